//! JSON-RPC ids: which JSON values are ids, the one key of each (ids equal
//! as JSON values have equal keys), and what identifies a message that is
//! not relayed, so that its sender can be answered.

use std::borrow::Cow;

/// What identifies a message that is not relayed (unreadable, or over
/// the size limit), as far as it could be read cleanly: its sender is
/// answered by its id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ident {
    /// Its top-level `id` (the last one, if repeated), as valid JSON text.
    pub id: Option<String>,
    /// It has a top-level `id` member, whatever its value (one that is
    /// no valid id, such as `1e400`, is not kept in [`Ident::id`]).
    pub has_id: bool,
    /// Its top-level `method`.
    pub method: Option<String>,
    /// It has a `result` or an `error`: it answers a request.
    pub answer: bool,
}

impl Ident {
    /// Whether its sender gets an error reply: not for an answer (the
    /// request it answers is told instead) nor for a notification (a
    /// method and no `id` member at all). A request whose id cannot be
    /// read or is no valid id gets its error under id `null`.
    pub fn replied(&self) -> bool {
        !(self.answer || (self.method.is_some() && !self.has_id && self.id.is_none()))
    }
}

/// The canonical key of raw JSON text that is a valid MCP id, `None` for
/// any other: ids equal as JSON values have equal keys. A string is
/// compared unescaped (`"a"` and `"\u0061"` are one id); an integer as
/// written, except `-0` (which is `0`); a number with a fraction or an
/// exponent whose value is an integer of at most 2^53 is that integer
/// (`5.0` and `5e0` are `5`, as hosts read them: JSON-RPC says ids SHOULD
/// NOT have fractions, and Python and JavaScript match `5.0` to `5`).
/// Other numbers are not ids. Copies only what is not canonical already.
pub fn valid_id_key(raw: &str) -> Option<Cow<'_, str>> {
    let b = raw.as_bytes();
    match b.first()? {
        b'"' => {
            if b.len() >= 2 && b[b.len() - 1] == b'"' && !b.contains(&b'\\') {
                return Some(Cow::Borrowed(raw));
            }
            let s: String = serde_json::from_str(raw).ok()?;
            Some(Cow::Owned(serde_json::Value::String(s).to_string()))
        }
        b'-' | b'0'..=b'9' => {
            let digits = b.strip_prefix(b"-").unwrap_or(b);
            if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) {
                if digits.iter().all(|d| *d == b'0') {
                    return Some(Cow::Borrowed("0"));
                }
                return Some(Cow::Borrowed(raw));
            }
            let v: f64 = raw.parse().ok()?;
            let integral = v.is_finite() && v.fract() == 0.0 && v.abs() <= 9_007_199_254_740_992.0;
            // An exact integer of at most 2^53: printed without a fraction.
            #[allow(clippy::cast_possible_truncation)]
            integral.then(|| Cow::Owned((v as i64).to_string()))
        }
        _ => None,
    }
}
