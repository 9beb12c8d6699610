//! Protocol versions, failing closed: a revision the guard does not know is
//! never offered to the server, and a host request stamped with one never
//! reaches it.
//!
//! The places a version travels (schema 2025-11-25 and 2026-07-28; Python
//! SDK `mcp_types`):
//!
//! - `initialize` params `protocolVersion` (handshake era): the host's
//!   offer. [`cap_initialize`] replaces an unknown one by the newest known
//!   revision not after it.
//! - `server/discover` result `supportedVersions` (2026-07-28): the
//!   server's offer, from which the host picks. [`filter_discover_result`]
//!   keeps the known revisions only.
//! - error `-32022` (`UNSUPPORTED_PROTOCOL_VERSION`) `data.supported`,
//!   `data.requested`: a server's counter-offer. [`filter_version_error`]
//!   keeps the known revisions only.
//! - every 2026-07-28 request's `params._meta["io.modelcontextprotocol/protocolVersion"]`:
//!   [`check_request`] refuses an unknown one with `-32022` naming the
//!   revisions rootfence can guard ([`unsupported_response`]).

use serde_json::{Value, json};

use super::Revision;
use crate::proxy::message;

/// JSON-RPC error code of an unsupported protocol version (2026-07-28).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// `params._meta` key of a 2026-07-28 request's protocol version.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// Every revision the guard knows, oldest first.
pub const KNOWN: [Revision; 5] = [
    Revision::V2024_11_05,
    Revision::V2025_03_26,
    Revision::V2025_06_18,
    Revision::V2025_11_25,
    Revision::V2026_07_28,
];

impl Revision {
    /// The newest revision the guard knows.
    pub const LATEST: Revision = Revision::V2026_07_28;

    /// The revision `v` names exactly, if the guard knows it.
    pub fn known(v: &str) -> Option<Revision> {
        KNOWN.into_iter().find(|r| r.to_string() == v)
    }

    /// Whether this revision is of the stateless era (no handshake,
    /// per-request `_meta`, `input_required` results).
    pub fn is_stateless(self) -> bool {
        self >= Revision::V2026_07_28
    }
}

/// The `initialize` params `params` (raw JSON) with an unknown
/// `protocolVersion` replaced by the newest known revision not after it
/// (or the oldest known, for a version before every known one); `None`
/// when the version is known, absent or not a string (nothing to change).
///
/// # Security
///
/// The server is never asked to speak a revision whose messages the guard
/// cannot judge.
pub fn cap_initialize(params: &str) -> Option<String> {
    let v: String = serde_json::from_str(message::member(params, "protocolVersion")?).ok()?;
    if Revision::known(&v).is_some() {
        return None;
    }
    let capped = KNOWN
        .into_iter()
        .rev()
        .find(|r| r.to_string().as_str() <= v.as_str())
        .unwrap_or(KNOWN[0]);
    let raw = Value::String(capped.to_string()).to_string();
    message::edit_members(params, &[("protocolVersion", Some(&raw))])
}

/// Keep the known revisions of a JSON array of version strings; `None`
/// when nothing is removed (or `list` is not an array).
fn known_only(list: &str) -> Option<String> {
    let items: Vec<Value> = serde_json::from_str(list).ok()?;
    let kept: Vec<&Value> = items
        .iter()
        .filter(|v| v.as_str().and_then(Revision::known).is_some())
        .collect();
    (kept.len() != items.len())
        .then(|| Value::from(kept.into_iter().cloned().collect::<Vec<_>>()).to_string())
}

/// A `server/discover` result (raw JSON) with the revisions the guard does
/// not know removed from `supportedVersions`; `None` when nothing changes.
/// An emptied list is kept empty: the host then finds no revision in
/// common and falls back to the handshake (the Python SDK does).
pub fn filter_discover_result(result: &str) -> Option<String> {
    let list = message::member(result, "supportedVersions")?;
    let kept = known_only(list)?;
    message::edit_members(result, &[("supportedVersions", Some(&kept))])
}

/// An `error` object (raw JSON) of a `-32022` response with the revisions
/// the guard does not know removed from `data.supported`; `None` when
/// nothing changes or it is another error.
pub fn filter_version_error(error: &str) -> Option<String> {
    let code: i64 = serde_json::from_str(message::member(error, "code")?).ok()?;
    if code != UNSUPPORTED_PROTOCOL_VERSION {
        return None;
    }
    let data = message::member(error, "data")?;
    let kept = known_only(message::member(data, "supported")?)?;
    let data = message::edit_members(data, &[("supported", Some(&kept))])?;
    message::edit_members(error, &[("data", Some(&data))])
}

/// A host request stamped with a protocol version the guard does not
/// know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "protocol version {requested:?} is newer than (or unknown to) the guard, which cannot judge its messages"
)]
pub struct UnknownVersion {
    /// The version as the request names it (raw JSON when not a string).
    pub requested: String,
}

/// Check a host request's `params` (raw JSON): the version, when its
/// `_meta` names one the guard does not know (answer with
/// [`unsupported_response`]). Requests without that `_meta` key (the
/// handshake era) pass.
pub fn check_request(params: &str) -> Result<(), UnknownVersion> {
    let Some(v) =
        message::member(params, "_meta").and_then(|m| message::member(m, META_PROTOCOL_VERSION))
    else {
        return Ok(());
    };
    match serde_json::from_str::<String>(v) {
        Ok(s) if Revision::known(&s).is_some() => Ok(()),
        Ok(requested) => Err(UnknownVersion { requested }),
        Err(_) => Err(UnknownVersion {
            requested: v.to_string(),
        }),
    }
}

