//! Environment variables: the `--env` flag, the variables refused to it,
//! and which of rootfence's own variables are worth a warning when they do
//! not reach the server.
//!
//! Precedence, lowest first: `[env] pass`, the runtime profile, `--env`,
//! `[env] set`. The policy is the ceiling: what it sets, a launch cannot
//! change, and what it denies, a launch cannot name.

use std::fmt;
use std::str::FromStr;

/// One `--env` flag: `NAME` (pass it from rootfence's environment) or
/// `NAME=VALUE` (set it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EnvFlag {
    /// The variable.
    pub name: String,
    /// The value given on the command line; `None` passes rootfence's own.
    pub value: Option<String>,
}

/// A `--env` flag that does not name a variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{name:?} is not a variable name (ASCII letters, digits and _, not starting with a digit); write NAME or NAME=VALUE"
)]
pub struct BadEnvName {
    /// What stands where the name should be.
    pub name: String,
}

impl FromStr for EnvFlag {
    type Err = BadEnvName;

    fn from_str(s: &str) -> Result<EnvFlag, BadEnvName> {
        let (name, value) = match s.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (s, None),
        };
        if !valid_name(name) {
            return Err(BadEnvName {
                name: name.to_string(),
            });
        }
        Ok(EnvFlag {
            name: name.to_string(),
            value,
        })
    }
}

impl fmt::Display for EnvFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the value: it may be a secret.
        match self.value {
            Some(_) => write!(f, "--env {}=...", self.name),
            None => write!(f, "--env {}", self.name),
        }
    }
}

/// Whether `s` is a portable environment variable name.
pub fn valid_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `name` matches `pattern` (`NAME`, or `PREFIX*`).
pub fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// Variables refused to `--env` and to `[env] pass` patterns unless the
/// policy names them exactly in `[env] pass` or `[env] set`, with why.
///
/// Each one makes a runtime load code, or run a command, that the command
/// line does not show: from a path it names, before the program's own code.
/// That code is confined like the server (Landlock applies to everything the
/// server runs), so none of them is an escape. What they break is what the
/// policy and `explain` promise: which program runs, on which runtime, and
/// that nothing runs from the roots (`[runtime] exec_in_roots = false`
/// refuses execve and maps from the roots, but `PYTHONPATH=<root>` or
/// `NODE_OPTIONS=--require <root>/x.js` would make the interpreter run code
/// a server wrote there in an earlier session). A host config is the wrong
/// place to decide that; a policy that means it says so. `TMPDIR` is
/// rootfence's own: the private scratch directory.
///
/// Left out on purpose: `NODE_PATH` (only where a module is not found in
/// the program's own tree: it cannot replace what the program loads),
/// `PYTHONSTARTUP` (interactive sessions only), and the many variables that
/// change how a program behaves without loading code.
pub const REFUSED: &[(&str, &str)] = &[
    (
        "LD_PRELOAD",
        "makes the dynamic loader load a library into every program the server runs",
    ),
    (
        "LD_AUDIT",
        "makes the dynamic loader load an audit library into every program the server runs",
    ),
    (
        "LD_LIBRARY_PATH",
        "makes the dynamic loader take libraries from other directories first",
    ),
    (
        "NODE_OPTIONS",
        "gives node options such as --require and --import, which load code before the program's",
    ),
    (
        "PYTHONPATH",
        "puts directories before Python's own modules: a file there replaces a standard module",
    ),
    (
        "PYTHONHOME",
        "makes Python load its standard library from another directory",
    ),
    (
        "BASH_ENV",
        "makes every non-interactive bash run this file first",
    ),
    ("ENV", "makes sh and bash run this file when they start"),
    (
        "PERL5OPT",
        "gives perl options such as -M, which load a module before the program",
    ),
    ("PERL5LIB", "puts directories before perl's own modules"),
    (
        "RUBYOPT",
        "gives ruby options such as -r, which load a library before the program",
    ),
    ("RUBYLIB", "puts directories before ruby's own libraries"),
    (
        "JAVA_TOOL_OPTIONS",
        "gives every JVM options such as -javaagent, which load code before the program",
    ),
    (
        "GIT_CONFIG_*",
        "adds git configuration (core.fsmonitor, core.sshCommand, aliases run commands)",
    ),
    (
        "GIT_EXEC_PATH",
        "makes git run its subcommands from another directory",
    ),
    (
        "TMPDIR",
        "is rootfence's own: the server's private scratch directory",
    ),
];

