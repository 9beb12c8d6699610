//! Discovering what a command needs to start: the resolved executable, its
//! interpreter, and the runtime profile's install trees and caches.
//!
//! This is the effectful half of planning: it looks at the filesystem (the
//! `PATH` search, `realpath`, shebang lines, ELF headers). Its output,
//! [`CommandSpec`], is plain data that [`crate::plan::build`] consumes.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::policy::ProfileName;

/// The runtime profile actually chosen for a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// System libraries only.
    Native,
    /// Node.js, npm, npx.
    Node,
    /// CPython.
    Python,
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Profile::Native => "native",
            Profile::Node => "node",
            Profile::Python => "python",
        })
    }
}

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

/// One path the runtime needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeNeed {
    /// Absolute path (may not exist on every machine; the sandbox skips
    /// missing optional paths).
    pub path: PathBuf,
    /// Rights needed.
    pub rights: Rights,
    /// Why.
    pub why: String,
    /// Whether a missing path is fine.
    pub optional: bool,
    /// A private layer: the server may write here, but its writes go to a
    /// layer of its own, discarded when it ends (the real directory is
    /// never written). Where the kernel cannot stack a private layer, this
    /// environment variable points the runtime at an empty private
    /// directory instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private_env: Option<String>,
}

/// A command resolved for launching.
#[derive(Debug, Clone, Serialize)]
pub struct CommandSpec {
    /// argv as given (argv\[0\] unchanged).
    #[serde(serialize_with = "ser_os_vec")]
    pub argv: Vec<OsString>,
    /// The executable found for argv\[0\], symlinks resolved.
    pub program: PathBuf,
    /// The script interpreter, when the program is a `#!` script.
    pub interpreter: Option<PathBuf>,
    /// The chosen profile.
    pub profile: Profile,
    /// Everything the profile needs.
    pub needs: Vec<RuntimeNeed>,
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
        HostEnv {
            vars,
            home,
            cwd: std::env::current_dir().ok(),
        }
    }
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

/// System trees every profile reads and executes from.
const SYSTEM_TREES: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// `/etc` entries needed for the dynamic loader, DNS, TLS, time and locale.
const ETC_FILES: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/passwd",
    "/etc/group",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/crypto-policies",
    "/etc/locale.alias",
    "/etc/mime.types",
    "/etc/alternatives",
];

/// Kernel information files commonly read at start-up (CPU count, memory).
const INFO_FILES: &[&str] = &[
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/uptime",
    "/proc/loadavg",
    "/proc/version",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
];

/// Find `name` the way `execvp` would, using `PATH` from `env`.
pub fn which(name: &str, env: &HostEnv) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        let p = if p.is_absolute() {
            p
        } else {
            env.cwd.as_ref()?.join(p)
        };
        return is_executable(&p).then_some(p);
    }
    let path = env
        .vars
        .get("PATH")
        .map_or("/usr/local/bin:/usr/bin:/bin", String::as_str);
    path.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Read a `#!` line: the interpreter and its first argument.
fn shebang(p: &Path) -> Option<(String, Option<String>)> {
    let mut buf = [0u8; 256];
    let mut f = std::fs::File::open(p).ok()?;
    let n = f.read(&mut buf).ok()?;
    let head = buf.get(..n)?;
    let rest = head.strip_prefix(b"#!")?;
    let line = rest.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim();
    let mut parts = line.splitn(2, char::is_whitespace);
    let interp = parts.next()?.to_string();
    let arg = parts
        .next()
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty());
    Some((interp, arg))
}

