//! A forwarded request's body: how its head says it is delimited, and
//! where it ends in the bytes that follow the head. Exactly one request
//! is served per connection: what comes after the head and its declared
//! body (a pipelined second request, a smuggled one) is never forwarded.
//!
//! Strict, because a body that two parsers delimit differently is a way
//! to hide a request from the check: both `Content-Length` and
//! `Transfer-Encoding`, two `Content-Length`s, a length that is not plain
//! digits, a transfer coding other than `chunked`, chunked in HTTP/1.0,
//! or a `Connection` header naming a framing header are refused (400).
//! Pure: bytes in, counts out.

/// Why a body's framing or its chunks cannot be read (a 400).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed request: {0}")]
pub struct Malformed(pub &'static str);

/// Longest chunk-size or trailer line.
const MAX_LINE: usize = 4096;

/// How a request head delimits its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    None,
    /// `Content-Length`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// The framing `headers` (names as sent) declare for a request of HTTP/1.`minor`,
/// or why it is ambiguous.
pub fn framing(headers: &[(String, Vec<u8>)], minor: u8) -> Result<Framing, Malformed> {
    fn named<'h>(
        headers: &'h [(String, Vec<u8>)],
        n: &'static str,
    ) -> impl Iterator<Item = &'h [u8]> {
        headers
            .iter()
            .filter(move |(h, _)| h.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.as_slice())
    }
    for v in named(headers, "connection") {
        let listed = String::from_utf8_lossy(v).to_ascii_lowercase();
        if listed
            .split(',')
            .map(str::trim)
            .any(|t| matches!(t, "content-length" | "transfer-encoding" | "host"))
        {
            return Err(Malformed(
                "Connection names a header that frames or routes the request",
            ));
        }
    }
    let lengths: Vec<&[u8]> = named(headers, "content-length").collect();
    let codings: Vec<&[u8]> = named(headers, "transfer-encoding").collect();
    match (lengths.as_slice(), codings.as_slice()) {
        ([], []) => Ok(Framing::None),
        ([_, _, ..], _) => Err(Malformed("more than one Content-Length")),
        ([_], [_, ..]) => Err(Malformed("both Content-Length and Transfer-Encoding")),
        ([l], []) => {
            if l.is_empty() || l.len() > 18 || !l.iter().all(u8::is_ascii_digit) {
                return Err(Malformed("Content-Length is not a number"));
            }
            // Checked: at most 18 ASCII digits.
            let n = l.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
            Ok(Framing::Length(n))
        }
        ([], [t]) if minor == 1 && t.eq_ignore_ascii_case(b"chunked") => Ok(Framing::Chunked),
        ([], [_]) if minor == 0 => Err(Malformed("Transfer-Encoding in an HTTP/1.0 request")),
        ([], _) => Err(Malformed("a Transfer-Encoding other than one \"chunked\"")),
    }
}

/// Where a body ends, fed the bytes after the head as they come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body {
    state: State,
    /// The chunk-size or trailer line read so far.
    line: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// This many bytes of data left (a length, or a chunk's data).
    Data { left: u64, chunked: bool },
    /// The CRLF after a chunk's data (how many of its bytes were seen).
    DataEnd(u8),
    /// A chunk-size line.
    Size,
    /// Trailer lines, up to the empty one.
    Trailer,
    /// The body is over.
    Done,
}

impl Body {
    /// A body delimited by `f`.
    pub fn new(f: Framing) -> Body {
        let state = match f {
            Framing::None | Framing::Length(0) => State::Done,
            Framing::Length(n) => State::Data {
                left: n,
                chunked: false,
            },
            Framing::Chunked => State::Size,
        };
        Body {
            state,
            line: Vec::new(),
        }
    }

    /// Whether the body is over: nothing more is forwarded.
    pub fn done(&self) -> bool {
        self.state == State::Done
    }

