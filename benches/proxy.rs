//! The MCP relay's cost, measured side by side in one run: a minimal MCP
//! server (this binary, in server mode) driven directly and through
//! `rootfence run` (sandboxed). Prints a table of medians, p99s and ratios.
//!
//!     cargo bench --bench proxy
//!
//! Measures: `ping` round trips; pipelined `tools/call` throughput with 1 KiB and
//! 4 MiB payloads; the rebuild time from the host's
//! `notifications/roots/list_changed` to the new server answering; and the
//! server's own start time, the floor of a rebuild.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// Argument that makes this binary the minimal MCP server.
const SERVER_ARG: &str = "--rootfence-bench-server";

/// The minimal server: answers initialize, ping, and echoes tools/call
/// arguments back. Parses only what it needs.
fn serve() {
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout());
    let mut line = String::new();
    let mut r = stdin.lock();
    loop {
        line.clear();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        #[derive(serde::Deserialize)]
        struct Env<'a> {
            #[serde(borrow)]
            id: Option<&'a serde_json::value::RawValue>,
            method: Option<String>,
            #[serde(borrow)]
            params: Option<&'a serde_json::value::RawValue>,
        }
        let Ok(env) = serde_json::from_str::<Env<'_>>(&line) else {
            continue;
        };
        let (Some(id), Some(method)) = (env.id, env.method) else {
            continue;
        };
        let id = id.get();
        let reply = match method.as_str() {
            "initialize" => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-06-18","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"bench","version":"1"}}}}}}"#
            ),
            "tools/call" => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"ok"}}],"echo":{}}}}}"#,
                env.params.map_or("null", |p| p.get())
            ),
            "pid" => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"pid":{}}}}}"#,
                std::process::id()
            ),
            _ => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#),
        };
        let _ = out.write_all(reply.as_bytes());
        let _ = out.write_all(b"\n");
        let _ = out.flush();
    }
}

struct Peer {
    child: Child,
    w: ChildStdin,
    r: BufReader<ChildStdout>,
    buf: String,
}

impl Peer {
    fn spawn(mut cmd: Command) -> Peer {
        let mut child = cmd
            .arg(SERVER_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let w = child.stdin.take().unwrap();
        let r = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
        Peer {
            child,
            w,
            r,
            buf: String::new(),
        }
    }

    fn send(&mut self, s: &str) {
        self.w.write_all(s.as_bytes()).unwrap();
        self.w.write_all(b"\n").unwrap();
        self.w.flush().unwrap();
    }

    fn recv(&mut self) -> &str {
        self.buf.clear();
        assert!(self.r.read_line(&mut self.buf).unwrap() > 0, "peer closed");
        &self.buf
    }

    /// Read until a line containing `needle`, answering roots/list with `roots`.
    fn recv_until(&mut self, needle: &str, roots: &str) {
        loop {
            let l = self.recv().to_string();
            if l.contains("\"roots/list\"") {
                let v: serde_json::Value = serde_json::from_str(&l).unwrap();
                let reply = format!(
                    r#"{{"jsonrpc":"2.0","id":{},"result":{{"roots":{roots}}}}}"#,
                    v["id"]
                );
                self.send(&reply);
                continue;
            }
            if l.contains(needle) {
                return;
            }
        }
    }

    fn initialize(&mut self, with_roots: bool, roots: &str) {
        let caps = if with_roots {
            r#"{"roots":{"listChanged":true}}"#
        } else {
            "{}"
        };
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":"init","method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{caps},"clientInfo":{{"name":"bench","version":"1"}}}}}}"#
        ));
        self.recv_until("\"init\"", roots);
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }

    fn close(mut self) {
        drop(self.w);
        let _ = self.child.wait();
    }
}

fn direct() -> Command {
    Command::new(std::env::current_exe().unwrap())
}

