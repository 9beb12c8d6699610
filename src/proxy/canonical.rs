//! The strict reading of a line the fast scan is unsure of, and the one
//! text rootfence relays for it.
//!
//! [`canonical`] reads the whole line (RFC 8259) and writes it again: no
//! whitespace, each string escaped one way (`\"`, `\\`, control
//! characters as `\n` or `\u00XX`, everything else as UTF-8), each number
//! as written. What cannot be read completely and unambiguously is
//! [`Unreadable`]: invalid UTF-8 anywhere, a key repeated in an object
//! (compared after unescaping: `"a"` and `"\u0061"` are one key), a lone
//! surrogate escape, a number that is not finite as a double, nesting
//! past [`MAX_DEPTH`], anything that is not JSON. Of an unreadable line,
//! what could be read cleanly of its envelope ([`Ident`]: its id, its
//! method, whether it answers) is kept, so that its sender gets an answer.
//!
//! # Security
//!
//! A canonical line is read the same way by every parser a host uses:
//! no key twice (first-wins and last-wins parsers agree), no carriage
//! return or other whitespace between tokens (no line splitter breaks
//! it), valid UTF-8 with no lone surrogate (Python's `json` would read
//! one and fail to encode it later; serde refuses it), numbers finite.

use std::collections::HashSet;

use super::id::{Ident, valid_id_key};
pub use super::scan::MAX_DEPTH;

/// Why a line cannot be relayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// Not JSON.
    NotJson,
    /// Bytes that are not UTF-8.
    Utf8,
    /// An object names this key twice.
    Duplicate(String),
    /// A `\u` escape of half a surrogate pair.
    Surrogate,
    /// A number too large for a double.
    Number,
    /// Nested deeper than [`MAX_DEPTH`].
    Depth,
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::NotJson => f.write_str("it is not JSON"),
            Why::Utf8 => f.write_str("it holds bytes that are not UTF-8"),
            Why::Duplicate(k) => {
                let k: String = k.chars().take(64).collect();
                write!(f, "an object in it names the key {k:?} twice")
            }
            Why::Surrogate => f.write_str("a string in it holds half a surrogate pair"),
            Why::Number => f.write_str("a number in it does not fit a double"),
            Why::Depth => write!(f, "it is nested deeper than {MAX_DEPTH} levels"),
        }
    }
}

/// A line that cannot be relayed, and what identifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The first reason found.
    pub why: Why,
    /// Its id, method and kind, as far as they could be read cleanly.
    pub ident: Ident,
}

/// The canonical text of `line`, or why it cannot be read.
pub fn canonical(line: &[u8]) -> Result<Vec<u8>, Unreadable> {
    let mut r = Reader {
        b: line,
        i: 0,
        out: Vec::with_capacity(line.len()),
        first: None,
        faults: 0,
        ident: Ident::default(),
    };
    r.ws();
    let read = r.value(0, true).and_then(|()| {
        r.ws();
        if r.i == line.len() { Ok(()) } else { Err(()) }
    });
    let why = match (read, r.first.take()) {
        (Err(()), _) => Why::NotJson,
        (Ok(()), Some(why)) => why,
        (Ok(()), None) => return Ok(r.out),
    };
    Err(Unreadable {
        why,
        ident: r.ident,
    })
}

/// The reader: a position in the line, the canonical text so far, and the
/// first fault found (reading goes on past a fault, to find the id).
struct Reader<'a> {
    b: &'a [u8],
    i: usize,
    out: Vec<u8>,
    first: Option<Why>,
    faults: usize,
    ident: Ident,
}

/// `Err(())`: not JSON (reading stops).
type Read = Result<(), ()>;

