//! `rootfence wrap`: a host's MCP config with every stdio server launched
//! through `rootfence run`, or back (`--undo`).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::hostconfig::{self, Action, Format, Outcome, Probe, WrapSettings};
use crate::policy::Policy;
use crate::roots::{self, Access, RootInput};
use crate::runtime::HostEnv;

/// Exit code for a config that cannot be read, parsed or written.
const EXIT_CONFIG: u8 = 1;
/// Exit code for bad options (a policy that does not load, an unknown
/// server name); clap's own usage errors exit 2 too.
const EXIT_USAGE: u8 = 2;

/// `rootfence wrap` options.
#[derive(Debug, clap::Args)]
#[command(after_long_help = AFTER_HELP)]
pub struct WrapArgs {
    /// The host's MCP config: claude_desktop_config.json, .vscode/mcp.json
    /// (or a VS Code settings.json), ~/.cursor/mcp.json or .cursor/mcp.json,
    /// .mcp.json.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The host, when the file name does not tell (any file with a
    /// "servers" object is read as VS Code's).
    #[arg(long, value_enum, value_name = "HOST")]
    pub format: Option<Format>,
    /// A policy for every wrapped server (made absolute).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// A policy for one server, by its name in the config; wins over
    /// --policy. Repeatable.
    #[arg(long = "policy-for", value_name = "NAME=FILE")]
    pub policy_for: Vec<String>,
    /// The rootfence binary the config launches. Default: this binary's
    /// absolute path.
    #[arg(long, value_name = "PATH")]
    pub rootfence: Option<PathBuf>,
    /// Rewrite the file itself (atomically, keeping its permissions) after
    /// saving the original as FILE.rootfence-backup. Without it the result
    /// goes to stdout.
    #[arg(long)]
    pub in_place: bool,
    /// With --in-place: replace an existing backup that differs from the
    /// file.
    #[arg(long, requires = "in_place")]
    pub force: bool,
    /// A root for every wrapped server (in addition to those inferred).
    /// Repeatable.
    #[arg(long = "root", value_name = "DIR", conflicts_with = "undo")]
    pub roots: Vec<PathBuf>,
    /// A root for one server, by its name in the config: what a host that
    /// declares no roots (Claude Desktop) needs for a server whose
    /// configuration names no directory. Repeatable.
    #[arg(long = "root-for", value_name = "NAME=DIR", conflicts_with = "undo")]
    pub roots_for: Vec<String>,
    /// Also make roots of directories the servers name that do not exist
    /// yet (a database's directory, a vault), creating them (mode 0700).
    #[arg(long, conflicts_with = "undo")]
    pub create_roots: bool,
    /// Copy each wrapped server's existing state in your home (`~/.NAME`,
    /// `~/.config/NAME`, ... named like the server) into the server's own
    /// store, where it finds it under rootfence; the originals are left as
    /// they are, and a place the store holds already is not overwritten.
    #[arg(long, conflicts_with = "undo")]
    pub import_state: bool,
    /// Restore every server launched through `rootfence run` to the
    /// command after its `--` (no backup needed).
    #[arg(long, conflicts_with_all = ["policy", "policy_for"])]
    pub undo: bool,
}

const AFTER_HELP: &str = "\
Each stdio server's \"command\" becomes the rootfence binary and its \"args\"
become: run [--policy P] [--env NAME]... [--root DIR]... -- COMMAND ARGS...
- every key of the server's \"env\" becomes --env NAME (the host still sets
  the value; rootfence passes it on); the \"env\" object is kept as it is;
- arguments and values of its \"env\" that are paths here (absolute, ~/...,
  ${userHome}/... in VS Code and Cursor, ${HOME}/... in Claude Code, ./...
  next to a .mcp.json; database URLs such as sqlite:////abs/x.db) and
  ${workspaceFolder} become --root: a directory itself, a data file its
  directory (also a file the server will create). Never a root: code (a
  script or an executable), a system directory (/usr, /etc, /opt, ...), a
  root the policy would refuse, a place programs outside the sandbox read
  or run (the home or an ancestor of it, a dot-directory of the home or
  anything in one, a directory on PATH or ~/bin, in or holding one, a
  shell start-up file): those get a line naming the server, the argument,
  why, and the --root-for NAME=DIR that makes it a root. Other host
  variables are known only when the host launches the server (a note says
  so). A directory that does not exist yet becomes a root only with
  --create-roots, which creates it.
