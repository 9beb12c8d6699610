//! git's configuration, sanitized.
//!
//! A server that commits needs the user's identity; the user's git
//! configuration also holds what must never reach a server (tokens in
//! `url.<x>.insteadOf`, credential helpers) and what would run code
//! (`core.fsmonitor`, `core.sshCommand`, aliases, hooks paths). The server
//! gets neither file: rootfence writes a copy holding only the keys of
//! [`SAFE_KEYS`], with values that name no URL with credentials, into the
//! server's scratch directory and points `GIT_CONFIG_GLOBAL` at it.

use std::path::PathBuf;

use super::HostEnv;

/// The keys copied, lowercase `section.key` (sections without a
/// subsection only). Everything else is left out.
pub const SAFE_KEYS: &[&str] = &[
    "user.name",
    "user.email",
    "init.defaultbranch",
    "core.autocrlf",
    "core.eol",
    "core.safecrlf",
    "core.quotepath",
    "core.ignorecase",
    "core.precomposeunicode",
    "pull.rebase",
    "pull.ff",
    "merge.ff",
    "merge.conflictstyle",
    "push.default",
    "push.autosetupremote",
    "fetch.prune",
    "rebase.autosquash",
    "rebase.autostash",
    "diff.algorithm",
    "diff.renames",
    "color.ui",
    "commit.verbose",
    "log.date",
    "tag.sort",
];

/// The user's global configuration files as git reads them, lowest
/// precedence first: `$XDG_CONFIG_HOME/git/config` (or
/// `~/.config/git/config`), then `~/.gitconfig`; or `GIT_CONFIG_GLOBAL`
/// alone when set.
fn sources(env: &HostEnv) -> Vec<PathBuf> {
    if let Some(g) = env.abs_var("GIT_CONFIG_GLOBAL") {
        return vec![g];
    }
    let mut out = Vec::new();
    let xdg = env
        .abs_var("XDG_CONFIG_HOME")
        .or_else(|| env.home.as_ref().map(|h| h.join(".config")));
    if let Some(x) = xdg {
        out.push(x.join("git/config"));
    }
    if let Some(h) = &env.home {
        out.push(h.join(".gitconfig"));
    }
    out
}

/// The sanitized global configuration of the user of `env`, if they have
/// any safe key set.
pub fn of_user(env: &HostEnv) -> Option<String> {
    let mut text = String::new();
    for f in sources(env) {
        if let Ok(t) = std::fs::read_to_string(&f) {
            text.push_str(&t);
            text.push('\n');
        }
    }
    let out = sanitize(&text);
    (!out.is_empty()).then_some(out)
}

/// A git configuration holding only the `SAFE_KEYS` of `text` (last
/// value wins), in a canonical form. Values holding a newline, a NUL or
/// `://` with credentials are left out. Includes are not followed.
pub fn sanitize(text: &str) -> String {
    let mut section = String::new();
    let mut values: Vec<(String, String)> = Vec::new();
    let mut lines = text.lines();
    while let Some(raw) = lines.next() {
        let mut line = raw.to_string();
        // Continuation lines: a value ending in an unescaped backslash.
        while line.ends_with('\\') && !line.ends_with("\\\\") {
            line.pop();
            match lines.next() {
                Some(next) => line.push_str(next),
                None => break,
            }
        }
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some(rest) = l.strip_prefix('[') {
            let Some(end) = rest.find(']') else {
                section.clear();
                continue;
            };
            let head = rest[..end].trim();
            // `[section "subsection"]` and `[section.subsection]` are
            // never copied.
            section = if head.contains(['"', '.', ' ']) {
                String::from("\0")
            } else {
                head.to_ascii_lowercase()
            };
            let after = rest[end + 1..].trim();
            if after.is_empty() || after.starts_with('#') || after.starts_with(';') {
                continue;
            }
            line = after.to_string();
        }
        let l = line.trim();
        let (key, value) = match l.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => (l, "true"),
        };
        let full = format!("{section}.{}", key.to_ascii_lowercase());
        if !SAFE_KEYS.contains(&full.as_str()) {
            continue;
        }
        let Some(v) = unquote(value) else { continue };
        if v.contains(['\n', '\0']) || has_credentials(&v) {
            continue;
        }
        values.retain(|(k, _)| k != &full);
        values.push((full, v));
    }
    values.sort();
    let mut out = String::new();
    let mut current = "";
    for (full, v) in &values {
        let (sec, key) = full.split_once('.').unwrap_or((full.as_str(), ""));
        if sec != current {
            out.push_str(&format!("[{sec}]\n"));
            current = sec;
        }
        out.push_str(&format!("\t{key} = \"{}\"\n", escape(v)));
    }
    out
}

/// A git config value: quotes removed, escapes read, a trailing comment
/// dropped. None when malformed.
fn unquote(v: &str) -> Option<String> {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = v.chars();
    while let Some(ch) = chars.next() {
        match ch {
            '"' => quoted = !quoted,
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'b' => {
                    out.pop();
                }
                '"' => out.push('"'),
                '\\' => out.push('\\'),
                _ => return None,
            },
            '#' | ';' if !quoted => break,
            c => out.push(c),
        }
    }
    (!quoted).then(|| out.trim_end().to_string())
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\t', "\\t")
}

/// `scheme://user:secret@host` or `scheme://token@host`.
fn has_credentials(v: &str) -> bool {
    v.split("://").skip(1).any(|rest| {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        authority.contains('@')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_kept_and_everything_else_left_out() {
        let text = "[user]\n\tname = Ada Lovelace\n\temail = \"ada@example.org\" # work\n\
            [url \"https://x-access-token:ghp_secret@github.com/\"]\n\tinsteadOf = https://github.com/\n\
            [core]\n\tfsmonitor = /tmp/evil\n\tsshCommand = ssh -i ~/.ssh/k\n\tautocrlf = input\n\
            [credential]\n\thelper = store\n[alias]\n\tst = !sh -c evil\n\
            [include]\n\tpath = ~/.gitconfig.local\n[init] defaultBranch = main\n";
        let out = sanitize(text);
        assert_eq!(
            out,
            "[core]\n\tautocrlf = \"input\"\n[init]\n\tdefaultbranch = \"main\"\n[user]\n\temail = \"ada@example.org\"\n\tname = \"Ada Lovelace\"\n"
        );
        for secret in [
            "ghp_secret",
            "fsmonitor",
            "evil",
            "helper",
            "sshcommand",
            "include",
        ] {
            assert!(!out.to_lowercase().contains(secret), "{secret} in {out}");
        }
    }

    #[test]
    fn values_with_credentials_newlines_or_bad_escapes_are_dropped() {
        assert_eq!(sanitize("[user]\nname = https://u:p@host/x\n"), "");
        assert_eq!(sanitize("[user]\nname = \"a\\nb\"\n"), "");
        assert_eq!(sanitize("[user]\nname = \"a\\qb\"\n"), "");
        assert_eq!(sanitize("[user]\nname = \"open\n"), "");
        // The last value wins; a subsection never counts as the section.
        assert_eq!(
            sanitize("[user]\nname = a\n[user \"x\"]\nname = b\n[user]\nname = c\n"),
            "[user]\n\tname = \"c\"\n"
        );
    }
}
