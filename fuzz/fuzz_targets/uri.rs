//! Fuzz the `file://` root URI parser.
//!
//! Invariants checked on every input:
//! - the parser never panics;
//! - an accepted URI names an absolute path with no `.`, `..` or empty
//!   segments and no trailing slash (except `/` itself);
//! - printing that path with `path_to_uri` and parsing the result gives the
//!   same path back, and printing is a fixed point.
//!
//! Input that is not UTF-8 is parsed after lossy conversion (root URIs
//! arrive as JSON strings, so they are always UTF-8).
//!
//! Run from the repository root (cargo-fuzz wants nightly; on stable,
//! `RUSTC_BOOTSTRAP=1` enables the flags it needs):
//!
//! ```text
//! RUSTC_BOOTSTRAP=1 cargo fuzz run uri -- -dict=fuzz/uri.dict -max_total_time=30
//! ```

#![no_main]

use std::os::unix::ffi::OsStrExt;

use libfuzzer_sys::fuzz_target;

/// The parser under test: rootfence's own source file.
#[path = "../../src/roots/uri.rs"]
#[allow(dead_code)]
mod uri;

use uri::{parse_file_uri, path_to_uri};

fuzz_target!(|data: &[u8]| {
    let input = match std::str::from_utf8(data) {
        Ok(s) => s,
        Err(_) => &String::from_utf8_lossy(data),
    };
    let Ok(path) = parse_file_uri(input) else {
        return;
    };
    let bytes = path.as_os_str().as_bytes();
    assert!(
        bytes.starts_with(b"/"),
        "not absolute: {path:?} from {input:?}"
    );
    if bytes != b"/" {
        assert!(!bytes.ends_with(b"/"), "trailing slash: {path:?}");
        for seg in bytes[1..].split(|&b| b == b'/') {
            assert!(!seg.is_empty(), "empty segment in {path:?} from {input:?}");
            assert!(
                seg != b"." && seg != b"..",
                "dot segment in {path:?} from {input:?}"
            );
            assert!(!seg.contains(&0), "NUL in {path:?} from {input:?}");
        }
    }
    let uri = path_to_uri(&path);
    assert_eq!(
        parse_file_uri(&uri).as_ref(),
        Ok(&path),
        "{uri:?} (printed from {path:?}, parsed from {input:?}) does not parse back"
    );
    assert_eq!(path_to_uri(&path), uri);
});
