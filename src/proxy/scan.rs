//! A strict, fast scan of a JSON object's top-level members.
//!
//! [`members`] finds the members of the JSON-RPC envelope in one pass and
//! checks that the whole line is valid JSON in valid UTF-8, without
//! building anything: long ASCII strings (the base64 of an image) are
//! crossed 64 bytes at a time, other text a run at a time. It answers only
//! when it is sure: anything unusual (an escaped key, half a surrogate
//! pair, a key repeated in any object, a carriage return between tokens, a number
//! that may not fit a double, deep nesting, any error) gives `None`, and
//! the caller reads the line strictly and rewrites it in canonical form
//! (`super::canonical`), or refuses it.
//!
//! # Security
//!
//! A line the scan reads is read the same way by every parser a host
//! uses (serde_json, Python's `json`, `JSON.parse`, node's `readline`,
//! Python's universal newlines, pydantic's reader): it is valid JSON
//! (RFC 8259) in valid UTF-8 (outside strings only ASCII is accepted,
//! and every string's text is checked), no object names a key twice (so
//! "first wins" and "last wins" parsers agree), no carriage return
//! stands between tokens (so line splitters that break on `\r` see one
//! line), every number is finite as a double, and nesting stays under
//! [`MAX_DEPTH`]. Such a line is relayed byte for byte.

/// The envelope members of a JSON object, each as its exact text (valid
/// JSON in valid UTF-8).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Members<'a> {
    /// `jsonrpc`, raw.
    pub jsonrpc: Option<&'a [u8]>,
    /// `id`, raw.
    pub id: Option<&'a [u8]>,
    /// `method`, raw.
    pub method: Option<&'a [u8]>,
    /// `params`, raw.
    pub params: Option<&'a [u8]>,
    /// `result`, raw.
    pub result: Option<&'a [u8]>,
    /// `error`, raw.
    pub error: Option<&'a [u8]>,
    /// The guarded members of `params`, when it is there (see [`Guarded`]).
    pub params_guarded: Option<Guarded<'a>>,
    /// The guarded members of `result`, when it is there.
    pub result_guarded: Option<Guarded<'a>>,
}

/// The top-level members of a `params` or `result` object that the guard
/// of the 2026-07-28 revision looks for, found during the envelope's own
/// pass (so a megabyte result is not searched again for them).
///
/// Reported whenever the scan reads the line (its keys hold no escape and
/// each appears once per object, so what it finds is certain); for a value
/// that is not an object, all are absent.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Guarded<'a> {
    /// `_meta`, raw.
    pub meta: Option<&'a [u8]>,
    /// `requestState`, raw.
    pub request_state: Option<&'a [u8]>,
    /// `resultType`, raw.
    pub result_type: Option<&'a [u8]>,
    /// `inputRequests`, raw.
    pub input_requests: Option<&'a [u8]>,
}

impl<'a> Guarded<'a> {
    fn slot(&mut self, key: &[u8]) -> Option<&mut Option<&'a [u8]>> {
        Some(match key {
            b"_meta" => &mut self.meta,
            b"requestState" => &mut self.request_state,
            b"resultType" => &mut self.result_type,
            b"inputRequests" => &mut self.input_requests,
            _ => return None,
        })
    }
}

/// The deepest nesting rootfence reads (the top-level object counts as
/// one level less than its members' values); deeper lines are unreadable.
pub const MAX_DEPTH: usize = 100;

/// The keys of the objects being read, innermost object last: a key
/// repeated in one object (compared as written: escaped keys are refused)
/// makes the line unsure. Objects with many keys are checked with a hash
/// set, so a line of a million keys costs a million look-ups.
struct Keys<'a> {
    stack: Vec<&'a [u8]>,
    /// The hash sets of the open objects that have many keys, by where
    /// their keys start in `stack`.
    sets: Vec<(usize, std::collections::HashSet<&'a [u8]>)>,
}

impl Default for Keys<'_> {
    fn default() -> Self {
        // Room for an envelope's keys and its params' without growing.
        Keys {
            stack: Vec::with_capacity(FEW_KEYS),
            sets: Vec::new(),
        }
    }
}

/// Objects with at most this many keys are checked by comparing keys.
const FEW_KEYS: usize = 16;

impl<'a> Keys<'a> {
    /// An object opens: where its keys start.
    fn open(&self) -> usize {
        self.stack.len()
    }

