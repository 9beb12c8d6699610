//! The launcher off the loop: launching a server builds its sandbox
//! (every path of its plan opened, a process cloned and set up), which
//! reads the filesystem and can take long, so the loop hands each launch
//! to one blocking task of its own, which runs them (and the launcher's
//! other calls) in the order asked, and reports each back.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::server::{LaunchError, Launcher, ServerProcess};
use super::session::GenId;
use crate::plan::SandboxPlan;

/// What the launcher is asked to do.
enum Job {
    /// Launch a generation under this plan.
    Launch(GenId, Arc<SandboxPlan>),
    /// A server it launched answered `initialize` ([`Launcher::started`]).
    Started,
}

/// A launch's outcome, as the launcher's task reports it.
pub(super) type Launched = (GenId, Result<ServerProcess, LaunchError>);

/// The loop's side of the launcher's task.
pub(super) struct Launching {
    jobs: std::sync::mpsc::Sender<Job>,
}

impl Launching {
    /// Move `launcher` to a blocking task of its own; each launch's
    /// outcome comes back on the receiver. The task ends once this side
    /// is dropped and what it was asked is done.
    pub(super) fn start<L: Launcher>(mut launcher: L) -> (Launching, mpsc::UnboundedReceiver<Launched>) {
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        let (done, outcomes) = mpsc::unbounded_channel();
        tokio::task::spawn_blocking(move || {
            for job in queue {
                match job {
                    Job::Launch(g, plan) => {
                        let outcome = launcher.launch(&plan);
                        // The session may be over: the process is dropped
                        // with its pipes then (it reads its end of stdin).
                        let _ = done.send((g, outcome));
                    }
                    Job::Started => launcher.started(),
                }
            }
        });
        (Launching { jobs }, outcomes)
    }

    /// Launch generation `g` under `plan`.
    pub(super) fn launch(&self, g: GenId, plan: Arc<SandboxPlan>) -> Result<(), LaunchError> {
        self.jobs
            .send(Job::Launch(g, plan))
            .map_err(|_| LaunchError::Io {
                what: "the launcher's task is gone",
                source: std::io::Error::other("launcher task ended"),
            })
    }

    /// A server answered `initialize`.
    pub(super) fn started(&self) {
        // Only lost when the launcher's task is gone (it panicked): no
        // launch comes after.
        let _ = self.jobs.send(Job::Started);
    }
}
