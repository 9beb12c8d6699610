//! Turning filesystem events into "roots may have changed": edits of the
//! policy file, and root directories deleted, renamed or replaced.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc::UnboundedSender;

use crate::envvars::EnvFlag;
use crate::policy::{Policy, PolicyError};
use crate::proxy::Change;

/// How long a policy file must stay unchanged before it is loaded.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(50);

/// Watches one policy file; keeps the watch alive while it exists.
pub struct PolicyWatcher {
    _watcher: RecommendedWatcher,
}

/// Watch `file` and send [`Change::Policy`] with the newly loaded
/// policy (or why it was rejected) whenever its content changes. The
/// launch's `--env` flags are checked against each new policy: one that
/// refuses a flag is rejected like an invalid one.
///
/// The parent directory is watched, so editors that replace the file
/// (write a temporary file, rename it over) are seen too.
pub fn watch_policy(
    file: &Path,
    home: Option<PathBuf>,
    env_flags: Vec<EnvFlag>,
    tx: UnboundedSender<Change>,
) -> notify::Result<PolicyWatcher> {
    let file = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    let dir = file
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    let shown = file.clone();
    let mut last = std::fs::read(&file).ok();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let Ok(ev) = res else { return };
        if !ev.paths.is_empty() && !ev.paths.iter().any(|p| p == &shown) {
            return;
        }
        // Editors write in steps (truncate, write; or write a temporary
        // file and rename it): judge the file only once it has settled, so a
        // half-written policy is never applied.
        let mut now = std::fs::read(&shown).ok();
        loop {
            std::thread::sleep(SETTLE);
            let again = std::fs::read(&shown).ok();
            if again == now {
                break;
            }
            now = again;
        }
        if now == last {
            return;
        }
        last.clone_from(&now);
        let file = || shown.display().to_string();
        let result = match now {
            None => Err(PolicyError::Gone { file: file() }),
            Some(bytes) => match String::from_utf8(bytes) {
                Err(_) => Err(PolicyError::NotUtf8 { file: file() }),
                Ok(text) => Policy::parse(&text, Some(&shown), home.as_deref())
                    .and_then(|p| Ok(p.with_env_flags(&env_flags)?))
                    .map(Box::new),
            },
        };
        let _ = tx.send(Change::Policy(result));
    })?;
    watcher.watch(&dir, RecursiveMode::NonRecursive)?;
    Ok(PolicyWatcher { _watcher: watcher })
}

/// Watches the parent directories of the enforced roots.
pub struct RootWatcher {
    watcher: RecommendedWatcher,
    watched: BTreeSet<PathBuf>,
}

impl RootWatcher {
    /// A watcher that sends [`Change::RootsMaybeChanged`] on any change in a
    /// watched directory.
    pub fn new(tx: UnboundedSender<Change>) -> notify::Result<RootWatcher> {
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if let Ok(ev) = res {
                use notify::EventKind;
                if matches!(
                    ev.kind,
                    EventKind::Remove(_)
                        | EventKind::Modify(notify::event::ModifyKind::Name(_))
                        | EventKind::Create(_)
                ) {
                    let _ = tx.send(Change::RootsMaybeChanged);
                }
            }
        })?;
        Ok(RootWatcher {
            watcher,
            watched: BTreeSet::new(),
        })
    }

    /// Watch the parents of `roots` (and the roots themselves), and nothing
    /// else.
    pub fn set(&mut self, roots: &[PathBuf]) {
        let want: BTreeSet<PathBuf> = roots
            .iter()
            .flat_map(|r| [Some(r.clone()), r.parent().map(Path::to_path_buf)])
            .flatten()
            .collect();
        for gone in self.watched.difference(&want) {
            let _ = self.watcher.unwatch(gone);
        }
        for new in want.difference(&self.watched) {
            if let Err(e) = self.watcher.watch(new, RecursiveMode::NonRecursive) {
                tracing::debug!("cannot watch {}: {e}", new.display());
            }
        }
        tracing::debug!(
            "watching {} directories for changes to the roots",
            want.len()
        );
        self.watched = want;
    }
}
