//! What a command needs to start, decided by general rules a user can
//! predict instead of per-launcher guesses.
//!
//! Every server gets, besides its roots, what the same rules give every
//! other server ([`Rule`], each stated in one line by `rootfence explain`):
//! the system's libraries and configuration, its own program and
//! interpreter, the programs on the user's `PATH` with the toolchains
//! their layout shows (`layout`), its project up to the project's marker,
//! and the package caches behind private layers. No rule takes its input
//! from the server: its name labels its own state store
//! ([`crate::store`]) and grants nothing. Secrets are granted by no rule:
//! the deny list wins over every grant, and a grant that holds a denied
//! path is narrowed around it (`narrow`). git's configuration reaches the
//! server only as a sanitized copy (`gitconfig`).
//!
//! This is the effectful half of planning: it looks at the filesystem
//! (the `PATH` search, `realpath`, shebang lines, ELF headers, directory
//! listings). Its output, [`CommandSpec`], is plain data that
//! [`crate::plan::build`] consumes without reading anything.

mod cache;
mod exe;
mod gitconfig;
mod launchers;
mod layout;
mod narrow;
mod project;
mod rules;
mod state;
mod system;
mod toolchain;
mod wide;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use exe::which;
pub use gitconfig::sanitize as sanitize_git_config;
pub use rules::{HOME as HOME_STATEMENT, NEVER as NEVER_STATEMENT, Rule};
pub use system::reads as system_reads;
pub use wide::too_wide;

use crate::policy::{Policy, ProfileName};

/// Rights on a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Rights {
    /// Read files, list directories.
    pub read: bool,
    /// Create, write, truncate, remove, rename.
    pub write: bool,
    /// Execute files (and map them executable).
    pub exec: bool,
}

impl Rights {
    /// Read only.
    pub const R: Rights = Rights {
        read: true,
        write: false,
        exec: false,
    };
    /// Read and execute.
    pub const RX: Rights = Rights {
        read: true,
        write: false,
        exec: true,
    };
    /// Read and write.
    pub const RW: Rights = Rights {
        read: true,
        write: true,
        exec: false,
    };

    /// The union of two sets of rights.
    pub fn union(self, o: Rights) -> Rights {
        Rights {
            read: self.read || o.read,
            write: self.write || o.write,
            exec: self.exec || o.exec,
        }
    }

    /// Whether these rights include every right of `o`.
    pub fn covers(self, o: Rights) -> bool {
        (self.read || !o.read) && (self.write || !o.write) && (self.exec || !o.exec)
    }
}

impl std::fmt::Display for Rights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = |b: bool, ch: char| if b { ch } else { '-' };
        write!(
            f,
            "{}{}{}",
            c(self.read, 'r'),
            c(self.write, 'w'),
            c(self.exec, 'x')
        )
    }
}

/// One path a rule grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeNeed {
    /// Absolute path, as the rule found it (the sandbox resolves it once,
    /// recreating the links on the way in the server's view; it skips
    /// missing optional paths).
    pub path: PathBuf,
    /// Rights needed.
    pub rights: Rights,
    /// The rule that grants it.
    pub rule: Rule,
    /// Why, in the rule's terms (`PATH directory ~/.local/bin`).
    pub why: String,
    /// Whether a missing path is fine.
    pub optional: bool,
    /// A private layer: the server may write here, but its writes go to a
    /// layer of its own, discarded when it ends (the real directory is
    /// never written). Without namespaces the path is read-only, or, when
    /// [`RuntimeNeed::private_env`] names a variable, the runtime is
    /// pointed at an empty private directory instead.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub private: bool,
    /// See [`RuntimeNeed::private`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private_env: Option<String>,
}

/// A command resolved for launching, with everything the rules grant it.
#[derive(Debug, Clone, Serialize)]
pub struct CommandSpec {
    /// argv as given (argv\[0\] unchanged).
    #[serde(serialize_with = "ser_os_vec")]
    pub argv: Vec<OsString>,
    /// The executable found for argv\[0\], symlinks resolved.
    pub program: PathBuf,
    /// The script interpreter, when the program is a `#!` script.
    pub interpreter: Option<PathBuf>,
    /// Everything the rules grant, narrowed around denied paths.
    pub needs: Vec<RuntimeNeed>,
    /// Variables the rules set for the server (the caches they grant, uv
    /// and npm kept offline); the policy's `[env]` overrides them.
    pub env: BTreeMap<String, String>,
    /// git's global configuration, sanitized (see
    /// [`sanitize_git_config`]), when the policy lets git's identity reach
    /// the server and the user has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_config: Option<String>,
    /// What the rules left out and why (a too-wide `PATH` directory, a grant
    /// narrowed around a denied path, a launcher setting dropped).
    pub notes: Vec<String>,
    /// The name the server goes by (its command's, or the package a
    /// launcher runs): a label for its store, never a grant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The user's existing directories named like the server (`~/.NAME`,
    /// `~/.config/NAME`, ...): not granted (the name is the server's
    /// choice); the plan says the line that would grant each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub own_state: Vec<PathBuf>,
}

impl CommandSpec {
    /// A command with exactly `needs` and nothing else discovered: for
    /// tests, benches and hosts that plan their own grants.
    pub fn with_needs(program: impl Into<PathBuf>, needs: Vec<RuntimeNeed>) -> CommandSpec {
        let program = program.into();
        CommandSpec {
            argv: vec![program.clone().into_os_string()],
            program,
            interpreter: None,
            needs,
            env: BTreeMap::new(),
            git_config: None,
            notes: Vec::new(),
            name: None,
            own_state: Vec::new(),
        }
    }
}

