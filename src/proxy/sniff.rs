//! The envelope of a line too long to keep, found while it is discarded.
//!
//! A line over `limits.max_message_bytes` is never held whole (see
//! `framing`); its bytes pass through a [`Sniffer`] on their way out, which
//! keeps only what identifies the message ([`Ident`]: its top-level `id`,
//! `method`, and whether it has a `result` or `error`), wherever in the
//! line they are: the TypeScript SDK writes `result` before `id`, so an
//! answer's id comes after its payload. State is a few counters and two
//! bounded buffers, whatever the line's length.

use super::id::{Ident, valid_id_key};

/// Longest key of interest (`jsonrpc`, `method`, `result`) kept, with
/// its quotes and possible escapes; longer keys are of no interest.
const KEY_MAX: usize = 32;

/// Longest `id` or `method` value kept (raw); a longer one cannot be
/// answered (see `ledger::MAX_ID_BYTES`, which is smaller).
const VALUE_MAX: usize = 4096;

/// What the top-level value being crossed is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// A key (between `{` or `,` and `:`).
    Key,
    /// The value of `id`.
    Id,
    /// The value of `method`.
    Method,
    /// Any other value.
    Other,
}

/// Tracks a line's top-level members as its bytes go by.
#[derive(Debug)]
pub struct Sniffer {
    /// Nesting: 0 before the top-level `{`, 1 inside it.
    depth: usize,
    in_string: bool,
    escape: bool,
    /// Not a JSON object, or past its end: nothing more is learnt.
    done: bool,
    slot: Slot,
    /// The text of the current key or value of interest, while it fits.
    buf: Vec<u8>,
    over: bool,
    ident: Ident,
}

impl Default for Sniffer {
    fn default() -> Self {
        Sniffer {
            depth: 0,
            in_string: false,
            escape: false,
            done: false,
            slot: Slot::Key,
            buf: Vec::new(),
            over: false,
            ident: Ident::default(),
        }
    }
}

impl Sniffer {
    /// The next bytes of the line.
    pub fn feed(&mut self, data: &[u8]) {
        let mut i = 0;
        while i < data.len() && !self.done {
            if self.in_string {
                if self.escape {
                    self.escape = false;
                    self.keep(&data[i..=i]);
                    i += 1;
                    continue;
                }
                let rest = &data[i..];
                let Some(k) = memchr::memchr2(b'"', b'\\', rest) else {
                    self.keep(rest);
                    return;
                };
                self.keep(&rest[..=k]);
                i += k + 1;
                if rest[k] == b'\\' {
                    self.escape = true;
                } else {
                    self.in_string = false;
                }
                continue;
            }
            let c = data[i];
            i += 1;
            match c {
                b' ' | b'\t' | b'\r' | b'\n' if self.depth <= 1 => {}
                b'{' | b'[' if self.depth == 0 => {
                    if c == b'[' {
                        self.done = true;
                    }
                    self.depth = 1;
                    self.slot = Slot::Key;
                }
                b':' if self.depth == 1 => self.key_done(),
                b',' if self.depth == 1 => self.value_done(),
                b'}' if self.depth == 1 => {
                    self.value_done();
                    self.done = true;
                }
                _ if self.depth == 0 => self.done = true,
                b'"' => {
                    self.in_string = true;
                    self.keep(b"\"");
                }
                b'{' | b'[' => {
                    self.depth += 1;
                    self.keep(&[c]);
                }
                b'}' | b']' => {
                    self.depth -= 1;
                    self.keep(&[c]);
                }
                _ => self.keep(&[c]),
            }
        }
    }

    /// What was found, once the whole line went by.
    pub fn finish(self) -> Ident {
        self.ident
    }

    fn keep(&mut self, bytes: &[u8]) {
        let max = match self.slot {
            Slot::Key => KEY_MAX,
            Slot::Id | Slot::Method => VALUE_MAX,
            Slot::Other => return,
        };
        if self.buf.len() + bytes.len() > max {
            self.over = true;
        } else if !self.over {
            self.buf.extend_from_slice(bytes);
        }
    }

    fn key_done(&mut self) {
        let key = (!self.over)
            .then(|| serde_json::from_slice::<String>(&self.buf).ok())
            .flatten();
        self.slot = match key.as_deref() {
            Some("id") => Slot::Id,
            Some("method") => Slot::Method,
            Some("result" | "error") => {
                self.ident.answer = true;
                Slot::Other
            }
            _ => Slot::Other,
        };
        self.buf.clear();
        self.over = false;
    }

    fn value_done(&mut self) {
        let text = (!self.over)
            .then(|| std::str::from_utf8(&self.buf).ok())
            .flatten();
        match self.slot {
            // A repeated member: the last one, as most parsers read it.
            Slot::Id => {
                self.ident.has_id = true;
                self.ident.id = text
                    .and_then(|t| serde_json::from_str::<&serde_json::value::RawValue>(t).ok())
                    .map(|v| v.get())
                    .filter(|v| valid_id_key(v).is_some())
                    .map(str::to_string);
            }
            Slot::Method => {
                self.ident.method = text.and_then(|t| serde_json::from_str::<String>(t).ok());
            }
            _ => {}
        }
        self.slot = Slot::Key;
        self.buf.clear();
        self.over = false;
    }
}

/// [`Sniffer`] over one whole text (tests, and a head already held).
pub fn ident(line: &[u8]) -> Ident {
    let mut s = Sniffer::default();
    s.feed(line);
    s.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_anywhere_in_the_line() {
        let big = "x".repeat(100_000);
        let line = format!(
            r#"{{"jsonrpc":"2.0","result":{{"content":[{{"type":"text","text":"{big}","id":99}}],"a":{{"id":"no"}}}},"id":"r\"1"}}"#
        );
        let i = ident(line.as_bytes());
        assert_eq!(i.id.as_deref(), Some(r#""r\"1""#));
        assert!(i.answer);
        assert_eq!(i.method, None);
        // Fed in pieces of every size, the same.
        for step in [1, 2, 3, 7, 64, 4096] {
            let mut s = Sniffer::default();
            for c in line.as_bytes().chunks(step) {
                s.feed(c);
            }
            assert_eq!(s.finish(), i, "{step}");
        }
        let i = ident(
            format!(r#"{{ "method" : "tools/call", "params":{{"p":"{big}"}}, "id" : 12 }}"#)
                .as_bytes(),
        );
        assert_eq!(
            (i.id.as_deref(), i.method.as_deref(), i.answer),
            (Some("12"), Some("tools/call"), false)
        );
    }

    #[test]
    fn what_cannot_identify() {
        assert_eq!(ident(b"[1,2]"), Ident::default());
        assert_eq!(ident(b"garbage"), Ident::default());
        // An id that is not an id, or too long, or cut off.
        assert_eq!(ident(br#"{"id":1.5,"method":"m"}"#).id, None);
        assert_eq!(ident(br#"{"id":{"a":1}}"#).id, None);
        let long = format!(r#"{{"id":"{}"}}"#, "i".repeat(VALUE_MAX));
        assert_eq!(ident(long.as_bytes()).id, None);
        assert_eq!(ident(br#"{"method":"m","params":{"a":"#).id, None);
        // Keys escaped are read; the last of repeated ones.
        assert_eq!(ident(br#"{"i\u0064":3,"id":4}"#).id.as_deref(), Some("4"));
        assert_eq!(ident(br#"{"i\u0064":3}"#).id.as_deref(), Some("3"));
    }
}
