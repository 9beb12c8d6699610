//! Saying why: a server that fails under the sandbox usually says so on its
//! stderr as a runtime error (`EACCES: permission denied, open '/x'`,
//! `PermissionError: [Errno 13] Permission denied: '/x'`, git's `unable to
//! access '/x'`, `Read-only file system`) that never mentions the sandbox.
//! [`denial`] reads such a line, and when the path is one the plan does not
//! grant (or grants read-only), names it as a sandbox denial and the rule
//! that would allow it.
//!
//! Pure apart from `exists`, which the caller gives (in the server's own
//! view a path outside the grants is "not found"; a path that exists on the
//! host but not in the view is a denial).

use std::path::{Path, PathBuf};

use crate::plan::SandboxPlan;

/// A denial found in a line of the server's stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The path the server was refused.
    pub path: PathBuf,
    /// It wanted to write (the grant, if any, is read-only).
    pub write: bool,
    /// The hint: what was refused and the rule that would allow it.
    pub hint: String,
}

/// What kind of failure a line reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// Permission denied / operation not permitted.
    Denied,
    /// Read-only file system.
    ReadOnly,
    /// Not found (in the server's view, what is not granted is not there).
    Missing,
}

fn failure(line: &str) -> Option<Failure> {
    let l = line.to_ascii_lowercase();
    if l.contains("read-only file system") || l.contains("erofs") {
        Some(Failure::ReadOnly)
    } else if l.contains("permission denied")
        || l.contains("eacces")
        || l.contains("eperm")
        || l.contains("operation not permitted")
        || l.contains("errno 13")
    {
        Some(Failure::Denied)
    } else if l.contains("no such file or directory")
        || l.contains("enoent")
        || l.contains("errno 2")
    {
        Some(Failure::Missing)
    } else {
        None
    }
}

/// The absolute paths a line names: quoted (`'/x'`, `"/x"`), or after a
/// colon or a space up to the next colon, quote or space.
fn paths_in(line: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for q in ['\'', '"', '`'] {
        let mut rest = line;
        while let Some(i) = rest.find(q) {
            let after = &rest[i + 1..];
            let Some(j) = after.find(q) else { break };
            let cand = &after[..j];
            if cand.starts_with('/') && !cand.contains('\n') {
                out.push(PathBuf::from(cand));
            }
            rest = &after[j + 1..];
        }
    }
    if out.is_empty() {
        for word in line.split([' ', ':', ',', '(', ')', '\t']) {
            let w = word.trim_end_matches(['.', ';']);
            if w.len() > 1 && w.starts_with('/') {
                out.push(PathBuf::from(w));
            }
        }
    }
    out
}

/// The rights the plan gives `path`: (readable, writable), from the grant
/// that covers it (nearest ancestor-or-self).
fn rights_of(plan: &SandboxPlan, path: &Path) -> Option<(bool, bool)> {
    plan.grants
        .iter()
        .filter(|g| crate::roots::within(path, &g.path))
        .max_by_key(|g| g.path.as_os_str().len())
        .map(|g| (g.rights.read, g.rights.write))
}

/// `~/x` when `path` is under the home directory.
fn shown(path: &Path, home: Option<&Path>) -> String {
    match home.and_then(|h| path.strip_prefix(h).ok()) {
        Some(rel) => format!("~/{}", rel.display()),
        None => path.display().to_string(),
    }
}

/// Read `line` (one line of the server's stderr) for a sandbox denial.
/// `exists` tells whether a path exists outside the sandbox.
pub fn denial(
    line: &str,
    plan: &SandboxPlan,
    home: Option<&Path>,
    exists: &dyn Fn(&Path) -> bool,
) -> Option<Denial> {
    let kind = failure(line)?;
    // The refused path comes last (a program names itself first:
    // `/bin/sh: 1: cannot create /x: Permission denied`).
    for path in paths_in(line).into_iter().rev() {
        let granted = rights_of(plan, &path);
        let name = shown(&path, home);
        let (write, hint) = match (kind, granted) {
            // Not found, and not granted, but there outside: the view hid it.
            (Failure::Missing, None) if exists(&path) => (
                false,
                format!(
                    "{} is outside the sandbox (not granted, so not in the server's view); to allow it add `[runtime] read = [\"{name}\"]` (or `write`) to the policy, or give it as a root",
                    path.display()
                ),
            ),
            // Not found, not there outside either, but its directory is,
            // and is not granted: the file could only have been created,
            // which the view prevented.
            (Failure::Missing, None)
                if !exists(&path)
                    && !plan
                        .private_home
                        .as_deref()
                        .is_some_and(|h| crate::roots::within(&path, h))
                    && path
                        .parent()
                        .is_some_and(|p| p != Path::new("/") && exists(p))
                    && path.parent().is_some_and(|p| rights_of(plan, p).is_none()) =>
            {
                let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
                let dir_name = shown(&dir, home);
                return Some(Denial {
                    hint: format!(
                        "{} cannot be created: its directory {} is outside the sandbox; to allow it add `[runtime] write = [\"{dir_name}\"]` to the policy, or give it as a root",
                        path.display(),
                        dir.display()
                    ),
                    path: dir,
                    write: true,
                });
            }
            (Failure::Denied, None) => (
                false,
                format!(
                    "the sandbox refused {} (not granted); to allow it add `[runtime] read = [\"{name}\"]` (or `write`) to the policy, or give it as a root",
                    path.display()
                ),
            ),
            (Failure::Denied | Failure::ReadOnly, Some((_, false))) => (
                true,
                format!(
                    "the sandbox refused writing {} (granted read-only); to allow it add `[runtime] write = [\"{name}\"]` to the policy, or give a read-write root that holds it",
                    path.display()
                ),
            ),
            _ => continue,
        };
        return Some(Denial { path, write, hint });
    }
    None
}

