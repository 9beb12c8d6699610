//! The JSON-RPC envelope: what rootfence reads of a message without
//! touching the rest, and the few edits it makes (ids, error replies).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::canonical::{self, Unreadable};
pub use super::id::{Ident, valid_id_key};
use super::scan;

/// JSON-RPC error codes used by rootfence.
pub mod code {
    /// Invalid JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// Method not found.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid params.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal error.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// rootfence refused the request by policy (implementation-defined range).
    pub const POLICY_REFUSED: i64 = -32001;
    /// The server was restarted or is gone.
    pub const SERVER_GONE: i64 = -32002;
}

/// A member that may be absent; unlike `Option`, a present `null` is kept
/// (as the raw text `null`), so `"id": null` and `"result": null` are told
/// apart from a missing member.
#[derive(Default)]
struct Member<'a>(Option<&'a RawValue>);

impl<'de: 'a, 'a> Deserialize<'de> for Member<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'a RawValue>::deserialize(d).map(|r| Member(Some(r)))
    }
}

#[derive(Deserialize)]
struct RawEnvelope<'a> {
    #[serde(default, borrow)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    id: Member<'a>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Member<'a>,
    #[serde(default, borrow)]
    result: Member<'a>,
    #[serde(default, borrow)]
    error: Member<'a>,
}

/// What kind of message a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Has `method` and `id`.
    Request,
    /// Has `method`, no `id`.
    Notification,
    /// Has `id` and `result` or `error`, no `method`.
    Response,
}

/// A JSON value exactly as written in a line (valid JSON in valid UTF-8,
/// no surrounding whitespace): checked by the scan or by serde, and not
/// checked again unless its text is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raw<'a>(&'a [u8]);

impl<'a> Raw<'a> {
    /// The value's text. Checks the UTF-8 again (a pass over the value):
    /// hot paths read [`Raw::bytes`] or the envelope's [`Guarded`] members
    /// instead, so a megabyte value is not read once more.
    pub fn get(self) -> &'a str {
        // Never fails: a Raw is made only from text the scan or serde
        // found to be valid UTF-8.
        std::str::from_utf8(self.0).unwrap_or("null")
    }

    /// The value's bytes.
    pub fn bytes(self) -> &'a [u8] {
        self.0
    }
}

impl<'a> From<&'a RawValue> for Raw<'a> {
    fn from(r: &'a RawValue) -> Self {
        Raw(r.get().as_bytes())
    }
}

/// The members of a `params` or `result` object the stateless guard looks
/// for, as the envelope's pass found them (see [`scan::Guarded`]); each
/// absent when the object certainly has no such member.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Guarded<'a> {
    /// `_meta`.
    pub meta: Option<Raw<'a>>,
    /// `requestState`.
    pub request_state: Option<Raw<'a>>,
    /// `resultType`.
    pub result_type: Option<Raw<'a>>,
    /// `inputRequests`.
    pub input_requests: Option<Raw<'a>>,
}

/// The parts of a message rootfence inspects, borrowed from the line.
#[derive(Debug)]
pub struct Envelope<'a> {
    /// Request, notification or response.
    pub kind: Kind,
    /// The id, as written.
    pub id: Option<Raw<'a>>,
    /// The method.
    pub method: Option<Cow<'a, str>>,
    /// The params, as written.
    pub params: Option<Raw<'a>>,
    /// The result, as written.
    pub result: Option<Raw<'a>>,
    /// The error, as written.
    pub error: Option<Raw<'a>>,
    /// Whether the response is an error.
    pub is_error: bool,
    /// The guarded members of `params`, when the envelope's pass is sure
    /// of them; `None`: look in the text.
    pub params_guarded: Option<Guarded<'a>>,
    /// The guarded members of `result`, likewise.
    pub result_guarded: Option<Guarded<'a>>,
}

