//! rootfence's own stdin and stdout as async streams.
//!
//! Hosts connect to rootfence with pipes. A pipe is registered with the
//! reactor directly (non-blocking, no thread hand-off per read or write);
//! anything else (a terminal, a file, a socket) falls back to tokio's
//! blocking-pool stdin/stdout.

use std::os::fd::{AsFd, OwnedFd};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

fn dup(fd: std::os::fd::BorrowedFd<'_>) -> Option<OwnedFd> {
    fd.try_clone_to_owned().ok()
}

/// rootfence's stdin.
pub fn stdin() -> Box<dyn AsyncRead + Unpin + Send> {
    let fd = std::io::stdin();
    if let Some(owned) = dup(fd.as_fd())
        && let Ok(r) = pipe::Receiver::from_owned_fd(owned)
    {
        return Box::new(r);
    }
    Box::new(tokio::io::stdin())
}

/// rootfence's stdout.
pub fn stdout() -> Box<dyn AsyncWrite + Unpin + Send> {
    let fd = std::io::stdout();
    if let Some(owned) = dup(fd.as_fd())
        && let Ok(w) = pipe::Sender::from_owned_fd(owned)
    {
        return Box::new(w);
    }
    Box::new(tokio::io::stdout())
}

/// A second handle on rootfence's stdout for writing big lines from
/// another thread ([`super::bigwrite`]), when it is a pipe.
pub fn stdout_big_writer() -> Option<super::bigwrite::BigWriter> {
    super::bigwrite::BigWriter::of(&std::io::stdout())
}
