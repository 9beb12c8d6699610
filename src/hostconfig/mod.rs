//! Host MCP configs (Claude Desktop, VS Code, Cursor, Claude Code):
//! finding their stdio servers and rewriting each to launch through
//! `rootfence run`, or back (`rootfence wrap`, `--undo`).
//!
//! The text is edited in place through a concrete syntax tree: comments,
//! blank lines, key order and formatting outside the edited `command` and
//! `args` values stay as they were. Pure: reading and writing files is the
//! CLI's job, and the filesystem is asked only through [`Probe`].

mod certs;
#[cfg(test)]
mod fake;
mod place;
mod probe;
pub mod server;
mod values;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
use serde_json::Value;

pub use server::{Action, Decision, Launch, Probe, WrapOptions};

/// A host's MCP config format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `claude_desktop_config.json`: `mcpServers`, plain JSON.
    ClaudeDesktop,
    /// `.vscode/mcp.json` (`servers`) or a user `settings.json`
    /// (`mcp.servers`): JSON with comments and trailing commas.
    #[value(name = "vscode")]
    VsCode,
    /// `~/.cursor/mcp.json`, `.cursor/mcp.json`: `mcpServers`, comments
    /// allowed.
    Cursor,
    /// `.mcp.json`: `mcpServers`, plain JSON.
    ClaudeCode,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::ClaudeDesktop => "Claude Desktop",
            Format::VsCode => "VS Code",
            Format::Cursor => "Cursor",
            Format::ClaudeCode => "Claude Code",
        })
    }
}

impl Format {
    /// Whether the host reads comments and trailing commas.
    pub fn jsonc(self) -> bool {
        matches!(self, Format::VsCode | Format::Cursor)
    }
}

/// Why a config could not be read or rewritten. `file` names it.
#[derive(Debug, thiserror::Error)]
pub enum HostConfigError {
    /// Not parseable in the host's syntax.
    #[error(
        "{file}: not valid {syntax} at line {line}, column {column}: {message} ({format} reads {syntax}; fix the file, or pass --format if it belongs to another host)"
    )]
    Syntax {
        /// The file.
        file: String,
        /// The host.
        format: Format,
        /// "JSON" or "JSON with comments".
        syntax: &'static str,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// The host could not be told from the file name and content.
    #[error("{file}: {why}; pass --format claude-desktop, vscode, cursor or claude-code")]
    UnknownFormat {
        /// The file.
        file: String,
        /// What was seen.
        why: String,
    },
    /// The file lacks the host's servers object.
    #[error(
        "{file}: no {key} object, where {format} keeps its MCP servers (is this the right file, or the right --format?)"
    )]
    NoServers {
        /// The file.
        file: String,
        /// The host.
        format: Format,
        /// The key looked for.
        key: &'static str,
    },
    /// `--policy-for` or `--root-for` names a server the file does not
    /// have.
    #[error("{file}: {flag} {name}: no server named {name} (servers: {known})")]
    UnknownServer {
        /// The file.
        file: String,
        /// The option that named it.
        flag: &'static str,
        /// The name given.
        name: String,
        /// The servers the file has.
        known: String,
    },
}

/// Where a format keeps its servers, as the keys leading to the object.
fn servers_path(format: Format, root: &Value) -> &'static [&'static str] {
    match format {
        Format::VsCode if root.get("servers").is_none() && root.get("mcp").is_some() => {
            &["mcp", "servers"]
        }
        Format::VsCode => &["servers"],
        _ => &["mcpServers"],
    }
}