/// The ELF `PT_INTERP` of a 64-bit little-endian executable, if any.
///
/// Reads only the headers and the interpreter string (a few hundred bytes),
/// never the whole file: interpreters such as node are tens of megabytes.
fn elf_interpreter(p: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(p).ok()?;
    let mut hdr = [0u8; 64];
    f.read_exact_at(&mut hdr, 0).ok()?;
    if hdr.get(..4)? != b"\x7fELF" || *hdr.get(4)? != 2 || *hdr.get(5)? != 1 {
        return None;
    }
    let u16_at = |b: &[u8], o: usize| Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?));
    let u64_at = |b: &[u8], o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?));
    let phoff = u64_at(&hdr, 0x20)?;
    let phentsize = usize::from(u16_at(&hdr, 0x36)?);
    let phnum = usize::from(u16_at(&hdr, 0x38)?);
    if phentsize < 56 || phnum > 256 {
        return None;
    }
    let mut phdrs = vec![0u8; phentsize.checked_mul(phnum)?];
    f.read_exact_at(&mut phdrs, phoff).ok()?;
    for ph in phdrs.chunks_exact(phentsize) {
        let p_type = u32::from_le_bytes(ph.get(..4)?.try_into().ok()?);
        if p_type == 3 {
            let off = u64_at(ph, 8)?;
            let size = usize::try_from(u64_at(ph, 32)?).ok()?;
            if size > 4096 {
                return None;
            }
            let mut raw = vec![0u8; size];
            f.read_exact_at(&mut raw, off).ok()?;
            let raw = raw.split(|&b| b == 0).next()?;
            return Some(PathBuf::from(std::str::from_utf8(raw).ok()?));
        }
    }
    None
}

fn base_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn detect(names: &[String]) -> Profile {
    for n in names {
        if matches!(
            n.as_str(),
            "node" | "nodejs" | "npx" | "npm" | "npx-cli.js" | "npm-cli.js" | "bun" | "deno"
        ) {
            return Profile::Node;
        }
        if n.starts_with("python") || matches!(n.as_str(), "uv" | "uvx" | "pipx" | "pip" | "pip3") {
            return Profile::Python;
        }
    }
    Profile::Native
}

/// The install prefix of an interpreter binary (`/x/bin/node` → `/x`).
fn prefix_of(bin: &Path) -> Option<PathBuf> {
    let dir = bin.parent()?;
    if base_name(dir) == "bin" {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir.to_path_buf())
    }
}

/// Resolve `argv` and gather what its runtime profile needs.
pub fn discover(
    argv: &[OsString],
    profile: ProfileName,
    env: &HostEnv,
) -> Result<CommandSpec, RuntimeError> {
    discover_with(argv, profile, env, true)
}

/// [`discover`] under `policy` (its profile and `[runtime] git_config`).
pub fn discover_for(
    argv: &[OsString],
    policy: &crate::policy::Policy,
    env: &HostEnv,
) -> Result<CommandSpec, RuntimeError> {
    discover_with(
        argv,
        policy.raw.runtime.profile,
        env,
        policy.raw.runtime.git_config,
    )
}

