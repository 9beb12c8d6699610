//! HTTP/1.x heads as a forward proxy reads and writes them: the client's
//! request head (`CONNECT host:port` or an absolute-form request), the
//! head sent upstream, the upstream's response head, and rootfence's own
//! answers.
//!
//! Strict, because a head that two parsers read differently is a way
//! around a check: lines end with CRLF, header names are tokens, values
//! hold no control characters but tab, no line folding, no space before a
//! colon, one request line of three parts. Anything else is refused
//! (400), never guessed at. Pure: bytes in, values and bytes out.

use super::rule::{Target, TargetHost};

/// Most bytes of a head (request line and headers).
pub const MAX_HEAD: usize = 32 * 1024;

/// Most header lines in a head.
const MAX_HEADERS: usize = 128;

/// A request head that cannot be read, or that this proxy does not serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    /// Longer than [`MAX_HEAD`].
    #[error("the request head is longer than {MAX_HEAD} bytes")]
    TooLarge,
    /// Not well-formed.
    #[error("malformed request: {0}")]
    Malformed(&'static str),
    /// An origin-form request (`GET /path`): sent to the proxy as if it
    /// were the server.
    #[error(
        "this is rootfence's HTTP proxy: send absolute-form requests (GET http://host/path) or CONNECT host:port"
    )]
    OriginForm,
    /// A scheme the proxy does not speak in absolute form.
    #[error(
        "scheme {0:?} is not served in absolute form: https goes through CONNECT host:443, other schemes are not proxied"
    )]
    Scheme(String),
    /// Credentials in the URL.
    #[error("a user name or password in the URL is not forwarded; send credentials in a header")]
    Userinfo,
    /// Not a host name or address.
    #[error("{0:?} is not a host name or an IP address")]
    Host(String),
    /// A missing or bad port.
    #[error("{0:?} is not a TCP port (1-65535)")]
    Port(String),
    /// Not HTTP/1.0 or HTTP/1.1.
    #[error("only HTTP/1.0 and HTTP/1.1 are served")]
    Version,
}

impl From<super::body::Malformed> for HeadError {
    fn from(e: super::body::Malformed) -> HeadError {
        HeadError::Malformed(e.0)
    }
}

/// What a client asked the proxy for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `CONNECT host:port`: a tunnel.
    Connect {
        /// Where to.
        target: Target,
    },
    /// An absolute-form request for a plain `http` URL, to forward.
    Forward(Forward),
}

impl Request {
    /// The host and port asked for.
    pub fn target(&self) -> &Target {
        match self {
            Request::Connect { target } => target,
            Request::Forward(f) => &f.target,
        }
    }

    /// The method, for the audit log.
    pub fn method(&self) -> &str {
        match self {
            Request::Connect { .. } => "CONNECT",
            Request::Forward(f) => &f.method,
        }
    }
}

/// An absolute-form request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    /// The method.
    pub method: String,
    /// The host and port of the URL.
    pub target: Target,
    /// The path and query, as sent (`/` when the URL has none).
    pub path: String,
    /// `1` for HTTP/1.1, `0` for HTTP/1.0.
    pub minor: u8,
    /// The headers in order, names as sent.
    pub headers: Vec<(String, Vec<u8>)>,
    /// How its body is delimited.
    pub body: super::body::Framing,
}

/// The index just past the blank line ending the head at the start of
/// `buf`, if it is all there.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    memchr::memmem::find(buf, b"\r\n\r\n").map(|i| i + 4)
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The header lines of a head (after its first line), checked.
fn header_lines(lines: &[&[u8]]) -> Result<Vec<(String, Vec<u8>)>, HeadError> {
    if lines.len() > MAX_HEADERS {
        return Err(HeadError::Malformed("too many header lines"));
    }
    let mut out = Vec::with_capacity(lines.len());
    for line in lines {
        if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
            return Err(HeadError::Malformed("folded header line"));
        }
        let colon =
            memchr::memchr(b':', line).ok_or(HeadError::Malformed("header without a colon"))?;
        let name = &line[..colon];
        if name.is_empty() || !name.iter().all(|b| is_tchar(*b)) {
            return Err(HeadError::Malformed("bad header name"));
        }
        let value = trim_ows(&line[colon + 1..]);
        if value
            .iter()
            .any(|b| (*b < 0x20 && *b != b'\t') || *b == 0x7f)
        {
            return Err(HeadError::Malformed("control character in a header value"));
        }
        // Checked: only token bytes (ASCII).
        let name = String::from_utf8_lossy(name).into_owned();
        out.push((name, value.to_vec()));
    }
    Ok(out)
}