/// The `-32022` error response to the host's request `id_raw` whose
/// protocol version the guard does not know: `data.supported` lists the
/// stateless revisions rootfence can guard.
pub fn unsupported_response(id_raw: &str, unknown: &UnknownVersion) -> Vec<u8> {
    let requested = &unknown.requested;
    let supported: Vec<String> = KNOWN
        .into_iter()
        .filter(|r| r.is_stateless())
        .map(|r| r.to_string())
        .collect();
    let data = json!({
        "supported": supported,
        "requested": requested,
        "rule": "protocol.version",
        "by": "rootfence",
    });
    message::error_response_with_data(
        Some(id_raw),
        UNSUPPORTED_PROTOCOL_VERSION,
        &format!("rootfence: {unknown}; use one of {}", supported.join(", ")),
        &data,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exact_revisions_are_known() {
        assert_eq!(Revision::known("2026-07-28"), Some(Revision::V2026_07_28));
        assert_eq!(Revision::known("2025-03-26"), Some(Revision::V2025_03_26));
        for v in [
            "2027-01-01",
            "2026-07-29",
            "2025-09-01",
            "DRAFT-2026-v1",
            "",
            "2026-07-28 ",
        ] {
            assert_eq!(Revision::known(v), None, "{v:?}");
        }
        assert_eq!(Revision::LATEST, *KNOWN.last().unwrap());
        assert!(Revision::V2026_07_28.is_stateless() && !Revision::V2025_11_25.is_stateless());
    }

    #[test]
    fn initialize_never_offers_an_unknown_revision() {
        let p = r#"{"protocolVersion":"2027-03-01","capabilities":{"x":1.50},"clientInfo":{"name":"h","version":"1"}}"#;
        assert_eq!(
            cap_initialize(p).unwrap(),
            r#"{"protocolVersion":"2026-07-28","capabilities":{"x":1.50},"clientInfo":{"name":"h","version":"1"}}"#
        );
        // Between two known revisions: the older one.
        let p = r#"{"protocolVersion":"2025-09-01"}"#;
        assert_eq!(
            cap_initialize(p).unwrap(),
            r#"{"protocolVersion":"2025-06-18"}"#
        );
        // Before every known one, or not a date: the oldest / by text.
        assert_eq!(
            cap_initialize(r#"{"protocolVersion":"2020-01-01"}"#).unwrap(),
            r#"{"protocolVersion":"2024-11-05"}"#
        );
        assert_eq!(
            cap_initialize(r#"{"protocolVersion":"next"}"#).unwrap(),
            r#"{"protocolVersion":"2026-07-28"}"#
        );
        // Known, absent, or not a string: unchanged.
        for p in [
            r#"{"protocolVersion":"2025-11-25"}"#,
            r#"{"capabilities":{}}"#,
            r#"{"protocolVersion":7}"#,
            "[]",
        ] {
            assert_eq!(cap_initialize(p), None, "{p}");
        }
    }

    #[test]
    fn discover_results_offer_known_revisions_only() {
        let r = r#"{"resultType":"complete","supportedVersions":["2025-11-25","2026-07-28","2027-01-01","x"],"capabilities":{},"ttlMs":0}"#;
        assert_eq!(
            filter_discover_result(r).unwrap(),
            r#"{"resultType":"complete","supportedVersions":["2025-11-25","2026-07-28"],"capabilities":{},"ttlMs":0}"#
        );
        // Only unknown ones: the list is emptied.
        let r = r#"{"supportedVersions":["2027-01-01"]}"#;
        assert_eq!(
            filter_discover_result(r).unwrap(),
            r#"{"supportedVersions":[]}"#
        );
        // Nothing to remove, or no list.
        assert_eq!(
            filter_discover_result(r#"{"supportedVersions":["2026-07-28"]}"#),
            None
        );
        assert_eq!(filter_discover_result(r#"{"capabilities":{}}"#), None);
    }

    #[test]
    fn version_errors_offer_known_revisions_only() {
        let e = r#"{"code":-32022,"message":"unsupported","data":{"supported":["2027-01-01","2026-07-28"],"requested":"2025-01-01"}}"#;
        assert_eq!(
            filter_version_error(e).unwrap(),
            r#"{"code":-32022,"message":"unsupported","data":{"supported":["2026-07-28"],"requested":"2025-01-01"}}"#
        );
        assert_eq!(
            filter_version_error(
                r#"{"code":-32601,"message":"x","data":{"supported":["2027-01-01"]}}"#
            ),
            None
        );
        assert_eq!(
            filter_version_error(r#"{"code":-32022,"message":"x"}"#),
            None
        );
    }

    #[test]
    fn requests_stamped_with_an_unknown_revision_are_refused() {
        let ok = r#"{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#;
        assert_eq!(check_request(ok), Ok(()));
        assert_eq!(
            check_request(r#"{"name":"t","_meta":{"progressToken":1}}"#),
            Ok(())
        );
        assert_eq!(check_request(r#"{"name":"t"}"#), Ok(()));
        let new = r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2027-01-01"}}"#;
        let unknown = |v: &str| UnknownVersion {
            requested: v.to_string(),
        };
        assert_eq!(check_request(new), Err(unknown("2027-01-01")));
        let odd = r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":5}}"#;
        assert_eq!(check_request(odd), Err(unknown("5")));
        let line: Value =
            serde_json::from_slice(&unsupported_response("7", &unknown("2027-01-01"))).unwrap();
        assert_eq!(line["id"], 7);
        assert_eq!(line["error"]["code"], -32022);
        assert_eq!(line["error"]["data"]["supported"], json!(["2026-07-28"]));
        assert_eq!(line["error"]["data"]["requested"], "2027-01-01");
        assert_eq!(
            line["error"]["message"],
            "rootfence: protocol version \"2027-01-01\" is newer than (or unknown to) the guard, which cannot judge its messages; use one of 2026-07-28"
        );
    }
}