/// [`discover`], with `git_config` saying whether git's global
/// configuration (`~/.gitconfig`, `~/.config/git`) is readable
/// (`[runtime] git_config`).
pub fn discover_with(
    argv: &[OsString],
    profile: ProfileName,
    env: &HostEnv,
    git_config: bool,
) -> Result<CommandSpec, RuntimeError> {
    let first = argv.first().ok_or(RuntimeError::Empty)?;
    let first_s = first.to_string_lossy().into_owned();
    let found = which(&first_s, env).ok_or_else(|| RuntimeError::NotFound(first_s.clone()))?;
    let program =
        std::fs::canonicalize(&found).map_err(|_| RuntimeError::NotFound(first_s.clone()))?;
    if !is_executable(&program) {
        return Err(RuntimeError::NotExecutable(program));
    }

    let mut needs = Vec::new();
    let mut private_needs = Vec::new();
    // Python virtual environments the command runs from: the program as
    // found on PATH (a venv's bin/ holds symlinks to the base interpreter)
    // and a script's interpreter as written in its `#!` line.
    let mut venvs: Vec<PathBuf> = venv_of(&found).into_iter().collect();
    let mut need = |path: PathBuf, rights: Rights, why: String, optional: bool| {
        needs.push(RuntimeNeed {
            path,
            rights,
            why,
            optional,
            private_env: None,
        });
    };

    // Names that decide the profile: argv[0], the resolved program, the
    // script interpreter (through /usr/bin/env).
    let mut names = vec![base_name(Path::new(&first_s)), base_name(&program)];
    let mut interpreter = None;
    if let Some((interp, arg)) = shebang(&program) {
        let real = if base_name(Path::new(&interp)) == "env" {
            need(
                PathBuf::from(&interp),
                Rights::RX,
                "script runs through env".into(),
                false,
            );
            let target = arg
                .as_deref()
                .and_then(|a| a.split_whitespace().find(|w| !w.starts_with('-')));
            target.and_then(|t| which(t, env))
        } else {
            Some(PathBuf::from(&interp))
        };
        if let Some(real) = real {
            venvs.extend(venv_of(&real));
            let real = std::fs::canonicalize(&real).unwrap_or(real);
            names.push(base_name(&real));
            interpreter = Some(real);
        }
    }
    let chosen = match profile {
        ProfileName::Auto => detect(&names),
        ProfileName::Native => Profile::Native,
        ProfileName::Node => Profile::Node,
        ProfileName::Python => Profile::Python,
    };

    for t in SYSTEM_TREES {
        need(
            PathBuf::from(t),
            Rights::RX,
            "system libraries and tools".into(),
            true,
        );
    }
    for f in ETC_FILES {
        need(
            PathBuf::from(f),
            Rights::R,
            "loader, DNS, TLS, time and locale configuration".into(),
            true,
        );
    }
    for f in INFO_FILES {
        need(
            PathBuf::from(f),
            Rights::R,
            "CPU and memory information".into(),
            true,
        );
    }
    need(
        PathBuf::from("/dev/null"),
        Rights::RW,
        "/dev/null".into(),
        false,
    );
    need(
        PathBuf::from("/dev/zero"),
        Rights::R,
        "/dev/zero".into(),
        true,
    );
    need(
        PathBuf::from("/dev/full"),
        Rights::RW,
        "/dev/full".into(),
        true,
    );
    need(
        PathBuf::from("/dev/random"),
        Rights::R,
        "randomness".into(),
        true,
    );
    need(
        PathBuf::from("/dev/urandom"),
        Rights::R,
        "randomness".into(),
        false,
    );
    need(
        PathBuf::from(PROC_SELF),
        Rights::R,
        "the server's own /proc entry (opened in the server process itself)".into(),
        false,
    );
    need(
        program.clone(),
        Rights::RX,
        "the server executable".into(),
        false,
    );
    for exe in std::iter::once(&program).chain(interpreter.as_ref()) {
        if let Some(ld) = elf_interpreter(exe) {
            need(
                ld,
                Rights::RX,
                format!("ELF interpreter of {}", exe.display()),
                false,
            );
        }
    }
    if let Some(i) = &interpreter {
        need(i.clone(), Rights::RX, "script interpreter".into(), false);
    }

    let home = env.home.as_deref();
    match chosen {
        Profile::Native => {}
        Profile::Node => {
            let node = interpreter
                .clone()
                .filter(|i| base_name(i).starts_with("node"))
                .or_else(|| which("node", env).and_then(|n| std::fs::canonicalize(n).ok()));
            if let Some(prefix) = node.as_deref().and_then(prefix_of) {
                need(prefix, Rights::RX, "node install tree".into(), false);
            }
            if let Some(prefix) = prefix_of(&program) {
                need(
                    prefix,
                    Rights::RX,
                    "install tree of the command".into(),
                    true,
                );
            }
            if let Some(cache) = npm_cache(env) {
                // npx runs the bins of the packages cached here, and the
                // user's own npx runs them later outside the sandbox: the
                // server writes only to a private layer.
                private_needs.push(RuntimeNeed {
                    path: cache,
                    rights: Rights::RX,
                    why: "npm cache (npx runs packages from it; writes go to a private layer)"
                        .into(),
                    optional: true,
                    private_env: Some("npm_config_cache".into()),
                });
            }
            if let Some(h) = home {
                need(
                    h.join(".nvm/versions/node"),
                    Rights::RX,
                    "nvm-installed node".into(),
                    true,
                );
            }
        }
        Profile::Python => {
            let py = interpreter
                .clone()
                .filter(|i| base_name(i).starts_with("python"))
                .or_else(|| {
                    names
                        .iter()
                        .any(|n| n.starts_with("python"))
                        .then(|| program.clone())
                });
            if let Some(prefix) = py.as_deref().and_then(prefix_of) {
                need(prefix, Rights::RX, "python install tree".into(), false);
            }
            if let Some(prefix) = prefix_of(&program) {
                need(
                    prefix,
                    Rights::RX,
                    "install tree of the command".into(),
                    true,
                );
            }
            let pyenv = env
                .vars
                .get("PYENV_ROOT")
                .filter(|r| r.starts_with('/'))
                .map(PathBuf::from)
                .or_else(|| pyenv_root_of(&program))
                .or_else(|| pyenv_root_of(&found))
                .or_else(|| home.map(|h| h.join(".pyenv")));
            if let Some(pyenv) = pyenv
                && (program.starts_with(&pyenv) || found.starts_with(&pyenv))
            {
                need(
                    pyenv,
                    Rights::RX,
                    "pyenv (shims, versions and the pyenv scripts the shims run)".into(),
                    false,
                );
            }
            for v in uv_projects(argv, env) {
                venvs.extend(std::iter::once(v.join(".venv")).filter(|d| d.is_dir()));
                for f in ["pyproject.toml", "uv.lock", ".python-version"] {
                    need(
                        v.join(f),
                        Rights::R,
                        format!("uv project {}", v.display()),
                        true,
                    );
                }
            }
            for v in venvs.iter() {
                need(
                    v.clone(),
                    Rights::RX,
                    "python virtual environment (pyvenv.cfg, site-packages, its scripts)".into(),
                    false,
                );
                if let Some(base) = venv_base(v, env) {
                    need(
                        base,
                        Rights::RX,
                        format!(
                            "python the virtual environment {} was made from",
                            v.display()
                        ),
                        true,
                    );
                }
            }
            if let Some(h) = home {
                need(
                    h.join(".local/lib"),
                    Rights::R,
                    "user site-packages".into(),
                    true,
                );
                need(
                    h.join(".local/share/pipx"),
                    Rights::RX,
                    "pipx-installed tools".into(),
                    true,
                );
                need(
                    h.join(".local/pipx"),
                    Rights::RX,
                    "pipx-installed tools (older layout)".into(),
                    true,
                );
            }
            if let Some(data) = uv_data_dir(env) {
                need(
                    data,
                    Rights::RX,
                    "uv-managed pythons and tools".into(),
                    true,
                );
            }
            // uv hard-links cache files into environments used outside
            // the sandbox, and runs the tools installed in its tool
            // directory (which `uvx` locks, so it must be writable): the
            // server writes both only through private layers.
            if let Some(cache) = uv_cache(env) {
                private_needs.push(RuntimeNeed {
                    path: cache,
                    rights: Rights::RX,
                    why: "uv cache (uvx runs environments from it; writes go to a private layer)"
                        .into(),
                    optional: true,
                    private_env: Some("UV_CACHE_DIR".into()),
                });
            }
            if let Some(tools) = uv_tool_dir(env) {
                private_needs.push(RuntimeNeed {
                    path: tools,
                    rights: Rights::RX,
                    why: "uv tool directory (uvx locks it and runs installed tools; writes go to a private layer)"
                        .into(),
                    optional: true,
                    private_env: Some("UV_TOOL_DIR".into()),
                });
            }
        }
    }

    if git_config && let Some(h) = home {
        for (p, why) in [
            (
                h.join(".gitconfig"),
                "git's global configuration (identity for commits)",
            ),
            (
                h.join(".config/git"),
                "git's global configuration (XDG location)",
            ),
        ] {
            need(p, Rights::R, why.into(), true);
        }
    }
    needs.append(&mut private_needs);
    if let Some((script, tree)) = script_tree(argv, chosen, env) {
        needs.push(RuntimeNeed {
            path: tree,
            rights: Rights::R,
            why: format!("the server's script {} and its package", script.display()),
            optional: false,
            private_env: None,
        });
    }

    Ok(CommandSpec {
        argv: argv.to_vec(),
        program,
        interpreter,
        profile: chosen,
        needs,
    })
}