fn trim_ows(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| *b != b' ' && *b != b'\t')
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| *b != b' ' && *b != b'\t')
        .map_or(start, |e| e + 1);
    &v[start..end.max(start)]
}

/// Split a head (ending with the blank line) into its lines.
fn lines(head: &[u8]) -> Result<Vec<&[u8]>, HeadError> {
    let body = head.strip_suffix(b"\r\n\r\n").ok_or(HeadError::Malformed(
        "the head does not end with a blank line",
    ))?;
    let mut out = Vec::new();
    let mut rest = body;
    loop {
        match memchr::memmem::find(rest, b"\r\n") {
            Some(i) => {
                out.push(&rest[..i]);
                rest = &rest[i + 2..];
            }
            None => {
                out.push(rest);
                break;
            }
        }
    }
    if out
        .iter()
        .any(|l| memchr::memchr2(b'\r', b'\n', l).is_some())
    {
        return Err(HeadError::Malformed("a bare CR or LF"));
    }
    Ok(out)
}

fn port(p: &str) -> Result<u16, HeadError> {
    match p.parse::<u16>() {
        Ok(n) if n != 0 && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => Err(HeadError::Port(p.to_string())),
    }
}

/// Read `host[:port]` (`[v6]:port`), with `default` when there is no port
/// (`None`: a port is required).
fn authority(a: &str, default: Option<u16>) -> Result<Target, HeadError> {
    if a.contains('@') {
        return Err(HeadError::Userinfo);
    }
    let (host, p) = if a.starts_with('[') {
        match a.find(']') {
            Some(end) => match &a[end + 1..] {
                "" => (&a[..=end], None),
                tail => (
                    &a[..=end],
                    Some(
                        tail.strip_prefix(':')
                            .ok_or_else(|| HeadError::Host(a.to_string()))?,
                    ),
                ),
            },
            None => return Err(HeadError::Host(a.to_string())),
        }
    } else {
        match a.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (a, None),
        }
    };
    let port = match (p, default) {
        (Some(p), _) => port(p)?,
        (None, Some(d)) => d,
        (None, None) => return Err(HeadError::Port(String::new())),
    };
    let host = TargetHost::parse(host).ok_or_else(|| HeadError::Host(host.to_string()))?;
    Ok(Target { host, port })
}

/// Read a complete request head (as delimited by [`head_end`]).
pub fn parse_request(head: &[u8]) -> Result<Request, HeadError> {
    if head.len() > MAX_HEAD {
        return Err(HeadError::TooLarge);
    }
    let lines = lines(head)?;
    let first = std::str::from_utf8(lines[0])
        .map_err(|_| HeadError::Malformed("request line is not text"))?;
    let mut parts = first.split(' ');
    let (Some(method), Some(uri), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::Malformed(
            "the request line is not METHOD TARGET VERSION",
        ));
    };
    if method.is_empty() || !method.bytes().all(is_tchar) {
        return Err(HeadError::Malformed("bad method"));
    }
    let minor = match version {
        "HTTP/1.1" => 1,
        "HTTP/1.0" => 0,
        _ => return Err(HeadError::Version),
    };
    if uri.is_empty() || !uri.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(HeadError::Malformed("bad request target"));
    }
    let headers = header_lines(&lines[1..])?;
    if method == "CONNECT" {
        return Ok(Request::Connect {
            target: authority(uri, None)?,
        });
    }
    if uri.starts_with('/') || uri == "*" {
        return Err(HeadError::OriginForm);
    }
    let Some((scheme, rest)) = uri.split_once("://") else {
        return Err(HeadError::Malformed("bad request target"));
    };
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(HeadError::Scheme(scheme.to_ascii_lowercase()));
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let target = authority(&rest[..end], Some(80))?;
    let mut path = rest[end..].split('#').next().unwrap_or("").to_string();
    if path.is_empty() {
        path.push('/');
    } else if path.starts_with('?') {
        path.insert(0, '/');
    }
    let body = super::body::framing(&headers, minor)?;
    Ok(Request::Forward(Forward {
        method: method.to_string(),
        target,
        path,
        minor,
        headers,
        body,
    }))
}

