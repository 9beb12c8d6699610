//! Walking trees: `directory_tree` and `search_files`.
//!
//! Both read each directory once through a handle opened beneath its
//! parent (links are listed, never followed: a walk cannot leave its
//! root), write their result as they go, and stop at the first limit
//! reached (entries, depth, bytes of result, time), saying so in a note at
//! the end of the result.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cap_std::fs::Dir;
use globset::{Glob, GlobBuilder, GlobMatcher};

use super::error::FsError;
use super::paths::Target;

/// How far a walk may go.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most entries visited.
    pub entries: usize,
    /// Deepest directory level expanded (the walk's start is level 0).
    pub depth: usize,
    /// Largest result text, in bytes.
    pub bytes: usize,
    /// Longest walk.
    pub time: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            entries: 200_000,
            depth: 64,
            bytes: 16 << 20,
            time: Duration::from_secs(20),
        }
    }
}

/// Which limit stopped a walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Entries,
    Bytes,
    Time,
}

/// A walk's running account.
struct Budget {
    limits: Limits,
    started: Instant,
    entries: usize,
    stopped: Option<Stop>,
    depth_capped: usize,
    unreadable: usize,
}

impl Budget {
    fn new(limits: Limits) -> Budget {
        Budget {
            limits,
            started: Instant::now(),
            entries: 0,
            stopped: None,
            depth_capped: 0,
            unreadable: 0,
        }
    }

    /// Count one entry; false when the walk must stop.
    fn take(&mut self, out_len: usize) -> bool {
        if self.stopped.is_some() {
            return false;
        }
        if self.entries >= self.limits.entries {
            self.stopped = Some(Stop::Entries);
        } else if out_len >= self.limits.bytes {
            self.stopped = Some(Stop::Bytes);
        } else if self.entries.is_multiple_of(256) && self.started.elapsed() >= self.limits.time {
            self.stopped = Some(Stop::Time);
        }
        self.entries += 1;
        self.stopped.is_none()
    }

    /// The note at the end of a result, if the walk was cut short.
    fn note(&self, tool: &str) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(stop) = self.stopped {
            let what = match stop {
                Stop::Entries => format!("after {} entries (the limit)", self.limits.entries),
                Stop::Bytes => format!("at {} bytes of result (the limit)", self.limits.bytes),
                Stop::Time => format!("after {} s (the limit)", self.limits.time.as_secs_f64()),
            };
            parts.push(format!(
                "{tool} stopped {what}: the result above is partial; narrow the path or add excludePatterns"
            ));
        }
        if self.depth_capped > 0 {
            parts.push(format!(
                "{} directories deeper than {} levels were not expanded",
                self.depth_capped, self.limits.depth
            ));
        }
        if self.unreadable > 0 {
            parts.push(format!("{} directories could not be read", self.unreadable));
        }
        (!parts.is_empty()).then(|| format!("[{}]", parts.join("; ")))
    }
}

fn glob(pattern: &str) -> Result<GlobMatcher, FsError> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|g: Glob| g.compile_matcher())
        .map_err(|source| FsError::Glob {
            pattern: pattern.to_string(),
            source,
        })
}

/// `directory_tree`'s exclusion: a pattern with `*` matches the relative
/// path; one without matches it, or any component sequence ending in it,
/// or anything under it (as the reference server reads them).
struct Excludes(Vec<GlobMatcher>);

impl Excludes {
    fn tree(patterns: &[String]) -> Result<Excludes, FsError> {
        let mut v = Vec::new();
        for p in patterns {
            v.push(glob(p)?);
            if !p.contains('*') {
                v.push(glob(&format!("**/{p}"))?);
                v.push(glob(&format!("**/{p}/**"))?);
            }
        }
        Ok(Excludes(v))
    }

    fn search(patterns: &[String]) -> Result<Excludes, FsError> {
        patterns
            .iter()
            .map(|p| glob(p))
            .collect::<Result<_, _>>()
            .map(Excludes)
    }

    fn hit(&self, rel: &Path) -> bool {
        self.0.iter().any(|g| g.is_match(rel))
    }
}

fn open_start(t: &Target) -> Result<Dir, FsError> {
    t.root
        .dir
        .open_dir(t.rel_or_dot())
        .map_err(t.err("read directory"))
}

/// `directory_tree`: the tree under `t` as JSON (`JSON.stringify(tree,
/// null, 2)` layout), then a note if a limit was reached.
pub fn tree(t: &Target, exclude: &[String], limits: Limits) -> Result<String, FsError> {
    let start = open_start(t)?;
    let ex = Excludes::tree(exclude)?;
    let mut budget = Budget::new(limits);
    let mut out = String::new();
    tree_level(&start, Path::new(""), 0, 0, &ex, &mut budget, &mut out);
    if let Some(note) = budget.note("directory_tree") {
        out.push_str("\n\n");
        out.push_str(&note);
    }
    Ok(out)
}

