//! One server entry of a host config: what `wrap` and `--undo` do with it.
//! Pure: the filesystem is only asked through [`Probe`].

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::Format;
use super::certs::{self, Cert};
use super::place::{self, Declined};
pub use super::values::{Probe, WrapOptions};
use super::values::{localize, path_like};
use crate::roots::Access;

/// A server's new `command` and `args` (`None`: no `args` key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The command.
    pub command: String,
    /// The arguments.
    pub args: Option<Vec<String>>,
}

/// What to do with one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Replace its command and arguments.
    Rewrite(Launch),
    /// Leave it as it is.
    Leave,
}

/// The decision for one server, with what the user should be told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The action.
    pub action: Action,
    /// Notes for stderr (what was inferred, what was left alone and why).
    pub notes: Vec<String>,
    /// The roots inferred (wrap only), as written in the args.
    pub roots: Vec<String>,
    /// The read-only roots inferred (wrap only: certificates), as
    /// written in the args.
    pub ro_roots: Vec<String>,
    /// The places named by its arguments or env that were not made roots
    /// because they are not data places (wrap only).
    pub declined: Vec<Declined>,
    /// The `--env` names added (wrap only).
    pub env: Vec<String>,
    /// Directories to create before the server is launched (wrap with
    /// `--create-roots`), as local paths.
    pub create: Vec<PathBuf>,
}

impl Decision {
    fn leave(note: impl Into<String>) -> Decision {
        Decision {
            action: Action::Leave,
            notes: vec![note.into()],
            roots: vec![],
            ro_roots: vec![],
            declined: vec![],
            env: vec![],
            create: vec![],
        }
    }
}

/// Container launchers: the server runs in its own container, whose
/// isolation is the runtime's; rootfence in front would confine only the
/// client talking to the daemon.
const CONTAINER_COMMANDS: &[&str] = &["docker", "podman", "nerdctl"];

/// The last component of `command`.
fn base_name(command: &str) -> &str {
    command.rsplit('/').next().unwrap_or(command)
}

/// Whether `command` is rootfence: its file name, or `rootfence` itself.
pub fn is_rootfence(command: &str, rootfence: &str) -> bool {
    command == rootfence || base_name(command) == "rootfence"
}

/// A server entry's `args` that is not a list of strings: the entry is
/// left alone.
#[derive(Debug, thiserror::Error)]
enum BadArgs {
    /// An element is not a string.
    #[error("an argument is not a string: {0}")]
    NotString(Value),
    /// `args` is not an array.
    #[error("\"args\" is not a list: {0}")]
    NotList(Value),
}

fn strings(v: Option<&Value>) -> Result<Option<Vec<String>>, BadArgs> {
    match v {
        None => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| BadArgs::NotString(x.clone()))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(other) => Err(BadArgs::NotList(other.clone())),
    }
}

/// Whether the entry is a remote (HTTP or SSE) server.
fn remote(entry: &Map<String, Value>) -> bool {
    entry.contains_key("url")
        || matches!(
            entry.get("type").and_then(Value::as_str),
            Some("http" | "sse" | "streamable-http" | "streamableHttp")
        )
}