/// Why a line is not a JSON-RPC message rootfence relays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    /// Not JSON, or not JSON every parser reads the same way (see
    /// [`super::canonical`]).
    Unreadable(Unreadable),
    /// A JSON array: a batch.
    Batch,
    /// JSON, but not a JSON-RPC 2.0 message; the id if one was found.
    NotJsonRpc {
        /// What is wrong.
        why: &'static str,
        /// The id, as written, if it was a valid id.
        id: Option<String>,
    },
}

/// The envelope's members, from either reading.
struct Members<'a> {
    jsonrpc: Option<Cow<'a, str>>,
    id: Option<Raw<'a>>,
    method: Option<Cow<'a, str>>,
    params: Option<Raw<'a>>,
    result: Option<Raw<'a>>,
    error: Option<Raw<'a>>,
    params_guarded: Option<Guarded<'a>>,
    result_guarded: Option<Guarded<'a>>,
}

/// The fast reading ([`scan::members`]), when it is sure; `None` leaves the
/// line to serde.
fn scanned(line: &[u8]) -> Option<Members<'_>> {
    let m = scan::members(line)?;
    fn guarded(g: scan::Guarded<'_>) -> Guarded<'_> {
        Guarded {
            meta: g.meta.map(Raw),
            request_state: g.request_state.map(Raw),
            result_type: g.result_type.map(Raw),
            input_requests: g.input_requests.map(Raw),
        }
    }
    Some(Members {
        jsonrpc: text(m.jsonrpc)?,
        method: text(m.method)?,
        id: m.id.map(Raw),
        params: m.params.map(Raw),
        result: m.result.map(Raw),
        error: m.error.map(Raw),
        params_guarded: m.params_guarded.map(guarded),
        result_guarded: m.result_guarded.map(guarded),
    })
}

/// A string member as serde reads it into `Option<Cow<str>>` (`null` is
/// absent); `None` for another type, which is serde's error to report.
#[allow(clippy::option_option)]
fn text(v: Option<&[u8]>) -> Option<Option<Cow<'_, str>>> {
    match v {
        None | Some(b"null") => Some(None),
        Some(s) if s.first() == Some(&b'"') && !s.contains(&b'\\') => Some(Some(Cow::Borrowed(
            std::str::from_utf8(&s[1..s.len() - 1]).ok()?,
        ))),
        Some(s) if s.first() == Some(&b'"') => serde_json::from_slice::<String>(s)
            .ok()
            .map(|s| Some(Cow::Owned(s))),
        Some(_) => None,
    }
}

/// Read the envelope of one line, without changing it: for a line the
/// fast scan is unsure of, only when the strict reading finds it readable
/// (its canonical text is what is relayed: see [`Line::read`]).
///
/// # Security
///
/// The fast scan reads a line only when every parser reads it the same
/// way; every other line is read strictly first, then by serde, so both
/// readings agree on every line they both accept (the property
/// `scan_agrees_with_serde` tests this).
pub fn parse(line: &[u8]) -> Result<Envelope<'_>, Invalid> {
    let first = line.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') {
        return Err(Invalid::Batch);
    }
    let raw = match scanned(line) {
        Some(m) => m,
        None => {
            canonical::canonical(line).map_err(Invalid::Unreadable)?;
            parse_serde(line)?
        }
    };
    check(raw)
}