/// Tell the host format from the file name and content.
///
/// `claude_desktop_config.json` is Claude Desktop; `mcp.json` in a
/// `.cursor` directory is Cursor; `.mcp.json` is Claude Code; a `servers`
/// object (or `mcp.servers`, as in a `settings.json`) is VS Code. Any other
/// file with `mcpServers` could be one of three hosts and is an error.
pub fn detect(path: &Path, text: &str) -> Result<Format, HostConfigError> {
    let file = path.display().to_string();
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let parent = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or("");
    match (name, parent) {
        ("claude_desktop_config.json", _) => return Ok(Format::ClaudeDesktop),
        ("mcp.json", ".cursor") => return Ok(Format::Cursor),
        ("mcp.json", ".vscode") => return Ok(Format::VsCode),
        (".mcp.json", _) => return Ok(Format::ClaudeCode),
        _ => {}
    }
    let root = parse_value(text, true).map_err(|(line, column, message)| {
        HostConfigError::UnknownFormat {
            file: file.clone(),
            why: format!("not JSON (line {line}, column {column}: {message})"),
        }
    })?;
    if root.get("servers").is_some_and(Value::is_object)
        || root.pointer("/mcp/servers").is_some_and(Value::is_object)
    {
        return Ok(Format::VsCode);
    }
    if root.get("mcpServers").is_some() {
        return Err(HostConfigError::UnknownFormat {
            file,
            why: "an mcpServers file is read by Claude Desktop, Cursor and Claude Code, and its name does not tell which".into(),
        });
    }
    Err(HostConfigError::UnknownFormat {
        file,
        why: "neither mcpServers nor servers is in it".into(),
    })
}

fn options(jsonc: bool) -> ParseOptions {
    ParseOptions {
        allow_comments: jsonc,
        allow_trailing_commas: jsonc,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        ..ParseOptions::default()
    }
}

/// Parse `text` to a value; the error is (line, column, message).
fn parse_value(text: &str, jsonc: bool) -> Result<Value, (usize, usize, String)> {
    if !jsonc {
        return serde_json::from_str(text).map_err(|e| (e.line(), e.column(), e.to_string()));
    }
    let root = CstRootNode::parse(text, &options(true)).map_err(|e| {
        let (line, column) = line_col(text, e.range().start);
        (line, column, e.kind().to_string())
    })?;
    Ok(root.to_serde_value().unwrap_or(Value::Null))
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// A parsed config.
struct Document {
    root: CstRootNode,
    value: Value,
    format: Format,
    file: String,
}

impl Document {
    fn parse(file: &str, text: &str, format: Format) -> Result<Document, HostConfigError> {
        let syntax = |(line, column, message)| HostConfigError::Syntax {
            file: file.to_string(),
            format,
            syntax: if format.jsonc() {
                "JSON with comments"
            } else {
                "JSON"
            },
            line,
            column,
            message,
        };
        let value = parse_value(text, format.jsonc()).map_err(syntax)?;
        let root = CstRootNode::parse(text, &options(format.jsonc())).map_err(|e| {
            let (line, column) = line_col(text, e.range().start);
            syntax((line, column, e.kind().to_string()))
        })?;
        Ok(Document {
            root,
            value,
            format,
            file: file.to_string(),
        })
    }

    /// The servers object: its CST node and its value.
    fn servers(&self) -> Result<(CstObject, serde_json::Map<String, Value>), HostConfigError> {
        let path = servers_path(self.format, &self.value);
        let missing = || HostConfigError::NoServers {
            file: self.file.clone(),
            format: self.format,
            key: if path.len() == 2 {
                "mcp.servers"
            } else if path[0] == "servers" {
                "servers"
            } else {
                "mcpServers"
            },
        };
        let mut node = self.root.object_value().ok_or_else(missing)?;
        let mut value = &self.value;
        for key in path {
            node = node.object_value(key).ok_or_else(missing)?;
            value = value.get(*key).ok_or_else(missing)?;
        }
        let map = value.as_object().cloned().ok_or_else(missing)?;
        Ok((node, map))
    }

    /// Apply `launch` to the server `name`.
    fn apply(servers: &CstObject, name: &str, launch: &Launch) {
        let Some(obj) = servers.get(name).and_then(|p| p.object_value()) else {
            return;
        };
        let command = CstInputValue::String(launch.command.clone());
        let at = match obj.get("command") {
            Some(p) => {
                p.set_value(command);
                p.property_index() + 1
            }
            None => {
                obj.append("command", command);
                obj.properties().len()
            }
        };
        match (&launch.args, obj.get("args")) {
            (Some(args), Some(p)) => p.set_value(array(args)),
            (Some(args), None) => {
                obj.insert(at, "args", array(args));
            }
            (None, Some(p)) => p.remove(),
            (None, None) => {}
        }
    }
}

fn array(args: &[String]) -> CstInputValue {
    CstInputValue::Array(
        args.iter()
            .map(|a| CstInputValue::String(a.clone()))
            .collect(),
    )
}

/// The result of `wrap` or `--undo` on a config.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The new text.
    pub text: String,
    /// The format.
    pub format: Format,
    /// Per server, in the file's order: its decision.
    pub servers: Vec<(String, Decision)>,
}