    /// Add `key` to the object whose keys start at `base`; false when the
    /// key is escaped or already there.
    fn add(&mut self, base: usize, key: &'a [u8]) -> bool {
        if key.contains(&b'\\') {
            return false;
        }
        let known = &self.stack[base..];
        if known.len() < FEW_KEYS {
            if known.contains(&key) {
                return false;
            }
        } else {
            if self.sets.last().is_none_or(|(b, _)| *b != base) {
                self.sets.push((base, known.iter().copied().collect()));
            }
            // Just pushed, or found, for this object.
            let Some((_, set)) = self.sets.last_mut() else {
                return false;
            };
            if !set.insert(key) {
                return false;
            }
        }
        self.stack.push(key);
        true
    }

    /// The object whose keys start at `base` is closed.
    fn close(&mut self, base: usize) {
        self.stack.truncate(base);
        if self.sets.last().is_some_and(|(b, _)| *b == base) {
            self.sets.pop();
        }
    }
}

/// The top-level members of `line`, if it is certainly one valid JSON
/// object that every parser reads the same way (see the module's
/// `# Security`); `None` if unsure.
pub fn members(b: &[u8]) -> Option<Members<'_>> {
    let mut m = Members::default();
    each_member(b, true, |key, value, guarded| {
        match key {
            b"params" => m.params_guarded = guarded,
            b"result" => m.result_guarded = guarded,
            _ => {}
        }
        let slot = match key {
            b"jsonrpc" => &mut m.jsonrpc,
            b"id" => &mut m.id,
            b"method" => &mut m.method,
            b"params" => &mut m.params,
            b"result" => &mut m.result,
            b"error" => &mut m.error,
            _ => return Some(()),
        };
        *slot = Some(value);
        Some(())
    })?;
    Some(m)
}

/// Member `key` of the JSON object `b`, as its exact text: `Some(None)`
/// when `b` is certainly a valid JSON object without it, `Some(Some(v))`
/// when it certainly has it once, `None` if unsure (the caller asks serde).
pub fn member<'a>(b: &'a [u8], key: &[u8]) -> Option<Option<&'a [u8]>> {
    let mut found = None;
    each_member(b, false, |k, value, _| {
        if k == key {
            found = Some(value);
        }
        Some(())
    })?;
    Some(found)
}

/// Call `visit` with each top-level member (key without quotes, value's
/// exact text, and with `deep` for `params` and `result` their guarded
/// members) of `b`, if `b` is certainly one valid JSON object read the
/// same way by every parser; `None` if unsure or if `visit` says so.
fn each_member<'a>(
    b: &'a [u8],
    deep: bool,
    mut visit: impl FnMut(&'a [u8], &'a [u8], Option<Guarded<'a>>) -> Option<()>,
) -> Option<()> {
    let mut keys = Keys::default();
    let mut i = ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    let base = keys.open();
    i = ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        i += 1;
    } else {
        loop {
            if b.get(i) != Some(&b'"') {
                return None;
            }
            let kend = string_end(b, i + 1)?;
            let key = &b[i + 1..kend - 1];
            if !keys.add(base, key) {
                return None;
            }
            i = ws(b, kend);
            if b.get(i) != Some(&b':') {
                return None;
            }
            i = ws(b, i + 1);
            let (vend, guarded) = if deep && matches!(key, b"params" | b"result") {
                if b.get(i) == Some(&b'{') {
                    let (end, g) = guarded_object_end(b, i, &mut keys)?;
                    (end, Some(g))
                } else {
                    (value_end(b, i, 1, &mut keys)?, Some(Guarded::default()))
                }
            } else {
                (value_end(b, i, 1, &mut keys)?, None)
            };
            visit(key, &b[i..vend], guarded)?;
            i = ws(b, vend);
            match b.get(i) {
                Some(b',') => i = ws(b, i + 1),
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    (ws(b, i) == b.len()).then_some(())
}

/// End of the object opened at `i` (a top-level member's value), with its
/// guarded members. Checks the object exactly as [`container_end`] does
/// (keys are plain and each appears once, so the guarded members found
/// are certain).
fn guarded_object_end<'a>(
    b: &'a [u8],
    i: usize,
    keys: &mut Keys<'a>,
) -> Option<(usize, Guarded<'a>)> {
    let mut g = Guarded::default();
    let base = keys.open();
    let mut j = ws(b, i + 1);
    if b.get(j) == Some(&b'}') {
        return Some((j + 1, g));
    }
    loop {
        if b.get(j) != Some(&b'"') {
            return None;
        }
        let kend = string_end(b, j + 1)?;
        let key = &b[j + 1..kend - 1];
        if !keys.add(base, key) {
            return None;
        }
        j = ws(b, kend);
        if b.get(j) != Some(&b':') {
            return None;
        }
        j = ws(b, j + 1);
        let vend = value_end(b, j, 2, keys)?;
        if let Some(slot) = g.slot(key) {
            *slot = Some(&b[j..vend]);
        }
        j = ws(b, vend);
        match *b.get(j)? {
            b',' => j = ws(b, j + 1),
            b'}' => {
                keys.close(base);
                return Some((j + 1, g));
            }
            _ => return None,
        }
    }
}

/// Index of the first non-whitespace byte at or after `i`. Line breaks
/// are not taken as whitespace: a carriage return, because a host whose
/// line reader also breaks lines there (node's `readline`, Python's
/// universal newlines) would read two lines; a newline, which a line
/// never holds (lines are split at it).
fn ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t') = b.get(i) {
        i += 1;
    }
    i
}