/// For `node path/to/server.js` and `python path/to/server.py`: the script
/// and the tree it loads its code from. For node, the outermost
/// `node_modules` above the script (its dependencies live there), else the
/// nearest directory with a `package.json`, else the script's directory.
/// For python, the script's directory (its `sys.path[0]`).
fn script_tree(argv: &[OsString], profile: Profile, env: &HostEnv) -> Option<(PathBuf, PathBuf)> {
    if profile == Profile::Native {
        return None;
    }
    // The first argument that is not an option and names an existing file
    // (launchers put subcommands first: `fastmcp run server.py`,
    // `uv run server.py`), relative paths taken from the directory the
    // command runs in (`uv --directory P` runs in P).
    let cwd = uv_directory(argv, env).or_else(|| env.cwd.clone());
    let script = argv
        .iter()
        .skip(1)
        .map(Path::new)
        .filter(|a| !a.as_os_str().to_string_lossy().starts_with('-'))
        .filter_map(|a| {
            let a = if a.is_absolute() {
                a.to_path_buf()
            } else {
                cwd.as_ref()?.join(a)
            };
            std::fs::canonicalize(&a).ok().filter(|p| p.is_file())
        })
        .next()?;
    let dir = script.parent()?.to_path_buf();
    // A script in a shared directory (/tmp, the home directory, ...) gets
    // itself granted, never the whole directory.
    if shared_directory(&dir, env) {
        return Some((script.clone(), script));
    }
    let tree = match profile {
        Profile::Node => {
            let outer_modules = script
                .ancestors()
                .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
                .last();
            let tree = match outer_modules {
                Some(m) => m.to_path_buf(),
                None => script
                    .ancestors()
                    .skip(1)
                    .find(|a| a.join("package.json").is_file())
                    .map_or(dir, Path::to_path_buf),
            };
            if shared_directory(&tree, env) {
                script.clone()
            } else {
                tree
            }
        }
        _ => dir,
    };
    Some((script, tree))
}

