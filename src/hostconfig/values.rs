//! What `wrap` is given: its options, and a config's values read as
//! paths here (through its window on the machine, [`Probe`]). A leaf of
//! `hostconfig`: a server entry's rules and the certificate rule both
//! read values so.

use std::path::PathBuf;

use super::Format;
use super::place;
pub use super::probe::Probe;

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
    /// Directories named by the server's arguments or environment that do
    /// not exist yet become roots too (`--create-roots`: the caller creates
    /// them).
    pub create_roots: bool,
    /// Roots the user gives this server (`--root`, `--root-for`), as
    /// written: added first, checked like inferred ones.
    pub roots: Vec<String>,
}

/// The value as a path here, with the text to write in the args (host
/// variables kept). None when it names no path. `~` and a host's home
/// variable alone name the home.
pub(super) fn localize(
    v: &str,
    opts: &WrapOptions,
    probe: &dyn Probe,
) -> Option<(String, PathBuf)> {
    let home_prefixes: &[&str] = match opts.format {
        Format::VsCode | Format::Cursor => &["${userHome}/", "${env:HOME}/"],
        Format::ClaudeCode => &["${HOME}/", "$HOME/"],
        Format::ClaudeDesktop => &[],
    };
    let home_alone = v == "~" || home_prefixes.iter().any(|p| v == p.trim_end_matches('/'));
    let local = if home_alone {
        probe.home()?
    } else if let Some(rest) = v.strip_prefix("~/") {
        probe.home()?.join(rest)
    } else if let Some(rest) = home_prefixes.iter().find_map(|p| v.strip_prefix(p)) {
        probe.home()?.join(rest)
    } else if v.starts_with('/') {
        PathBuf::from(v)
    } else if opts.format == Format::ClaudeCode && (v == "." || v.starts_with("./")) {
        opts.base.as_ref()?.join(v)
    } else {
        return None;
    };
    if local.to_string_lossy().contains("${") {
        return None;
    }
    let text = match v.trim_end_matches('/') {
        "" => "/",
        t => t,
    };
    Some((text.to_string(), place::normal(&local)))
}

/// A value that looks like a path: absolute, the home or under it, or
/// under a host's home or folder variable.
pub(super) fn path_like(v: &str) -> bool {
    const HOMES: &[&str] = &["~", "${userHome}", "${env:HOME}", "${HOME}", "$HOME"];
    v.starts_with('/')
        || v.starts_with("${workspaceFolder}")
        || HOMES.iter().any(|h| {
            v.strip_prefix(h)
                .is_some_and(|r| r.is_empty() || r.starts_with('/'))
        })
}
