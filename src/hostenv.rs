//! rootfence's own environment as discovery and planning read it, and a
//! path as the user writes it. A leaf: the policy, the store, the runtime
//! rules and the plan all read it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The parts of rootfence's environment that discovery and planning read.
#[derive(Debug, Clone, Default)]
pub struct HostEnv {
    /// Environment variables.
    pub vars: BTreeMap<String, String>,
    /// Home directory.
    pub home: Option<PathBuf>,
    /// Current directory.
    pub cwd: Option<PathBuf>,
    /// The names of the variables the host set for this launch: added to
    /// or changed from the host's own environment (rootfence's parent's,
    /// see [`HostEnv::current`]). `None`: that cannot be told (the parent
    /// cannot be read), and only the policy's `[env] pass` passes.
    pub host_set: Option<std::collections::BTreeSet<String>>,
}

impl HostEnv {
    /// Read the current process's environment.
    pub fn current() -> HostEnv {
        let vars: BTreeMap<String, String> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        let home = vars
            .get("HOME")
            .filter(|h| h.starts_with('/'))
            .map(PathBuf::from);
        let host_set = parent_environment().map(|parent| {
            vars.iter()
                .filter(|(k, v)| {
                    parent.get(*k) != Some(*v) && !SHELL_BOOKKEEPING.contains(&k.as_str())
                })
                .map(|(k, _)| k.clone())
                .collect()
        });
        HostEnv {
            vars,
            home,
            cwd: std::env::current_dir().ok(),
            host_set,
        }
    }

    /// An XDG base directory: the variable `var` when it holds an absolute
    /// path, else `default` under the home directory.
    pub fn xdg(&self, var: &str, default: &str) -> Option<PathBuf> {
        self.abs_var(var)
            .or_else(|| self.home.as_ref().map(|h| h.join(default)))
    }

    /// An environment variable holding an absolute path.
    pub(crate) fn abs_var(&self, name: &str) -> Option<PathBuf> {
        self.vars
            .get(name)
            .filter(|v| v.starts_with('/'))
            .map(PathBuf::from)
    }
}

/// Variables a shell changes for every command it starts: never "set by
/// the host for this launch".
const SHELL_BOOKKEEPING: &[&str] = &["PWD", "OLDPWD", "SHLVL", "_"];

/// Most bytes of the parent's environment read.
const MAX_PARENT_ENVIRON: u64 = 1 << 20;

/// The environment the parent process (the host) was started with, from
/// `/proc/PPID/environ` (readable for the same user); `None` when it
/// cannot be read, or rootfence's parent is gone (init adopted it).
fn parent_environment() -> Option<BTreeMap<String, String>> {
    use std::io::Read;
    let ppid = std::os::unix::process::parent_id();
    if ppid <= 1 {
        return None;
    }
    let mut raw = Vec::new();
    std::fs::File::open(format!("/proc/{ppid}/environ"))
        .ok()?
        .take(MAX_PARENT_ENVIRON)
        .read_to_end(&mut raw)
        .ok()?;
    Some(
        raw.split(|&b| b == 0)
            .filter_map(|kv| {
                let kv = std::str::from_utf8(kv).ok()?;
                let (k, v) = kv.split_once('=')?;
                Some((k.to_string(), v.to_string()))
            })
            .collect(),
    )
}

/// `path` as a user writes it: `~/x` under `home`.
pub fn shown(path: &Path, home: Option<&Path>) -> String {
    match home.and_then(|h| path.strip_prefix(h).ok()) {
        Some(rel) if rel.as_os_str().is_empty() => "~".to_string(),
        Some(rel) => format!("~/{}", rel.display()),
        None => path.display().to_string(),
    }
}

/// [`shown`] for prose a server's names may reach (a note to the host, a
/// line of `rootfence learn`): as it is when it holds only letters, digits
/// and the punctuation of ordinary paths; else quoted, with quotes,
/// backslashes and control characters (newlines, escape sequences)
/// escaped, so that no name reads as rootfence's own words.
pub fn shown_quoted(path: &Path, home: Option<&Path>) -> String {
    quoted(&shown(path, home))
}

/// `s` as it is when plain (see [`shown_quoted`]), else quoted and escaped.
pub fn quoted(s: &str) -> String {
    let plain = s
        .chars()
        .all(|c| c.is_alphanumeric() || "._~/+-@%,=: ".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("{s:?}")
    }
}

/// [`shown`] as a TOML string, for a policy line: the line grants that
/// path and nothing else, whatever its name holds.
pub fn shown_toml(path: &Path, home: Option<&Path>) -> String {
    // One TOML basic string on one line: quotes, backslashes and control
    // characters escaped (the toml crate may write a multi-line string).
    let mut out = String::from("\"");
    for c in shown(path, home).chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
