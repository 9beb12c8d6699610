//! The launcher thread: where every server is cloned from.
//!
//! Linux ties the parent-death signal to the thread that cloned the child:
//! a child cloned by a short-lived thread (a tokio blocking thread) would
//! be killed when that thread exits. Launches therefore run on the main
//! thread when called there, else on one thread that lives as long as the
//! process.

use std::io;
use std::sync::OnceLock;
use std::sync::mpsc;

use super::SandboxError;

type Job = Box<dyn FnOnce() + Send>;

static LAUNCHER: OnceLock<mpsc::Sender<Job>> = OnceLock::new();

/// Run `f` on the launcher thread, a thread that lives as long as the
/// process (so children it clones keep their parent-death signal armed
/// until rootfence exits).
///
/// The main thread lives as long as the process too: called there, `f`
/// runs directly (no thread to start, no hand-off).
pub(super) fn on_launcher<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, SandboxError> {
    // SAFETY: gettid and getpid cannot fail.
    let on_main_thread = unsafe { libc::gettid() == libc::getpid() };
    if on_main_thread {
        return Ok(f());
    }
    let sender = match LAUNCHER.get() {
        Some(s) => s,
        None => {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("rootfence-launcher".into())
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                })
                .map_err(SandboxError::Launcher)?;
            // If another thread won the race, our sender is dropped and our
            // launcher thread ends.
            LAUNCHER.get_or_init(|| tx)
        }
    };
    let (tx, rx) = mpsc::sync_channel(1);
    sender
        .send(Box::new(move || {
            let _ = tx.send(f());
        }))
        .map_err(|_| SandboxError::Launcher(io::Error::other("the launcher thread is gone")))?;
    rx.recv()
        .map_err(|_| SandboxError::Launcher(io::Error::other("the launcher thread panicked")))
}