fn push_indent(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// Write the array of `dir`'s entries at `indent` (the column of its `[`
/// line).
fn tree_level(
    dir: &Dir,
    rel: &Path,
    depth: usize,
    indent: usize,
    ex: &Excludes,
    budget: &mut Budget,
    out: &mut String,
) {
    out.push('[');
    let mut any = false;
    let entries = match dir.entries() {
        Ok(e) => e,
        Err(_) => {
            budget.unreadable += 1;
            out.push(']');
            return;
        }
    };
    for entry in entries {
        let Ok(entry) = entry else {
            budget.unreadable += 1;
            continue;
        };
        let name = entry.file_name();
        let child = rel.join(&name);
        if ex.hit(&child) {
            continue;
        }
        if !budget.take(out.len()) {
            break;
        }
        let is_dir = entry.file_type().map(|f| f.is_dir()).unwrap_or(false);
        out.push_str(if any { ",\n" } else { "\n" });
        any = true;
        push_indent(out, indent + 2);
        out.push_str("{\n");
        push_indent(out, indent + 4);
        out.push_str("\"name\": ");
        out.push_str(&serde_json::Value::from(name.to_string_lossy()).to_string());
        out.push_str(",\n");
        push_indent(out, indent + 4);
        if is_dir {
            out.push_str("\"type\": \"directory\",\n");
            push_indent(out, indent + 4);
            out.push_str("\"children\": ");
            if depth + 1 >= budget.limits.depth {
                budget.depth_capped += 1;
                out.push_str("[]");
            } else {
                match entry.open_dir() {
                    Ok(sub) => tree_level(&sub, &child, depth + 1, indent + 4, ex, budget, out),
                    Err(_) => {
                        budget.unreadable += 1;
                        out.push_str("[]");
                    }
                }
            }
        } else {
            out.push_str("\"type\": \"file\"");
        }
        out.push('\n');
        push_indent(out, indent + 2);
        out.push('}');
    }
    if any {
        out.push('\n');
        push_indent(out, indent);
    }
    out.push(']');
}

/// `search_files`: the full path of every entry under `t` whose path
/// relative to `t` matches `pattern`, one a line ("No matches found" when
/// none), then a note if a limit was reached.
pub fn search(
    t: &Target,
    pattern: &str,
    exclude: &[String],
    limits: Limits,
) -> Result<String, FsError> {
    let start = open_start(t)?;
    let m = glob(pattern)?;
    let ex = Excludes::search(exclude)?;
    let mut budget = Budget::new(limits);
    let mut out = String::new();
    let base = t.shown();
    let ctx = Search {
        t,
        base: &base,
        pattern: &m,
        ex: &ex,
    };
    ctx.level(&start, Path::new(""), 0, &mut budget, &mut out);
    if out.is_empty() {
        out.push_str("No matches found");
    }
    if let Some(note) = budget.note("search_files") {
        out.push_str("\n\n");
        out.push_str(&note);
    }
    Ok(out)
}

struct Search<'a> {
    t: &'a Target<'a>,
    base: &'a Path,
    pattern: &'a GlobMatcher,
    ex: &'a Excludes,
}

impl Search<'_> {
    fn level(&self, dir: &Dir, rel: &Path, depth: usize, budget: &mut Budget, out: &mut String) {
        let Ok(entries) = dir.entries() else {
            budget.unreadable += 1;
            return;
        };
        for entry in entries {
            let Ok(entry) = entry else {
                budget.unreadable += 1;
                continue;
            };
            if !budget.take(out.len()) {
                return;
            }
            let child: PathBuf = rel.join(entry.file_name());
            let ft = entry.file_type().ok();
            if ft.is_some_and(|f| f.is_symlink()) {
                // As the reference server does, a link is a result only if
                // it resolves inside the allowed directories (beneath the
                // root's handle here).
                let full = self.t.rel.join(&child);
                if self.t.root.dir.metadata(&full).is_err() {
                    continue;
                }
            }
            if self.ex.hit(&child) {
                continue;
            }
            if self.pattern.is_match(&child) {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(&self.base.join(&child).to_string_lossy());
            }
            if ft.is_some_and(|f| f.is_dir()) {
                if depth + 1 >= budget.limits.depth {
                    budget.depth_capped += 1;
                    continue;
                }
                match entry.open_dir() {
                    Ok(sub) => self.level(&sub, &child, depth + 1, budget, out),
                    Err(_) => budget.unreadable += 1,
                }
                if budget.stopped.is_some() {
                    return;
                }
            }
        }
    }
}
