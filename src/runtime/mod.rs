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
mod listings;
mod narrow;
mod project;
mod rules;
mod state;
mod unwritten;
mod system;
mod toolchain;
mod wide;
mod written;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use exe::which;
pub use gitconfig::sanitize as sanitize_git_config;
pub use rules::{HOME as HOME_STATEMENT, NEVER as NEVER_STATEMENT, Rule};
pub use system::reads as system_reads;
pub use wide::too_wide;
pub use written::{record_file as written_record, remember as remember_written};

pub use crate::hostenv::{HostEnv, quoted, shown, shown_quoted, shown_toml};
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
    /// The directories whose contents the rule read to find it (a `PATH`
    /// directory's links, the file a link leads to and its `#!` line, the
    /// layout around an interpreter, a library directory): where the
    /// server may write any of them, the need is not granted (see
    /// [`crate::plan::build`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<PathBuf>,
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
    /// The places the server may write that the rules took nothing from
    /// ([`writes_of`]): discovery is valid for these alone, and is made
    /// again when the places the server may write change (a host's roots).
    #[serde(skip)]
    pub server_writes: Vec<PathBuf>,
    /// The places a server was let write in an earlier session, as
    /// remembered when the command was discovered: what was found there
    /// grants nothing either.
    #[serde(skip)]
    pub written_before: Vec<PathBuf>,
}

impl CommandSpec {
    /// Whether discovery took anything from under `places` (what a need
    /// was read from, the program, its interpreter), or asked a launcher
    /// (whose configuration may lie anywhere): when a place becomes one
    /// the server may write, only then must the command be discovered
    /// again.
    pub fn reads_in(&self, places: &[&PathBuf]) -> bool {
        let under = |f: &Path| places.iter().any(|p| f.starts_with(p));
        launchers::of(&self.argv).is_some()
            || under(&self.program)
            || self.interpreter.as_deref().is_some_and(under)
            || self.needs.iter().any(|n| n.from.iter().any(|f| under(f)))
    }

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
            server_writes: Vec::new(),
            written_before: Vec::new(),
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
            from: Vec::new(),
        }
    }
}

fn ser_os_vec<S: serde::Serializer>(v: &[OsString], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|a| a.to_string_lossy()))
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
    /// The directories whose contents the grants being added come from.
    from: Vec<PathBuf>,
    /// Where the server may write, as far as discovery knows (canonical):
    /// nothing found there is run.
    writable: Vec<PathBuf>,
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
            from: self.from.clone(),
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
    discover_with(argv, policy, env, &[])
}

/// [`discover`], knowing that the server may write under `writable` (its
/// roots that it may write, canonical) besides the policy's own write
/// paths and roots.
///
/// # Security
///
/// A launcher asked where its caches are runs with the user's rights,
/// outside any sandbox: one found in a place the server may write (a
/// `PATH` directory in a writable root) is never run.
pub fn discover_with(
    argv: &[OsString],
    policy: &Policy,
    env: &HostEnv,
    writable: &[PathBuf],
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

    let server_writes = writes_of(policy, writable);
    let mut c = Collect {
        env,
        needs: Vec::new(),
        notes: Vec::new(),
        from: Vec::new(),
        // And every place a server was let write before: what it left
        // there is its word too.
        writable: written::remembered(env, &server_writes),
    };
    system::collect(&mut c);
    toolchain::program(&mut c, &found, &program, interpreter.as_ref());
    let toolchains = policy.raw.runtime.profile != ProfileName::Native;
    if toolchains {
        toolchain::collect(&mut c);
    }
    project::collect(&mut c, argv, &found, &program, interpreter.is_some());
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
        written_before: c
            .writable
            .iter()
            .filter(|p| !server_writes.contains(p))
            .cloned()
            .collect(),
        server_writes,
    })
}

/// Every place the server may write under `policy` with the roots it may
/// write, `writable` (canonical): the policy's write paths and roots and
/// those, sorted, once each.
pub fn writes_of(policy: &Policy, writable: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = writable.to_vec();
    out.extend(policy.server_writes());
    out.sort();
    out.dedup();
    out
}