/// Whether a line is a JSON array (a batch).
pub fn is_batch(line: &[u8]) -> bool {
    line.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[')
}

/// A line as rootfence relays it, with its envelope: the line as it came
/// when the fast scan reads it, else its canonical text (see
/// [`canonical`]).
#[derive(Debug)]
pub struct Line {
    bytes: Vec<u8>,
    spans: Spans,
    rewritten: bool,
}

/// Where each envelope member is in a [`Line`].
#[derive(Debug)]
struct Spans {
    kind: Kind,
    id: Option<Range<usize>>,
    method: Option<Text>,
    params: Option<Range<usize>>,
    result: Option<Range<usize>>,
    error: Option<Range<usize>>,
    is_error: bool,
    params_guarded: Option<[Option<Range<usize>>; 4]>,
    result_guarded: Option<[Option<Range<usize>>; 4]>,
}

/// A string member: where it is in the line (no escapes), or its text.
#[derive(Debug)]
enum Text {
    At(Range<usize>),
    Owned(String),
}

use std::ops::Range;

impl Line {
    /// Read `bytes` (one line): the line itself when the fast scan reads
    /// it, its canonical text when the strict reading does, else why not.
    ///
    /// # Security
    ///
    /// What a [`Line`] holds is read the same way by every parser a host
    /// uses; a line that cannot be read completely and unambiguously is
    /// never relayed as it came.
    pub fn read(bytes: Vec<u8>) -> Result<Line, Invalid> {
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        if first == Some(&b'[') {
            return Err(Invalid::Batch);
        }
        if let Some(m) = scanned(&bytes) {
            let spans = Spans::of(&bytes, &check(m)?);
            return Ok(Line {
                bytes,
                spans,
                rewritten: false,
            });
        }
        let canon = canonical::canonical(&bytes).map_err(Invalid::Unreadable)?;
        let raw = match scanned(&canon) {
            Some(m) => m,
            None => parse_serde(&canon)?,
        };
        let spans = Spans::of(&canon, &check(raw)?);
        let rewritten = canon != bytes;
        Ok(Line {
            bytes: canon,
            spans,
            rewritten,
        })
    }

    /// The envelope.
    pub fn envelope(&self) -> Envelope<'_> {
        let b = &self.bytes;
        let raw = |r: &Option<Range<usize>>| r.clone().map(|r| Raw(&b[r]));
        let guarded = |g: &Option<[Option<Range<usize>>; 4]>| {
            g.as_ref().map(|[m, s, t, i]| Guarded {
                meta: raw(m),
                request_state: raw(s),
                result_type: raw(t),
                input_requests: raw(i),
            })
        };
        let s = &self.spans;
        Envelope {
            kind: s.kind,
            id: raw(&s.id),
            method: s.method.as_ref().map(|m| match m {
                // Checked UTF-8 when read; ASCII boundaries.
                Text::At(r) => Cow::Borrowed(std::str::from_utf8(&b[r.clone()]).unwrap_or("")),
                Text::Owned(t) => Cow::Borrowed(t.as_str()),
            }),
            params: raw(&s.params),
            result: raw(&s.result),
            error: raw(&s.error),
            is_error: s.is_error,
            params_guarded: guarded(&s.params_guarded),
            result_guarded: guarded(&s.result_guarded),
        }
    }

    /// The line's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The line's bytes, to relay.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// Whether the line is rootfence's canonical text of what came.
    pub fn rewritten(&self) -> bool {
        self.rewritten
    }
}

impl Spans {
    fn of(line: &[u8], e: &Envelope<'_>) -> Spans {
        let at = |r: Option<Raw<'_>>| r.and_then(|r| span_in(line, r));
        let guarded = |g: &Option<Guarded<'_>>| {
            g.map(|g| {
                [
                    at(g.meta),
                    at(g.request_state),
                    at(g.result_type),
                    at(g.input_requests),
                ]
            })
        };
        Spans {
            kind: e.kind,
            id: at(e.id),
            method: e.method.as_ref().map(|m| match m {
                Cow::Borrowed(t) => match span_of(line, t) {
                    Some(r) => Text::At(r),
                    None => Text::Owned(t.to_string()),
                },
                Cow::Owned(t) => Text::Owned(t.clone()),
            }),
            params: at(e.params),
            result: at(e.result),
            error: at(e.error),
            is_error: e.is_error,
            params_guarded: guarded(&e.params_guarded),
            result_guarded: guarded(&e.result_guarded),
        }
    }
}