/// Why the built-in list refuses `name`, if it does.
pub fn builtin_refusal(name: &str) -> Option<(&'static str, &'static str)> {
    REFUSED
        .iter()
        .find(|(pattern, _)| matches(pattern, name))
        .copied()
}

/// Variables of a shell, a desktop session, a terminal, a service manager
/// or a host application: rootfence's environment holds them because of
/// where it was started, not because a host config set them for the
/// server. `run` does not warn when they do not reach the server.
/// `PREFIX*` matches a prefix.
pub const SESSION: &[&str] = &[
    "_",
    "COLORTERM",
    "COLUMNS",
    "DBUS_*",
    "DESKTOP_SESSION",
    "DISPLAY",
    "EDITOR",
    "ELECTRON_*",
    "GDMSESSION",
    "GIO_*",
    "GNOME_*",
    "GPG_AGENT_INFO",
    "GPG_TTY",
    "GTK_*",
    "HISTCONTROL",
    "HISTFILE",
    "HISTFILESIZE",
    "HISTSIZE",
    "HOSTNAME",
    "HOSTTYPE",
    "INFOPATH",
    "INVOCATION_ID",
    "JOURNAL_STREAM",
    "KONSOLE_*",
    "LANGUAGE",
    "LESS",
    "LESSCLOSE",
    "LESSOPEN",
    "LINES",
    "LS_COLORS",
    "MAIL",
    "MANAGERPID",
    "MANPATH",
    "MOTD_SHOWN",
    "NOTIFY_SOCKET",
    "OLDPWD",
    "OSTYPE",
    "PAGER",
    "PS1",
    "PS2",
    "PROMPT_COMMAND",
    "PWD",
    "QT_*",
    "SESSION_MANAGER",
    "SHELL",
    "SHLVL",
    "SSH_*",
    "STY",
    "SYSTEMD_*",
    "TERM_PROGRAM",
    "TERM_PROGRAM_VERSION",
    "TERM_SESSION_ID",
    "TMUX",
    "TMUX_PANE",
    "VISUAL",
    "VSCODE_*",
    "VTE_VERSION",
    "WAYLAND_DISPLAY",
    "WINDOWID",
    "WINDOWPATH",
    "WSL_*",
    "WT_*",
    "XAUTHORITY",
    "XDG_*",
    "XMODIFIERS",
];

/// Whether `name` is a shell or session variable (see [`SESSION`]).
pub fn is_session_variable(name: &str) -> bool {
    SESSION.iter().any(|p| matches(p, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse() {
        assert_eq!(
            "A_1".parse::<EnvFlag>().unwrap(),
            EnvFlag {
                name: "A_1".into(),
                value: None
            }
        );
        let f: EnvFlag = "X=a=b".parse().unwrap();
        assert_eq!((f.name.as_str(), f.value.as_deref()), ("X", Some("a=b")));
        let f: EnvFlag = "X=".parse().unwrap();
        assert_eq!(f.value.as_deref(), Some(""));
        for bad in ["", "=v", "1A", "A-B", "A B=1", "É"] {
            assert!(bad.parse::<EnvFlag>().is_err(), "{bad:?}");
        }
        assert_eq!(
            "K=secret".parse::<EnvFlag>().unwrap().to_string(),
            "--env K=..."
        );
    }

    #[test]
    fn refused_and_session() {
        assert!(builtin_refusal("LD_PRELOAD").is_some());
        assert!(builtin_refusal("GIT_CONFIG_COUNT").is_some());
        assert!(builtin_refusal("GIT_AUTHOR_NAME").is_none());
        assert!(builtin_refusal("MEMORY_FILE_PATH").is_none());
        assert!(is_session_variable("XDG_RUNTIME_DIR"));
        assert!(is_session_variable("_"));
        assert!(!is_session_variable("MEMORY_FILE_PATH"));
        assert!(!is_session_variable("GITHUB_TOKEN"));
    }
}