- a certificate variable (SSL_CERT_FILE, SSL_CERT_DIR, NODE_EXTRA_CA_CERTS,
  REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, DENO_CERT, PIP_CERT, GIT_SSL_CAINFO,
  ...: a word of its name begins or ends with CERT, or it holds CA_BUNDLE,
  CAINFO, CAPATH, CAFILE or SSL_ROOTS) needs nothing when the system's
  files hold it (/etc/ssl, /etc/pki, /usr, ...); elsewhere its file or
  directory becomes --ro-root, read-only, never writable.
- --root DIR adds a root to every wrapped server, --root-for NAME=DIR to
  one: what a server needs under a host that declares no roots (Claude
  Desktop) when its configuration names no directory (a note says so),
  and the user's word for a place wrap declined (never a system
  directory).
Left alone, with a note: servers already run by rootfence (wrapping twice
changes nothing), remote servers (url, type http or sse), servers run by
docker or podman. What was inferred for each server is printed on stderr.

Comments, formatting and key order are kept: only the command and args of
each wrapped server change (a comment inside a replaced args list is lost;
with --in-place the backup keeps the original). Claude Desktop and Claude
Code files must be plain JSON; VS Code and Cursor files may have comments
and trailing commas.

--import-state copies what each server run through rootfence kept in your
home before (~/.NAME and NAME in the XDG directories, named like the
server: what explain lists as not granted) into the server's own store, at
the same place under its home, where rootfence run lets it find it. A copy:
the original is never reached or written; a place the store holds already
is left as it is; links are copied as links.

--undo gives back each server's command and args from what its wrapped args
say, so wrapping then undoing gives the same JSON; a server whose args were
an empty list gets none. With --in-place, --undo writes no backup.

Exit status: 0 done (also when nothing needed changing); 1 the file cannot
be read, parsed, recognised or written, or its backup differs (--force);
2 bad options (a policy that does not load, --policy-for naming no server).";

/// The machine as `wrap` sees it: directories, the home directory, the
/// user's `PATH`, and the roots engine under each server's policy.
struct MachineProbe {
    home: Option<PathBuf>,
    cwd: Option<PathBuf>,
    path: Vec<PathBuf>,
    policies: BTreeMap<Option<String>, Policy>,
}

impl Probe for MachineProbe {
    fn is_code(&self, path: &Path) -> bool {
        use std::io::Read as _;
        use std::os::unix::fs::PermissionsExt as _;
        const SCRIPTS: &[&str] = &["js", "mjs", "cjs", "ts", "py", "sh", "rb", "pl"];
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| SCRIPTS.contains(&e));
        let exec = std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
        let mut head = [0u8; 4];
        let magic = std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut head))
            .is_ok()
            && (head.starts_with(b"#!") || &head == b"\x7fELF");
        ext || exec || magic
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn exists(&self, path: &Path) -> bool {
        path.symlink_metadata().is_ok()
    }

    fn home(&self) -> Option<PathBuf> {
        self.home.clone()
    }

    fn path_dirs(&self) -> Vec<PathBuf> {
        self.path.clone()
    }

    fn canonical(&self, path: &Path) -> Option<PathBuf> {
        // The deepest existing ancestor, canonical, and the rest as given.
        let mut rest = Vec::new();
        let mut at = path;
        loop {
            if let Ok(c) = std::fs::canonicalize(at) {
                return Some(rest.iter().rev().fold(c, |p, r| p.join(r)));
            }
            rest.push(at.file_name()?);
            at = at.parent()?;
        }
    }

    fn root_refusal(
        &self,
        path: &Path,
        policy: Option<&str>,
        access: Access,
    ) -> Option<roots::RefusalReason> {
        let policy = self.policies.get(&policy.map(str::to_string))?;
        let input = RootInput::command_line(path.to_string_lossy(), access);
        let (_, refused) = roots::resolve_all(&[input], &policy.root_rules(self.cwd.clone()));
        refused.into_iter().next().map(|r| r.reason)
    }
}

fn absolute(p: &Path, cwd: Option<&Path>) -> PathBuf {
    match cwd {
        Some(c) if p.is_relative() => c.join(p),
        _ => p.to_path_buf(),
    }
}