/// Decide what `wrap` does with one server entry.
pub fn wrap(entry: &Value, opts: &WrapOptions, probe: &dyn Probe) -> Decision {
    let Some(entry) = entry.as_object() else {
        return Decision::leave("not an object: left alone");
    };
    if remote(entry) {
        return Decision::leave(
            "remote server (url): left alone; rootfence confines servers it launches over stdio",
        );
    }
    if let Some(t) = entry.get("type").and_then(Value::as_str)
        && t != "stdio"
    {
        return Decision::leave(format!("type {t:?} is not stdio: left alone"));
    }
    let Some(command) = entry.get("command").and_then(Value::as_str) else {
        return Decision::leave("no \"command\": left alone");
    };
    let args = match strings(entry.get("args")) {
        Ok(a) => a,
        Err(e) => return Decision::leave(format!("{e}: left alone")),
    };
    if is_rootfence(command, &opts.rootfence) {
        return Decision::leave(
            "already runs under rootfence: unchanged (to change its options, --undo it first)",
        );
    }
    let name = base_name(command);
    if CONTAINER_COMMANDS.contains(&name) {
        return Decision::leave(format!(
            "runs in a container ({name}): left alone; the container is its sandbox, and rootfence in front would confine only the {name} client"
        ));
    }

    let mut notes = Vec::new();
    let mut out = vec!["run".to_string()];
    if let Some(p) = &opts.policy {
        out.push("--policy".into());
        out.push(p.clone());
    }
    let mut env_names = Vec::new();
    if let Some(env) = entry.get("env").and_then(Value::as_object) {
        for k in env.keys() {
            if !crate::envvars::valid_name(k) {
                notes.push(format!(
                    "env {k:?} is not a variable name rootfence can pass: the server will not get it"
                ));
                continue;
            }
            env_names.push(k.clone());
        }
    }
    if entry.contains_key("envFile") {
        notes.push(
            "envFile: its variables are not known here and do not reach the server; add --env NAME to its args for each"
                .into(),
        );
    }
    for n in &env_names {
        out.push("--env".into());
        out.push(n.clone());
    }
    let original = args.clone().unwrap_or_default();
    let mut found = Found::default();
    for r in &opts.roots {
        given_root(r, opts, probe, &mut found);
    }
    // The option a value follows (`--cache-dir` of `--cache-dir DIR`), to
    // show the argument as written.
    let mut flag: Option<&str> = None;
    for a in &original {
        let (value, arg) = match a.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (v, a.clone()),
            _ if a.starts_with('-') => {
                flag = Some(a);
                continue;
            }
            _ => (
                a.as_str(),
                flag.map_or_else(|| a.clone(), |f| format!("{f} {a}")),
            ),
        };
        flag = None;
        let from = Origin {
            from: "its arguments",
            arg,
        };
        consider(value, &from, opts, probe, &mut found);
    }
    if let Some(env) = entry.get("env").and_then(Value::as_object) {
        for (k, v) in env {
            let Some(v) = v.as_str() else { continue };
            let from = Origin {
                from: &format!("env {k}"),
                arg: format!("{k}={v}"),
            };
            if certs::is_cert_var(k) {
                match certs::judge(v, opts, probe) {
                    Some(Cert::Grant(text)) => found.ro_root(text, from.from),
                    Some(other) => found.notes.push(format!("env {k}: {other}")),
                    None => {}
                }
            } else if let Some(path) = url_path(v) {
                consider(&path, &from, opts, probe, &mut found);
            } else if path_like(v) && names_a_path(k) {
                consider(v, &from, opts, probe, &mut found);
            } else if path_like(v) {
                notes.push(format!(
                    "env {k} names a path ({v}): the server reaches it only inside a root; {}",
                    reach_hint(v, opts, probe)
                ));
            }
        }
    }
    notes.append(&mut found.notes);
    let roots = found.roots;
    if roots.is_empty() && found.declined.is_empty() && opts.format == Format::ClaudeDesktop {
        notes.push(
            "no root: nothing in its arguments or env names a directory, and Claude Desktop declares no roots, so the server sees none of your files; give it one with `rootfence wrap --root-for NAME=DIR` (or add \"--root\", \"DIR\" before \"--\" in its args)"
                .into(),
        );
    }
    for r in &roots {
        out.push("--root".into());
        out.push(r.clone());
    }
    for r in &found.ro_roots {
        out.push("--ro-root".into());
        out.push(r.clone());
    }
    out.push("--".into());
    out.push(command.to_string());
    out.extend(original);
    Decision {
        action: Action::Rewrite(Launch {
            command: opts.rootfence.clone(),
            args: Some(out),
        }),
        notes,
        roots,
        ro_roots: found.ro_roots,
        declined: found.declined,
        env: env_names,
        create: found.create,
    }
}