fn fenced(root: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rootfence"));
    c.arg("run")
        .args(extra)
        .arg("--root")
        .arg(root)
        .arg("--")
        .arg(std::env::current_exe().unwrap());
    c
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn ping_rtts(mut p: Peer, n: usize) -> Vec<Duration> {
    p.initialize(false, "[]");
    let mut v = Vec::with_capacity(n);
    for i in 0..n + 200 {
        let t = Instant::now();
        p.send(&format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"ping"}}"#));
        p.recv();
        if i >= 200 {
            v.push(t.elapsed());
        }
    }
    p.close();
    v
}

/// Round trips per second and bytes relayed per second (both directions)
/// for `n` `tools/call` with `size`-byte payloads, pipelined: a writer
/// thread sends every request while this thread reads the answers, as a
/// busy host does.
fn throughput(mut p: Peer, n: usize, size: usize) -> (f64, f64) {
    p.initialize(false, "[]");
    let payload = "A".repeat(size);
    let msgs: Vec<String> = (0..n)
        .map(|i| format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"echo","arguments":{{"data":"{payload}"}}}}}}"#))
        .collect();
    let sent: usize = msgs.iter().map(|m| m.len() + 1).sum();
    let Peer {
        child,
        mut w,
        mut r,
        mut buf,
    } = p;
    let t = Instant::now();
    let writer = std::thread::spawn(move || {
        for m in &msgs {
            w.write_all(m.as_bytes()).unwrap();
            w.write_all(b"\n").unwrap();
        }
        w.flush().unwrap();
        w
    });
    let mut received = 0usize;
    for _ in 0..n {
        buf.clear();
        received += r.read_line(&mut buf).unwrap();
    }
    let el = t.elapsed().as_secs_f64();
    let w = writer.join().unwrap();
    Peer { child, w, r, buf }.close();
    (n as f64 / el, (sent + received) as f64 / el)
}