/// The envelope's members as serde reads them.
fn parse_serde(line: &[u8]) -> Result<Members<'_>, Invalid> {
    let raw: RawEnvelope<'_> = match serde_json::from_slice(line) {
        Ok(r) => r,
        Err(e) => {
            // Valid JSON of another shape is not a parse error.
            if serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok() {
                return Err(Invalid::NotJsonRpc {
                    why: "not a JSON-RPC object",
                    id: None,
                });
            }
            tracing::debug!("not JSON: {e}");
            return Err(Invalid::Unreadable(Unreadable {
                why: canonical::Why::NotJson,
                ident: Ident::default(),
            }));
        }
    };
    Ok(Members {
        jsonrpc: raw.jsonrpc,
        id: raw.id.0.map(Raw::from),
        method: raw.method,
        params: raw.params.0.map(Raw::from),
        result: raw.result.0.map(Raw::from),
        error: raw.error.0.map(Raw::from),
        params_guarded: None,
        result_guarded: None,
    })
}

/// The envelope, if the members make a JSON-RPC 2.0 message.
fn check(raw: Members<'_>) -> Result<Envelope<'_>, Invalid> {
    let (mut id, params, result, error) = (raw.id, raw.params, raw.result, raw.error);
    // An error response may carry `"id": null` (the request was unreadable).
    if error.is_some() && raw.method.is_none() && id.is_some_and(|i| i.get() == "null") {
        id = None;
    }
    let id_ok = id.is_none_or(|id| valid_id_key(id.get()).is_some());
    // The id's text, kept only when the message is refused.
    let bad = |why: &'static str| Invalid::NotJsonRpc {
        why,
        id: id.filter(|_| id_ok).map(|id| id.get().to_string()),
    };
    if raw.jsonrpc.as_deref() != Some("2.0") {
        return Err(bad("jsonrpc must be \"2.0\""));
    }
    if !id_ok {
        return Err(bad("id must be a string or an integer"));
    }
    let kind = match (&raw.method, id, result.is_some() || error.is_some()) {
        (Some(_), Some(_), false) => Kind::Request,
        (Some(_), None, false) => Kind::Notification,
        (None, Some(_), true) => Kind::Response,
        (None, None, true) => {
            // An error response to something whose id could not be read.
            if error.is_some() {
                Kind::Response
            } else {
                return Err(bad("a response needs an id"));
            }
        }
        (Some(_), _, true) => {
            return Err(bad("a message cannot have both method and result/error"));
        }
        (None, _, false) => return Err(bad("neither method nor result/error")),
    };
    if let Some(p) = params {
        let c = p.bytes().first();
        if !matches!(c, Some(b'{') | Some(b'[')) {
            return Err(bad("params must be an object or an array"));
        }
    }
    Ok(Envelope {
        kind,
        id,
        method: raw.method,
        params,
        result,
        error,
        is_error: error.is_some(),
        params_guarded: raw.params_guarded,
        result_guarded: raw.result_guarded,
    })
}

#[derive(serde::Deserialize)]
struct CancelParams<'a> {
    #[serde(rename = "requestId", borrow)]
    request_id: &'a serde_json::value::RawValue,
}

#[derive(serde::Deserialize)]
struct ProgressParams<'a> {
    #[serde(rename = "progressToken", borrow)]
    token: &'a serde_json::value::RawValue,
}

/// The `requestId` of `notifications/cancelled` params, when readable.
pub fn cancelled_id<'a>(params: Option<Raw<'a>>) -> Option<&'a serde_json::value::RawValue> {
    let p = serde_json::from_str::<CancelParams<'a>>(params?.get()).ok()?;
    Some(p.request_id)
}

/// The `progressToken` of `notifications/progress` params, when readable.
pub fn progress_token<'a>(params: Option<Raw<'a>>) -> Option<&'a serde_json::value::RawValue> {
    let p = serde_json::from_str::<ProgressParams<'a>>(params?.get()).ok()?;
    Some(p.token)
}

/// Byte range of `part` inside `line`. `part` must be borrowed from `line`
/// (as every member of an [`Envelope`] parsed from `line` is).
pub fn span_in(line: &[u8], part: Raw<'_>) -> Option<std::ops::Range<usize>> {
    let start = (part.bytes().as_ptr() as usize).checked_sub(line.as_ptr() as usize)?;
    let end = start.checked_add(part.bytes().len())?;
    (end <= line.len()).then_some(start..end)
}