/// Directories shared by everything the user runs: a script there is
/// granted alone, never with its directory, and a cache named as one is not
/// granted at all. `dir` is compared as given and, when it exists,
/// resolved (a symbolic link to `/tmp` is `/tmp`).
fn shared_directory(dir: &Path, env: &HostEnv) -> bool {
    shared_as_named(dir, env) || std::fs::canonicalize(dir).is_ok_and(|c| shared_as_named(&c, env))
}

/// Whether `dir`, as given, is one of the shared directories (the home
/// directory as given or resolved).
fn shared_as_named(dir: &Path, env: &HostEnv) -> bool {
    const SHARED: &[&str] = &[
        "/",
        "/tmp",
        "/var/tmp",
        "/dev/shm",
        "/home",
        "/root",
        "/srv",
        "/opt",
        "/usr/local/bin",
        "/usr/bin",
    ];
    SHARED.iter().any(|s| dir == Path::new(s))
        || env
            .home
            .as_deref()
            .is_some_and(|h| dir == h || std::fs::canonicalize(h).is_ok_and(|c| c == dir))
}

/// The virtual environment `bin` lives in: `<venv>/bin/<name>` where
/// `<venv>/pyvenv.cfg` exists.
fn venv_of(program: &Path) -> Option<PathBuf> {
    let bin = program.parent()?;
    if base_name(bin) != "bin" {
        return None;
    }
    let root = bin.parent()?;
    root.join("pyvenv.cfg")
        .is_file()
        .then(|| root.to_path_buf())
}

/// The install prefix of the Python a virtual environment was made from:
/// `home = <prefix>/bin` in its `pyvenv.cfg`, when that directory holds a
/// Python (`uv run` and the venv's own `bin/python` link run it; uv takes
/// a venv whose Python it cannot see for broken and recreates it).
///
/// # Security
///
/// `pyvenv.cfg` is as writable as the venv: a `home` that is not a `bin`
/// directory with a Python in it, or whose prefix is a shared directory
/// (`/`, the home directory, ...), grants nothing.
fn venv_base(venv: &Path, env: &HostEnv) -> Option<PathBuf> {
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    let home = cfg.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "home").then(|| v.trim().to_string())
    })?;
    let bin = std::fs::canonicalize(&home).ok()?;
    if base_name(&bin) != "bin" || !holds_python(&bin) {
        return None;
    }
    let prefix = bin.parent()?.to_path_buf();
    (!shared_directory(&prefix, env)).then_some(prefix)
}

