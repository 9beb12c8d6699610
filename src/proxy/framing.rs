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

/// Write one message and its newline, then flush.
pub async fn write_line<W: AsyncWrite + Unpin>(
    w: &mut W,
    mut line: Vec<u8>,
) -> std::io::Result<()> {
    line.push(b'\n');
    w.write_all(&line).await?;
    w.flush().await
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