/// End (exclusive) of the value starting at `i`.
fn value_end<'a>(b: &'a [u8], i: usize, depth: usize, keys: &mut Keys<'a>) -> Option<usize> {
    match *b.get(i)? {
        b'"' => string_end(b, i + 1),
        b'{' => container_end(b, i, b'}', depth, keys),
        b'[' => container_end(b, i, b']', depth, keys),
        b't' => literal(b, i, b"true"),
        b'f' => literal(b, i, b"false"),
        b'n' => literal(b, i, b"null"),
        b'-' | b'0'..=b'9' => number_end(b, i),
        _ => None,
    }
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    b[i..].starts_with(word).then_some(i + word.len())
}

/// End of the object or array opened at `i`.
fn container_end<'a>(
    b: &'a [u8],
    i: usize,
    close: u8,
    depth: usize,
    keys: &mut Keys<'a>,
) -> Option<usize> {
    if depth >= MAX_DEPTH {
        return None;
    }
    let object = close == b'}';
    let base = keys.open();
    let mut j = ws(b, i + 1);
    if b.get(j) == Some(&close) {
        return Some(j + 1);
    }
    loop {
        if object {
            if b.get(j) != Some(&b'"') {
                return None;
            }
            let kend = string_end(b, j + 1)?;
            if !keys.add(base, &b[j + 1..kend - 1]) {
                return None;
            }
            j = ws(b, kend);
            if b.get(j) != Some(&b':') {
                return None;
            }
            j = ws(b, j + 1);
        }
        j = ws(b, value_end(b, j, depth + 1, keys)?);
        match *b.get(j)? {
            b',' => j = ws(b, j + 1),
            c if c == close => {
                keys.close(base);
                return Some(j + 1);
            }
            _ => return None,
        }
    }
}

/// How many bytes of a string are checked at a time.
const CHUNK: usize = 64;

/// Whether a chunk is plain ASCII text that does not end or interrupt a
/// string: no quote, no backslash, no control character, no byte of a
/// multi-byte character. (Written without early exit, so the compiler
/// checks the whole chunk with vector instructions.)
fn plain(chunk: &[u8; CHUNK]) -> bool {
    let mut any = false;
    for &c in chunk {
        any |= special(c);
    }
    !any
}

/// A byte that ends or interrupts a string's plain text: a quote, a
/// backslash, a control character or a byte of a multi-byte character.
#[inline(always)]
fn special(c: u8) -> bool {
    (c == b'"') | (c == b'\\') | !(0x20..0x80).contains(&c)
}