    /// How many of `input`'s first bytes belong to the body (the rest is
    /// dropped); an error when the chunked framing is broken.
    pub fn take(&mut self, input: &[u8]) -> Result<usize, Malformed> {
        let mut i = 0;
        while i < input.len() {
            match self.state {
                State::Done => break,
                State::Data { left, chunked } => {
                    let n = usize::try_from(left)
                        .unwrap_or(usize::MAX)
                        .min(input.len() - i);
                    i += n;
                    // `n` is at most `left`.
                    let left = left - n as u64;
                    self.state = match (left, chunked) {
                        (0, false) => State::Done,
                        (0, true) => State::DataEnd(0),
                        (left, chunked) => State::Data { left, chunked },
                    };
                }
                State::DataEnd(seen) => {
                    let want = if seen == 0 { b'\r' } else { b'\n' };
                    if input[i] != want {
                        return Err(Malformed("a chunk does not end with CRLF"));
                    }
                    i += 1;
                    self.state = if seen == 0 {
                        State::DataEnd(1)
                    } else {
                        State::Size
                    };
                }
                State::Size | State::Trailer => {
                    let b = input[i];
                    i += 1;
                    self.line.push(b);
                    if self.line.len() > MAX_LINE {
                        return Err(Malformed("a chunk line is too long"));
                    }
                    if b != b'\n' {
                        continue;
                    }
                    let line = std::mem::take(&mut self.line);
                    let Some(text) = line.strip_suffix(b"\r\n") else {
                        return Err(Malformed("a bare LF in the chunked body"));
                    };
                    if text.contains(&b'\r') {
                        return Err(Malformed("a bare CR in the chunked body"));
                    }
                    self.state = if self.state == State::Trailer {
                        if text.is_empty() {
                            State::Done
                        } else {
                            State::Trailer
                        }
                    } else {
                        match chunk_size(text)? {
                            0 => State::Trailer,
                            left => State::Data {
                                left,
                                chunked: true,
                            },
                        }
                    };
                }
            }
        }
        Ok(i)
    }
}

/// A chunk-size line's size (hex digits, an optional `;extension`).
fn chunk_size(line: &[u8]) -> Result<u64, Malformed> {
    let end = line.iter().position(|b| *b == b';').unwrap_or(line.len());
    let hex = &line[..end];
    if hex.is_empty() || hex.len() > 15 || !hex.iter().all(u8::is_ascii_hexdigit) {
        return Err(Malformed("a chunk size is not hexadecimal"));
    }
    // Checked: at most 15 hex digits.
    Ok(hex.iter().fold(0u64, |n, d| {
        n * 16 + u64::from((*d as char).to_digit(16).unwrap_or(0))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn ambiguous_framing_is_refused() {
        for hs in [
            vec![("Content-Length", "5"), ("Transfer-Encoding", "chunked")],
            vec![("Content-Length", "5"), ("Content-Length", "5")],
            vec![("Content-Length", "5"), ("content-length", "6")],
            vec![("Content-Length", "+5")],
            vec![("Content-Length", "5, 5")],
            vec![("Content-Length", "0x5")],
            vec![("Content-Length", "")],
            vec![("Transfer-Encoding", "gzip, chunked")],
            vec![
                ("Transfer-Encoding", "chunked"),
                ("Transfer-Encoding", "chunked"),
            ],
            vec![("Transfer-Encoding", "xchunked")],
            vec![("Connection", "Content-Length")],
            vec![("Connection", "close, transfer-encoding")],
            vec![("Connection", "Host")],
        ] {
            assert!(framing(&h(&hs), 1).is_err(), "{hs:?}");
        }
        assert!(framing(&h(&[("Transfer-Encoding", "chunked")]), 0).is_err());
        // The allowed twins.
        assert_eq!(framing(&h(&[]), 1), Ok(Framing::None));
        assert_eq!(
            framing(&h(&[("Content-Length", "12")]), 0),
            Ok(Framing::Length(12))
        );
        assert_eq!(
            framing(&h(&[("Transfer-Encoding", "Chunked")]), 1),
            Ok(Framing::Chunked)
        );
        assert_eq!(
            framing(&h(&[("Connection", "close, keep-alive")]), 1),
            Ok(Framing::None)
        );
    }

    #[test]
    fn a_body_ends_where_its_head_says() {
        let mut b = Body::new(Framing::Length(5));
        assert_eq!(b.take(b"hel"), Ok(3));
        assert_eq!(b.take(b"loGET / HTTP/1.1\r\n"), Ok(2));
        assert!(b.done());
        assert_eq!(b.take(b"more"), Ok(0));
        let mut b = Body::new(Framing::None);
        assert!(b.done());
        assert_eq!(b.take(b"GET http://evil/ HTTP/1.1\r\n\r\n"), Ok(0));
        let chunked = b"5;x=1\r\nhello\r\n0\r\nTrailer: t\r\n\r\n";
        let mut b = Body::new(Framing::Chunked);
        let mut all = chunked.to_vec();
        all.extend_from_slice(b"GET /smuggled HTTP/1.1\r\n\r\n");
        // Fed one byte at a time, it ends at the same place.
        let mut n = 0;
        for byte in &all {
            n += b.take(std::slice::from_ref(byte)).unwrap();
        }
        assert_eq!(n, chunked.len());
        assert!(b.done());
        let mut b = Body::new(Framing::Chunked);
        assert_eq!(b.take(&all), Ok(chunked.len()));
        for broken in [
            &b"5\nhello\r\n0\r\n\r\n"[..],
            b"5\r\nhelloX\r\n",
            b"g\r\n",
            b"\r\n",
            b"5\r\nhello\r\n0\r\n\n",
        ] {
            assert!(
                Body::new(Framing::Chunked).take(broken).is_err(),
                "{broken:?}"
            );
        }
    }
}