/// Decide what `--undo` does with one server entry: a server launched as
/// `rootfence run [OPTIONS] -- CMD ARGS...` gets `CMD` and `ARGS` back
/// (no `args` key when there are none).
pub fn undo(entry: &Value, rootfence: &str) -> Decision {
    let Some(entry) = entry.as_object() else {
        return Decision::leave("not an object: left alone");
    };
    let Some(command) = entry.get("command").and_then(Value::as_str) else {
        return Decision::leave("not launched by a command: left alone");
    };
    if !is_rootfence(command, rootfence) {
        return Decision::leave("not wrapped: unchanged");
    }
    let args = match strings(entry.get("args")) {
        Ok(a) => a.unwrap_or_default(),
        Err(e) => return Decision::leave(format!("{e}: left alone")),
    };
    if args.first().map(String::as_str) != Some("run") {
        return Decision::leave("runs rootfence, but not `rootfence run`: left alone");
    }
    let Some(sep) = args.iter().position(|a| a == "--") else {
        return Decision::leave("runs `rootfence run` without `--`: no server command to restore");
    };
    let Some(cmd) = args.get(sep + 1) else {
        return Decision::leave("runs `rootfence run` with nothing after `--`: left alone");
    };
    let rest: Vec<String> = args[sep + 2..].to_vec();
    Decision {
        action: Action::Rewrite(Launch {
            command: cmd.clone(),
            args: (!rest.is_empty()).then_some(rest),
        }),
        notes: vec![format!("restored: {cmd}")],
        roots: vec![],
        ro_roots: vec![],
        declined: vec![],
        env: vec![],
        create: vec![],
    }
}

/// Where a value comes from: for notes (`its arguments`, `env K`) and
/// for the line of a declined place (the argument as written).
struct Origin<'a> {
    from: &'a str,
    arg: String,
}

/// Roots found so far for one server.
#[derive(Default)]
struct Found {
    roots: Vec<String>,
    ro_roots: Vec<String>,
    create: Vec<PathBuf>,
    notes: Vec<String>,
    declined: Vec<Declined>,
    /// The roots the user gave, as local paths.
    given: Vec<PathBuf>,
}

impl Found {
    fn root(&mut self, text: String, from: &str, why: &str) {
        if !self.roots.contains(&text) {
            self.notes.push(format!("root from {from}: {text}{why}"));
            self.roots.push(text);
        }
    }

    fn ro_root(&mut self, text: String, from: &str) {
        if !self.ro_roots.contains(&text) {
            self.notes.push(format!(
                "read-only root from {from}: {text} (certificates the server reads, never writes)"
            ));
            self.ro_roots.push(text);
        }
    }

    /// Whether `dir` is inside a root the user gave (in any of its forms).
    fn given_covers(&self, dir: &Path, probe: &dyn Probe) -> bool {
        let dirs = [Some(place::normal(dir)), probe.canonical(dir)];
        self.given.iter().any(|g| {
            let gs = [Some(place::normal(g)), probe.canonical(g)];
            dirs.iter()
                .flatten()
                .any(|d| gs.iter().flatten().any(|g| d.starts_with(g)))
        })
    }
}

/// A root the user gave: made absolute (`~` and `~/` expanded), checked
/// like an inferred one, never a system directory; the user's word, so
/// any place else (the home, a dot-directory, a PATH directory).
fn given_root(r: &str, opts: &WrapOptions, probe: &dyn Probe, found: &mut Found) {
    let local = match r.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => match probe.home() {
            Some(h) => place::normal(&h.join(rest.trim_start_matches('/'))),
            None => PathBuf::from(r),
        },
        _ => PathBuf::from(r),
    };
    let text = local.to_string_lossy().into_owned();
    if !local.is_absolute() {
        found
            .notes
            .push(format!("not a root: {r} (given) is not an absolute path"));
        return;
    }
    if SYSTEM_TREES
        .iter()
        .any(|t| crate::roots::within(&local, Path::new(t)))
    {
        found
            .notes
            .push(format!("not a root: {r} (given) is a system directory"));
        return;
    }
    match probe.root_refusal(&local, opts.policy.as_deref(), Access::ReadWrite) {
        Some(why) => found
            .notes
            .push(format!("not a root: {r} (given) would be refused ({why})")),
        None => {
            found.given.push(local);
            found.root(text, "the command line", "");
        }
    }
}