impl Reader<'_> {
    fn fault(&mut self, why: Why) {
        self.faults += 1;
        if self.first.is_none() {
            self.first = Some(why);
        }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Result<u8, ()> {
        self.b.get(self.i).copied().ok_or(())
    }

    fn value(&mut self, depth: usize, top: bool) -> Read {
        match self.peek()? {
            b'{' | b'[' if depth >= MAX_DEPTH => {
                self.fault(Why::Depth);
                self.skip_container()
            }
            b'{' => self.object(depth, top),
            b'[' => self.array(depth),
            b'"' => self.string(None),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(()),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Read {
        if !self.b[self.i..].starts_with(word) {
            return Err(());
        }
        self.out.extend_from_slice(word);
        self.i += word.len();
        Ok(())
    }

    /// An object or array opens (`open`, at the cursor): whether it is
    /// empty (then closed as well).
    fn open(&mut self, open: u8, close: u8) -> Result<bool, ()> {
        self.i += 1;
        self.out.push(open);
        self.ws();
        let empty = self.peek()? == close;
        if empty {
            self.i += 1;
            self.out.push(close);
        }
        Ok(empty)
    }

    /// After a member or element: a comma (`false`, more follows) or
    /// `close` (`true`, the object or array ended).
    fn comma_or_close(&mut self, close: u8) -> Result<bool, ()> {
        let c = self.peek()?;
        if c != b',' && c != close {
            return Err(());
        }
        self.i += 1;
        self.out.push(c);
        if c == b',' {
            self.ws();
        }
        Ok(c == close)
    }

    fn object(&mut self, depth: usize, top: bool) -> Read {
        if self.open(b'{', b'}')? {
            return Ok(());
        }
        let mut keys: HashSet<Vec<u8>> = HashSet::new();
        loop {
            if self.peek()? != b'"' {
                return Err(());
            }
            let mut key = Vec::new();
            self.string(Some(&mut key))?;
            self.ws();
            if self.peek()? != b':' {
                return Err(());
            }
            self.i += 1;
            self.out.push(b':');
            self.ws();
            let (start, faults) = (self.out.len(), self.faults);
            self.value(depth + 1, false)?;
            if top {
                let clean = faults == self.faults;
                self.note_member(&key, start, clean);
            }
            if !keys.insert(key.clone()) {
                self.fault(Why::Duplicate(String::from_utf8_lossy(&key).into_owned()));
            }
            self.ws();
            if self.comma_or_close(b'}')? {
                return Ok(());
            }
        }
    }

    /// A top-level member was read (its value written from `start`): keep
    /// what identifies the message. A repeated `id` or `method`: the last
    /// one, as most parsers read it.
    fn note_member(&mut self, key: &[u8], start: usize, clean: bool) {
        let value = &self.out[start..];
        match key {
            b"id" => {
                self.ident.has_id = true;
                self.ident.id = clean
                    .then(|| std::str::from_utf8(value).ok())
                    .flatten()
                    .filter(|v| valid_id_key(v).is_some())
                    .map(str::to_string);
            }
            b"method" => {
                self.ident.method = clean
                    .then(|| serde_json::from_slice::<String>(value).ok())
                    .flatten();
            }
            b"result" | b"error" => self.ident.answer = true,
            _ => {}
        }
    }

    fn array(&mut self, depth: usize) -> Read {
        if self.open(b'[', b']')? {
            return Ok(());
        }
        loop {
            self.value(depth + 1, false)?;
            self.ws();
            if self.comma_or_close(b']')? {
                return Ok(());
            }
        }
    }

    /// Cross a container too deep to read, without recursion: brackets
    /// are counted, strings crossed.
    fn skip_container(&mut self) -> Read {
        let mut depth = 0usize;
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    loop {
                        let rest = self.b.get(self.i..).ok_or(())?;
                        let k = memchr::memchr2(b'"', b'\\', rest).ok_or(())?;
                        self.i += k + 1;
                        if rest[k] == b'"' {
                            break;
                        }
                        self.i += 1;
                    }
                    continue;
                }
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        self.i += 1;
                        return Ok(());
                    }
                }
                _ => {}
            }
            self.i += 1;
        }
    }

    /// A string, written escaped the canonical way; its decoded text is
    /// added to `key` when given.
    fn string(&mut self, mut key: Option<&mut Vec<u8>>) -> Read {
        self.i += 1;
        self.out.push(b'"');
        loop {
            let rest = &self.b[self.i..];
            let run = memchr::memchr2(b'"', b'\\', rest).ok_or(())?;
            let text = &rest[..run];
            if text.iter().any(|&c| c < 0x20) {
                return Err(());
            }
            if std::str::from_utf8(text).is_err() {
                self.fault(Why::Utf8);
            }
            self.out.extend_from_slice(text);
            if let Some(k) = key.as_deref_mut() {
                k.extend_from_slice(text);
            }
            self.i += run;
            if rest[run] == b'"' {
                self.i += 1;
                self.out.push(b'"');
                return Ok(());
            }
            let c = self.escape()?;
            let mut buf = [0u8; 4];
            match c {
                Some(c) => {
                    self.write_char(c);
                    if let Some(k) = key.as_deref_mut() {
                        k.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    }
                }
                None => self.fault(Why::Surrogate),
            }
        }
    }

    /// The escape at the position (a backslash): the character it stands
    /// for, or `None` for half a surrogate pair.
    fn escape(&mut self) -> Result<Option<char>, ()> {
        let c = *self.b.get(self.i + 1).ok_or(())?;
        self.i += 2;
        Ok(Some(match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = self.hex4()?;
                if !(0xD800..0xE000).contains(&hi) {
                    return Ok(char::from_u32(hi));
                }
                if hi >= 0xDC00 || !self.b[self.i..].starts_with(b"\\u") {
                    return Ok(None);
                }
                let save = self.i;
                self.i += 2;
                let lo = self.hex4()?;
                if !(0xDC00..0xE000).contains(&lo) {
                    // The second escape is read on its own.
                    self.i = save;
                    return Ok(None);
                }
                return Ok(char::from_u32(
                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00),
                ));
            }
            _ => return Err(()),
        }))
    }

    fn hex4(&mut self) -> Result<u32, ()> {
        let h = self.b.get(self.i..self.i + 4).ok_or(())?;
        let h = std::str::from_utf8(h).map_err(|_| ())?;
        if !h.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(());
        }
        self.i += 4;
        u32::from_str_radix(h, 16).map_err(|_| ())
    }

    fn write_char(&mut self, c: char) {
        match c {
            '"' => self.out.extend_from_slice(b"\\\""),
            '\\' => self.out.extend_from_slice(b"\\\\"),
            '\n' => self.out.extend_from_slice(b"\\n"),
            '\r' => self.out.extend_from_slice(b"\\r"),
            '\t' => self.out.extend_from_slice(b"\\t"),
            '\u{8}' => self.out.extend_from_slice(b"\\b"),
            '\u{c}' => self.out.extend_from_slice(b"\\f"),
            c if (c as u32) < 0x20 => {
                self.out
                    .extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes());
            }
            c => {
                let mut buf = [0u8; 4];
                self.out
                    .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }

    /// A number, written as it is; a fault when it is not finite as a
    /// double.
    fn number(&mut self) -> Read {
        let start = self.i;
        let b = self.b;
        let digits = |mut i: usize| {
            let s = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i > s { Ok(i) } else { Err(()) }
        };
        let mut i = self.i;
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i = digits(i)?,
            _ => return Err(()),
        }
        if b.get(i) == Some(&b'.') {
            i = digits(i + 1)?;
        }
        if let Some(b'e' | b'E') = b.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            i = digits(i)?;
        }
        let text = &b[start..i];
        // ASCII by construction.
        let finite = std::str::from_utf8(text)
            .ok()
            .and_then(|t| t.parse::<f64>().ok())
            .is_some_and(f64::is_finite);
        if !finite {
            self.fault(Why::Number);
        }
        self.out.extend_from_slice(text);
        self.i = i;
        Ok(())
    }
}

