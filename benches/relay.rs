//! The relay in criterion: a `ping` round trip and a 1 KiB `tools/call`
//! round trip, direct to the minimal MCP server and through `rootfence run`.
//! The side-by-side table of every target is `cargo bench --bench compare`.
//!
//!     cargo bench --bench relay

mod common;

use std::time::{Duration, Instant};

use common::{Peer, direct, fenced};
use criterion::{BenchmarkId, Criterion};

fn round_trips(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let mut g = c.benchmark_group("relay");
    g.sample_size(100)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    let call = String::from_utf8(common::calls(1, 1024).remove(0)).unwrap();
    for (side, cmd) in [("direct", direct()), ("rootfence", fenced(&root, &[]))] {
        let mut p = Peer::spawn(cmd);
        p.initialize(false, "[]");
        g.bench_function(BenchmarkId::new("ping", side), |b| {
            b.iter_custom(|iters| {
                let t = Instant::now();
                for _ in 0..iters {
                    p.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
                    p.recv();
                }
                t.elapsed()
            })
        });
        g.bench_function(BenchmarkId::new("tools/call 1 KiB", side), |b| {
            b.iter_custom(|iters| {
                let t = Instant::now();
                for _ in 0..iters {
                    p.send(&call);
                    p.recv();
                }
                t.elapsed()
            })
        });
        p.close();
    }
    g.finish();
}

fn main() {
    if common::maybe_serve() {
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    round_trips(&mut c);
    c.final_summary();
}
