//! The names a server goes by, and the user's directories named like it.
//!
//! Servers keep settings and data under the home directory, in a directory
//! named after their command or package (`~/.NAME`, `~/.config/NAME`,
//! `~/.local/share/NAME`, ...). A name is the server's to choose: one that
//! calls itself `claude` or `gh` would reach that tool's tokens. So a name
//! grants nothing: it labels the server's own store ([`crate::store`]),
//! and the user's existing directories of that name are only found, for
//! `explain` to show the policy line that would grant each.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::HostEnv;
use super::exe::base_name;
use super::wide::{too_wide, user_data_dirs};
use crate::roots::PathRule;

/// Names that say nothing about which server runs: launchers,
/// interpreters, shells, rootfence itself (its own state is denied).
const GENERIC: &[&str] = &[
    "node",
    "nodejs",
    "npx",
    "npm",
    "pnpm",
    "yarn",
    "bun",
    "bunx",
    "deno",
    "python",
    "python3",
    "uv",
    "uvx",
    "pipx",
    "pip",
    "pip3",
    "env",
    "sh",
    "bash",
    "dash",
    "zsh",
    "fish",
    "run",
    "exec",
    "server",
    "index",
    "main",
    "cli",
    "bin",
    "dist",
    "build",
    "src",
    "lib",
    "mcp",
    "git",
    "cargo",
    "go",
    "java",
    "ruby",
    "perl",
    "docker",
    "podman",
    "true",
    "rootfence",
];

/// Launchers whose first non-option argument names the package they run.
const PACKAGE_RUNNERS: &[&str] = &["npx", "bunx", "uvx", "pipx", "dlx"];

/// The user's existing directories named like the server (`~/.NAME` and
/// `NAME` in each XDG directory), outside denied paths. Found, never
/// granted.
pub fn existing(
    env: &HostEnv,
    argv: &[OsString],
    program: &Path,
    deny: &[PathRule],
) -> Vec<PathBuf> {
    let Some(home) = env.home.clone() else {
        return Vec::new();
    };
    let mut bases = vec![home.clone()];
    bases.extend(user_data_dirs(env));
    let mut out = Vec::new();
    for name in names(argv, program) {
        for (i, base) in bases.iter().enumerate() {
            let dir = if i == 0 {
                base.join(format!(".{name}"))
            } else {
                base.join(&name)
            };
            if dir.is_dir()
                && !too_wide(&dir, env)
                && crate::policy::deny_conflict(&dir, deny).is_none()
                && !out.contains(&dir)
            {
                out.push(dir);
            }
        }
    }
    out
}

/// The names a server goes by: its command's and program's names, and
/// the package a launcher runs (`npx -y @scope/name@1.2` → `name`).
pub fn names(argv: &[OsString], program: &Path) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |n: &str| {
        let n = n
            .trim_end_matches(".js")
            .trim_end_matches(".mjs")
            .trim_end_matches(".py");
        let ok = n.len() >= 3
            && !GENERIC.contains(&n)
            && !n.starts_with("python")
            && !n.ends_with("-cli")
            && n.chars()
                .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.'))
            && !n.starts_with('.');
        if ok && !out.iter().any(|o| o == n) {
            out.push(n.to_string());
        }
    };
    if let Some(first) = argv.first() {
        push(&base_name(Path::new(first)));
    }
    push(&base_name(program));
    let launcher = argv
        .first()
        .map(|f| base_name(Path::new(f)))
        .unwrap_or_default();
    let runs_package =
        PACKAGE_RUNNERS.contains(&launcher.as_str()) || argv.iter().any(|a| a == "dlx");
    if runs_package
        && let Some(spec) = argv
            .iter()
            .skip(1)
            .map(|a| a.to_string_lossy())
            .find(|a| !a.starts_with('-') && a != "run" && a != "dlx")
    {
        push(&package_name(&spec));
    }
    out
}

/// The bare name of a package spec: `@scope/name@1.2` → `name`,
/// `name==1.2` → `name`, `git+https://…/name.git` → `name`.
fn package_name(spec: &str) -> String {
    let s = spec.trim_end_matches('/');
    let s = s.rsplit('/').next().unwrap_or(s);
    let s = s.trim_end_matches(".git");
    let end = s
        .char_indices()
        .skip(1)
        .find(|(_, ch)| matches!(ch, '@' | '=' | '<' | '>' | '[' | '~' | '!'))
        .map_or(s.len(), |(i, _)| i);
    s[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_specs_give_their_bare_names() {
        assert_eq!(
            package_name("@wonderwhy-er/desktop-commander@latest"),
            "desktop-commander"
        );
        assert_eq!(
            package_name("mcp-server-sqlite==0.6.2"),
            "mcp-server-sqlite"
        );
        assert_eq!(package_name("obsidian-mcp@1.0.6"), "obsidian-mcp");
        assert_eq!(package_name("markitdown-mcp[all]>=0.1"), "markitdown-mcp");
    }

    #[test]
    fn launchers_and_interpreters_are_not_names() {
        let argv: Vec<OsString> = ["npx", "-y", "@scope/my-server@2"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(
            names(&argv, Path::new("/usr/lib/node_modules/npm/bin/npx-cli.js")),
            vec!["my-server"]
        );
        let argv: Vec<OsString> = ["python3", "server.py"]
            .iter()
            .map(OsString::from)
            .collect();
        assert!(
            names(&argv, Path::new("/usr/bin/python3.11"))
                .iter()
                .all(|n| n != "python3")
        );
    }
}
