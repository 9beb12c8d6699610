//! `file://` URI parsing and printing for roots.
//!
//! The parser is deliberately strict and entirely pure: it never touches the
//! filesystem. It turns a root URI into the absolute byte path it names, or a
//! [`UriError`] that says exactly which rule refused it. The printer turns a
//! canonical path back into the one URI form rootfence emits.
//!
//! # Rules
//!
//! - the scheme must be `file` (ASCII case-insensitive);
//! - the authority, when present, must be empty or `localhost`; a userinfo
//!   part or a port is refused, as is any other host;
//! - no query (`?`) and no fragment (`#`);
//! - the path must be absolute (`file:/x`, `file:///x` and
//!   `file://localhost/x` are accepted; `file:x` is refused);
//! - percent-decoding happens exactly once: `%252e` decodes to the three
//!   literal bytes `%2e`, never to `.`;
//! - after decoding, a segment may not contain `/` (from `%2F`) or NUL
//!   (`%00`), and may not be `.` or `..` (raw or encoded): such segments are
//!   refused, never normalized away;
//! - empty segments (`//`) are refused, except that one trailing slash is
//!   ignored;
//! - raw control characters and raw backslashes are refused (the latter
//!   because other parsers treat `\` as a separator);
//! - the decoded path must be shorter than the Linux `PATH_MAX` (4096
//!   bytes): no longer path can be opened, and every accepted path then
//!   prints to a URI the parser accepts again.
//!
//! Non-UTF-8 bytes are allowed in percent-encoded form and survive the round
//! trip: [`path_to_uri`] re-encodes them.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Longest root URI accepted, in bytes (the Linux `PATH_MAX` plus room for
/// the scheme and percent-encoding of every byte).
pub const MAX_URI_LEN: usize = 3 * PATH_MAX + 32;

/// The Linux `PATH_MAX`, terminating NUL included: a decoded path has at
/// most `PATH_MAX - 1` bytes.
const PATH_MAX: usize = 4096;

/// Why a root URI was refused by the parser.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UriError {
    /// The input is empty.
    #[error("empty URI")]
    Empty,
    /// The input is longer than [`MAX_URI_LEN`].
    #[error("URI is {0} bytes long, more than the {MAX_URI_LEN} allowed")]
    TooLong(usize),
    /// The scheme is missing or not `file`.
    #[error("scheme {0:?} is not allowed: only file:// URIs name roots")]
    Scheme(String),
    /// The input has no scheme at all.
    #[error("not a URI: no scheme (expected file:///absolute/path)")]
    NoScheme,
    /// The authority names a host other than `localhost`.
    #[error("host {0:?} is not allowed: a root must be on this machine (use file:///path)")]
    ForeignHost(String),
    /// The authority carries a userinfo part.
    #[error("userinfo in the authority is not allowed")]
    UserInfo,
    /// The authority carries a port.
    #[error("a port in the authority is not allowed")]
    Port,
    /// A `?query` is present.
    #[error("a query (?...) is not allowed in a root URI")]
    Query,
    /// A `#fragment` is present.
    #[error("a fragment (#...) is not allowed in a root URI")]
    Fragment,
    /// The path is not absolute (`file:x`).
    #[error("the path is not absolute (expected file:///absolute/path)")]
    Relative,
    /// A `%` is not followed by two hex digits.
    #[error("malformed percent-encoding at byte {0}")]
    BadPercent(usize),
    /// A segment decodes to something containing `/`.
    #[error("segment {0} contains an encoded '/' (%2F)")]
    EncodedSlash(usize),
    /// A segment decodes to something containing NUL.
    #[error("segment {0} contains a NUL byte (%00)")]
    Nul(usize),
    /// A segment is `.` or `..`, raw or encoded.
    #[error("segment {index} is {segment:?}: dot segments are refused, not normalized")]
    DotSegment {
        /// 1-based segment index.
        index: usize,
        /// The decoded segment (`.` or `..`).
        segment: String,
    },
    /// Two consecutive slashes.
    #[error("segment {0} is empty (consecutive slashes)")]
    EmptySegment(usize),
    /// A raw character that may not appear in a root URI.
    #[error("raw character {0:?} is not allowed (percent-encode it)")]
    BadChar(char),
    /// The decoded path is too long to open.
    #[error("the path is {0} bytes long once decoded, more than the {max} allowed", max = PATH_MAX - 1)]
    PathTooLong(usize),
}