/// Trees that are never made roots by `wrap`: the system's, and the
/// places software is installed.
const SYSTEM_TREES: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/boot", "/opt",
    "/var/lib", "/snap", "/nix", "/proc", "/sys", "/dev", "/run",
];

/// Consider one value the server is given (an argument, or an
/// environment value) as naming where it works. A value that is a path
/// here becomes a root:
///
/// - a directory (absolute, `~/...`, `${userHome}/...` in VS Code and
///   Cursor, `${HOME}/...` in Claude Code, `./...` next to a `.mcp.json`),
///   or `${workspaceFolder}`;
/// - a data file (a database, a notes file): its directory, also when the
///   file does not exist yet (the server creates it);
/// - with `--create-roots`, a directory that does not exist yet (or a
///   missing file's), created by the caller.
///
/// Never a root: a file that is code (a script, an executable: the
/// server's own code must not be writable by it), a system tree, a place
/// that is not a data place ([`place::not_data`]: the home, its
/// dot-directories, `PATH`, start-up files; declined with the flag that
/// states it, unless a root the user gave holds it), a root the policy
/// would refuse. Other host variables (`${input:...}`, `${env:...}`) are
/// only known when the host launches the server: noted.
fn consider(v: &str, origin: &Origin, opts: &WrapOptions, probe: &dyn Probe, found: &mut Found) {
    let from = origin.from;
    let folder_vars = matches!(opts.format, Format::VsCode | Format::Cursor);
    if folder_vars && (v == "${workspaceFolder}" || v == "${workspaceFolder}/") {
        // The folder the host opened: known only to the host.
        found.root(v.trim_end_matches('/').to_string(), from, "");
        return;
    }
    let Some((text, local)) = localize(v, opts, probe) else {
        if v.contains("${") {
            found.notes.push(format!(
                "not a root: {v} ({from}) is only known when the host launches the server; add --root to its args if it names a directory"
            ));
        }
        return;
    };
    if local
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return;
    }
    // What would become the root: the directory itself, or the file's.
    let (dir_text, dir, of_file) = if probe.is_dir(&local) {
        (text, local.clone(), false)
    } else if probe.exists(&local) {
        if probe.is_code(&local) {
            found.notes.push(format!(
                "not a root: {v} ({from}) is code the server runs; its directory is not made writable"
            ));
            return;
        }
        match parent(&text, &local) {
            Some((t, d)) => (t, d, true),
            None => return,
        }
    } else if looks_like_file(v) {
        match parent(&text, &local) {
            Some((t, d)) => (t, d, true),
            None => return,
        }
    } else if from != "its arguments"
        || opts.create_roots
        || local.parent().is_some_and(|p| probe.is_dir(p))
    {
        (text, local.clone(), false)
    } else {
        // A word that merely starts with / (a route, an option value).
        return;
    };
    if SYSTEM_TREES
        .iter()
        .any(|t| crate::roots::within(&dir, Path::new(t)))
        || dir == Path::new("/")
    {
        found.notes.push(format!(
            "not a root: {} ({from}) is a system directory",
            dir.display()
        ));
        return;
    }
    let refusal = probe
        .is_dir(&dir)
        .then(|| probe.root_refusal(&dir, opts.policy.as_deref(), Access::ReadWrite))
        .flatten();
    if let Some(why) = place::not_data(&local, &dir, probe) {
        if refusal.is_none() && found.given_covers(&dir, probe) {
            found.notes.push(format!(
                "{dir_text} ({from}): inside a root given on the command line"
            ));
            return;
        }
        let home = probe.home();
        found.declined.push(Declined {
            argument: origin.arg.clone(),
            dir: place::shown(&dir, home.as_deref()),
            file: of_file.then(|| place::shown(&local, home.as_deref())),
            why,
            refused: refusal.map(|r| r.to_string()),
        });
        return;
    }
    if let Some(why) = refusal {
        found.notes.push(format!(
            "not a root: {dir_text} ({from}) would be refused ({why})"
        ));
        return;
    }
    if probe.is_dir(&dir) {
        let what = if of_file {
            " (the directory of a file it uses)"
        } else {
            ""
        };
        found.root(dir_text, from, what);
    } else if opts.create_roots {
        if !found.create.contains(&dir) {
            found.create.push(dir.clone());
        }
        found.root(dir_text, from, " (created)");
    } else {
        found.notes.push(format!(
            "not a root: {dir_text} ({from}) does not exist yet; create it, or wrap with --create-roots to have it created and given as a root"
        ));
    }
}