pub(super) fn wrap(args: &WrapArgs) -> ExitCode {
    let env = HostEnv::current();
    let shown = args.file.display().to_string();
    let text = match std::fs::read_to_string(&args.file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("rootfence: {shown}: cannot read: {e} (check the path to the host's config)");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let format = match args.format {
        Some(f) => f,
        None => match hostconfig::detect(&args.file, &text) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("rootfence: {e}");
                return ExitCode::from(EXIT_CONFIG);
            }
        },
    };
    let rootfence = match &args.rootfence {
        Some(p) => absolute(p, env.cwd.as_deref()),
        None => match std::env::current_exe().and_then(std::fs::canonicalize) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("rootfence: cannot find this binary's path ({e}); pass --rootfence PATH");
                return ExitCode::from(EXIT_USAGE);
            }
        },
    };
    let rootfence = rootfence.to_string_lossy().into_owned();
    let outcome = if args.undo {
        hostconfig::undo(&shown, &text, format, &rootfence)
    } else {
        let settings = match settings(args, &env, rootfence.clone()) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("rootfence: {e}");
                return ExitCode::from(EXIT_USAGE);
            }
        };
        let (settings, policies) = settings;
        let probe = MachineProbe {
            home: env.home.clone(),
            cwd: env.cwd.clone(),
            path: env
                .vars
                .get("PATH")
                .map(|p| std::env::split_paths(p).collect())
                .unwrap_or_default(),
            policies,
        };
        hostconfig::wrap(&shown, &text, format, &settings, &probe).inspect(|o| {
            env_notes(o, &settings, &probe.policies);
        })
    };
    let outcome = match outcome {
        Ok(o) => o,
        Err(e @ hostconfig::HostConfigError::UnknownServer { .. }) => {
            eprintln!("rootfence: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
        Err(e) => {
            eprintln!("rootfence: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    report(&shown, &outcome, args.undo);
    if args.import_state
        && let Err(code) = import_state(&shown, &outcome, format, &rootfence, &env, args)
    {
        return code;
    }
    if args.create_roots && (args.in_place || !args.undo) {
        for (name, d) in &outcome.servers {
            for dir in &d.create {
                match std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                {
                    Ok(()) => eprintln!("rootfence: {name}: created {}", dir.display()),
                    Err(e) => {
                        eprintln!(
                            "rootfence: {name}: cannot create {}: {e}; create it yourself, the wrapped config names it as a root",
                            dir.display()
                        );
                        return ExitCode::from(EXIT_CONFIG);
                    }
                }
            }
        }
    }
    if !args.in_place {
        let mut out = std::io::stdout().lock();
        if out
            .write_all(outcome.text.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            return ExitCode::from(EXIT_CONFIG);
        }
        return ExitCode::SUCCESS;
    }
    if !outcome.changed() {
        eprintln!("rootfence: {shown}: nothing to change; the file is left as it is");
        return ExitCode::SUCCESS;
    }
    match write_in_place(&args.file, &text, &outcome.text, !args.undo, args.force) {
        Ok(backup) => {
            match backup {
                Some(b) => eprintln!(
                    "rootfence: {shown} rewritten; the original is in {}",
                    b.display()
                ),
                None => eprintln!("rootfence: {shown} rewritten"),
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rootfence: {e}");
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

type Policies = BTreeMap<Option<String>, Policy>;

/// The wrap settings, with every policy named made absolute and loaded (a
/// policy that does not load would make the wrapped server fail to start).
fn settings(
    args: &WrapArgs,
    env: &HostEnv,
    rootfence: String,
) -> Result<(WrapSettings, Policies), String> {
    let mut policies = Policies::new();
    let mut load = |p: &Path| -> Result<String, String> {
        let abs = absolute(p, env.cwd.as_deref());
        let policy = Policy::load(&abs, env.home.as_deref()).map_err(|e| e.to_string())?;
        let key = abs.to_string_lossy().into_owned();
        policies.insert(Some(key.clone()), policy);
        Ok(key)
    };
    let policy = args.policy.as_deref().map(&mut load).transpose()?;
    let mut policy_for = BTreeMap::new();
    for spec in &args.policy_for {
        let Some((name, file)) = spec.split_once('=') else {
            return Err(format!(
                "--policy-for {spec:?}: write NAME=FILE (the server's name in the config, then its policy)"
            ));
        };
        policy_for.insert(name.to_string(), load(Path::new(file))?);
    }
    // `~` and `~/...` are left for the server's options to expand.
    let abs_root = |p: &Path| {
        if p.starts_with("~") {
            return p.to_string_lossy().into_owned();
        }
        absolute(p, env.cwd.as_deref())
            .to_string_lossy()
            .into_owned()
    };
    let roots = args.roots.iter().map(|r| abs_root(r)).collect();
    let mut roots_for: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for spec in &args.roots_for {
        let Some((name, dir)) = spec.split_once('=') else {
            return Err(format!(
                "--root-for {spec:?}: write NAME=DIR (the server's name in the config, then the directory)"
            ));
        };
        roots_for
            .entry(name.to_string())
            .or_default()
            .push(abs_root(Path::new(dir)));
    }
    let builtin = Policy::builtin(env.home.as_deref()).map_err(|e| e.to_string())?;
    policies.insert(None, builtin);
    let base = std::fs::canonicalize(&args.file)
        .ok()
        .and_then(|f| f.parent().map(Path::to_path_buf));
    Ok((
        WrapSettings {
            rootfence,
            policy,
            policy_for,
            base,
            create_roots: args.create_roots,
            roots,
            roots_for,
        },
        policies,
    ))
}

/// Notes about `env` keys the server's policy refuses: `rootfence run`
/// would refuse to start, so say so now, with the fix.
fn env_notes(outcome: &Outcome, settings: &WrapSettings, policies: &Policies) {
    for (name, d) in &outcome.servers {
        let key = settings.policy_for.get(name).or(settings.policy.as_ref());
        let Some(policy) = policies.get(&key.cloned()) else {
            continue;
        };
        for var in &d.env {
            if let Some(rule) = policy.env_refusal(var) {
                eprintln!(
                    "rootfence: {name}: WARNING: env {var} is refused by policy {}: {var} {}. rootfence run will not start this server: name {var} in the policy's [env] pass (give one with --policy-for {name}=FILE), or drop it from env",
                    policy.name(),
                    rule.why
                );
            }
        }
    }
}

/// `--import-state`: each server run through rootfence in `outcome` (the
/// command after its `--`), its existing state directories copied into its
/// store, as `run` will find the store.
fn import_state(
    shown: &str,
    outcome: &Outcome,
    format: Format,
    rootfence: &str,
    env: &HostEnv,
    args: &WrapArgs,
) -> Result<(), ExitCode> {
    use crate::store::{self, Imported, ServerId};
    let (settings, policies) = settings(args, env, rootfence.to_string()).map_err(|e| {
        eprintln!("rootfence: {e}");
        ExitCode::from(EXIT_USAGE)
    })?;
    let Some(home) = env.home.clone() else {
        eprintln!("rootfence: --import-state: HOME is not set; nothing imported");
        return Err(ExitCode::from(EXIT_USAGE));
    };
    // The commands after each `--`, as `run` will start them.
    let commands = hostconfig::undo(shown, &outcome.text, format, rootfence).map_err(|e| {
        eprintln!("rootfence: {e}");
        ExitCode::from(EXIT_CONFIG)
    })?;
    for (name, d) in &commands.servers {
        let Action::Rewrite(launch) = &d.action else {
            continue;
        };
        let key = settings.policy_for.get(name).or(settings.policy.as_ref());
        let Some(policy) = policies.get(&key.cloned()) else {
            continue;
        };
        let argv: Vec<std::ffi::OsString> = std::iter::once(launch.command.clone())
            .chain(launch.args.iter().flatten().cloned())
            .map(Into::into)
            .collect();
        let spec = match crate::runtime::discover(&argv, policy, env) {
            Ok(spec) => spec,
            Err(e) => {
                eprintln!("rootfence: {name}: state not imported: {e}");
                continue;
            }
        };
        if spec.own_state.is_empty() {
            continue;
        }
        if policy.raw.runtime.home != crate::policy::HomeMode::Private {
            eprintln!(
                "rootfence: {name}: state not imported: its policy {} keeps no store ([runtime] home is not \"private\")",
                policy.name()
            );
            continue;
        }
        let id = ServerId::of(&spec.argv, spec.name.as_deref());
        let Some(dir) = store::location(env, &id) else {
            continue;
        };
        // A cache is made again; what is kept is state.
        let cache = env.xdg("XDG_CACHE_HOME", ".cache");
        for own in &spec.own_state {
            let shown_own = crate::runtime::shown(own, Some(&home));
            if cache.as_ref().is_some_and(|c| own.starts_with(c)) {
                eprintln!("rootfence: {name}: {shown_own} not copied: a cache, made again");
                continue;
            }
            match store::import(&home, &dir, own) {
                Ok(Imported::Copied(n)) => eprintln!(
                    "rootfence: {name}: {shown_own} copied into its store ({n} files, in {}); the original is left as it is",
                    crate::runtime::shown(&dir, Some(&home))
                ),
                Ok(Imported::AlreadyThere) => eprintln!(
                    "rootfence: {name}: {shown_own} not copied: its store holds that place already (in {})",
                    crate::runtime::shown(&dir, Some(&home))
                ),
                Err(e) => {
                    eprintln!("rootfence: {name}: {shown_own} not imported: {e}");
                    return Err(ExitCode::from(EXIT_CONFIG));
                }
            }
        }
    }
    Ok(())
}

fn report(file: &str, outcome: &Outcome, undo: bool) {
    eprintln!("rootfence: {file}: {} config", outcome.format);
    for (name, d) in &outcome.servers {
        let what = match (&d.action, undo) {
            (Action::Rewrite(_), false) => "wrapped",
            (Action::Rewrite(_), true) => "unwrapped",
            (Action::Leave, _) => "left alone",
        };
        eprintln!("  {name}: {what}");
        if !undo && matches!(d.action, Action::Rewrite(_)) {
            if !d.env.is_empty() {
                eprintln!("    --env {}", d.env.join(" --env "));
            }
            if d.roots.is_empty() {
                eprintln!(
                    "    no root from its arguments: it gets only the roots the host announces and the policy's"
                );
            }
        }
        for n in &d.notes {
            eprintln!("    {n}");
        }
    }
    for (name, d) in &outcome.servers {
        for declined in &d.declined {
            eprintln!("rootfence: {}", declined.line(name));
        }
    }
}

/// Write `new` over `file` atomically, keeping its mode and owner; first,
/// when `backup`, save `original` as `FILE.rootfence-backup` (refused if a
/// different backup is there, unless `force`). Returns the backup's path.
///
/// A symlinked config is written through: its target is replaced, the link
/// stays.
fn write_in_place(
    file: &Path,
    original: &str,
    new: &str,
    backup: bool,
    force: bool,
) -> Result<Option<PathBuf>, String> {
    let shown = file.display();
    let target = std::fs::canonicalize(file).map_err(|e| format!("{shown}: {e}"))?;
    let meta = std::fs::metadata(&target).map_err(|e| format!("{shown}: {e}"))?;
    let mut saved = None;
    if backup {
        let mut name = target.clone().into_os_string();
        name.push(".rootfence-backup");
        let b = PathBuf::from(name);
        match std::fs::read(&b) {
            Ok(old) if old == original.as_bytes() => {}
            Ok(_) if !force => {
                return Err(format!(
                    "{shown}: the backup {} exists and differs from the file (it may hold the original of an earlier wrap); move it away, or pass --force to replace it",
                    b.display()
                ));
            }
            Ok(_) => atomic_write(&b, original.as_bytes(), &meta)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                atomic_write(&b, original.as_bytes(), &meta)?;
            }
            Err(e) => return Err(format!("{}: cannot read: {e}", b.display())),
        }
        saved = Some(b);
    }
    atomic_write(&target, new.as_bytes(), &meta)?;
    Ok(saved)
}

/// Write `bytes` to a new file beside `path`, with `meta`'s mode and owner
/// (best effort for the owner), flush it to disk and rename it over `path`.
fn atomic_write(path: &Path, bytes: &[u8], meta: &std::fs::Metadata) -> Result<(), String> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let dir = path.parent().unwrap_or(Path::new("/"));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.rootfence-{}.tmp", std::process::id()));
    let fail = |what: &str, e: std::io::Error| {
        let _ = std::fs::remove_file(&tmp);
        format!(
            "{}: cannot {what}: {e} (check that its directory is writable)",
            path.display()
        )
    };
    let mode = meta.mode() & 0o7777;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| fail("create a temporary file beside it", e))?;
    // Same owner first (as root editing a user's file), then the mode:
    // the umask does not apply to set_permissions.
    let _ = std::os::unix::fs::fchown(&f, Some(meta.uid()), Some(meta.gid()));
    f.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(|e| fail("set its permissions", e))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| fail("write", e))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| fail("replace it", e))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