impl Outcome {
    /// Whether any server was rewritten.
    pub fn changed(&self) -> bool {
        self.servers
            .iter()
            .any(|(_, d)| matches!(d.action, Action::Rewrite(_)))
    }
}

/// Per-run settings of [`wrap`].
#[derive(Debug, Clone)]
pub struct WrapSettings {
    /// The rootfence binary for `command`.
    pub rootfence: String,
    /// `--policy` for every server.
    pub policy: Option<String>,
    /// `--policy` per server name (wins over `policy`).
    pub policy_for: BTreeMap<String, String>,
    /// The directory of the config file.
    pub base: Option<PathBuf>,
    /// Missing directories the servers name become roots (and are
    /// created): `--create-roots`.
    pub create_roots: bool,
    /// Roots given for every server (`--root`), as written.
    pub roots: Vec<String>,
    /// Roots given per server name (`--root-for NAME=DIR`).
    pub roots_for: BTreeMap<String, Vec<String>>,
}

/// Rewrite every stdio server of `text` to launch through `rootfence run`.
/// Servers already wrapped, remote and containerised ones are left alone
/// (see [`server::wrap`]); wrapping a wrapped config changes nothing.
pub fn wrap(
    file: &str,
    text: &str,
    format: Format,
    settings: &WrapSettings,
    probe: &dyn Probe,
) -> Result<Outcome, HostConfigError> {
    let doc = Document::parse(file, text, format)?;
    let (node, servers) = doc.servers()?;
    for (flag, names) in [
        (
            "--policy-for",
            settings.policy_for.keys().collect::<Vec<_>>(),
        ),
        ("--root-for", settings.roots_for.keys().collect::<Vec<_>>()),
    ] {
        if let Some(name) = names.into_iter().find(|n| !servers.contains_key(*n)) {
            return Err(HostConfigError::UnknownServer {
                file: file.to_string(),
                flag,
                name: name.clone(),
                known: servers.keys().cloned().collect::<Vec<_>>().join(", "),
            });
        }
    }
    Ok(rewrite_each(&doc, &node, &servers, |name, entry| {
        let opts = WrapOptions {
            rootfence: settings.rootfence.clone(),
            policy: settings
                .policy_for
                .get(name)
                .or(settings.policy.as_ref())
                .cloned(),
            format,
            base: settings.base.clone(),
            create_roots: settings.create_roots,
            roots: settings
                .roots
                .iter()
                .chain(settings.roots_for.get(name).into_iter().flatten())
                .cloned()
                .collect(),
        };
        server::wrap(entry, &opts, probe)
    }))
}

/// Restore every server launched through `rootfence run` to the command
/// after its `--`; other servers are left alone.
pub fn undo(
    file: &str,
    text: &str,
    format: Format,
    rootfence: &str,
) -> Result<Outcome, HostConfigError> {
    let doc = Document::parse(file, text, format)?;
    let (node, servers) = doc.servers()?;
    Ok(rewrite_each(&doc, &node, &servers, |_, entry| {
        server::undo(entry, rootfence)
    }))
}

/// Decide for each server of `doc` and apply the rewrites decided: the new
/// text and the decisions in the file's order.
fn rewrite_each(
    doc: &Document,
    node: &CstObject,
    servers: &serde_json::Map<String, Value>,
    decide: impl Fn(&String, &Value) -> Decision,
) -> Outcome {
    let mut out = Vec::new();
    for (name, entry) in servers {
        let d = decide(name, entry);
        if let Action::Rewrite(l) = &d.action {
            Document::apply(node, name, l);
        }
        out.push((name.clone(), d));
    }
    Outcome {
        text: doc.root.to_string(),
        format: doc.format,
        servers: order(node, out),
    }
}

/// The decisions in the file's order (the value map is sorted by name).
fn order(node: &CstObject, mut decisions: Vec<(String, Decision)>) -> Vec<(String, Decision)> {
    let names: Vec<String> = node
        .properties()
        .iter()
        .filter_map(|p| p.name().and_then(|n| n.decoded_value().ok()))
        .collect();
    decisions.sort_by_key(|(n, _)| names.iter().position(|m| m == n));
    decisions
}
