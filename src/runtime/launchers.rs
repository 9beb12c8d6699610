//! Package runners, each asked where its cache is.
//!
//! `bunx`, `pnpm dlx`, `deno run npm:...`, `pipx run`, `yarn dlx`, `npx`
//! and `uvx` run packages out of a cache of their own. Instead of guessing
//! each one's layout, rootfence asks the launcher the command runs, the way
//! its user would (`bun pm cache`, `pnpm store path`, `deno info --json`,
//! ...): one table entry per launcher. The launcher is the user's own
//! program (found on the user's `PATH`, named by the configured command),
//! asked with the user's environment in the home directory, never the
//! server, and blind to every place the server may write
//! ([`super::unwritten`]): its answer comes from what the user wrote. It is
//! granted only as the cache rule grants (read, a private layer for writes,
//! never a shared or too wide directory, never a denied path).
//!
//! Answers are kept per launcher binary in rootfence's cache
//! (`$XDG_CACHE_HOME/rootfence/launchers/`), keyed by the binary's path,
//! size and modification time, the variables that move its cache and the
//! places it was blind to, so a launch asks a launcher once, not every
//! time.

use std::collections::BTreeMap;
use std::hash::Hasher;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::HostEnv;
use super::exe::{base_name, which};
use super::unwritten::{Blindfold, Unavailable};

/// How a launcher's answer is read.
#[derive(Clone, Copy)]
enum Answer {
    /// The first line is the path.
    Line,
    /// A JSON object; the path is the string under this key.
    JsonKey(&'static str),
}

/// A package runner and how to ask it where its caches are.
pub struct Launcher {
    /// The commands that run it (`bunx` is bun's).
    commands: &'static [&'static str],
    /// The program asked, found on `PATH`.
    pub(super) program: &'static str,
    /// Its questions, one per cache.
    pub asks: &'static [Ask],
}

/// Which directory a launcher's variable names, given its answer.
#[derive(Clone, Copy)]
enum Names {
    /// The directory it answered.
    Answer,
    /// The directory above it: pnpm's `store path` is the store directory
    /// its `store-dir` names with the store's layout version added (`v10`,
    /// `v11`), so pointing `store-dir` at the answer would make it look in
    /// an empty `v11/v11`.
    Parent,
}

/// One question to a launcher: where one of its caches is.
pub struct Ask {
    /// The arguments.
    args: &'static [&'static str],
    answer: Answer,
    /// What the variable names, given the answer: that directory is the
    /// one granted.
    names: Names,
    /// The variable that points the launcher at this cache (for a
    /// private, empty one where no overlay can be had), and that moves
    /// its answer.
    pub var: &'static str,
    /// What the cache is, for `explain`.
    pub why: &'static str,
}

/// The launchers rootfence asks. A new one is one entry here.
const LAUNCHERS: &[Launcher] = &[
    Launcher {
        commands: &["bun", "bunx"],
        program: "bun",
        asks: &[Ask {
            args: &["pm", "cache"],
            answer: Answer::Line,
            names: Names::Answer,
            var: "BUN_INSTALL_CACHE_DIR",
            why: "bun's package cache (bunx runs packages from it), as `bun pm cache` says",
        }],
    },
    Launcher {
        commands: &["pnpm", "pnpx"],
        program: "pnpm",
        // pnpm reads its settings from `pnpm_config_*` variables (since
        // pnpm 11; `npm_config_*` before, whose defaults are the same
        // directories).
        asks: &[
            Ask {
                args: &["store", "path"],
                answer: Answer::Line,
                names: Names::Parent,
                var: "pnpm_config_store_dir",
                why: "pnpm's store (pnpm dlx installs from it), the directory above what `pnpm store path` says",
            },
            Ask {
                args: &["cache", "path"],
                answer: Answer::Line,
                names: Names::Answer,
                var: "pnpm_config_cache_dir",
                why: "pnpm's cache (pnpm dlx keeps the packages it ran and their metadata there), as `pnpm cache path` says",
            },
        ],
    },
    Launcher {
        commands: &["deno"],
        program: "deno",
        asks: &[Ask {
            args: &["info", "--json"],
            answer: Answer::JsonKey("denoDir"),
            names: Names::Answer,
            var: "DENO_DIR",
            why: "deno's cache (deno run npm:... runs packages from it), as `deno info --json` says",
        }],
    },
    Launcher {
        commands: &["pipx"],
        program: "pipx",
        asks: &[Ask {
            args: &["environment", "--value", "PIPX_HOME"],
            answer: Answer::Line,
            names: Names::Answer,
            var: "PIPX_HOME",
            why: "pipx's home (pipx run keeps its environments there), as `pipx environment` says",
        }],
    },
    Launcher {
        commands: &["yarn"],
        program: "yarn",
        asks: &[Ask {
            args: &["cache", "dir"],
            answer: Answer::Line,
            names: Names::Answer,
            var: "YARN_CACHE_FOLDER",
            why: "yarn's cache (yarn dlx runs packages from it), as `yarn cache dir` says",
        }],
    },
];