/// Longest stderr line read for denials (longer ones are relayed, not
/// read).
const MAX_LINE: usize = 8 << 10;

/// Most distinct denied paths reported per server process.
const MAX_REPORTED: usize = 16;

/// Reads a server's stderr, as it is relayed, for sandbox denials
/// ([`denial`], line by line). Each denied path is reported once.
#[derive(Debug)]
pub struct StderrWatch {
    plan: SandboxPlan,
    home: Option<PathBuf>,
    line: Vec<u8>,
    /// The current line is longer than [`MAX_LINE`]: skip to its end.
    skipping: bool,
    reported: Vec<PathBuf>,
    last: Option<String>,
}

impl StderrWatch {
    /// Watch the stderr of a server launched with `plan`.
    pub fn new(plan: SandboxPlan, home: Option<PathBuf>) -> StderrWatch {
        StderrWatch {
            plan,
            home,
            line: Vec::new(),
            skipping: false,
            reported: Vec::new(),
            last: None,
        }
    }

    /// Bytes the server wrote to its stderr: the denials found in the lines
    /// they complete, each path once. `exists` as for [`denial`].
    pub fn feed(&mut self, mut bytes: &[u8], exists: &dyn Fn(&Path) -> bool) -> Vec<Denial> {
        let mut found = Vec::new();
        while !bytes.is_empty() {
            let (part, done) = match memchr::memchr(b'\n', bytes) {
                Some(i) => (&bytes[..i], true),
                None => (bytes, false),
            };
            bytes = if done { &bytes[part.len() + 1..] } else { &[] };
            if !self.skipping {
                if self.line.len() + part.len() > MAX_LINE {
                    self.skipping = true;
                    self.line.clear();
                } else {
                    self.line.extend_from_slice(part);
                }
            }
            if done {
                if !self.skipping {
                    found.extend(self.read_line(exists));
                }
                self.line.clear();
                self.skipping = false;
            }
        }
        found
    }

    /// The stream ended: read an unterminated last line.
    pub fn finish(&mut self, exists: &dyn Fn(&Path) -> bool) -> Vec<Denial> {
        let found = if self.skipping || self.line.is_empty() {
            Vec::new()
        } else {
            self.read_line(exists).into_iter().collect()
        };
        self.line.clear();
        found
    }

    /// The hint of the last denial reported, if any.
    pub fn last_hint(&self) -> Option<&str> {
        self.last.as_deref()
    }