/// Byte range of `part` inside `line`; `part` must be a slice of `line`'s
/// text (as [`member`] of it returns).
pub fn span_of(line: &[u8], part: &str) -> Option<std::ops::Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(line.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (end <= line.len()).then_some(start..end)
}

/// `line` with `range` replaced by `with`.
pub fn splice(line: &[u8], range: std::ops::Range<usize>, with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len() - range.len() + with.len() + 1);
    out.extend_from_slice(&line[..range.start]);
    out.extend_from_slice(with);
    out.extend_from_slice(&line[range.end..]);
    out
}

/// `line` with each range replaced; the ranges must not overlap.
pub fn splice_all(line: &[u8], edits: &mut [(std::ops::Range<usize>, &[u8])]) -> Vec<u8> {
    edits.sort_by_key(|(r, _)| r.start);
    let grow: usize = edits.iter().map(|(_, w)| w.len()).sum();
    let mut out = Vec::with_capacity(line.len() + grow + 1);
    let mut at = 0;
    for (r, with) in edits.iter() {
        out.extend_from_slice(&line[at..r.start]);
        out.extend_from_slice(with);
        at = r.end;
    }
    out.extend_from_slice(&line[at..]);
    out
}

/// A JSON-RPC error response. `id` is raw JSON (`None` → `null`).
pub fn error_response(id: Option<&str>, code: i64, message: &str) -> Vec<u8> {
    let msg = serde_json::Value::String(message.to_string());
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"error\":{{\"code\":{code},\"message\":{msg}}}}}",
        id.unwrap_or("null")
    )
    .into_bytes()
}

/// A JSON-RPC error response with `data`. `id` is raw JSON (`None` →
/// `null`).
pub fn error_response_with_data(
    id: Option<&str>,
    code: i64,
    message: &str,
    data: &serde_json::Value,
) -> Vec<u8> {
    let msg = serde_json::Value::String(message.to_string());
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"error\":{{\"code\":{code},\"message\":{msg},\"data\":{data}}}}}",
        id.unwrap_or("null")
    )
    .into_bytes()
}

/// A JSON-RPC result response. `id` and `result` are raw JSON.
pub fn result_response(id: &str, result: &str) -> Vec<u8> {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}").into_bytes()
}

/// A JSON-RPC request. `id` and `params` are raw JSON.
pub fn request(id: &str, method: &str, params: Option<&str>) -> Vec<u8> {
    let m = serde_json::Value::String(method.to_string());
    match params {
        Some(p) => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":{m},\"params\":{p}}}"),
        None => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":{m}}}"),
    }
    .into_bytes()
}

/// A JSON-RPC notification. `params` is raw JSON.
pub fn notification(method: &str, params: Option<&str>) -> Vec<u8> {
    let m = serde_json::Value::String(method.to_string());
    match params {
        Some(p) => format!("{{\"jsonrpc\":\"2.0\",\"method\":{m},\"params\":{p}}}"),
        None => format!("{{\"jsonrpc\":\"2.0\",\"method\":{m}}}"),
    }
    .into_bytes()
}

/// The members of a JSON object, in order, each value exactly as written.
struct RawMembers<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for RawMembers<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = RawMembers<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = m.next_key::<Cow<'de, str>>()? {
                    let v: &'de RawValue = m.next_value()?;
                    out.push((k, v));
                }
                Ok(RawMembers(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// The raw text of member `key` of the JSON object `object` (the last one
/// if it is repeated, as serde reads it); `None` when `object` is not an
/// object or has no such member.
pub fn member<'a>(object: &'a str, key: &str) -> Option<&'a str> {
    if !may_name(object, key) {
        return None;
    }
    // The fast scan when it is sure (the same answer serde gives), serde
    // otherwise.
    if let Some(found) = super::scan::member(object.as_bytes(), key.as_bytes()) {
        return found.and_then(|v| {
            // `v` is a slice of `object` that starts and ends on JSON
            // token boundaries, which are character boundaries.
            let start = v.as_ptr() as usize - object.as_ptr() as usize;
            object.get(start..start + v.len())
        });
    }
    let m: RawMembers<'a> = serde_json::from_str(object).ok()?;
    m.0.into_iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.get())
}