/// One text per JSON value, for comparing what different parsers read:
/// numbers as the bits of their double (`-0` as `0`), strings as the hex
/// of their UTF-8, object members sorted. The same form as
/// `tests/peers/readers.py`'s `norm` (the differential run compares them).
pub fn normal_form(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Null => "n".into(),
        Value::Bool(true) => "t".into(),
        Value::Bool(false) => "f".into(),
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            let x = if x == 0.0 { 0.0 } else { x };
            format!("d{:016x}", x.to_bits())
        }
        Value::String(s) => format!("s{}", hex(s)),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(normal_form).collect::<Vec<_>>().join(",")
        ),
        Value::Object(o) => {
            let mut m: Vec<String> = o
                .iter()
                .map(|(k, v)| format!("s{}:{}", hex(k), normal_form(v)))
                .collect();
            m.sort();
            format!("{{{}}}", m.join(","))
        }
    }
}

/// The lowercase hex of `s`'s UTF-8 bytes.
fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &[u8]) -> String {
        String::from_utf8(canonical(s).expect("readable")).expect("UTF-8")
    }

    fn why(s: &[u8]) -> Why {
        canonical(s).expect_err("unreadable").why
    }

    #[test]
    fn canonical_text() {
        assert_eq!(
            ok(b" {\"a\" :\r\n [1, -2.5e3 ,true,null,\"x\\/y\\u0041\\u00e9\\ud83d\\ude00\"]}\r"),
            "{\"a\":[1,-2.5e3,true,null,\"x/yA\u{e9}\u{1f600}\"]}"
        );
        assert_eq!(
            ok(b"{\"c\":\"\\u0001\\n\\\"\\\\\\b\\f\\t\\r\"}"),
            "{\"c\":\"\\u0001\\n\\\"\\\\\\b\\f\\t\\r\"}"
        );
        assert_eq!(
            ok(b"{\"n\":1e-400,\"m\":123456789012345678901234567890}"),
            "{\"n\":1e-400,\"m\":123456789012345678901234567890}"
        );
        // What the canonical text holds, the fast scan reads.
        let c = ok(b"{\"id\":1,\r\"method\":\"ping\",\"params\":{\"a\\u0062\":1}}");
        assert!(crate::proxy::scan::members(c.as_bytes()).is_some(), "{c}");
    }

    #[test]
    fn what_cannot_be_read() {
        assert_eq!(why(b"{\"a\":1,\"\\u0061\":2}"), Why::Duplicate("a".into()));
        assert_eq!(
            why(b"{\"x\":{\"k\":1,\"k\":1}}"),
            Why::Duplicate("k".into())
        );
        assert_eq!(why(b"{\"z\":\"\xff\xfe\"}"), Why::Utf8);
        assert_eq!(why(b"{\"z\":\"\\ud800\"}"), Why::Surrogate);
        assert_eq!(why(b"{\"z\":\"\\udc00\\ud800\"}"), Why::Surrogate);
        assert_eq!(why(b"{\"z\":\"\\ud800\\u0041\"}"), Why::Surrogate);
        assert_eq!(why(b"{\"z\":1e400}"), Why::Number);
        assert_eq!(
            why(format!("{{\"z\":1{}}}", "0".repeat(400)).as_bytes()),
            Why::Number
        );
        let deep = format!("{{\"x\":{}{}}}", "[".repeat(150), "]".repeat(150));
        assert_eq!(why(deep.as_bytes()), Why::Depth);
        for bad in [
            &b"{"[..],
            b"{}x",
            b"{\"a\":01}",
            b"{\"a\":\"\x01\"}",
            b"\xff",
            b"{\"a\" 1}",
        ] {
            assert_eq!(why(bad), Why::NotJson, "{bad:?}");
        }
    }

    #[test]
    fn the_sender_is_found_past_the_fault() {
        let u = canonical(
            b"{\"jsonrpc\":\"2.0\",\"params\":{\"z\":\"\xff\"},\"method\":\"tools/call\",\"id\":7}",
        )
        .expect_err("unreadable");
        assert_eq!(u.why, Why::Utf8);
        assert_eq!(u.ident.id.as_deref(), Some("7"));
        assert_eq!(u.ident.method.as_deref(), Some("tools/call"));
        assert!(!u.ident.answer);
        let deep = format!(
            "{{\"jsonrpc\":\"2.0\",\"result\":{}{},\"id\":\"r\\u0031\"}}",
            "[".repeat(300),
            "]".repeat(300)
        );
        let u = canonical(deep.as_bytes()).expect_err("too deep");
        assert_eq!(
            (u.why, u.ident.id.as_deref(), u.ident.answer),
            (Why::Depth, Some("\"r1\""), true)
        );
        // An id that is itself unreadable is not used; repeated: the last.
        let u = canonical(b"{\"id\":\"\xff\",\"method\":\"x\"}").expect_err("unreadable");
        assert_eq!(u.ident.id, None);
        let u = canonical(b"{\"id\":1,\"id\":2,\"method\":\"x\"}").expect_err("unreadable");
        assert_eq!(u.ident.id.as_deref(), Some("2"));
    }
}
