//! The loop's other effects that touch the filesystem, off the loop:
//! watching the serving generation's roots (a watch added on each) and
//! remembering a handshake for the next session (a file written). One
//! blocking task of their own does them in the order asked; nothing comes
//! back from them.

use std::path::PathBuf;

use super::init_cache::RememberedInit;
use super::session::{RememberFn, RootsObserver};

/// What the task is asked to do.
enum Chore {
    /// Watch these root paths (instead of those before).
    Watch(Vec<PathBuf>),
    /// Remember this handshake.
    Remember(RememberedInit),
}

/// The loop's side of the task.
pub(super) struct Chores {
    /// `None` when there is nothing to do them with.
    jobs: Option<std::sync::mpsc::Sender<Chore>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Chores {
    /// Move `observer` and `remember` to a blocking task of their own
    /// (none when both are absent). It ends once this side is dropped and
    /// what it was asked is done.
    pub(super) fn start(mut observer: Option<RootsObserver>, mut remember: Option<RememberFn>) -> Chores {
        if observer.is_none() && remember.is_none() {
            return Chores {
                jobs: None,
                task: None,
            };
        }
        let (jobs, queue) = std::sync::mpsc::channel::<Chore>();
        let task = tokio::task::spawn_blocking(move || {
            for chore in queue {
                match chore {
                    Chore::Watch(paths) => {
                        if let Some(obs) = observer.as_mut() {
                            obs(&paths);
                        }
                    }
                    Chore::Remember(init) => {
                        if let Some(remember) = remember.as_mut() {
                            remember(&init);
                        }
                    }
                }
            }
        });
        Chores {
            jobs: Some(jobs),
            task: Some(task),
        }
    }

    /// Let what was asked be done, within `grace` (a handshake remembered
    /// at a session's end is written before rootfence exits).
    pub(super) async fn finish(mut self, grace: std::time::Duration) {
        self.jobs = None;
        if let Some(task) = self.task.take()
            && tokio::time::timeout(grace, task).await.is_err()
        {
            tracing::warn!(
                "watching the roots or remembering the handshake took longer than limits.shutdown_grace_ms = {} ms: exiting without it",
                grace.as_millis()
            );
        }
    }

    /// Watch `paths`, the serving generation's roots.
    pub(super) fn watch(&self, paths: Vec<PathBuf>) {
        self.send(Chore::Watch(paths));
    }

    /// Remember `init` for the next session.
    pub(super) fn remember(&self, init: RememberedInit) {
        self.send(Chore::Remember(init));
    }

    fn send(&self, chore: Chore) {
        if let Some(jobs) = &self.jobs
            && jobs.send(chore).is_err()
        {
            // Only when the task panicked: the watch or the memory is
            // lost, never the session.
            tracing::warn!("the task watching the roots and remembering handshakes is gone");
        }
    }
}
