//! One server entry of a host config: what `wrap` and `--undo` do with it.
//! Pure: the filesystem is only asked through [`Probe`].

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::Format;

/// What `wrap` needs to know about the machine: whether a path is a
/// directory, and the home directory.
pub trait Probe {
    /// Whether `path` is an existing directory.
    fn is_dir(&self, path: &Path) -> bool;
    /// Whether `path` exists (as anything).
    fn exists(&self, path: &Path) -> bool;
    /// The home directory, for `~/...` and `${userHome}`.
    fn home(&self) -> Option<PathBuf>;
    /// Why `rootfence run` under `policy` (`None`: the built-in default)
    /// would refuse `dir` as a root, if it would.
    fn root_refusal(&self, dir: &Path, policy: Option<&str>) -> Option<String>;
}

/// The options `wrap` applies to every server.
#[derive(Debug, Clone)]
pub struct WrapOptions {
    /// The `command` of wrapped servers: the rootfence binary.
    pub rootfence: String,
    /// `--policy` for this server, if any.
    pub policy: Option<String>,
    /// The host format (decides which host variables name folders).
    pub format: Format,
    /// The directory of the config file (relative arguments of Claude Code
    /// servers are checked against it).
    pub base: Option<PathBuf>,
}

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
    /// The `--env` names added (wrap only).
    pub env: Vec<String>,
}

impl Decision {
    fn leave(note: impl Into<String>) -> Decision {
        Decision {
            action: Action::Leave,
            notes: vec![note.into()],
            roots: vec![],
            env: vec![],
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

fn strings(v: Option<&Value>) -> Result<Option<Vec<String>>, String> {
    match v {
        None => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("an argument is not a string: {x}"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(other) => Err(format!("\"args\" is not a list: {other}")),
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
        for (k, v) in env {
            if !crate::envvars::valid_name(k) {
                notes.push(format!(
                    "env {k:?} is not a variable name rootfence can pass: the server will not get it"
                ));
                continue;
            }
            if let Some(s) = v.as_str()
                && (s.starts_with('/') || s.starts_with("~/"))
            {
                notes.push(format!(
                    "env {k} names a path ({s}): the server reaches it only inside a root; {}",
                    reach_hint(s)
                ));
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
    let roots = infer_roots(&original, opts, probe, &mut notes);
    for r in &roots {
        out.push("--root".into());
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
        env: env_names,
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
        env: vec![],
    }
}

/// The arguments that become `--root`: each argument (or the value of a
/// `--name=VALUE` argument) that names a directory the server works in.
///
/// - an absolute path or `~/...` that is an existing directory here;
/// - `${workspaceFolder}` (VS Code, Cursor): the folder the host opened;
/// - `${userHome}/...` (VS Code, Cursor), `${env:HOME}/...`, and for Claude
///   Code `${HOME}/...`, that is an existing directory here;
/// - for Claude Code, `.` and `./...` that are directories next to the
///   `.mcp.json` (Claude Code starts servers in the project directory).
///
/// Files are never roots, nor their directories: a `--db /data/x.db` gets
/// a note (grant it with a policy, or give the directory with --root).
/// Other host variables (`${input:...}`, `${env:...}`) are only known when
/// the host launches the server: noted, not inferred.
fn infer_roots(
    args: &[String],
    opts: &WrapOptions,
    probe: &dyn Probe,
    notes: &mut Vec<String>,
) -> Vec<String> {
    let mut roots: Vec<String> = Vec::new();
    for a in args {
        let value = match a.split_once('=') {
            Some((flag, v)) if flag.starts_with('-') => v,
            _ if a.starts_with('-') => continue,
            _ => a.as_str(),
        };
        match classify(value, opts, probe) {
            Candidate::Root => {
                notes.push(format!("root from its arguments: {value}"));
                if !roots.iter().any(|r| r == value) {
                    roots.push(value.to_string());
                }
            }
            Candidate::Refused(why) => notes.push(format!(
                "not a root: {value} would be refused ({why})"
            )),
            Candidate::NotDirectory => notes.push(format!(
                "not a root: {value} is not a directory here (a file the server uses?); {}",
                reach_hint(value)
            )),
            Candidate::Unknown => notes.push(format!(
                "not a root: {value} is only known when the host launches the server; add --root to its args if it names a directory"
            )),
            Candidate::No => {}
        }
    }
    roots
}

enum Candidate {
    Root,
    Refused(String),
    NotDirectory,
    Unknown,
    No,
}

fn classify(v: &str, opts: &WrapOptions, probe: &dyn Probe) -> Candidate {
    let folder_vars = matches!(opts.format, Format::VsCode | Format::Cursor);
    if folder_vars && (v == "${workspaceFolder}" || v == "${workspaceFolder}/") {
        return Candidate::Root;
    }
    let home_prefixes: &[&str] = match opts.format {
        Format::VsCode | Format::Cursor => &["${userHome}/", "${env:HOME}/"],
        Format::ClaudeCode => &["${HOME}/", "$HOME/"],
        Format::ClaudeDesktop => &[],
    };
    let local: Option<PathBuf> = if let Some(rest) = v.strip_prefix("~/") {
        probe.home().map(|h| h.join(rest))
    } else if let Some(rest) = home_prefixes.iter().find_map(|p| v.strip_prefix(p)) {
        probe.home().map(|h| h.join(rest))
    } else if v.starts_with('/') {
        Some(PathBuf::from(v))
    } else if opts.format == Format::ClaudeCode && (v == "." || v.starts_with("./")) {
        opts.base.as_ref().map(|b| b.join(v))
    } else if v.contains("${") {
        return Candidate::Unknown;
    } else {
        return Candidate::No;
    };
    let Some(local) = local else {
        return Candidate::Unknown;
    };
    if local
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return Candidate::No;
    }
    if probe.is_dir(&local) {
        match probe.root_refusal(&local, opts.policy.as_deref()) {
            Some(why) => Candidate::Refused(why),
            None => Candidate::Root,
        }
    } else if probe.exists(&local) || looks_like_file(v) {
        Candidate::NotDirectory
    } else {
        Candidate::No
    }
}

/// How to let the server reach the file `path`: its directory as a root.
fn reach_hint(path: &str) -> String {
    match path.rsplit_once('/') {
        Some((dir, _)) if !dir.is_empty() && dir != "~" => format!(
            "to let it, add \"--root\", \"{dir}\" before \"--\" in its args, or grant the file in a policy ([runtime] write)"
        ),
        _ => "to let it, grant it in a policy ([runtime] write)".to_string(),
    }
}

/// A missing path whose last component has an extension (`x.db`,
/// `memory.json`): worth a note, unlike a word that merely starts with /.
fn looks_like_file(v: &str) -> bool {
    v.rsplit('/')
        .next()
        .is_some_and(|last| last.contains('.') && !last.starts_with('.'))
}