/// What a head that cannot be served names, as far as it can be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partial {
    /// Its method (`?` when none), printable ASCII, at most 32 bytes.
    pub method: String,
    /// Its request target, or for an origin-form request its `Host`,
    /// printable ASCII (other bytes as `\xNN`), at most 256 bytes.
    pub asked: String,
    /// The host and port it names, when they read as one.
    pub target: Option<Target>,
}

/// Printable ASCII of `b`, other bytes as `\xNN`, at most `max` bytes.
fn printable(b: &[u8], max: usize) -> String {
    let mut out = String::new();
    for c in b {
        if out.len() >= max {
            break;
        }
        if c.is_ascii_graphic() || *c == b' ' {
            out.push(char::from(*c));
        } else {
            out.push_str(&format!("\\x{c:02x}"));
        }
    }
    out
}

/// Read what a head names, leniently, for the audit of its refusal: the
/// first line's method and target (an absolute URL of any scheme, an
/// authority, or a path with the `Host` header's value).
pub fn partial(head: &[u8]) -> Partial {
    let first_end = memchr::memchr(b'\n', head).unwrap_or(head.len());
    let first = head[..first_end]
        .strip_suffix(b"\r")
        .unwrap_or(&head[..first_end]);
    let mut parts = first.split(|b| *b == b' ').filter(|p| !p.is_empty());
    let method = parts
        .next()
        .map_or_else(|| "?".to_string(), |m| printable(m, 32));
    let uri = parts.next().unwrap_or_default();
    let text = std::str::from_utf8(uri).unwrap_or_default();
    let host_header = || {
        head.split(|b| *b == b'\n').skip(1).find_map(|l| {
            let l = l.strip_suffix(b"\r").unwrap_or(l);
            let colon = memchr::memchr(b':', l)?;
            l[..colon]
                .eq_ignore_ascii_case(b"host")
                .then(|| trim_ows(&l[colon + 1..]).to_vec())
        })
    };
    let (asked, authority_text, default) = if let Some((scheme, rest)) = text.split_once("://") {
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let d = match scheme.to_ascii_lowercase().as_str() {
            "https" => Some(443),
            _ => Some(80),
        };
        (printable(uri, 256), rest[..end].to_string(), d)
    } else if text.starts_with('/') || text.is_empty() {
        match host_header() {
            Some(h) => {
                let s = String::from_utf8_lossy(&h).into_owned();
                (printable(&h, 256), s, Some(80))
            }
            None => (printable(uri, 256), String::new(), None),
        }
    } else {
        (printable(uri, 256), text.to_string(), Some(443))
    };
    // Userinfo is left out of the target (never of what was asked).
    let authority_text = authority_text
        .rsplit_once('@')
        .map_or(authority_text.as_str(), |(_, h)| h)
        .to_string();
    let target = (!authority_text.is_empty())
        .then(|| authority(&authority_text, default).ok())
        .flatten();
    Partial {
        method,
        asked,
        target,
    }
}

/// Headers that belong to one connection (RFC 9110 §7.6.1), never
/// forwarded.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
];

