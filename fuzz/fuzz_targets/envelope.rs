//! Fuzz the relay's reading of a line (`src/proxy/scan.rs`, the fast scan,
//! and `src/proxy/canonical.rs`, the strict reading) against serde_json.
//!
//! What rootfence emits for a line (as `message::Line::read` decides: the
//! line itself when the scan reads it, else its canonical text when the
//! strict reading does, else nothing, the sender being refused) is, for
//! every input:
//! - valid UTF-8 JSON with no carriage return or newline, no key twice,
//!   no lone surrogate, numbers finite: the strict reading accepts it and
//!   gives it back unchanged when it is canonical already;
//! - the same value to serde_json as the line it came from.
//!
//! With `ROOTFENCE_FUZZ_EMIT=FILE`, each emitted line is appended to FILE
//! and serde_json's normal form of it to FILE.serde, for
//! `scripts/differential.py`, which reads FILE with Python and node and
//! compares (CI replays the corpus that way after the fuzz run).
//!
//! Invariants of the scan checked on every input:
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

// The readings under test: rootfence's own source files (each refers to
// the others as `super::`, the crate root here).
#[path = "../../src/proxy/canonical.rs"]
#[allow(dead_code)]
mod canonical;
#[path = "../../src/proxy/id.rs"]
#[allow(dead_code)]
mod id;
#[path = "../../src/proxy/scan.rs"]
#[allow(dead_code)]
mod scan;

use serde_json::Value;

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

/// What rootfence relays for `line` (see the module documentation).
fn emitted(line: &[u8]) -> Option<Vec<u8>> {
    if scan::members(line).is_some() {
        return Some(line.to_vec());
    }
    canonical::canonical(line).ok()
}


fn check_emitted(line: &[u8]) {
    let Some(out) = emitted(line) else {
        return;
    };
    assert!(std::str::from_utf8(&out).is_ok(), "emitted text that is not UTF-8");
    assert!(!out.contains(&b'\r') && !out.contains(&b'\n'), "emitted a line break");
    let again = canonical::canonical(&out).expect("emitted a line the strict reading refuses");
    assert_eq!(canonical::canonical(&again).as_ref().ok(), Some(&again), "canonical text not stable");
    let value: Value = serde_json::from_slice(&out).expect("emitted a line serde_json refuses");
    if let Ok(before) = serde_json::from_slice::<Value>(line) {
        assert_eq!(before, value, "the emitted line means something else to serde_json");
    }
    if let Some(path) = std::env::var_os("ROOTFENCE_FUZZ_EMIT") {
        use std::io::Write;
        let mut serde_path = path.clone();
        serde_path.push(".serde");
        let open = |p: &std::ffi::OsStr| {
            std::fs::OpenOptions::new().create(true).append(true).open(p).expect("emit file")
        };
        let mut f = open(&path);
        let mut g = open(&serde_path);
        let _ = f.write_all(&[out.as_slice(), b"\n"].concat());
        let _ = g.write_all(format!("{}\n", canonical::normal_form(&value)).as_bytes());
    }
}

fuzz_target!(|data: &[u8]| {
    check_emitted(data);
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