/// The launcher `argv` runs (by its command's name), if it is one rootfence
/// asks.
pub fn of(argv: &[std::ffi::OsString]) -> Option<&'static Launcher> {
    let first = base_name(Path::new(argv.first()?));
    LAUNCHERS
        .iter()
        .find(|l| l.commands.contains(&first.as_str()))
}

/// Longest a launcher may take to answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(10);

/// Most bytes of an answer read.
const MAX_ANSWER: u64 = 256 * 1024;

impl Launcher {
    /// Where this launcher says each of its caches is (see
    /// [`Ask::cache_dir`]): the directory its variable names, with the
    /// question answered.
    ///
    /// # Security
    ///
    /// The launcher runs with the user's rights, blind to every place under
    /// `writable` (what it would read or run there is refused): its answer
    /// and whatever its configuration makes it run come from what the user
    /// wrote. One whose place (its directory, or the directory of any link
    /// on the way to it) lies under `writable` is not run at all, nor one
    /// that cannot be blindfolded; nor is an answer recorded where the
    /// server may write read back.
    pub fn cache_dirs(
        &self,
        env: &HostEnv,
        writable: &[PathBuf],
    ) -> Result<Vec<(&'static Ask, PathBuf)>, NotAsked> {
        let Some(program) = which(self.program, env) else {
            return Ok(Vec::new());
        };
        let mut places = crate::canon::link_holders(&program);
        places.extend(program.parent().map(Path::to_path_buf));
        places.extend(
            crate::canon::canonicalize(&program)
                .ok()
                .and_then(|p| p.parent().map(Path::to_path_buf)),
        );
        if let Some(at) = places
            .into_iter()
            .find(|p| writable.iter().any(|w| p.starts_with(w)))
        {
            return Err(NotAsked::Writable(at));
        }
        let blind = Blindfold::around(writable).map_err(NotAsked::Blind)?;
        let asking = Asking {
            name: self.program,
            found: &program,
            env,
            writable,
            blind: blind.as_ref(),
        };
        Ok(self
            .asks
            .iter()
            .filter_map(|a| {
                let answer = a.cache_dir(&asking)?;
                // An answer in a place the server may write, or reached
                // through a link there (a launcher resolving the directory
                // its variable names, which Landlock lets it read), is the
                // server's word; so is one the variable names through such
                // a place.
                let mut places = crate::canon::link_holders(&answer);
                places.push(answer.clone());
                if let Some(named) = env.abs_var(a.var) {
                    places.extend(crate::canon::link_holders(&named));
                    places.push(named);
                }
                if places.iter().any(|p| writable.iter().any(|w| p.starts_with(w))) {
                    tracing::debug!(
                        "{} answered {}, where the server may write: not granted",
                        self.program,
                        answer.display()
                    );
                    return None;
                }
                let dir = match a.names {
                    Names::Answer => answer,
                    Names::Parent => answer.parent()?.to_path_buf(),
                };
                Some((a, dir))
            })
            .collect())
    }
}