/// The directory of a file value: its text and local path (`~` for a
/// file in the home, `/` for one at the top).
fn parent(text: &str, local: &Path) -> Option<(String, PathBuf)> {
    let (t, _) = text.rsplit_once('/')?;
    let dir = local.parent()?.to_path_buf();
    let t = if t.is_empty() { "/" } else { t };
    Some((t.to_string(), dir))
}

/// The path a database URL names: absolute (`sqlite:////abs/x.db`,
/// `sqlite:///abs/x.db`, `duckdb:///abs/x.duckdb`, `file:///abs/x`), or
/// under the home (`sqlite:///~/x.db`, as the servers that expand `~`
/// read it).
fn url_path(v: &str) -> Option<String> {
    let (scheme, rest) = v.split_once("://")?;
    let known = ["sqlite", "duckdb", "file"]
        .iter()
        .any(|k| scheme == *k || scheme.starts_with(&format!("{k}+")));
    if !known || !rest.starts_with('/') {
        return None;
    }
    let path = rest.split(['?', '#']).next()?.trim_start_matches('/');
    if path == "~" || path.starts_with("~/") {
        return Some(path.to_string());
    }
    (!path.is_empty()).then(|| format!("/{path}"))
}

/// An environment variable whose name says it holds a path.
fn names_a_path(k: &str) -> bool {
    let k = k.to_ascii_uppercase();
    [
        "_PATH",
        "_DIR",
        "_FILE",
        "_ROOT",
        "_FOLDER",
        "_DB",
        "_DATABASE",
        "_VAULT",
        "_DIRECTORY",
        "_HOME",
    ]
    .iter()
    .any(|s| k.ends_with(s))
        || matches!(
            k.as_str(),
            "PATH_TO_DB" | "DB" | "DATABASE" | "VAULT" | "ROOT"
        )
}

/// How to let the server reach the file `path`: its directory as a root,
/// unless every server reads it already (the system's files), it is a
/// system directory, or it is not a data place.
fn reach_hint(path: &str, opts: &WrapOptions, probe: &dyn Probe) -> String {
    const POLICY: &str = "grant the file in a policy ([runtime] read or write)";
    let local = localize(path, opts, probe).map(|(_, l)| l);
    if let Some(l) = &local {
        let canonical = probe.canonical(l).unwrap_or_else(|| l.clone());
        if crate::runtime::system_reads(l) && crate::runtime::system_reads(&canonical) {
            return "it is readable already: the system's files are granted to every server"
                .to_string();
        }
    }
    let Some((dir, _)) = path.rsplit_once('/').filter(|(d, _)| !d.is_empty()) else {
        return format!("to let it, {POLICY}");
    };
    let dir_local = local.as_deref().and_then(Path::parent);
    if let Some(d) = dir_local {
        if SYSTEM_TREES
            .iter()
            .any(|t| crate::roots::within(d, Path::new(t)))
        {
            return format!("{dir} is a system directory; to let it, {POLICY}");
        }
        if let Some(l) = &local
            && let Some(why) = place::not_data(l, d, probe)
        {
            let shown = place::shown(d, probe.home().as_deref());
            return format!("{shown} {why}: not to be a root; to let it, {POLICY}");
        }
    }
    format!("to let it, add \"--root\", \"{dir}\" before \"--\" in its args, or {POLICY}")
}

/// A missing path whose last component has an extension (`x.db`,
/// `memory.json`): worth a note, unlike a word that merely starts with /.
fn looks_like_file(v: &str) -> bool {
    v.rsplit('/')
        .next()
        .is_some_and(|last| last.contains('.') && !last.starts_with('.'))
}