/// Whether `bin` holds an executable `python`, `python3` or `python3.X`.
fn holds_python(bin: &Path) -> bool {
    std::fs::read_dir(bin).is_ok_and(|rd| {
        rd.flatten().any(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("python"))
                .is_some_and(|v| v.is_empty() || v.starts_with(|c: char| c.is_ascii_digit()))
                && is_executable(&e.path())
        })
    })
}

/// The directories a `uv` command names with `flag` (`--directory P`,
/// `--project=P`, before or after `run`), canonical, relative ones taken
/// from the current directory. Nothing for other commands.
fn uv_flag_dirs(argv: &[OsString], flag: &str, env: &HostEnv) -> Vec<PathBuf> {
    let Some(first) = argv.first() else {
        return Vec::new();
    };
    if base_name(Path::new(first)) != "uv" {
        return Vec::new();
    }
    let args: Vec<String> = argv
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let abs = |p: &str| {
        let p = Path::new(p);
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            env.cwd.clone().unwrap_or_default().join(p)
        };
        std::fs::canonicalize(&p).ok().filter(|d| d.is_dir())
    };
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if a == flag {
            out.extend(args.get(i + 1).and_then(|v| abs(v)));
        } else if let Some(v) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            out.extend(abs(v));
        }
    }
    out
}

/// The directory a `uv --directory P` command runs in (the last given).
fn uv_directory(argv: &[OsString], env: &HostEnv) -> Option<PathBuf> {
    uv_flag_dirs(argv, "--directory", env).pop()
}

/// The projects a `uv` command runs in: `--directory P` / `--project P`
/// (before or after `run`), else, for `uv run`, the current directory
/// when it holds a `pyproject.toml`.
fn uv_projects(argv: &[OsString], env: &HostEnv) -> Vec<PathBuf> {
    if argv
        .first()
        .is_none_or(|first| base_name(Path::new(first)) != "uv")
    {
        return Vec::new();
    }
    let args: Vec<String> = argv
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut out = uv_flag_dirs(argv, "--directory", env);
    out.extend(uv_flag_dirs(argv, "--project", env));
    if out.is_empty()
        && args.iter().any(|a| a == "run")
        && let Some(cwd) = &env.cwd
        && cwd.join("pyproject.toml").is_file()
        && !shared_directory(cwd, env)
    {
        out.push(cwd.clone());
    }
    out
}

/// The npm cache: `npm_config_cache` (or `NPM_CONFIG_CACHE`) when absolute,
/// else `~/.npm`.
///
/// # Security
///
/// None when that is a shared directory (`/tmp`, the home directory, ...):
/// a cache is granted whole, and a shared directory never is.
fn npm_cache(env: &HostEnv) -> Option<PathBuf> {
    npm_cache_named(env).filter(|c| !shared_directory(c, env))
}

/// The npm cache as the host names it, shared directory or not.
fn npm_cache_named(env: &HostEnv) -> Option<PathBuf> {
    abs_var(env, "npm_config_cache")
        .or_else(|| abs_var(env, "NPM_CONFIG_CACHE"))
        .or_else(|| env.home.as_ref().map(|h| h.join(".npm")))
}

/// An environment variable of the host holding an absolute path.
fn abs_var(env: &HostEnv, name: &str) -> Option<PathBuf> {
    env.vars
        .get(name)
        .filter(|v| v.starts_with('/'))
        .map(PathBuf::from)
}

/// uv's cache: `UV_CACHE_DIR` when absolute, else `$XDG_CACHE_HOME/uv`,
/// else `~/.cache/uv`; None when that is a shared directory (as for
/// [`npm_cache`]).
fn uv_cache(env: &HostEnv) -> Option<PathBuf> {
    uv_cache_named(env).filter(|c| !shared_directory(c, env))
}

/// uv's cache as the host names it, shared directory or not.
fn uv_cache_named(env: &HostEnv) -> Option<PathBuf> {
    abs_var(env, "UV_CACHE_DIR")
        .or_else(|| abs_var(env, "XDG_CACHE_HOME").map(|c| c.join("uv")))
        .or_else(|| env.home.as_ref().map(|h| h.join(".cache/uv")))
}