impl RuntimeNeed {
    /// A required grant of `path` by `rule`.
    pub fn new(path: impl Into<PathBuf>, rights: Rights, rule: Rule, why: &str) -> RuntimeNeed {
        RuntimeNeed {
            path: path.into(),
            rights,
            rule,
            why: why.to_string(),
            optional: false,
            private: false,
            private_env: None,
        }
    }
}

fn ser_os_vec<S: serde::Serializer>(v: &[OsString], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|a| a.to_string_lossy()))
}

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
    fn abs_var(&self, name: &str) -> Option<PathBuf> {
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

/// Why a command could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// No command given.
    #[error("no server command given (put it after --)")]
    Empty,
    /// argv\[0\] not found.
    #[error("command {0:?} not found on PATH (give an absolute path or fix PATH)")]
    NotFound(String),
    /// Found but not a regular executable file.
    #[error("{0} is not an executable file")]
    NotExecutable(PathBuf),
}

/// The runtime need for the server's own `/proc/<pid>`. The sandbox must
/// open it in the child (after fork, before exec), never in rootfence.
pub const PROC_SELF: &str = "/proc/self";

/// Grants being gathered.
struct Collect<'a> {
    env: &'a HostEnv,
    needs: Vec<RuntimeNeed>,
    notes: Vec<String>,
}

impl Collect<'_> {
    /// Grant `path` (canonical where it exists).
    fn add(
        &mut self,
        path: impl Into<PathBuf>,
        rights: Rights,
        rule: Rule,
        why: impl Into<String>,
        optional: bool,
    ) {
        self.push(path.into(), rights, rule, why.into(), optional, None);
    }

    /// Grant `path` behind a private layer (see [`RuntimeNeed::private`]).
    fn add_private(
        &mut self,
        path: PathBuf,
        rights: Rights,
        rule: Rule,
        why: String,
        env: Option<&str>,
    ) {
        self.push(path, rights, rule, why, true, Some(env.map(str::to_string)));
    }

    fn push(
        &mut self,
        path: PathBuf,
        rights: Rights,
        rule: Rule,
        why: String,
        optional: bool,
        private: Option<Option<String>>,
    ) {
        self.needs.push(RuntimeNeed {
            path,
            rights,
            rule,
            why,
            optional,
            private: private.is_some(),
            private_env: private.flatten(),
        });
    }

    /// Whether a grant already gives `path` at least `rights` (through
    /// itself or an ancestor), without a private layer in the way.
    fn covered(&self, path: &Path, rights: Rights) -> bool {
        self.needs
            .iter()
            .any(|n| !n.private && path.starts_with(&n.path) && n.rights.covers(rights))
    }

    fn note(&mut self, s: String) {
        if !self.notes.contains(&s) {
            self.notes.push(s);
        }
    }

    /// `path` as the user would write it (`~/x` under the home directory).
    fn shown(&self, path: &Path) -> String {
        shown(path, self.env.home.as_deref())
    }
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

/// Resolve `argv` and gather what the general rules grant it under
/// `policy`.
///
/// # Security
///
/// No grant includes a denied path of `policy` (built-in secrets, its own
/// `[deny]`): a grant that would hold one is narrowed to its children
/// around it, and one inside a denied path is dropped. Shared directories
/// and directories holding the user's data are never granted whole by a
/// rule. git's configuration is never granted; a sanitized copy is
/// returned instead.
pub fn discover(
    argv: &[OsString],
    policy: &Policy,
    env: &HostEnv,
) -> Result<CommandSpec, RuntimeError> {
    let first = argv.first().ok_or(RuntimeError::Empty)?;
    let first_s = first.to_string_lossy().into_owned();
    let found = which(&first_s, env).ok_or_else(|| RuntimeError::NotFound(first_s.clone()))?;
    let program =
        crate::canon::canonicalize(&found).map_err(|_| RuntimeError::NotFound(first_s.clone()))?;
    if !exe::is_executable(&program) {
        return Err(RuntimeError::NotExecutable(program));
    }
    let interpreter = exe::script_interpreter(&program, env);

    let mut c = Collect {
        env,
        needs: Vec::new(),
        notes: Vec::new(),
    };
    system::collect(&mut c);
    toolchain::program(&mut c, &found, &program, interpreter.as_ref());
    let toolchains = policy.raw.runtime.profile != ProfileName::Native;
    if toolchains {
        toolchain::collect(&mut c);
    }
    project::collect(&mut c, argv, &program, interpreter.is_some());
    if toolchains {
        cache::collect(&mut c, argv);
    }
    let own_state = state::existing(c.env, argv, &program, &policy.deny);
    let name = state::names(argv, &program).into_iter().next();

    let mut needs = narrow::around_denied(c.needs, &policy.deny, &mut c.notes, env);
    needs.sort_by(|a, b| a.path.cmp(&b.path).then(a.rule.cmp(&b.rule)));
    let mut notes = c.notes;
    let env_out = cache::settings(argv, policy, &needs, &mut notes);
    let git_config = policy
        .raw
        .runtime
        .git_config
        .then(|| gitconfig::of_user(env))
        .flatten();

    Ok(CommandSpec {
        argv: argv.to_vec(),
        program,
        interpreter: interpreter.map(|(i, _)| wide::canonical_or(i)),
        needs,
        env: env_out,
        git_config,
        notes,
        name,
        own_state,
    })
}