fn main() {
    if std::env::args().any(|a| a == SERVER_ARG) {
        return serve();
    }
    if std::env::args().any(|a| a == "--list") {
        println!("proxy: benchmark");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let (a, b): (PathBuf, PathBuf) = (base.join("a"), base.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();

    println!(
        "rootfence relay bench ({} cores, kernel {})",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        rootfence::sandbox::probe().kernel
    );
    println!();

    // 1. ping latency.
    let n = 5000;
    let mut d = ping_rtts(Peer::spawn(direct()), n);
    let mut f = ping_rtts(Peer::spawn(fenced(&a, &[])), n);
    let (d50, d99) = (percentile(&mut d, 0.5), percentile(&mut d, 0.99));
    let (f50, f99) = (percentile(&mut f, 0.5), percentile(&mut f, 0.99));
    println!("ping round trip ({n} sequential)        direct      rootfence   added");
    println!(
        "  median                               {:>8.1} us {:>8.1} us {:>8.1} us",
        us(d50),
        us(f50),
        us(f50) - us(d50)
    );
    println!(
        "  p99                                  {:>8.1} us {:>8.1} us {:>8.1} us",
        us(d99),
        us(f99),
        us(f99) - us(d99)
    );

    // 2. throughput.
    for (n, size, label) in [(10_000, 1024, "1 KiB"), (100, 4 << 20, "4 MiB")] {
        let (dr, db) = throughput(Peer::spawn(direct()), n, size);
        let (fr, fb) = throughput(Peer::spawn(fenced(&a, &[])), n, size);
        println!(
            "tools/call {label} x{n:<6}  direct {:>9.0} calls/s {:>7.1} MB/s | rootfence {:>9.0} calls/s {:>7.1} MB/s | {:>5.1}% of direct",
            dr,
            db / 1e6,
            fr,
            fb / 1e6,
            100.0 * fr / dr
        );
    }

    // 3. server start (the floor of a rebuild) and rebuild time.
    let mut starts = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        let mut p = Peer::spawn(direct());
        p.initialize(false, "[]");
        starts.push(t.elapsed());
        p.close();
    }
    let start50 = percentile(&mut starts, 0.5);
    let ra = format!(r#"[{{"uri":"{}"}}]"#, rootfence::roots::path_to_uri(&a));
    let rb = format!(r#"[{{"uri":"{}"}}]"#, rootfence::roots::path_to_uri(&b));
    let mut p = Peer::spawn(fenced(&a, &[]));
    // First launch: static roots, then the host's roots arrive (a rebuild).
    let t = Instant::now();
    p.initialize(true, &ra);
    p.send(r#"{"jsonrpc":"2.0","id":"first","method":"ping"}"#);
    p.recv_until("\"first\"", &ra);
    let first = t.elapsed();
    let mut rebuilds = Vec::new();
    for i in 0..30 {
        let roots = if i % 2 == 0 { &rb } else { &ra };
        let t = Instant::now();
        p.send(r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#);
        // Held until the rebuilt server is up, then answered by it.
        p.send(&format!(
            r#"{{"jsonrpc":"2.0","id":"r{i}","method":"ping"}}"#
        ));
        p.recv_until(&format!("\"r{i}\""), roots);
        rebuilds.push(t.elapsed());
    }
    p.close();
    let rb50 = percentile(&mut rebuilds, 0.5);
    let rb99 = percentile(&mut rebuilds, 0.99);
    println!(
        "server start (spawn to initialize answered), median      {:>8.2} ms",
        start50.as_secs_f64() * 1e3
    );
    println!(
        "rebuild (list_changed to the new server answering), median {:>8.2} ms (p99 {:.2} ms), {:.2} ms over the server's start",
        rb50.as_secs_f64() * 1e3,
        rb99.as_secs_f64() * 1e3,
        (rb50.as_secs_f64() - start50.as_secs_f64()) * 1e3
    );
    println!(
        "first launch with host roots (initialize to first answer)  {:>8.2} ms",
        first.as_secs_f64() * 1e3
    );

    // 4. memory: peak RSS of the rootfence process, in fresh processes.
    println!();
    let policy = base.join("policy.toml");
    let mb = 1u64 << 20;
    std::fs::write(
        &policy,
        format!("[limits]\nmax_message_bytes = {}\n", 96 * mb),
    )
    .unwrap();
    let pol = policy.to_str().unwrap().to_string();
    let big = "A".repeat(64 << 20);
    let big_call = |id: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":"{id}","method":"tools/call","params":{{"name":"echo","arguments":{{"data":"{big}"}}}}}}"#
        )
    };
    let mut p = Peer::spawn(fenced(&a, &["--policy", &pol]));
    p.initialize(false, "[]");
    let idle = peak_rss_kib(p.child.id());
    p.send(&big_call("big"));
    let answer_len = p.recv().len();
    let relaying = peak_rss_kib(p.child.id());
    p.close();
    std::fs::write(&policy, format!("[limits]\nmax_message_bytes = {mb}\n")).unwrap();
    let mut p = Peer::spawn(fenced(&a, &["--policy", &pol]));
    p.initialize(false, "[]");
    let idle_small = peak_rss_kib(p.child.id());
    p.send(&big_call("over"));
    let refused = p.recv().contains("exceeds the limit");
    let oversized = peak_rss_kib(p.child.id());
    p.close();
    println!(
        "peak RSS of rootfence, idle                                   {:>7.1} MiB",
        idle as f64 / 1024.0
    );
    println!(
        "peak RSS relaying a 64 MiB request and its 64 MiB answer      {:>7.1} MiB ({:.2} x one message over idle)",
        relaying as f64 / 1024.0,
        relaying.saturating_sub(idle) as f64 * 1024.0 / answer_len as f64
    );
    println!(
        "peak RSS refusing a 64 MiB line over a 1 MiB limit ({:>7})  {:>7.1} MiB (+{:.1} MiB over idle)",
        if refused { "refused" } else { "NOT REFUSED" },
        oversized as f64 / 1024.0,
        oversized.saturating_sub(idle_small) as f64 / 1024.0
    );
}

/// The peak resident set of a process (VmHWM), in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