/// End (exclusive, after the closing quote) of the string whose content
/// starts at `i`.
fn string_end(b: &[u8], mut i: usize) -> Option<usize> {
    loop {
        while let Some(chunk) = b.get(i..i + CHUNK) {
            // CHUNK bytes by construction of the range.
            let chunk: &[u8; CHUNK] = chunk.try_into().ok()?;
            if !plain(chunk) {
                break;
            }
            i += CHUNK;
        }
        // The next special byte is within the next CHUNK bytes (the chunk
        // there was not plain, or the line ends sooner): go straight to it
        // rather than checking a whole chunk again at every byte.
        i += b.get(i..)?.iter().position(|&c| special(c))?;
        match *b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => match b.get(i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                // A `\u` escape: a character, or a surrogate pair (half a
                // pair is read differently by different parsers: unsure).
                b'u' => {
                    let unit = hex4(b, i + 2)?;
                    match unit {
                        0xD800..=0xDBFF => {
                            if b.get(i + 6..i + 8)? != b"\\u" {
                                return None;
                            }
                            if !(0xDC00..=0xDFFF).contains(&hex4(b, i + 8)?) {
                                return None;
                            }
                            i += 12;
                        }
                        0xDC00..=0xDFFF => return None,
                        _ => i += 6,
                    }
                }
                _ => return None,
            },
            0..0x20 => return None,
            0x80.. => {
                // Text up to the next quote or backslash (ASCII, so never
                // inside a multi-byte character) is checked at once: valid
                // UTF-8 and no control character.
                let end = i + memchr::memchr2(b'"', b'\\', &b[i..])?;
                let run = &b[i..end];
                let control = run.iter().fold(false, |a, &c| a | (c < 0x20));
                if control || std::str::from_utf8(run).is_err() {
                    return None;
                }
                i = end;
            }
            // Found by `special`: nothing else stops there.
            _ => return None,
        }
    }
}

/// The four hex digits at `i`, as a number.
fn hex4(b: &[u8], i: usize) -> Option<u32> {
    let h = b.get(i..i + 4)?;
    h.iter().try_fold(0u32, |n, &c| {
        let d = (c as char).to_digit(16)?;
        Some(n * 16 + d)
    })
}