/// Parse a `file://` root URI into the absolute path it names.
///
/// The result is an absolute path with no `.`, `..` or empty segments and no
/// trailing slash (except for `/` itself). It is not canonical yet: symlinks
/// are resolved by `roots::resolve`.
///
/// # Security
///
/// Decodes percent-escapes exactly once and refuses every input whose
/// meaning could differ between parsers (see the module docs). The returned
/// path can be handed to `open(2)` without further sanitizing.
pub fn parse_file_uri(input: &str) -> Result<PathBuf, UriError> {
    if input.is_empty() {
        return Err(UriError::Empty);
    }
    if input.len() > MAX_URI_LEN {
        return Err(UriError::TooLong(input.len()));
    }
    for c in input.chars() {
        if c.is_control() || c == '\\' {
            return Err(UriError::BadChar(c));
        }
    }
    let Some(colon) = input.find(':') else {
        return Err(UriError::NoScheme);
    };
    let scheme = &input[..colon];
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return Err(UriError::NoScheme);
    }
    if !scheme.eq_ignore_ascii_case("file") {
        return Err(UriError::Scheme(scheme.to_string()));
    }
    let rest = &input[colon + 1..];
    // Fragment first: everything after '#' is fragment, even a '?'.
    if rest.contains('#') {
        return Err(UriError::Fragment);
    }
    if rest.contains('?') {
        return Err(UriError::Query);
    }
    let path = if let Some(after) = rest.strip_prefix("//") {
        let end = after.find('/').unwrap_or(after.len());
        check_authority(&after[..end])?;
        &after[end..]
    } else {
        rest
    };
    if !path.starts_with('/') {
        return Err(UriError::Relative);
    }
    decode_path(path)
}

fn check_authority(auth: &str) -> Result<(), UriError> {
    if auth.contains('@') {
        return Err(UriError::UserInfo);
    }
    // A port is a ':' after the host; inside an IPv6 literal ("[::1]") the
    // colons belong to the address, which is a foreign host in any case.
    let host_end = if auth.starts_with('[') {
        auth.find(']').map_or(auth.len(), |i| i + 1)
    } else {
        0
    };
    if auth[host_end..].contains(':') {
        return Err(UriError::Port);
    }
    if auth.is_empty() || auth.eq_ignore_ascii_case("localhost") {
        return Ok(());
    }
    Err(UriError::ForeignHost(auth.to_string()))
}

