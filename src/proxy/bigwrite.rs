//! Writing a big line from another thread.
//!
//! The relay runs on one thread: it reads both sides, scans every line and
//! writes both sides. For a big line most of that thread's time is the
//! kernel's copies, and a copy into one pipe holds up the reading and
//! scanning of the other direction. A writer with a [`BigWriter`] hands a
//! big line to a thread of the runtime's blocking pool, which writes it
//! whole (waiting for room in the pipe) while the loop goes on; the writer
//! task waits for it before its next line, so lines stay whole and in order.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

/// A second handle on a pipe's writing end, written from a blocking thread.
pub struct BigWriter(Arc<OwnedFd>);

impl BigWriter {
    /// A big writer for `fd`, if it is a pipe.
    pub fn new(fd: OwnedFd) -> Option<BigWriter> {
        let st = rustix::fs::fstat(&fd).ok()?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Fifo {
            return None;
        }
        Some(BigWriter(Arc::new(fd)))
    }

    /// A big writer for a duplicate of `fd` (see [`BigWriter::new`]).
    pub fn of(fd: &impl AsFd) -> Option<BigWriter> {
        BigWriter::new(fd.as_fd().try_clone_to_owned().ok()?)
    }

    /// Write all of `line` to the pipe from a blocking thread; returns once
    /// the pipe has all of it, with the line's buffer (for reuse). Call
    /// after everything written before it through the other handle has
    /// reached the pipe.
    pub async fn write(&self, line: Vec<u8>) -> std::io::Result<Vec<u8>> {
        let fd = self.0.clone();
        let (line, r) = tokio::task::spawn_blocking(move || {
            let r = write_all(&fd, &line);
            (line, r)
        })
        .await
        .map_err(std::io::Error::other)?;
        r.map(|()| line)
    }
}

/// Write all of `buf` to `fd`, which may be non-blocking (its file is
/// shared with the runtime's handle): wait for room with `poll`.
fn write_all(fd: &OwnedFd, mut buf: &[u8]) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    while !buf.is_empty() {
        match rustix::io::write(fd, buf) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(rustix::io::Errno::AGAIN) => {
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, for the duration of the call.
                if unsafe { libc::poll(&mut p, 1, -1) } < 0 {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A big line written from the blocking pool reaches the reader whole,
    /// also through a pipe smaller than the line on a non-blocking file
    /// (the write waits for room), and lines stay in order.
    #[tokio::test]
    async fn a_big_line_arrives_whole_and_in_order() {
        let (r, w) = rustix::pipe::pipe().unwrap();
        let _ = rustix::pipe::fcntl_setpipe_size(&w, 64 * 1024);
        let line: Vec<u8> = (0..1_000_017).map(|i| (i % 251) as u8).collect();
        let want = line.clone();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            std::fs::File::from(r).read_to_end(&mut got).unwrap();
            got
        });
        // Registered with the runtime: the file is non-blocking.
        let w = tokio::net::unix::pipe::Sender::from_owned_fd(w).unwrap();
        let big = BigWriter::of(&w).unwrap();
        big.write(line).await.unwrap();
        big.write(want.clone()).await.unwrap();
        drop(big);
        drop(w);
        let got = reader.join().unwrap();
        assert_eq!(got.len(), 2 * want.len());
        assert!(got[..want.len()] == want[..] && got[want.len()..] == want[..]);
    }

    #[test]
    fn only_pipes() {
        let f = tempfile::tempfile().unwrap();
        assert!(BigWriter::new(f.into()).is_none());
    }
}