/// End of the number starting at `i`: `-? (0 | [1-9][0-9]*) (. [0-9]+)?
/// ([eE] [+-]? [0-9]+)?`, when it is certainly finite as a double (at
/// most 100 integer digits and a two-digit exponent: below 1e200); a
/// larger one is left to the strict reading, which checks it exactly.
fn number_end(b: &[u8], mut i: usize) -> Option<usize> {
    let digits = |b: &[u8], mut i: usize| {
        let s = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        (i > s).then_some(i)
    };
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    let int = i;
    match b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i = digits(b, i)?,
        _ => return None,
    }
    if i - int > 100 {
        return None;
    }
    if b.get(i) == Some(&b'.') {
        i = digits(b, i + 1)?;
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        let exp = i;
        i = digits(b, i)?;
        if i - exp > 2 {
            return None;
        }
    }
    Some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_envelope() {
        let line = r#" { "jsonrpc" : "2.0", "id":7, "x":{"id":9,"a":[1,-2.5e3,true,null,"s\"q"]},	"method":"tools/call","params":{"name":"n"} } "#;
        let m = members(line.as_bytes()).unwrap();
        assert_eq!(m.jsonrpc, Some(&br#""2.0""#[..]));
        assert_eq!(m.id, Some(&b"7"[..]));
        assert_eq!(m.method, Some(&br#""tools/call""#[..]));
        assert_eq!(m.params, Some(&br#"{"name":"n"}"#[..]));
        assert_eq!((m.result, m.error), (None, None));
        assert_eq!(members(b"{}"), Some(Members::default()));
        assert_eq!(
            members(br#"{"result":null,"id":"a"}"#).unwrap().result,
            Some(&b"null"[..])
        );
    }

    #[test]
    fn guarded_members_are_found_in_the_same_pass() {
        let line = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"resultType":"x"}],"resultType":"input_required","inputRequests":{"a":{"method":"roots/list"}}},"params":[1]}"#;
        let m = members(line).unwrap();
        let r = m.result_guarded.unwrap();
        assert_eq!(r.result_type, Some(&br#""input_required""#[..]));
        assert_eq!(
            r.input_requests,
            Some(&br#"{"a":{"method":"roots/list"}}"#[..])
        );
        assert_eq!((r.meta, r.request_state), (None, None));
        // Not an object: certainly none of them.
        assert_eq!(m.params_guarded, Some(Guarded::default()));
        let p = members(br#"{"params":{"_meta":{"v":1},"requestState":"s","x":"_meta"}}"#)
            .unwrap()
            .params_guarded
            .unwrap();
        assert_eq!(p.meta, Some(&br#"{"v":1}"#[..]));
        assert_eq!(p.request_state, Some(&br#""s""#[..]));
        // An escaped key (it may name one), a key repeated in any object:
        // the whole line is unsure (read strictly elsewhere).
        for unsure in [
            r#"{"id":1,"result":{"a\/b":1}}"#,
            r#"{"id":1,"result":{"result\/Type":1}}"#,
            r#"{"id":1,"result":{"resultType":"a","resultType":"input_required"}}"#,
            r#"{"id":1,"result":{"x":{"a":1,"a":2}}}"#,
            r#"{"id":1,"x":1,"x":2}"#,
        ] {
            assert_eq!(members(unsure.as_bytes()), None, "{unsure}");
        }
        // A `\u` escape leaves the whole line to serde.
        assert_eq!(
            members(br#"{"id":1,"result":{"result\u0054ype":"input_required"}}"#),
            None
        );
        // Without `params` or `result`: nothing to report.
        let m = members(br#"{"id":1,"method":"ping"}"#).unwrap();
        assert_eq!((m.params_guarded, m.result_guarded), (None, None));
        // The value is checked as strictly as any other.
        assert_eq!(members(br#"{"result":{"resultType":01}}"#), None);
        assert_eq!(members(br#"{"result":{"resultType" 1}}"#), None);
        assert_eq!(members(br#"{"result":{"a":1,}}"#), None);
    }

    #[test]
    fn unsure_or_invalid_gives_none() {
        for bad in [
            "",
            "[]",
            "{",
            "{}x",
            "{} {}",
            r#"{"id":1,}"#,
            r#"{"id":1 "x":2}"#,
            r#"{"id":01}"#,
            r#"{"id":1.}"#,
            r#"{"id":-}"#,
            r#"{"id":1e}"#,
            r#"{"id":+1}"#,
            r#"{"id":tru}"#,
            r#"{"id":[1,]}"#,
            r#"{"id":{"a"}}"#,
            r#"{"id":{1:2}}"#,
            r#"{"id":"a\x"}"#,
            "{\"id\":\"tab\there\"}",
            r#"{"id":"\ud800"}"#,
            r#"{"id":"\udc00\ud800"}"#,
            r#"{"id":"\ud800\u0041"}"#,
            r#"{"id":"\ud800x"}"#,
            r#"{"id":"\u00g1"}"#,
            r#"{"id":"\u004"}"#,
            r#"{"i\u0064":1}"#,
            r#"{"id":1,"id":2}"#,
            r#"{"params":{},"params":[]}"#,
            "{\u{c}\"id\":1}",
        ] {
            assert_eq!(members(bad.as_bytes()), None, "{bad:?}");
        }
        let deep = format!("{{\"x\":{}{}}}", "[".repeat(200), "]".repeat(200));
        assert_eq!(members(deep.as_bytes()), None);
        let ok = format!("{{\"x\":{}{}}}", "[".repeat(50), "]".repeat(50));
        assert!(members(ok.as_bytes()).is_some());
    }

    #[test]
    fn what_parsers_could_read_differently_is_unsure() {
        for unsure in [
            // A carriage return between tokens: two lines to some readers.
            "{\"id\":1,\r\"method\":\"ping\"}",
            "{\"id\":1}\r",
            // Repeated keys at any depth: first-wins and last-wins differ.
            r#"{"params":{"_meta":{"progressToken":1,"progressToken":2}},"id":1}"#,
            r#"{"params":[{"a":1,"b":2,"a":3}],"id":1}"#,
            // Numbers that may not be finite doubles.
            r#"{"id":1,"params":{"x":1e400}}"#,
            r#"{"id":1,"params":{"x":1E+308}}"#,
        ] {
            assert_eq!(members(unsure.as_bytes()), None, "{unsure:?}");
        }
        let many: Vec<String> = (0..100).map(|i| format!("\"k{i}\":{i}")).collect();
        let ok = format!("{{\"params\":{{{}}},\"id\":1}}", many.join(","));
        assert!(members(ok.as_bytes()).is_some());
        let dup = format!("{{\"params\":{{{},\"k7\":0}},\"id\":1}}", many.join(","));
        assert_eq!(members(dup.as_bytes()), None);
        // Keys repeated in different objects are fine.
        assert!(members(br#"{"a":{"x":1},"b":{"x":1},"id":{"a":{"a":1}}}"#).is_some());
        assert!(
            members(br#"{"id":1,"params":{"x":1e99,"y":-0.5E-12,"z":12345678901234567890}}"#)
                .is_some()
        );
    }

    #[test]
    fn unicode_escapes_of_whole_characters_are_read() {
        let line = r#"{"id":"\u0041\u00e9\ud83d\ude00\u2028\u0000","method":"m"}"#;
        let m = members(line.as_bytes()).unwrap();
        assert_eq!(
            m.id,
            Some(&br#""\u0041\u00e9\ud83d\ude00\u2028\u0000""#[..])
        );
        let v: String = serde_json::from_slice(m.id.unwrap()).unwrap();
        assert_eq!(v, "A\u{e9}\u{1f600}\u{2028}\0");
    }

    #[test]
    fn long_strings_are_crossed_whole() {
        for n in [0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000] {
            let s = "a".repeat(n);
            let line = format!(r#"{{"params":{{"d":"{s}","e":"{s}\"{s}"}},"id":1}}"#);
            let m = members(line.as_bytes()).unwrap();
            assert_eq!(m.id, Some(&b"1"[..]), "{n}");
            assert!(
                m.params
                    .unwrap()
                    .ends_with(format!(r#"\"{s}"}}"#).as_bytes())
            );
            let cut = format!(r#"{{"params":"{s}"#);
            assert_eq!(members(cut.as_bytes()), None);
            let ctl = format!("{{\"params\":\"{s}\u{1}{s}\"}}");
            assert_eq!(members(ctl.as_bytes()), None);
        }
    }

    /// The scan goes from a chunk that is not plain straight to its first
    /// special byte: whatever the byte and wherever it falls (first or last
    /// of a chunk, just past one, in the short tail of a line), the scan
    /// reads the line as serde does, or is unsure; never otherwise.
    #[test]
    fn a_special_byte_anywhere_in_a_long_string_is_seen() {
        let specials: [&[u8]; 14] = [
            b"\"",
            b"\\\"",
            b"\\\\",
            b"\\u0041",
            b"\\ud83d\\ude00",
            b"\\ud83d",
            b"\\x",
            b"\\",
            b"\x01",
            b"\x1f",
            b"\x7f",
            "\u{e9}".as_bytes(),
            b"\xc3",
            b"\xff",
        ];
        for n in 0..140 {
            for sp in specials {
                for tail in [0usize, 1, 70] {
                    let mut text = "a".repeat(n).into_bytes();
                    text.extend_from_slice(sp);
                    text.extend(std::iter::repeat_n(b'b', tail));
                    let mut line = b"{\"id\":1,\"params\":{\"d\":\"".to_vec();
                    line.extend_from_slice(&text);
                    line.extend_from_slice(b"\"},\"method\":\"m\"}");
                    let serde = serde_json::from_slice::<serde_json::Value>(&line);
                    match members(&line) {
                        Some(m) => {
                            let v = serde.unwrap_or_else(|e| {
                                panic!("scan read what serde refuses ({e}): {line:?}")
                            });
                            let p: serde_json::Value =
                                serde_json::from_slice(m.params.unwrap()).unwrap();
                            assert_eq!(p, v["params"], "{line:?}");
                            assert_eq!(m.method, Some(&b"\"m\""[..]), "{line:?}");
                        }
                        // Unsure is always allowed; what serde refuses must
                        // be unsure (checked here for the bytes that make
                        // any parser refuse the line).
                        None => {
                            let invalid = [
                                &b"\""[..],
                                b"\\x",
                                b"\\",
                                b"\x01",
                                b"\x1f",
                                b"\xc3",
                                b"\xff",
                            ];
                            if !invalid.contains(&sp) && *sp != b"\\ud83d"[..] {
                                panic!("scan unsure of a plain line: {line:?}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn text_must_be_utf8() {
        let good = "{\"params\":\"é 😀 漢字 \\n ü\",\"id\":\"ß\"}";
        assert_eq!(
            members(good.as_bytes()).unwrap().id,
            Some("\"ß\"".as_bytes())
        );
        for bad in [
            &b"{\"id\":\"\xc3\"}"[..],
            b"{\"id\":\"\xc0\x80\"}",
            b"{\"id\":\"\xed\xa0\x80\"}",
            b"{\"id\":\"\xf5\x80\x80\x80\"}",
            b"{\"id\":\"\xff\"}",
            b"{\"id\":\"\xc3\xa9\x01\"}",
            b"{\"id\":1}\xc3\xa9",
            b"{\"\xc3\":1}",
        ] {
            assert_eq!(members(bad), None, "{bad:?}");
        }
    }
}