/// Decode an absolute URI path (starting with `/`) into a path.
fn decode_path(path: &str) -> Result<PathBuf, UriError> {
    let body = &path[1..];
    // "/" alone is the root. Check before dropping a trailing slash, so that
    // "//" is an empty segment, not the root with a trailing slash.
    if body.is_empty() {
        return Ok(PathBuf::from("/"));
    }
    // One trailing slash does not matter.
    let body = body.strip_suffix('/').unwrap_or(body);
    let mut out: Vec<u8> = Vec::with_capacity(path.len());
    let mut offset = 1;
    for (i, seg) in body.split('/').enumerate() {
        let index = i + 1;
        if seg.is_empty() {
            return Err(UriError::EmptySegment(index));
        }
        let decoded = percent_decode(seg, offset)?;
        offset += seg.len() + 1;
        if decoded.contains(&b'/') {
            return Err(UriError::EncodedSlash(index));
        }
        if decoded.contains(&0) {
            return Err(UriError::Nul(index));
        }
        if decoded == b"." || decoded == b".." {
            return Err(UriError::DotSegment {
                index,
                segment: String::from_utf8_lossy(&decoded).into_owned(),
            });
        }
        out.push(b'/');
        out.extend_from_slice(&decoded);
    }
    if out.len() >= PATH_MAX {
        return Err(UriError::PathTooLong(out.len()));
    }
    Ok(PathBuf::from(OsString::from_vec(out)))
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decode `%XX` escapes exactly once. `offset` is the byte position of
/// `seg` in the URI path, for error messages.
fn percent_decode(seg: &str, offset: usize) -> Result<Vec<u8>, UriError> {
    let bytes = seg.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hi = bytes.get(i + 1).copied().and_then(hex);
            let lo = bytes.get(i + 2).copied().and_then(hex);
            match (hi, lo) {
                (Some(h), Some(l)) => out.push(h << 4 | l),
                _ => return Err(UriError::BadPercent(offset + i)),
            }
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// Bytes kept literally in a path segment of an emitted URI: RFC 3986
/// unreserved characters plus the sub-delimiters and `:`/`@` that `pchar`
/// allows. Everything else, including `%`, non-ASCII and non-UTF-8 bytes, is
/// percent-encoded with upper-case hex.
fn keep(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'@'
        )
}

/// Print an absolute path as the canonical `file:///` URI rootfence emits.
///
/// `parse_file_uri(&path_to_uri(p)) == p` for every absolute path `p`
/// without dot or empty segments and shorter than `PATH_MAX` (so for every
/// path the parser returns); non-UTF-8 bytes are percent-encoded.
pub fn path_to_uri(path: &Path) -> String {
    let bytes = path.as_os_str().as_bytes();
    let mut out = String::with_capacity(8 + bytes.len());
    out.push_str("file://");
    if bytes.is_empty() {
        out.push('/');
        return out;
    }
    for &b in bytes {
        if b == b'/' || keep(b) {
            out.push(b as char);
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.push('%');
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 15) as usize] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_forms() {
        assert_eq!(
            parse_file_uri("file:///a/b").unwrap(),
            PathBuf::from("/a/b")
        );
        assert_eq!(parse_file_uri("file:/a/b").unwrap(), PathBuf::from("/a/b"));
        assert_eq!(
            parse_file_uri("FILE://LocalHost/a/b/").unwrap(),
            PathBuf::from("/a/b")
        );
        assert_eq!(parse_file_uri("file:///").unwrap(), PathBuf::from("/"));
        assert_eq!(parse_file_uri("file:/").unwrap(), PathBuf::from("/"));
        assert_eq!(parse_file_uri("file:////"), Err(UriError::EmptySegment(1)));
        assert_eq!(parse_file_uri("file://///"), Err(UriError::EmptySegment(1)));
        assert_eq!(
            parse_file_uri("file://localhost//"),
            Err(UriError::EmptySegment(1))
        );
        assert_eq!(parse_file_uri("file:a"), Err(UriError::Relative));
        assert_eq!(parse_file_uri("file://h:1/a"), Err(UriError::Port));
        assert_eq!(parse_file_uri("file://:1/a"), Err(UriError::Port));
        assert_eq!(parse_file_uri("file://u@/a"), Err(UriError::UserInfo));
    }

    #[test]
    fn decoding_happens_once() {
        assert_eq!(
            parse_file_uri("file:///a/%252e%252e").unwrap(),
            PathBuf::from("/a/%2e%2e")
        );
        assert!(matches!(
            parse_file_uri("file:///a/%2e%2E/b"),
            Err(UriError::DotSegment { index: 2, .. })
        ));
    }

    #[test]
    fn decoded_path_length_is_bounded() {
        // Raw multi-byte characters decode to more bytes than a short URI
        // suggests; printing them takes three bytes per byte.
        let seg = "é".repeat(100);
        let long = format!("file:///{}", vec![seg.as_str(); 21].join("/"));
        assert!(long.len() < MAX_URI_LEN);
        assert_eq!(parse_file_uri(&long), Err(UriError::PathTooLong(21 * 201)));
        let max = format!("file:///{}", "a".repeat(PATH_MAX - 2));
        let path = parse_file_uri(&max).unwrap();
        let printed = path_to_uri(&path);
        assert!(printed.len() <= MAX_URI_LEN);
        assert_eq!(parse_file_uri(&printed).unwrap(), path);
        let over = format!("file:///{}", "a".repeat(PATH_MAX - 1));
        assert_eq!(parse_file_uri(&over), Err(UriError::PathTooLong(PATH_MAX)));
        // The longest accepted path, every byte escaped, still prints to
        // an acceptable URI.
        let bytes = vec![0xffu8; PATH_MAX - 2];
        let mut p = b"/".to_vec();
        p.extend_from_slice(&bytes);
        let p = PathBuf::from(OsString::from_vec(p));
        let printed = path_to_uri(&p);
        assert!(printed.len() <= MAX_URI_LEN);
        assert_eq!(parse_file_uri(&printed).unwrap(), p);
    }

    #[test]
    fn non_utf8_round_trip() {
        let p = PathBuf::from(OsString::from_vec(b"/tmp/\xff\xfe x%".to_vec()));
        let uri = path_to_uri(&p);
        assert_eq!(uri, "file:///tmp/%FF%FE%20x%25");
        assert_eq!(parse_file_uri(&uri).unwrap(), p);
    }
}
