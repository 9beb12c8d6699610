//! Newline-delimited framing with a hard bound on line length.
//!
//! A line longer than the limit is never buffered whole: once it passes the
//! limit, the rest of it is read and discarded, passing through a
//! [`Sniffer`] that keeps what identifies it (its `id`, wherever it is in
//! the line, and `method`) for the error reply.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::bigwrite::BigWriter;
use super::session::Frame;
use super::sniff::Sniffer;

/// How much a reader asks the kernel for at a time.
const READ_CHUNK: usize = 256 * 1024;

/// Lines at least this long are handed over in the buffer they were read
/// into (no copy); shorter ones are copied out of it.
const HAND_OVER: usize = 64 * 1024;

/// Spare buffers of big lines, at most this many kept.
const SPARES: usize = 6;

/// A spare is kept only if its capacity is at most this: buffers of bigger
/// lines go back to the allocator.
const SPARE_MAX: usize = 8 * 1024 * 1024 + READ_CHUNK;

/// Buffers of big lines, given back by the writers once written and taken
/// by the readers for their next line. A reader that hands a big line over
/// needs a new buffer as big; taking a spare, already in memory, saves the
/// page faults of fresh memory and the copies of growing a buffer again.
/// Holds at most [`SPARES`] buffers of at most [`SPARE_MAX`] bytes.
static SPARE: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

/// Give a written line's buffer back for reuse (kept only if big, and
/// not too big).
pub(crate) fn recycle(mut buf: Vec<u8>) {
    if !(HAND_OVER..=SPARE_MAX).contains(&buf.capacity()) {
        return;
    }
    buf.clear();
    if let Ok(mut spare) = SPARE.lock()
        && spare.len() < SPARES
    {
        spare.push(buf);
    }
}

/// Whether spare buffers are held.
pub(crate) fn spares_held() -> bool {
    SPARE.lock().is_ok_and(|s| !s.is_empty())
}

