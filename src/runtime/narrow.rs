//! Narrowing grants around what no rule may grant.
//!
//! Landlock grants a directory with everything below it, and cannot carve
//! a hole. So a grant that holds a denied path (`~/.cargo` holds
//! `~/.cargo/credentials.toml`) is replaced by grants of its entries, all
//! but the denied one, going down along the way to it; a grant inside a
//! denied path is dropped. A project's VCS directory is left out the same
//! way. Entries that appear later in a narrowed directory are not granted.

use std::path::{Path, PathBuf};

use super::{HostEnv, Rule, RuntimeNeed, project};
use crate::roots::{Known, PathRule, within, within_known};

/// Most entries listed while narrowing one grant: past it, the grant is
/// dropped (with a note) rather than granted whole.
const MAX_ENTRIES: usize = 4096;

/// `needs` with every grant narrowed around the denied paths of `deny`
/// (and, for projects, around their VCS directories).
///
/// # Security
///
/// No returned grant is, holds, or lies inside a denied path, under its
/// name or its canonical name; a symbolic link among a narrowed
/// directory's entries is kept only when its target is neither.
pub fn around_denied(
    needs: Vec<RuntimeNeed>,
    deny: &[PathRule],
    notes: &mut Vec<String>,
    env: &HostEnv,
) -> Vec<RuntimeNeed> {
    let denied: Vec<&Path> = deny.iter().flat_map(PathRule::names).collect();
    // Their forms looked at once: compared with every grant.
    let denied_known: Vec<Known> = denied.iter().map(|d| Known::new(d)).collect();
    let mut out = Vec::with_capacity(needs.len());
    for need in needs {
        let real = crate::canon::canonicalize(&need.path).ok();
        // The project's VCS directories, avoided besides the denied paths.
        let left_out: Vec<PathBuf> = if need.rule == Rule::Project {
            let base = real.as_deref().unwrap_or(&need.path);
            project::LEFT_OUT
                .iter()
                .map(|n| base.join(n))
                .filter(|p| p.exists())
                .collect()
        } else {
            Vec::new()
        };
        let shown = super::shown(&need.path, env.home.as_deref());
        let names: Vec<Known> = std::iter::once(need.path.as_path())
            .chain(real.as_deref())
            .map(Known::new)
            .collect();
        if let Some(d) = denied_known
            .iter()
            .copied()
            .find(|d| names.iter().any(|n| within_known(*n, *d)))
            .map(Known::path)
        {
            notes.push(format!(
                "{shown} ({}: {}) not granted: it is inside denied path {}",
                need.rule,
                need.why,
                super::shown(d, env.home.as_deref())
            ));
            continue;
        }
        // Narrowed in its real place: the entries listed are the real
        // directory's.
        let base = real.clone().unwrap_or_else(|| need.path.clone());
        let base_known = Known::new(&base);
        let inside: Vec<&Path> = denied_known
            .iter()
            .copied()
            .chain(left_out.iter().map(|p| Known::new(p)))
            .filter(|d| within_known(*d, base_known) && d.path() != base)
            .map(Known::path)
            .collect();
        if inside.is_empty() {
            out.push(need);
            continue;
        }
        let mut parts = Vec::new();
        let mut listed = 0usize;
        let whole = split(&base, &inside, &mut parts, &mut listed);
        if !whole {
            notes.push(format!(
                "{shown} ({}: {}) not granted: it holds a denied path and more than {MAX_ENTRIES} entries to grant around it",
                need.rule, need.why
            ));
            continue;
        }
        let secret = inside
            .iter()
            .filter(|d| d.exists() && denied.contains(d))
            .map(|d| super::shown(d, env.home.as_deref()))
            .collect::<Vec<_>>();
        if !secret.is_empty() {
            notes.push(format!(
                "{shown} ({}) granted without {}: denied",
                need.rule,
                secret.join(", ")
            ));
        }
        for p in parts {
            if denied.iter().any(|d| within(&p, d) || within(d, &p)) {
                continue;
            }
            out.push(RuntimeNeed {
                path: p,
                optional: true,
                ..need.clone()
            });
        }
    }
    out
}

/// The entries of `dir` to grant instead of `dir`: all but the avoided
/// ones, going down into the directories on the way to one. False when
/// more than [`MAX_ENTRIES`] were listed.
fn split(dir: &Path, avoid: &[&Path], out: &mut Vec<PathBuf>, listed: &mut usize) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return true;
    };
    for entry in rd.flatten() {
        *listed += 1;
        if *listed > MAX_ENTRIES {
            return false;
        }
        let p = entry.path();
        if avoid.iter().any(|d| within(&p, d)) {
            continue;
        }
        let Ok(ft) = entry.file_type() else { continue };
        if avoid.iter().any(|d| within(d, &p)) {
            if ft.is_dir() && !split(&p, avoid, out, listed) {
                return false;
            }
            continue;
        }
        if ft.is_symlink() {
            // Granted by its target: keep it only when that is not avoided.
            match crate::canon::canonicalize(&p) {
                Ok(t) if !avoid.iter().any(|d| within(&t, d) || within(d, &t)) => out.push(p),
                _ => {}
            }
            continue;
        }
        out.push(p);
    }
    true
}