/// uv's data directory (managed pythons, tools): `$XDG_DATA_HOME/uv`, else
/// `~/.local/share/uv`.
fn uv_data_dir(env: &HostEnv) -> Option<PathBuf> {
    abs_var(env, "XDG_DATA_HOME")
        .map(|d| d.join("uv"))
        .or_else(|| env.home.as_ref().map(|h| h.join(".local/share/uv")))
        .filter(|d| !shared_directory(d, env))
}

/// uv's tool directory: `UV_TOOL_DIR` when absolute, else `tools` in its
/// data directory; None when that is a shared directory.
fn uv_tool_dir(env: &HostEnv) -> Option<PathBuf> {
    uv_tool_dir_named(env).filter(|d| !shared_directory(d, env))
}

/// uv's tool directory as the host names it, shared directory or not.
fn uv_tool_dir_named(env: &HostEnv) -> Option<PathBuf> {
    abs_var(env, "UV_TOOL_DIR").or_else(|| uv_data_dir(env).map(|d| d.join("tools")))
}

/// The caches of a profile that the host names as shared directories
/// (`UV_CACHE_DIR=/tmp`, a link to the home directory, ...), which the
/// profile does not grant: each with the variable that names it to the
/// server, for the plan's warnings.
pub fn shared_caches(profile: Profile, env: &HostEnv) -> Vec<(&'static str, PathBuf)> {
    let named = match profile {
        Profile::Native => vec![],
        Profile::Node => vec![("npm_config_cache", npm_cache_named(env))],
        Profile::Python => vec![
            ("UV_CACHE_DIR", uv_cache_named(env)),
            ("UV_TOOL_DIR", uv_tool_dir_named(env)),
        ],
    };
    named
        .into_iter()
        .filter_map(|(var, dir)| dir.map(|d| (var, d)))
        .filter(|(_, d)| shared_directory(d, env))
        .collect()
}

/// Environment variables a profile sets for the server (the policy's
/// `env.set` overrides them).
///
/// Node: `npm_config_cache` names the cache the profile grants, and npm and
/// npx prefer what the cache holds over asking the registry (the server may
/// have no network) and skip the update, audit and funding calls that only
/// phone home. Python: `UV_CACHE_DIR` and `UV_TOOL_DIR` name the cache and
/// tool directory the profile grants, and uv stays offline.
pub fn profile_env(profile: Profile, env: &HostEnv) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if profile == Profile::Python {
        // uv and uvx use what the cache holds, never the network (the
        // default policy has none), and never download a Python.
        for (k, v) in [
            ("UV_OFFLINE", "1"),
            ("UV_PYTHON_DOWNLOADS", "never"),
            ("UV_NO_PROGRESS", "1"),
        ] {
            out.insert(k.to_string(), v.to_string());
        }
        for (k, dir) in [
            ("UV_CACHE_DIR", uv_cache(env)),
            ("UV_TOOL_DIR", uv_tool_dir(env)),
        ] {
            if let Some(dir) = dir {
                out.insert(k.to_string(), dir.to_string_lossy().into_owned());
            }
        }
    }
    if profile == Profile::Node {
        if let Some(cache) = npm_cache(env) {
            out.insert(
                "npm_config_cache".to_string(),
                cache.to_string_lossy().into_owned(),
            );
        }
        for (k, v) in [
            ("npm_config_prefer_offline", "true"),
            ("npm_config_update_notifier", "false"),
            ("npm_config_audit", "false"),
            ("npm_config_fund", "false"),
        ] {
            out.insert(k.to_string(), v.to_string());
        }
    }
    out
}

/// The pyenv root a program lives in: `<root>/shims/<name>` or
/// `<root>/versions/<version>/bin/<name>`, where `<root>/libexec/pyenv`
/// exists.
fn pyenv_root_of(program: &Path) -> Option<PathBuf> {
    let dir = program.parent()?;
    let candidate = if base_name(dir) == "shims" {
        dir.parent()?
    } else if base_name(dir) == "bin" {
        let version_dir = dir.parent()?;
        let versions = version_dir.parent()?;
        if base_name(versions) != "versions" {
            return None;
        }
        versions.parent()?
    } else {
        return None;
    };
    candidate
        .join("libexec/pyenv")
        .is_file()
        .then(|| candidate.to_path_buf())
}