/// Give the spare buffers back to the system (the relay went idle).
pub(crate) fn release_spares() {
    let spares = SPARE.lock().map(|mut s| std::mem::take(&mut *s));
    if let Ok(spares) = spares
        && !spares.is_empty()
    {
        drop(spares);
        // Freed heap memory stays in the process unless trimmed.
        #[cfg(target_env = "gnu")]
        // SAFETY: malloc_trim only returns free memory to the system.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

/// An empty buffer for a reader: a spare if there is one.
fn fresh_buffer() -> Vec<u8> {
    SPARE
        .lock()
        .ok()
        .and_then(|mut s| s.pop())
        .unwrap_or_default()
}

/// Reads newline-delimited frames, at most `max` bytes each.
///
/// Reads straight from the stream into its own buffer: a short line is
/// copied out of it, a long one is handed over in the buffer itself, so a
/// big message is copied once (by the kernel) on its way in.
pub struct LineReader<R> {
    inner: R,
    max: usize,
    /// Bytes read and not yet returned: `buf[start..]`.
    buf: Vec<u8>,
    start: usize,
    /// `buf[start..scanned]` holds no newline.
    scanned: usize,
    /// Discarding the rest of an oversized line: its length so far and
    /// what identifies it so far.
    oversized: Option<(u64, Sniffer)>,
    eof: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader whose lines may be at most `max` bytes.
    pub fn new(inner: R, max: usize) -> Self {
        LineReader {
            inner,
            max,
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            oversized: None,
            eof: false,
        }
    }

    /// The next non-empty frame; `None` at end of stream. A final line
    /// without a newline is returned as a line.
    pub async fn next(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            if let Some(i) = memchr(&self.buf[self.scanned..]) {
                let end = self.scanned + i;
                if let Some(frame) = self.take(end, 1) {
                    return Ok(Some(frame));
                }
                continue;
            }
            self.scanned = self.buf.len();
            let pending = self.buf.len() - self.start;
            if let Some((len, sniffer)) = &mut self.oversized {
                // Past the limit: count and drop what has no newline.
                *len += pending as u64;
                sniffer.feed(&self.buf[self.start..]);
                self.buf.clear();
                self.start = 0;
                self.scanned = 0;
            } else if pending > self.max {
                let mut sniffer = Sniffer::default();
                sniffer.feed(&self.buf[self.start..]);
                self.oversized = Some((pending as u64, sniffer));
                self.buf.clear();
                self.buf.shrink_to(READ_CHUNK);
                self.start = 0;
                self.scanned = 0;
            }
            if self.eof {
                let end = self.buf.len();
                if end == self.start && self.oversized.is_none() {
                    return Ok(None);
                }
                if let Some(frame) = self.take(end, 0) {
                    return Ok(Some(frame));
                }
                continue;
            }
            if self.start > 0 {
                // Move the partial line to the front.
                self.buf.drain(..self.start);
                self.scanned -= self.start;
                self.start = 0;
            }
            if self.buf.capacity() - self.buf.len() < READ_CHUNK / 2 {
                self.buf.reserve(READ_CHUNK);
            }
            // Near the limit, read only what can still belong to an
            // acceptable line: an oversized one then costs at most the
            // limit plus one read.
            let room = (self.max + 1)
                .saturating_sub(self.buf.len())
                .max(READ_CHUNK);
            if self
                .inner
                .read_buf(&mut bytes::BufMut::limit(&mut self.buf, room))
                .await?
                == 0
            {
                self.eof = true;
            }
        }
    }

    /// The frame ending at `end` (exclusive), followed by `sep` separator
    /// bytes; `None` for an empty line (skipped).
    fn take(&mut self, end: usize, sep: usize) -> Option<Frame> {
        let mut stop = end;
        if let Some((len, mut sniffer)) = self.oversized.take() {
            let total = len + (end - self.start) as u64;
            sniffer.feed(&self.buf[self.start..end]);
            self.consume(end + sep);
            return Some(Frame::TooLong {
                len: total,
                ident: sniffer.finish(),
            });
        }
        let n = end - self.start;
        if n > self.max {
            let ident = super::sniff::ident(&self.buf[self.start..end]);
            self.consume(end + sep);
            return Some(Frame::TooLong {
                len: n as u64,
                ident,
            });
        }
        if stop > self.start && self.buf[stop - 1] == b'\r' {
            stop -= 1;
        }
        if stop == self.start {
            self.consume(end + sep);
            return None;
        }
        if self.start == 0 && stop >= HAND_OVER {
            // Hand the buffer over; keep only what follows the line.
            let mut next = fresh_buffer();
            next.extend_from_slice(&self.buf[end + sep..]);
            let mut line = std::mem::replace(&mut self.buf, next);
            line.truncate(stop);
            // Room for the newline the writer appends.
            line.reserve_exact(1);
            self.start = 0;
            self.scanned = 0;
            return Some(Frame::Line(line));
        }
        let mut line = Vec::with_capacity(stop - self.start + 1);
        line.extend_from_slice(&self.buf[self.start..stop]);
        self.consume(end + sep);
        Some(Frame::Line(line))
    }

    /// Forget everything before `to`.
    fn consume(&mut self, to: usize) {
        if to >= self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else {
            self.start = to;
        }
        self.scanned = self.start;
    }
}

fn memchr(b: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', b)
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

/// Woken when a writer's queue falls back to [`HIGH_WATER`] or under it:
/// the loop that stopped reading while a writer was backed up waits on it
/// (shared by every writer of one session).
pub type Drained = std::sync::Arc<tokio::sync::Notify>;

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
    drained: Drained,
}

impl LineQueue {
    /// `n` bytes taken off the queue; wakes the session if that ends a
    /// backed-up state.
    fn taken(&self, n: usize) {
        let before = self
            .queued
            .fetch_sub(n, std::sync::atomic::Ordering::Relaxed);
        if before > HIGH_WATER && before - n <= HIGH_WATER {
            self.drained.notify_one();
        }
    }
}

/// A queue of lines for one writer, waking `drained` when it stops being
/// backed up.
pub fn line_queue(drained: Drained) -> (LineSender, LineQueue) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let queued = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    (
        LineSender {
            tx,
            queued: queued.clone(),
        },
        LineQueue {
            rx,
            queued,
            drained,
        },
    )
}

/// Lines at least this long are written by another thread when the writer
/// has a [`BigWriter`]: the loop's thread goes on reading and scanning while
/// the kernel copies them into the pipe.
const BIG_LINE: usize = 256 * 1024;

/// Small messages queued together are written with one system call up to
/// this size; larger ones are written straight from their own buffer.
const COALESCE: usize = 64 * 1024;