    fn read_line(&mut self, exists: &dyn Fn(&Path) -> bool) -> Option<Denial> {
        if self.reported.len() >= MAX_REPORTED {
            return None;
        }
        let line = String::from_utf8_lossy(&self.line);
        let d = denial(&line, &self.plan, self.home.as_deref(), exists)?;
        if self.reported.contains(&d.path) {
            return None;
        }
        self.reported.push(d.path.clone());
        self.last = Some(d.hint.clone());
        Some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use crate::runtime::{CommandSpec, HostEnv, Rights, Rule, RuntimeNeed};

    fn plan() -> SandboxPlan {
        let policy = Policy::builtin(Some(Path::new("/home/u"))).unwrap();
        let need = |p: &str, rights| RuntimeNeed::new(p, rights, Rule::Program, "t");
        let command = CommandSpec::with_needs(
            "/usr/bin/node",
            vec![need("/usr", Rights::RX), need("/opt/app", Rights::R)],
        );
        let env = HostEnv {
            home: Some("/home/u".into()),
            ..HostEnv::default()
        };
        crate::plan::build(&policy, vec![], vec![], command, &env)
    }

    fn d(line: &str) -> Option<Denial> {
        denial(line, &plan(), Some(Path::new("/home/u")), &|p| {
            p == Path::new("/home/u/.gitconfig")
        })
    }

    #[test]
    fn runtimes_own_words_become_sandbox_denials() {
        for line in [
            "Error: EACCES: permission denied, open '/home/u/data/memory.json'",
            "PermissionError: [Errno 13] Permission denied: '/home/u/data/memory.json'",
            "fatal: unable to access '/home/u/data/memory.json': Permission denied",
            "/bin/sh: 1: cannot create /home/u/data/memory.json: Permission denied",
        ] {
            let got = d(line).unwrap_or_else(|| panic!("{line}"));
            assert_eq!(got.path, Path::new("/home/u/data/memory.json"), "{line}");
            assert!(
                got.hint
                    .contains("[runtime] read = [\"~/data/memory.json\"]"),
                "{}",
                got.hint
            );
        }
    }

    #[test]
    fn writing_a_read_only_grant_names_the_write_rule() {
        let got = d("Error: EROFS: read-only file system, open '/opt/app/memory.json'").unwrap();
        assert!(got.write);
        assert!(
            got.hint
                .contains("[runtime] write = [\"/opt/app/memory.json\"]"),
            "{}",
            got.hint
        );
        let got = d("Error: EACCES: permission denied, open '/opt/app/memory.json'").unwrap();
        assert!(got.write);
    }

    #[test]
    fn a_path_hidden_by_the_view_is_named_only_when_it_exists_outside() {
        let got =
            d("fatal: unable to access '/home/u/.gitconfig': No such file or directory").unwrap();
        assert!(got.hint.contains("outside the sandbox"), "{}", got.hint);
        assert_eq!(
            d("Error: ENOENT: no such file or directory, open '/home/u/missing.json'"),
            None
        );
    }

    #[test]
    fn a_file_that_could_only_be_created_names_its_directory() {
        let exists = |p: &Path| p == Path::new("/srv/logs") || p == Path::new("/srv");
        let got = denial(
            "FileNotFoundError: [Errno 2] No such file or directory: '/srv/logs/s.log'",
            &plan(),
            Some(Path::new("/home/u")),
            &exists,
        )
        .unwrap();
        assert_eq!(got.path, Path::new("/srv/logs"));
        assert!(got.write);
        assert!(
            got.hint.contains("[runtime] write = [\"/srv/logs\"]"),
            "{}",
            got.hint
        );
        // Under the private home the server creates what it needs itself.
        let home = |p: &Path| p.starts_with("/home/u");
        assert_eq!(
            denial(
                "FileNotFoundError: [Errno 2] No such file or directory: '/home/u/.config/x/c.json'",
                &plan(),
                Some(Path::new("/home/u")),
                &|p| home(p) && p != Path::new("/home/u/.config/x/c.json"),
            ),
            None
        );
    }

    #[test]
    fn the_stderr_watch_reads_lines_across_reads_and_reports_each_path_once() {
        let mut w = StderrWatch::new(plan(), Some("/home/u".into()));
        let no = |_: &Path| false;
        assert!(
            w.feed(b"starting\nError: EACCES: permission de", &no)
                .is_empty()
        );
        let got = w.feed(b"nied, open '/home/u/data/m.json'\nmore\n", &no);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].path, Path::new("/home/u/data/m.json"));
        // The same path again: not reported again.
        let again = w.feed(
            b"Error: EACCES: permission denied, open '/home/u/data/m.json'\n",
            &no,
        );
        assert!(again.is_empty());
        assert!(w.last_hint().unwrap().contains("~/data/m.json"));
        // An unterminated last line is read at the end.
        assert!(
            w.feed(
                b"PermissionError: [Errno 13] Permission denied: '/srv/x'",
                &no
            )
            .is_empty()
        );
        assert_eq!(w.finish(&no)[0].path, Path::new("/srv/x"));
        // A line over the limit is not read, the next one is.
        let mut long = vec![b'a'; MAX_LINE + 10];
        long.extend_from_slice(b" EACCES '/srv/long'\nEACCES: permission denied '/srv/y'\n");
        let got = w.feed(&long, &no);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].path, Path::new("/srv/y"));
    }

    #[test]
    fn ordinary_lines_and_granted_paths_say_nothing() {
        assert_eq!(d("Secure MCP Filesystem Server running on stdio"), None);
        assert_eq!(
            d("Error: ENOENT: no such file or directory, open '/usr/share/x'"),
            None
        );
        assert_eq!(d("permission denied by the remote API"), None);
    }
}