/// Whether JSON text `text` may hold a member named `key`: it holds the
/// key's bytes, or a backslash (an escape such as `\u` or `\/` makes a
/// key's text differ from its name). `false` is certain; two substring
/// searches, far cheaper than reading the text.
pub fn may_name(text: &str, key: &str) -> bool {
    let t = text.as_bytes();
    if key.contains(['"', '\\']) || key.chars().any(char::is_control) {
        return true;
    }
    // Any escape at all (one byte search) may be one that hides the key.
    memchr::memchr(b'\\', t).is_some() || memchr::memmem::find(t, key.as_bytes()).is_some()
}

/// `object` (a JSON object's text) with members replaced, added or
/// removed: for each `(key, Some(raw))` the member is set to the raw JSON
/// `raw` (added at the end if absent), for each `(key, None)` it is
/// removed. Every other member keeps its place and its exact text. `None`
/// when `object` is not a JSON object.
pub fn edit_members(object: &str, edits: &[(&str, Option<&str>)]) -> Option<String> {
    let m: RawMembers<'_> = serde_json::from_str(object).ok()?;
    let mut out = String::with_capacity(object.len() + 64);
    out.push('{');
    let mut first = true;
    let mut put = |out: &mut String, k: &str, v: &str| {
        if !first {
            out.push(',');
        }
        first = false;
        // A string always serializes.
        out.push_str(&serde_json::Value::String(k.to_string()).to_string());
        out.push(':');
        out.push_str(v);
    };
    let mut done = vec![false; edits.len()];
    for (k, v) in &m.0 {
        match edits.iter().position(|(e, _)| *e == k.as_ref()) {
            None => put(&mut out, k, v.get()),
            Some(i) => {
                // A repeated member is written once, where it first was.
                if !done[i] {
                    done[i] = true;
                    if let Some(new) = edits[i].1 {
                        put(&mut out, k, new);
                    }
                }
            }
        }
    }
    for (i, (k, v)) in edits.iter().enumerate() {
        if !done[i]
            && let Some(v) = v
        {
            put(&mut out, k, v);
        }
    }
    out.push('}');
    Some(out)
}

#[cfg(test)]
mod tests {