/// Why a launcher was not asked where its caches are.
#[derive(Debug)]
pub enum NotAsked {
    /// It lies in this place, which the server may write.
    Writable(PathBuf),
    /// It could not be run blind to what the server may write.
    Blind(Unavailable),
}

/// A launcher being asked: its name, where it was found, the user's
/// environment, the places the server may write and the blindfold hiding
/// them.
struct Asking<'a> {
    name: &'a str,
    found: &'a Path,
    env: &'a HostEnv,
    writable: &'a [PathBuf],
    blind: Option<&'a Blindfold>,
}

impl Ask {
    /// Where the launcher says this cache is: from rootfence's record of
    /// its answer when the binary, the variable and the places hidden from
    /// it are unchanged, else by asking it (and recording the answer).
    /// `None` when it gives no absolute path.
    fn cache_dir(&self, asking: &Asking<'_>) -> Option<PathBuf> {
        let (name, env) = (asking.name, asking.env);
        let program = asking.found.to_path_buf();
        let real = crate::canon::canonicalize(&program).ok()?;
        let m = std::fs::metadata(&real).ok()?;
        let key = {
            let mut h = siphasher::sip::SipHasher13::new_with_keys(0x6c61_756e, 0x6368_6572);
            // Answers asked before launchers were asked blind are not
            // read back.
            h.write(b"blind\0");
            h.write(real.as_os_str().as_encoded_bytes());
            h.write_u64(m.len());
            h.write_i64(m.mtime());
            h.write_i64(m.mtime_nsec());
            for a in self.args {
                h.write(a.as_bytes());
                h.write_u8(0);
            }
            h.write(env.vars.get(self.var).map_or(&b""[..], |v| v.as_bytes()));
            h.write(
                env.home
                    .as_ref()
                    .map_or(&b""[..], |h| h.as_os_str().as_encoded_bytes()),
            );
            let mut hidden: Vec<&PathBuf> = asking.writable.iter().collect();
            hidden.sort();
            hidden.dedup();
            for w in hidden {
                h.write(w.as_os_str().as_encoded_bytes());
                h.write_u8(0);
            }
            format!("{name}-{:016x}", h.finish())
        };
        // Records kept where the server may write would be its word.
        let record = record_dir(env)
            .filter(|d| {
                let real = crate::canon::canonicalize(d).unwrap_or_else(|_| d.clone());
                !asking
                    .writable
                    .iter()
                    .any(|w| d.starts_with(w) || real.starts_with(w))
            })
            .map(|d| d.join(&key));
        if let Some(r) = &record
            && let Ok(text) = std::fs::read_to_string(r)
            && let Some(p) = text.lines().next().map(PathBuf::from)
            && p.is_absolute()
        {
            return Some(p);
        }
        let answer = self.ask_it(name, &program, env, asking.blind)?;
        if let Some(r) = &record {
            let _ = write_record(r, &answer);
        }
        Some(answer)
    }

    /// Run the launcher with its question (under `blind`) and read its
    /// answer.
    fn ask_it(
        &self,
        name: &str,
        program: &Path,
        env: &HostEnv,
        blind: Option<&Blindfold>,
    ) -> Option<PathBuf> {
        let mut cmd = Command::new(program);
        cmd.args(self.args)
            .env_clear()
            .envs(&env.vars)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(h) = &env.home {
            cmd.current_dir(h);
        }
        if let Some(b) = blind {
            b.apply(&mut cmd).ok()?;
        }
        let mut child = cmd.spawn().ok()?;
        let mut out = Vec::new();
        let reader = first_bytes(child.stdout.take()?);
        let errors = first_bytes(child.stderr.take()?);
        let start = Instant::now();
        let ok = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status.success(),
                Ok(None) if start.elapsed() < ASK_TIMEOUT => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    tracing::debug!("{name} did not say where its cache is in time");
                    break false;
                }
            }
        };
        if let Ok(o) = reader.join() {
            out = o;
        }
        let err = errors.join().unwrap_or_default();
        if !ok {
            // Asked blind, a launcher may fail for what it could not read
            // or make (a new entry in the home directory, on the way to a
            // root): said, not left to look like a missing cache.
            if blind.is_some() {
                let said = String::from_utf8_lossy(&err);
                let last = said.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
                tracing::warn!(
                    "{name} {} failed when asked blind to the places the server may write ({}): its cache is not granted; fix: name the cache in the policy's [runtime] read",
                    self.args.join(" "),
                    if last.is_empty() { "it said nothing" } else { last.trim() }
                );
            }
            return None;
        }
        let text = String::from_utf8(out).ok()?;
        let path = match self.answer {
            Answer::Line => text
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())?
                .to_string(),
            Answer::JsonKey(k) => {
                let v: BTreeMap<String, serde_json::Value> = serde_json::from_str(&text).ok()?;
                v.get(k)?.as_str()?.to_string()
            }
        };
        let path = PathBuf::from(path);
        path.is_absolute().then_some(path)
    }
}