/// Write every message queued on `q` to `w`, each followed by a newline.
/// Messages already queued are written together; the stream is flushed
/// whenever the queue is empty. A big line goes through `big` (a second
/// handle on the same pipe as `w`, which must not buffer), written by
/// another thread (see [`BigWriter`]). Returns when the queue closes (or on
/// a write error, which is returned).
pub async fn write_all_lines<W: AsyncWrite + Unpin>(
    w: &mut W,
    q: &mut LineQueue,
    big: Option<&BigWriter>,
) -> std::io::Result<()> {
    let mut batch: Vec<u8> = Vec::with_capacity(COALESCE);
    while let Some(first) = q.rx.recv().await {
        let mut next = Some(first);
        while let Some(mut line) = next.take() {
            q.taken(line.len());
            if line.len() >= COALESCE {
                if !batch.is_empty() {
                    w.write_all(&batch).await?;
                    batch.clear();
                }
                line.push(b'\n');
                match big {
                    Some(b) if line.len() >= BIG_LINE => {
                        // What went through `w` is in the pipe already.
                        w.flush().await?;
                        // Freed or kept for the readers here, on the
                        // loop's thread.
                        recycle(b.write(line).await?);
                    }
                    _ => {
                        w.write_all(&line).await?;
                        recycle(line);
                    }
                }
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
    use crate::proxy::message::Ident;

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
            Frame::TooLong { len, ident } => {
                assert_eq!(*len, 1000);
                assert_eq!(*ident, Ident::default());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(f[2], Frame::Line(b"after".to_vec()));
    }

    /// Delivers its input in chunks of the given sizes (cycled).
    struct Chunked {
        data: Vec<u8>,
        at: usize,
        sizes: Vec<usize>,
        turn: usize,
    }

    impl AsyncRead for Chunked {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            let size = self.sizes[self.turn % self.sizes.len()].max(1);
            self.turn += 1;
            let n = size.min(buf.remaining()).min(self.data.len() - self.at);
            let at = self.at;
            buf.put_slice(&self.data[at..at + n]);
            self.at += n;
            std::task::Poll::Ready(Ok(()))
        }
    }

    /// What the reader must return for `input`, by a plain split.
    fn expected(input: &[u8], max: usize) -> Vec<Frame> {
        let mut parts: Vec<&[u8]> = input.split(|&c| c == b'\n').collect();
        if input.last() == Some(&b'\n') {
            parts.pop();
        }
        parts
            .into_iter()
            .filter_map(|p| {
                if p.len() > max {
                    return Some(Frame::TooLong {
                        len: p.len() as u64,
                        ident: crate::proxy::sniff::ident(p),
                    });
                }
                let p = p.strip_suffix(b"\r").unwrap_or(p);
                (!p.is_empty()).then(|| Frame::Line(p.to_vec()))
            })
            .collect()
    }

    proptest::proptest! {
        #[test]
        fn any_chunking_gives_the_plain_split(
            lines in proptest::collection::vec(
                (0usize..200_000, proptest::bool::ANY, 0u8..4), 0..12),
            max in 1usize..150_000,
            sizes in proptest::collection::vec(1usize..300_000, 1..6),
        ) {
            let mut input = Vec::new();
            for (i, (len, cr, kind)) in lines.iter().enumerate() {
                // Mostly short lines, some long ones, some empty.
                let len = match kind { 0 => len % 50, 1 => len % 2000, 2 => 0, _ => *len };
                input.extend((0..len).map(|j| b'a' + ((i + j) % 26) as u8));
                if *cr { input.push(b'\r'); }
                input.push(b'\n');
            }
            if lines.len() % 2 == 1 {
                input.extend(b"tail without newline");
            }
            let want = expected(&input, max);
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let got = rt.block_on(async {
                let src = Chunked { data: input, at: 0, sizes, turn: 0 };
                let mut r = LineReader::new(src, max);
                let mut out = Vec::new();
                while let Some(f) = r.next().await.unwrap() {
                    out.push(f);
                }
                out
            });
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[tokio::test]
    async fn an_oversized_lines_id_is_found_wherever_it_is() {
        let big = "x".repeat(300_000);
        let line = format!(r#"{{"jsonrpc":"2.0","result":{{"t":"{big}","id":7}},"id":"late"}}"#);
        let input = format!("{line}\n{{\"id\":1}}\n");
        let f = frames(input.as_bytes(), 1000).await;
        match &f[0] {
            Frame::TooLong { len, ident } => {
                assert_eq!(*len, line.len() as u64);
                assert_eq!(ident.id.as_deref(), Some("\"late\""));
                assert!(ident.answer);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(f[1], Frame::Line(b"{\"id\":1}".to_vec()));
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
