//! Newline-delimited framing with a hard bound on line length.
//!
//! A line longer than the limit is never buffered whole: once it passes the
//! limit, the rest of it is read and discarded, and only its first bytes are
//! kept (to find its `id` and `method` for the error reply).

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// How much of an oversized line is kept to identify it.
pub const OVERSIZED_HEAD: usize = 64 * 1024;

/// One frame read from a stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A complete line, without its `\n` (and without a trailing `\r`).
    Line(Vec<u8>),
    /// A line longer than the limit: its total length and its first bytes.
    TooLong {
        /// Total length in bytes, without the newline.
        len: u64,
        /// The first [`OVERSIZED_HEAD`] bytes.
        head: Vec<u8>,
    },
}

/// Reads newline-delimited frames, at most `max` bytes each.
pub struct LineReader<R> {
    inner: R,
    max: usize,
    buf: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// A reader whose lines may be at most `max` bytes.
    pub fn new(inner: R, max: usize) -> Self {
        LineReader {
            inner,
            max,
            buf: Vec::new(),
        }
    }

    /// The next non-empty frame; `None` at end of stream. A final line
    /// without a newline is returned as a line.
    pub async fn next(&mut self) -> std::io::Result<Option<Frame>> {
        let mut total: u64 = 0;
        let mut oversized = false;
        loop {
            let avail = self.inner.fill_buf().await?;
            if avail.is_empty() {
                // End of stream.
                if total == 0 {
                    return Ok(None);
                }
                return Ok(Some(self.finish(total, oversized)));
            }
            let (chunk, found) = match memchr(avail) {
                Some(i) => (&avail[..i], true),
                None => (avail, false),
            };
            let n = chunk.len();
            total += n as u64;
            if !oversized && total > self.max as u64 {
                oversized = true;
                // Keep only the head; release the rest.
                self.buf.truncate(OVERSIZED_HEAD);
                self.buf.shrink_to(OVERSIZED_HEAD);
            }
            if oversized {
                let room = OVERSIZED_HEAD.saturating_sub(self.buf.len());
                self.buf.extend_from_slice(&chunk[..room.min(n)]);
            } else {
                self.buf.extend_from_slice(chunk);
            }
            self.inner.consume(n + usize::from(found));
            if found {
                if total == 0 || (total == 1 && self.buf == b"\r") {
                    // An empty line: skip it.
                    self.buf.clear();
                    total = 0;
                    continue;
                }
                return Ok(Some(self.finish(total, oversized)));
            }
        }
    }

    fn finish(&mut self, total: u64, oversized: bool) -> Frame {
        if oversized {
            let head = std::mem::take(&mut self.buf);
            return Frame::TooLong { len: total, head };
        }
        let mut line = std::mem::take(&mut self.buf);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        // Room for the newline the writer appends.
        line.reserve_exact(1);
        Frame::Line(line)
    }
}

fn memchr(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

/// Bytes queued for a writer above which rootfence stops reading from the
/// other side until the writer catches up (the pipes' own back-pressure
/// then reaches the peer). One message of any size up to the limit may
/// always be in flight.
pub const HIGH_WATER: usize = 4 * 1024 * 1024;

/// The sending side of a line writer, counting the bytes still queued.
#[derive(Clone)]
pub struct LineSender {
    tx: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
    queued: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl LineSender {
    /// Queue a line; false if the writer is gone.
    pub fn send(&self, line: Vec<u8>) -> bool {
        let n = line.len();
        self.queued
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        if self.tx.send(line).is_err() {
            self.queued
                .fetch_sub(n, std::sync::atomic::Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Whether more than [`HIGH_WATER`] bytes wait to be written.
    pub fn backed_up(&self) -> bool {
        self.queued.load(std::sync::atomic::Ordering::Relaxed) > HIGH_WATER
    }
}

/// The receiving side: hand it to [`write_all_lines`].
pub struct LineQueue {
    rx: tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
    queued: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

/// A queue of lines for one writer.
pub fn line_queue() -> (LineSender, LineQueue) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let queued = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    (
        LineSender {
            tx,
            queued: queued.clone(),
        },
        LineQueue { rx, queued },
    )
}

/// Small messages queued together are written with one system call up to
/// this size; larger ones are written straight from their own buffer.
const COALESCE: usize = 64 * 1024;

/// Write every message queued on `q` to `w`, each followed by a newline.
/// Messages already queued are written together; the stream is flushed
/// whenever the queue is empty. Returns when the queue closes (or on a
/// write error, which is returned).
pub async fn write_all_lines<W: AsyncWrite + Unpin>(
    w: &mut W,
    q: &mut LineQueue,
) -> std::io::Result<()> {
    let mut batch: Vec<u8> = Vec::with_capacity(COALESCE);
    while let Some(first) = q.rx.recv().await {
        let mut next = Some(first);
        while let Some(mut line) = next.take() {
            q.queued
                .fetch_sub(line.len(), std::sync::atomic::Ordering::Relaxed);
            if line.len() >= COALESCE {
                if !batch.is_empty() {
                    w.write_all(&batch).await?;
                    batch.clear();
                }
                line.push(b'\n');
                w.write_all(&line).await?;
            } else {
                batch.extend_from_slice(&line);
                batch.push(b'\n');
                if batch.len() >= COALESCE {
                    w.write_all(&batch).await?;
                    batch.clear();
                }
            }
            next = q.rx.try_recv().ok();
        }
        if !batch.is_empty() {
            w.write_all(&batch).await?;
            batch.clear();
        }
        w.flush().await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(input: &[u8], max: usize) -> Vec<Frame> {
        let mut r = LineReader::new(tokio::io::BufReader::with_capacity(7, input), max);
        let mut out = Vec::new();
        while let Some(f) = r.next().await.unwrap() {
            out.push(f);
        }
        out
    }

    #[tokio::test]
    async fn splits_lines_and_strips_cr() {
        let f = frames(b"{\"a\":1}\r\n\n{\"b\":2}\nlast", 100).await;
        assert_eq!(
            f,
            vec![
                Frame::Line(b"{\"a\":1}".to_vec()),
                Frame::Line(b"{\"b\":2}".to_vec()),
                Frame::Line(b"last".to_vec()),
            ]
        );
    }

    #[tokio::test]
    async fn oversized_lines_are_cut_and_the_stream_goes_on() {
        let mut input = b"short\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 1000));
        input.extend(b"\nafter\n");
        let f = frames(&input, 100).await;
        assert_eq!(f.len(), 3);
        assert_eq!(f[0], Frame::Line(b"short".to_vec()));
        match &f[1] {
            Frame::TooLong { len, head } => {
                assert_eq!(*len, 1000);
                assert!(head.len() <= OVERSIZED_HEAD && head.iter().all(|&c| c == b'x'));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(f[2], Frame::Line(b"after".to_vec()));
    }

    #[tokio::test]
    async fn exactly_the_limit_is_accepted() {
        let mut input = vec![b'y'; 100];
        input.push(b'\n');
        assert_eq!(
            frames(&input, 100).await,
            vec![Frame::Line(vec![b'y'; 100])]
        );
        let mut input = vec![b'y'; 101];
        input.push(b'\n');
        assert!(matches!(
            frames(&input, 100).await[0],
            Frame::TooLong { len: 101, .. }
        ));
    }
}