/// The first [`MAX_ANSWER`] bytes `from` gives, read on a thread of their
/// own; the rest is drained, so the launcher never waits on a full pipe.
fn first_bytes(mut from: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut got = Vec::new();
        let _ = (&mut from).take(MAX_ANSWER).read_to_end(&mut got);
        let _ = std::io::copy(&mut from, &mut std::io::sink());
        got
    })
}

/// Where the answers are recorded: `$XDG_CACHE_HOME/rootfence/launchers`
/// (or `~/.cache/...`), a directory servers are denied.
fn record_dir(env: &HostEnv) -> Option<PathBuf> {
    Some(
        env.xdg("XDG_CACHE_HOME", ".cache")?
            .join("rootfence/launchers"),
    )
}

/// Record `answer` at `file`, whole or not at all.
fn write_record(file: &Path, answer: &Path) -> std::io::Result<()> {
    crate::statefile::write_whole(file, format!("{}\n", answer.display()).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn the_command_names_its_launcher() {
        let argv = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(of(&argv(&["bunx", "x"])).map(|l| l.program), Some("bun"));
        assert_eq!(
            of(&argv(&["/opt/bin/pnpm", "dlx", "x"])).map(|l| l.program),
            Some("pnpm")
        );
        assert_eq!(
            of(&argv(&["deno", "run", "npm:x"])).map(|l| l.program),
            Some("deno")
        );
        assert!(of(&argv(&["node", "x.js"])).is_none());
    }

    /// A launcher on PATH in a fresh home: `bin/NAME` running `script`.
    fn fake(name: &str, script: &str) -> (tempfile::TempDir, HostEnv, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let bin = base.join("bin");
        let home = base.join("home");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let program = bin.join(name);
        std::fs::write(&program, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(
            &program,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let mut env = HostEnv {
            home: Some(home.clone()),
            ..HostEnv::default()
        };
        env.vars
            .insert("PATH".into(), format!("{}:/usr/bin:/bin", bin.display()));
        env.vars.insert("HOME".into(), home.display().to_string());
        (tmp, env, home)
    }

    /// pnpm (11 and later) answers `store path` with its store directory
    /// plus the layout version, and `cache path` with its cache (where
    /// `pnpm dlx` keeps what it ran); `config get cache-dir` says
    /// `undefined`. What is granted is what its variables name: the store
    /// directory above `v11`, and the cache.
    #[test]
    fn pnpm_is_asked_for_its_store_and_its_cache_by_the_variables_it_reads() {
        let (_tmp, env, home) = fake(
            "pnpm",
            r#"case "$*" in
  "store path") echo "$HOME/.local/share/pnpm/store/v11" ;;
  "cache path") echo "$HOME/.cache/pnpm" ;;
  *) echo undefined ;;
esac"#,
        );
        let argv = [OsString::from("pnpm"), "dlx".into(), "x".into()];
        let got: Vec<(&str, PathBuf)> = of(&argv)
            .unwrap()
            .cache_dirs(&env, &[])
            .unwrap()
            .into_iter()
            .map(|(a, p)| (a.var, p))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "pnpm_config_store_dir",
                    home.join(".local/share/pnpm/store")
                ),
                ("pnpm_config_cache_dir", home.join(".cache/pnpm")),
            ]
        );
    }

    /// A launcher answers from its configuration: one in a place the
    /// server may write is not read (the launcher answers as without it),
    /// and the answer is asked again when the places hidden change.
    #[test]
    fn a_launcher_reads_no_configuration_the_server_may_write() {
        let (tmp, env, home) = fake(
            "yarn",
            r#"cat "$HOME/../w/yarnrc" 2>/dev/null || echo "$HOME/.cache/yarn""#,
        );
        let w = std::fs::canonicalize(tmp.path()).unwrap().join("w");
        std::fs::create_dir_all(&w).unwrap();
        std::fs::write(w.join("yarnrc"), "/elsewhere/chosen\n").unwrap();
        let argv = [OsString::from("yarn"), "dlx".into(), "x".into()];
        let l = of(&argv).unwrap();
        let dirs = |writable: &[PathBuf]| -> Vec<PathBuf> {
            l.cache_dirs(&env, writable)
                .unwrap()
                .into_iter()
                .map(|(_, p)| p)
                .collect()
        };
        assert_eq!(dirs(std::slice::from_ref(&w)), vec![home.join(".cache/yarn")]);
        assert_eq!(dirs(&[]), vec![PathBuf::from("/elsewhere/chosen")]);
    }

    /// A variable naming the cache in a place the server may write, where
    /// the server left a link to a directory of the user's: the launcher
    /// resolves it (Landlock lets it read links), and its answer is not
    /// granted.
    #[test]
    fn a_cache_named_through_a_link_the_server_may_have_planted_is_not_granted() {
        let (tmp, mut env, _home) = fake("yarn", r#"realpath "$YARN_CACHE_FOLDER""#);
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let w = base.join("w");
        let private = base.join("private");
        std::fs::create_dir_all(&w).unwrap();
        std::fs::create_dir_all(&private).unwrap();
        std::os::unix::fs::symlink(&private, w.join("cache")).unwrap();
        env.vars
            .insert("YARN_CACHE_FOLDER".into(), w.join("cache").display().to_string());
        let argv = [OsString::from("yarn"), "dlx".into(), "x".into()];
        let l = of(&argv).unwrap();
        assert!(l.cache_dirs(&env, std::slice::from_ref(&w)).unwrap().is_empty());
        // Where the server may not write, the same link is the user's.
        let got: Vec<PathBuf> = l
            .cache_dirs(&env, &[])
            .unwrap()
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        assert_eq!(got, vec![private]);
    }

    #[test]
    fn a_launcher_is_asked_once_and_its_answer_recorded() {
        // Each time bun is asked, a line is added to `asked`.
        let log = tempfile::tempdir().unwrap();
        let asked = log.path().join("asked");
        let (_tmp, mut env, home) = fake(
            "bun",
            &format!(
                "echo x >> {}\n[ \"$1 $2\" = \"pm cache\" ] && echo \"$HOME/.bun/install/cache\"",
                asked.display()
            ),
        );
        let l = &LAUNCHERS[0];
        let want = home.join(".bun/install/cache");
        let dirs = |env: &HostEnv| -> Vec<PathBuf> {
            l.cache_dirs(env, &[])
                .unwrap()
                .into_iter()
                .map(|(_, p)| p)
                .collect()
        };
        assert_eq!(dirs(&env), vec![want.clone()]);
        assert_eq!(dirs(&env), vec![want]);
        assert_eq!(std::fs::read_to_string(&asked).unwrap().lines().count(), 1);
        // Its variable moves the answer: asked again.
        env.vars
            .insert("BUN_INSTALL_CACHE_DIR".into(), "/elsewhere".into());
        dirs(&env);
        assert_eq!(std::fs::read_to_string(&asked).unwrap().lines().count(), 2);
    }
}