/// The header names a `Connection` header lists (also hop-by-hop).
fn connection_listed(headers: &[(String, Vec<u8>)]) -> Vec<String> {
    headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, v)| {
            String::from_utf8_lossy(v)
                .split(',')
                .map(|t| t.trim().to_ascii_lowercase())
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn kept(headers: &[(String, Vec<u8>)]) -> impl Iterator<Item = &(String, Vec<u8>)> {
    let listed = connection_listed(headers);
    headers.iter().filter(move |(n, _)| {
        let l = n.to_ascii_lowercase();
        !HOP_BY_HOP.contains(&l.as_str()) && !listed.contains(&l)
    })
}

/// The `Host` header value for a target (the port left out when it is
/// `http`'s).
pub fn host_header(t: &Target) -> String {
    if t.port == 80 {
        t.host.to_string()
    } else {
        t.to_string()
    }
}

/// The head to send upstream for `f`: origin-form, `Host` set from the
/// URL (a different `Host` header would let one name be checked and
/// another served by a shared front end), the connection's own headers
/// dropped, and `Connection: close` (one request per connection, so that
/// every request on it was checked).
pub fn forward_head(f: &Forward) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(f.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(f.path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(host_header(&f.target).as_bytes());
    out.extend_from_slice(b"\r\n");
    for (n, v) in kept(&f.headers).filter(|(n, _)| !n.eq_ignore_ascii_case("host")) {
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out
}

/// An upstream response head, rewritten for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// The status code.
    pub status: u16,
    /// The head to send the client: the connection's own headers dropped
    /// and `Connection: close` added (an informational `1xx` head is
    /// passed as it came).
    pub bytes: Vec<u8>,
}

/// Read and rewrite a complete response head.
pub fn rewrite_response(head: &[u8]) -> Result<ResponseHead, HeadError> {
    if head.len() > MAX_HEAD {
        return Err(HeadError::TooLarge);
    }
    let lines = lines(head)?;
    let first = lines[0];
    let bad = HeadError::Malformed("bad status line");
    if first.len() < 12 || !(first.starts_with(b"HTTP/1.1 ") || first.starts_with(b"HTTP/1.0 ")) {
        return Err(bad);
    }
    let code = &first[9..12];
    if !code.iter().all(u8::is_ascii_digit) || first.get(12).is_some_and(|b| *b != b' ') {
        return Err(bad);
    }
    let status = u16::from(code[0] - b'0') * 100
        + u16::from(code[1] - b'0') * 10
        + u16::from(code[2] - b'0');
    let headers = header_lines(&lines[1..])?;
    if (100..200).contains(&status) {
        return Ok(ResponseHead {
            status,
            bytes: head.to_vec(),
        });
    }
    let mut out = Vec::with_capacity(head.len() + 24);
    out.extend_from_slice(first);
    out.extend_from_slice(b"\r\n");
    for (n, v) in kept(&headers) {
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(ResponseHead { status, bytes: out })
}

/// rootfence's own answer: `status` with a plain-text `body`, closing.
pub fn answer(status: u16, reason: &str, body: &str) -> Vec<u8> {
    let body = format!("{body}\n");
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nX-Rootfence: {status}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The answer to an accepted `CONNECT`.
pub const TUNNEL_OPEN: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn req(s: &str) -> Result<Request, HeadError> {
        let b = s.as_bytes();
        assert_eq!(head_end(b), Some(b.len()), "{s:?}");
        parse_request(b)
    }

    fn name(n: &str, port: u16) -> Target {
        Target {
            host: TargetHost::Name(n.into()),
            port,
        }
    }

    #[test]
    fn connect_and_absolute_form() {
        assert_eq!(
            req("CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n"),
            Ok(Request::Connect {
                target: name("api.github.com", 443)
            })
        );
        assert_eq!(
            req("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n")
                .unwrap()
                .target()
                .host,
            TargetHost::Ip("::1".parse().unwrap())
        );
        let Ok(Request::Forward(f)) = req(
            "GET http://Site.Test:8080/a/b?c=d#frag HTTP/1.1\r\nHost: other\r\nAccept: */*\r\n\r\n",
        ) else {
            panic!()
        };
        assert_eq!(f.target, name("site.test", 8080));
        assert_eq!(f.path, "/a/b?c=d");
        assert_eq!(f.method, "GET");
        let Ok(Request::Forward(f)) = req("HEAD http://site.test HTTP/1.0\r\n\r\n") else {
            panic!()
        };
        assert_eq!((f.target.port, f.path.as_str(), f.minor), (80, "/", 0));
        let Ok(Request::Forward(f)) = req("GET http://site.test?q HTTP/1.1\r\n\r\n") else {
            panic!()
        };
        assert_eq!(f.path, "/?q");
        // Numeric hosts are addresses however written.
        assert_eq!(
            req("GET http://2130706433:9/ HTTP/1.1\r\n\r\n")
                .unwrap()
                .target()
                .host,
            TargetHost::Ip("127.0.0.1".parse().unwrap())
        );
    }

    #[test]
    fn what_is_refused() {
        for (s, e) in [
            ("GET / HTTP/1.1\r\nHost: x\r\n\r\n", HeadError::OriginForm),
            (
                "GET https://x/ HTTP/1.1\r\n\r\n",
                HeadError::Scheme("https".into()),
            ),
            (
                "GET ftp://x/ HTTP/1.1\r\n\r\n",
                HeadError::Scheme("ftp".into()),
            ),
            ("GET http://u:p@x/ HTTP/1.1\r\n\r\n", HeadError::Userinfo),
            ("CONNECT x HTTP/1.1\r\n\r\n", HeadError::Port(String::new())),
            ("CONNECT x:0 HTTP/1.1\r\n\r\n", HeadError::Port("0".into())),
            (
                "CONNECT x:99999 HTTP/1.1\r\n\r\n",
                HeadError::Port("99999".into()),
            ),
            (
                "GET http://a b/ HTTP/1.1\r\n\r\n",
                HeadError::Malformed("the request line is not METHOD TARGET VERSION"),
            ),
            ("GET http://x/ HTTP/2\r\n\r\n", HeadError::Version),
            (
                "GET http://x/ HTTP/1.1\r\n bad: fold\r\n\r\n",
                HeadError::Malformed("folded header line"),
            ),
            (
                "GET http://x/ HTTP/1.1\r\nBad : x\r\n\r\n",
                HeadError::Malformed("bad header name"),
            ),
            (
                "GET http://x/ HTTP/1.1\r\nA: b\nC: d\r\n\r\n",
                HeadError::Malformed("a bare CR or LF"),
            ),
            (
                "GET http://x/ HTTP/1.1\r\nA: b\x01\r\n\r\n",
                HeadError::Malformed("control character in a header value"),
            ),
            (
                "GET http://%zz/ HTTP/1.1\r\n\r\n",
                HeadError::Host("%zz".into()),
            ),
            (
                "CONNECT [::1:443 HTTP/1.1\r\n\r\n",
                HeadError::Host("[::1:443".into()),
            ),
        ] {
            assert_eq!(req(s), Err(e), "{s:?}");
        }
        let big = format!(
            "GET http://x/ HTTP/1.1\r\nA: {}\r\n\r\n",
            "a".repeat(MAX_HEAD)
        );
        assert_eq!(parse_request(big.as_bytes()), Err(HeadError::TooLarge));
    }

    #[test]
    fn forwarded_heads_name_the_checked_host_and_close() {
        let Ok(Request::Forward(f)) = req(
            "POST http://site.test:8080/p HTTP/1.1\r\nHost: evil.example\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\nProxy-Authorization: basic x\r\nContent-Length: 3\r\n\r\n",
        ) else {
            panic!()
        };
        let out = String::from_utf8(forward_head(&f)).unwrap();
        assert_eq!(
            out,
            "POST /p HTTP/1.1\r\nHost: site.test:8080\r\nContent-Length: 3\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn responses_close_informational_pass() {
        let r = rewrite_response(b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\n").unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(
            String::from_utf8(r.bytes).unwrap(),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
        );
        let c = rewrite_response(b"HTTP/1.1 100 Continue\r\n\r\n").unwrap();
        assert_eq!(
            (c.status, c.bytes.as_slice()),
            (100, &b"HTTP/1.1 100 Continue\r\n\r\n"[..])
        );
        assert!(rewrite_response(b"HTTP/1.1 2x0 OK\r\n\r\n").is_err());
        assert!(rewrite_response(b"SSH-2.0-x\r\n\r\n").is_err());
    }

    proptest::proptest! {
        /// Whatever the bytes, the parser answers (never panics), and what
        /// it accepts it accepts for a host it can name.
        #[test]
        fn any_bytes_are_answered(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let mut head = bytes.clone();
            head.extend_from_slice(b"\r\n\r\n");
            if let Ok(r) = parse_request(&head) {
                proptest::prop_assert!(r.target().port != 0);
            }
            let _ = rewrite_response(&head);
        }

        /// A request line built from a host and port reads back as them.
        /// (No label begins with `x`: an `xn--` label must be valid
        /// punycode, which a random one is not.)
        #[test]
        fn connect_targets_round_trip(host in "[a-wyz][a-z0-9-]{0,10}(\\.[a-wyz][a-z0-9-]{0,10}){0,3}", port in 1u16..) {
            let s = format!("CONNECT {host}:{port} HTTP/1.1\r\n\r\n");
            let r = parse_request(s.as_bytes()).unwrap();
            proptest::prop_assert_eq!(r.target(), &name(&host, port));
        }
    }
}
