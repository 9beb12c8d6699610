//! Fuzz the envelope scan (`src/proxy/scan.rs`) against serde_json.
//!
//! Invariants checked on every input:
//! - the scan never panics;
//! - a line the scan reads is valid JSON (and so valid UTF-8) for
//!   serde_json;
//! - serde_json, reading the same line into the envelope's members (each
//!   kept as raw text, `null` included, a repeated member refused), finds
//!   exactly the members the scan reported;
//! - when the scan reports the guarded members of `params` or `result`
//!   (`_meta`, `requestState`, `resultType`, `inputRequests`), serde_json
//!   finds exactly those in the value (none when it is not an object).
//!
//! Run from the repository root:
//!
//! ```text
//! RUSTC_BOOTSTRAP=1 cargo fuzz run envelope -- -dict=fuzz/envelope.dict -max_total_time=30
//! ```

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::Deserialize;
use serde_json::value::RawValue;

/// The scan under test: rootfence's own source file.
#[path = "../../src/proxy/scan.rs"]
#[allow(dead_code)]
mod scan;

/// A member kept as written, `null` included.
#[derive(Default)]
struct Member<'a>(Option<&'a RawValue>);

impl<'de: 'a, 'a> Deserialize<'de> for Member<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'a RawValue>::deserialize(d).map(|r| Member(Some(r)))
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    jsonrpc: Member<'a>,
    #[serde(default, borrow)]
    id: Member<'a>,
    #[serde(default, borrow)]
    method: Member<'a>,
    #[serde(default, borrow)]
    params: Member<'a>,
    #[serde(default, borrow)]
    result: Member<'a>,
    #[serde(default, borrow)]
    error: Member<'a>,
}

fn raw<'a>(m: &Member<'a>) -> Option<&'a [u8]> {
    m.0.map(|r| r.get().as_bytes())
}

/// Member `key` of `value` as serde_json reads it (the last if repeated);
/// `None` when `value` is not an object or has no such member.
fn serde_member<'a>(value: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let m: std::collections::BTreeMap<std::borrow::Cow<'a, str>, &'a RawValue> =
        serde_json::from_slice(value).ok()?;
    m.get(key).map(|v| v.get().as_bytes())
}

fuzz_target!(|data: &[u8]| {
    let Some(m) = scan::members(data) else {
        return;
    };
    assert!(
        serde_json::from_slice::<serde::de::IgnoredAny>(data).is_ok(),
        "the scan read a line serde_json refuses"
    );
    let e: Envelope<'_> = match serde_json::from_slice(data) {
        Ok(e) => e,
        Err(err) => panic!("the scan read a line serde_json reads differently: {err}"),
    };
    assert_eq!(m.jsonrpc, raw(&e.jsonrpc));
    assert_eq!(m.id, raw(&e.id));
    assert_eq!(m.method, raw(&e.method));
    assert_eq!(m.params, raw(&e.params));
    assert_eq!(m.result, raw(&e.result));
    assert_eq!(m.error, raw(&e.error));
    for (value, guarded) in [(m.params, m.params_guarded), (m.result, m.result_guarded)] {
        let (Some(value), Some(g)) = (value, guarded) else {
            continue;
        };
        assert_eq!(g.meta, serde_member(value, "_meta"));
        assert_eq!(g.request_state, serde_member(value, "requestState"));
        assert_eq!(g.result_type, serde_member(value, "resultType"));
        assert_eq!(g.input_requests, serde_member(value, "inputRequests"));
    }
});