    #[test]
    fn edit_members_keeps_every_other_member_byte_for_byte() {
        let o = r#"{"name":"x","arguments":{"n":1.50,"big":123456789012345678901234567890},"_meta":{"a":1}}"#;
        let e = edit_members(
            o,
            &[
                ("inputResponses", Some(r#"{"k":{"roots":[]}}"#)),
                ("requestState", Some(r#""s\u0041""#)),
            ],
        )
        .unwrap();
        assert_eq!(
            e,
            r#"{"name":"x","arguments":{"n":1.50,"big":123456789012345678901234567890},"_meta":{"a":1},"inputResponses":{"k":{"roots":[]}},"requestState":"s\u0041"}"#
        );
        // Replace in place, remove, and repeated members written once.
        let o = r#"{"a":1,"requestState":"x","b":2,"requestState":"y"}"#;
        assert_eq!(
            edit_members(o, &[("requestState", Some("\"z\"")), ("b", None)]).unwrap(),
            r#"{"a":1,"requestState":"z"}"#
        );
        assert_eq!(edit_members("[1]", &[]), None);
        assert_eq!(edit_members("{}", &[("k", None)]).unwrap(), "{}");
        assert_eq!(member(r#"{"a":{"b":[1, 2]},"a":3}"#, "a"), Some("3"));
        assert_eq!(
            member(r#"{"a":{"b":[1, 2]}}"#, "a"),
            Some(r#"{"b":[1, 2]}"#)
        );
        assert_eq!(member("{}", "a"), None);
    }
    use super::*;

    #[test]
    fn kinds() {
        let k = |s: &str| parse(s.as_bytes()).map(|e| e.kind);
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Ok(Kind::Request)
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Kind::Notification)
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":"x","result":{}}"#),
            Ok(Kind::Response)
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}"#),
            Ok(Kind::Response)
        );
        assert!(k(r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#).is_err());
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":3,"result":null}"#),
            Ok(Kind::Response)
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","error":{"code":1,"message":"m"}}"#),
            Ok(Kind::Response)
        );
        assert!(matches!(k("not json"), Err(Invalid::Unreadable(_))));
        assert!(matches!(k("[1,2]"), Err(Invalid::Batch)));
        assert!(matches!(k("42"), Err(Invalid::NotJsonRpc { .. })));
        assert!(matches!(
            k(r#"{"id":1,"method":"x"}"#),
            Err(Invalid::NotJsonRpc { id: Some(_), .. })
        ));
        assert!(matches!(
            k(r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#),
            Err(Invalid::NotJsonRpc { .. })
        ));
        assert!(matches!(
            k(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#),
            Err(Invalid::NotJsonRpc { .. })
        ));
    }

    #[test]
    fn id_splice_keeps_every_other_byte() {
        let line = br#"{"jsonrpc":"2.0", "id" : 17 ,"method":"m","params":{"id":99,"x":[1,2]}}"#;
        let env = parse(line).unwrap();
        let range = span_in(line, env.id.unwrap()).unwrap();
        let out = splice(line, range, br#""rf-9""#);
        assert_eq!(
            out,
            br#"{"jsonrpc":"2.0", "id" : "rf-9" ,"method":"m","params":{"id":99,"x":[1,2]}}"#
                .to_vec()
        );
    }

    #[test]
    fn several_edits_in_one_line() {
        let line = br#"{"id":7,"params":{"_meta":{"progressToken":"t"}}}"#;
        let id = 6..7;
        let token = 43..46;
        assert_eq!(&line[token.clone()], br#""t""#);
        let out = splice_all(
            line,
            &mut [(token, b"12".as_slice()), (id, b"12".as_slice())],
        );
        assert_eq!(
            out,
            br#"{"id":12,"params":{"_meta":{"progressToken":12}}}"#.to_vec()
        );
    }

    /// Both readings of a line, as comparable text.
    fn members_text(m: &Members<'_>) -> [Option<String>; 6] {
        let raw = |r: Option<Raw<'_>>| r.map(|r| r.get().to_string());
        [
            m.jsonrpc.as_deref().map(str::to_string),
            m.method.as_deref().map(str::to_string),
            raw(m.id),
            raw(m.params),
            raw(m.result),
            raw(m.error),
        ]
    }

    /// Random JSON text: values of every kind, with whitespace, escapes
    /// and the envelope's names used as keys at any depth.
    fn json_text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let key = prop_oneof![
            Just("\"jsonrpc\"".to_string()),
            Just("\"id\"".to_string()),
            Just("\"method\"".to_string()),
            Just("\"params\"".to_string()),
            Just("\"result\"".to_string()),
            Just("\"error\"".to_string()),
            Just("\"i\\u0064\"".to_string()),
            Just("\"a\\/b\"".to_string()),
            Just("\"a/b\"".to_string()),
            Just("\"_meta\"".to_string()),
            Just("\"_m\\u0065ta\"".to_string()),
            Just("\"requestState\"".to_string()),
            Just("\"resultType\"".to_string()),
            Just("\"inputRequests\"".to_string()),
            "\"[a-z]{0,3}\"",
        ];
        // Near-valid leaves: numbers and literals with grammar-edge
        // mistakes ("01", "1.", "1e", "tru") among the valid ones.
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("false".to_string()),
            Just("tru".to_string()),
            Just("\"2.0\"".to_string()),
            Just("\"漢字 ü\"".to_string()),
            "-?[0-9]{1,3}(\\.[0-9]{0,2})?([eE][+-]?[0-9]{0,2})?",
            "\"([a-zA-Z0-9 /+=]|\\\\[nt\"\\\\/x]|\\\\u00[0-9a-f]{2}|é|😀){0,40}\"",
        ];
        let ws = prop_oneof![Just(""), Just(" "), Just("\t"), Just(" \r\n ")];
        // Sometimes a trailing comma.
        let object = |(members, comma): (Vec<(String, String)>, bool)| {
            let members: Vec<String> = members
                .into_iter()
                .map(|(k, v)| format!("{k} : {v}"))
                .collect();
            format!("{{{}{}}}", members.join(" ,"), if comma { "," } else { "" })
        };
        let inner_key = key.clone();
        let value = leaf.prop_recursive(4, 40, 6, move |inner| {
            prop_oneof![
                (
                    proptest::collection::vec(inner.clone(), 0..5),
                    proptest::bool::weighted(0.1)
                )
                    .prop_map(|(v, comma)| format!(
                        "[{}{}]",
                        v.join(","),
                        if comma { "," } else { "" }
                    )),
                (
                    proptest::collection::vec((inner_key.clone(), inner), 0..5),
                    proptest::bool::weighted(0.1)
                )
                    .prop_map(object),
            ]
        });
        // Lines are objects, as messages are.
        let top = (
            proptest::collection::vec((key, value), 0..6),
            proptest::bool::weighted(0.1),
        )
            .prop_map(object);
        (top, ws).prop_map(|(v, ws)| format!("{ws}{v}{ws}"))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// Whenever the fast scan reads a line, serde reads the same
        /// members from it; lines are random JSON, then damaged.
        #[test]
        fn scan_agrees_with_serde(
            text in json_text(),
            damage in proptest::collection::vec(
                (proptest::prelude::any::<proptest::sample::Index>(), 0u8..3, proptest::sample::select(b"0,]}\"\\:-.e[{ 1\x01\x80\xc3\xed\xf5\xa0".to_vec())),
                0..2,
            ),
        ) {
            // Damage: replace, insert or delete a byte, the bytes that
            // matter to JSON's grammar most often.
            let mut line = text.into_bytes();
            for (at, op, byte) in damage {
                let i = at.index(line.len() + 1);
                match op {
                    0 if i < line.len() => line[i] = byte,
                    1 => line.insert(i, byte),
                    _ if i < line.len() => {
                        line.remove(i);
                    }
                    _ => {}
                }
            }
            if let Some(fast) = scanned(&line) {
                let slow = parse_serde(&line);
                proptest::prop_assert!(slow.is_ok(), "scan read {:?}; serde refused it", String::from_utf8_lossy(&line));
                let slow = slow.unwrap_or_else(|_| unreachable!());
                proptest::prop_assert_eq!(members_text(&fast), members_text(&slow));
                // The guarded members the pass reports are the ones serde
                // reads in the value (none when it is not an object).
                for (value, guarded) in [(fast.params, fast.params_guarded), (fast.result, fast.result_guarded)] {
                    let (Some(value), Some(g)) = (value, guarded) else { continue };
                    for (key, found) in [
                        ("_meta", g.meta),
                        ("requestState", g.request_state),
                        ("resultType", g.result_type),
                        ("inputRequests", g.input_requests),
                    ] {
                        let slow: Option<String> = serde_json::from_str::<RawMembers<'_>>(value.get())
                            .ok()
                            .and_then(|m| m.0.into_iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.get().to_string()));
                        proptest::prop_assert_eq!(found.map(|f| f.get().to_string()), slow, "{} in {}", key, value.get());
                    }
                }
            }
        }

        /// [`member`] gives what serde reads (the last of repeated
        /// members), whether the fast scan or serde answered.
        #[test]
        fn member_agrees_with_serde(text in json_text()) {
            for key in ["id", "method", "params", "result", "error", "ab", "a/b"] {
                let slow: Option<String> = serde_json::from_str::<RawMembers<'_>>(&text)
                    .ok()
                    .and_then(|m| m.0.into_iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.get().to_string()));
                proptest::prop_assert_eq!(member(&text, key).map(str::to_string), slow, "{} in {}", key, text);
            }
        }
    }
}
