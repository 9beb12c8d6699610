//! Fuzz the network proxy's request and response heads
//! (`src/netproxy/http.rs`, with the host rules of `src/netproxy/rule.rs`
//! and the body framing of `src/netproxy/body.rs`).
//!
//! Invariants checked on every input:
//! - neither parser panics;
//! - a request it accepts names a host and a port other than 0, and a
//!   `CONNECT` line written back from that target reads as the same target;
//! - the head forwarded upstream for an absolute-form request has exactly
//!   one `Host` header, the one the URL names, none of the connection's own
//!   headers (`Proxy-*`, `Connection` but the closing one), no bare CR or
//!   LF inside a line, and ends with `Connection: close`;
//! - a response head it rewrites (not `1xx`) ends with `Connection: close`
//!   and keeps no `Keep-Alive`.
//!
//! Run from the repository root:
//!
//! ```text
//! RUSTC_BOOTSTRAP=1 cargo fuzz run proxy_head -- -dict=fuzz/proxy_head.dict -max_total_time=30
//! ```

#![no_main]

use libfuzzer_sys::fuzz_target;

/// The heads under test: rootfence's own source files (`http.rs` reaches
/// the host rules as `super::rule`, a body's framing as `super::body`).
#[path = "../../src/netproxy/body.rs"]
#[allow(dead_code)]
mod body;
#[path = "../../src/netproxy/http.rs"]
#[allow(dead_code)]
mod http;
#[path = "../../src/netproxy/rule.rs"]
#[allow(dead_code)]
mod rule;

use http::Request;

fuzz_target!(|data: &[u8]| {
    let mut head = data.to_vec();
    if !head.ends_with(b"\r\n\r\n") {
        head.extend_from_slice(b"\r\n\r\n");
    }
    if let Ok(req) = http::parse_request(&head) {
        let t = req.target().clone();
        assert_ne!(t.port, 0);
        let line = format!("CONNECT {t} HTTP/1.1\r\n\r\n");
        match http::parse_request(line.as_bytes()) {
            Ok(back) => assert_eq!(back.target(), &t, "{line:?}"),
            Err(e) => panic!("{line:?} does not read back: {e}"),
        }
        if let Request::Forward(f) = &req {
            let out = http::forward_head(f);
            let text = String::from_utf8_lossy(&out);
            let body = text
                .strip_suffix("\r\n\r\n")
                .expect("ends with a blank line");
            let lines: Vec<&str> = body.split("\r\n").collect();
            assert!(lines.iter().all(|l| !l.contains('\n') && !l.contains('\r')));
            let hosts: Vec<&&str> = lines
                .iter()
                .filter(|l| l.len() >= 5 && l[..5].eq_ignore_ascii_case("host:"))
                .collect();
            assert_eq!(
                hosts,
                [&format!("Host: {}", http::host_header(&f.target)).as_str()]
            );
            assert!(lines.iter().skip(1).all(|l| {
                let n = l.split(':').next().unwrap_or("").to_ascii_lowercase();
                !n.starts_with("proxy-") && (n != "connection" || *l == "Connection: close")
            }));
            assert_eq!(lines.last(), Some(&"Connection: close"));
        }
    }
    if let Ok(r) = http::rewrite_response(&head)
        && !(100..200).contains(&r.status)
    {
        let text = String::from_utf8_lossy(&r.bytes).to_ascii_lowercase();
        assert!(text.ends_with("connection: close\r\n\r\n"));
        assert!(!text.contains("\r\nkeep-alive:"));
    }
});
