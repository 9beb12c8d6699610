//! Every comparison of the performance targets, measured in one run and
//! printed as one table of ratios:
//!
//!     cargo bench --bench compare                 # everything (about 2 minutes)
//!     cargo bench --bench compare -- ping launch  # only some sections
//!
//! Sections: `launch` (rootfence exec and explain vs a bare spawn vs
//! bubblewrap both ways, and explain with an empty home vs a full one),
//! `ping` (round-trip latency, direct vs relayed, also with every process
//! on one CPU), `throughput` (1 KiB and 4 MiB `tools/call`, pipelined),
//! `rebuild` (host `list_changed` to the new server answering, with the
//! server in its own namespaces and, for comparison, without), `startup`
//! (roots from the host only: `initialize` to the first answer, direct,
//! through rootfence the first time and with the `initialize` answer
//! remembered), `plan`
//! (resolve + plan + Landlock ruleset for 1 to 1,000 roots), `memory`
//! (peak RSS of rootfence), `observe` (a real server's start through `run`
//! observed, as until a start has gone through, and not) and `network`
//! (network by domain: round trips,
//! new connections and downloads through rootfence's HTTP proxy against
//! direct connections, in process and with curl under `rootfence exec`).
//!
//! The direct side is a minimal MCP server: this binary in server mode
//! (see `common`). The relay baseline is the same server behind a byte
//! relay (this binary in relay mode: two `std::io::copy` loops, spliced
//! between pipes, parsing nothing, as `socat` would): the floor of any
//! stdio relay, measured in the same run. bubblewrap is Debian's (`apt-get install
//! bubblewrap`); without it the bwrap rows say they were skipped.
//!
//! `ROOTFENCE_BENCH_BIN=/path/to/rootfence` runs the fenced side with
//! another build (an earlier release, say) in the same bench, so two
//! releases are measured the same way; a section the other build cannot
//! run (an option it lacks) fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Peer, direct, fenced, percentile, pipelined};

/// One row of the final table.
struct Row {
    measure: String,
    baseline: String,
    relay: String,
    rootfence: String,
    result: String,
    target: String,
    met: Option<bool>,
}

fn row(
    measure: impl Into<String>,
    baseline: impl Into<String>,
    rootfence: impl Into<String>,
    result: impl Into<String>,
    target: impl Into<String>,
    met: Option<bool>,
) -> Row {
    Row {
        measure: measure.into(),
        baseline: baseline.into(),
        relay: String::new(),
        rootfence: rootfence.into(),
        result: result.into(),
        target: target.into(),
        met,
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    if common::maybe_serve() || common::maybe_relay() {
        return;
    }
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if std::env::args().any(|a| a == "--list") {
        println!("compare: benchmark");
        return;
    }
    let want = |s: &str| args.is_empty() || args.iter().any(|a| a == s);
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let (a, b): (PathBuf, PathBuf) = (base.join("a"), base.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let home = base.join("home");
    std::fs::create_dir_all(&home).unwrap();

    eprintln!(
        "rootfence compare: {} CPUs, kernel {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        rootfence::sandbox::probe().kernel
    );
    let mut rows = Vec::new();
    if want("launch") {
        eprintln!("launch ...");
        launch(&home, &mut rows);
    }
    if want("ping") {
        eprintln!("ping ...");
        ping(&a, &mut rows);
    }
    if want("throughput") || want("throughput-1k") || want("throughput-4m") {
        eprintln!("throughput ...");
        throughput(
            &a,
            want("throughput") || want("throughput-1k"),
            want("throughput") || want("throughput-4m"),
            &mut rows,
        );
    }
    if want("rebuild") {
        eprintln!("rebuild ...");
        rebuild(&a, &b, &mut rows);
    }
    if want("startup") {
        eprintln!("startup ...");
        startup(&a, &mut rows);
    }
    if want("plan") {
        eprintln!("plan ...");
        plan_scale(&mut rows);
    }
    if want("memory") {
        eprintln!("memory ...");
        memory(&base, &a, &mut rows);
    }
    if want("observe") {
        eprintln!("observe ...");
        observe(&a, &mut rows);
    }
    if want("network") {
        eprintln!("network ...");
        network(&base, &home, &mut rows);
    }
    print_table(&rows);
}

fn print_table(rows: &[Row]) {
    println!();
    println!("| measure | baseline | byte relay | rootfence | result | target | met |");
    println!("|---|---:|---:|---:|---:|---|:---:|");
    for r in rows {
        let met = match r.met {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "",
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.measure, r.baseline, r.relay, r.rootfence, r.result, r.target, met
        );
    }
}

// ---------------------------------------------------------------- launch

fn time_status(cmd: &mut Command) -> Duration {
    let t = Instant::now();
    let st = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("spawn");
    let el = t.elapsed();
    assert!(st.success(), "{cmd:?}: {st}");
    el
}

/// A user's home as a developer's is after a while: npm's and uv's caches
/// holding thousands of packages, cargo's registry, toolchains under
/// pyenv, nvm, cargo, go, bun and deno, and the `PATH` (12 entries) that
/// names their directories. Returns the `PATH`.
fn full_home(home: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let put = |rel: &str, n: usize, exec: bool| {
        let dir = home.join(rel);
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..n {
            let f = dir.join(format!("f{i:05}"));
            std::fs::write(&f, "#!/bin/sh\n").unwrap();
            if exec {
                std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
    };
    for i in 0..256 {
        put(
            &format!(".npm/_cacache/index-v5/{:02x}/{:02x}", i, i ^ 0x5a),
            12,
            false,
        );
        put(
            &format!(".npm/_cacache/content-v2/sha512/{:02x}", i),
            12,
            false,
        );
    }
    for i in 0..2000 {
        put(&format!(".cache/uv/archive-v0/pkg{i:04}/site"), 2, false);
    }
    for i in 0..1000 {
        put(
            &format!(".cargo/registry/src/index/crate-{i:04}/src"),
            2,
            false,
        );
    }
    let bins = [
        ".local/bin",
        ".cargo/bin",
        ".pyenv/shims",
        ".pyenv/bin",
        ".nvm/versions/node/v22.12.0/bin",
        "go/bin",
        ".bun/bin",
        ".deno/bin",
    ];
    for b in bins {
        put(b, 40, true);
    }
    let mut path: Vec<String> = bins
        .iter()
        .map(|b| home.join(b).display().to_string())
        .collect();
    path.extend(["/usr/local/sbin", "/usr/local/bin", "/usr/bin", "/bin"].map(String::from));
    path.join(":")
}

fn launch(home: &Path, rows: &mut Vec<Row>) {
    let rootfence = common::rootfence_bin();
    let bwrap = common::bwrap();
    let full = home.with_file_name("full-home");
    let full_path = full_home(&full);
    let fenced = |args: &[&str], home: &Path, path: &str| {
        let mut c = Command::new(&rootfence);
        c.args(args).env_clear().env("HOME", home).env("PATH", path);
        c
    };
    let mut bare = Vec::new();
    let mut exec = Vec::new();
    let mut explain = Vec::new();
    let mut explain_full = Vec::new();
    let mut bw = Vec::new();
    let mut bw_all = Vec::new();
    let exec_true = ["exec", "--", "/bin/true"];
    let explain_true = ["explain", "--", "/bin/true"];
    // Interleaved, so a slow patch of the machine hits every row alike.
    for i in 0..330 {
        let tb = time_status(&mut Command::new("/bin/true"));
        let tf = time_status(&mut fenced(&exec_true, home, "/usr/bin:/bin"));
        let te = time_status(&mut fenced(&explain_true, home, "/usr/bin:/bin"));
        let tx = time_status(&mut fenced(&explain_true, &full, &full_path));
        let tw = bwrap.map(|bw| time_status(&mut common::bwrap_true(bw)));
        let ta = bwrap.map(|bw| time_status(&mut common::bwrap_unshared_true(bw)));
        if i >= 30 {
            bare.push(tb);
            exec.push(tf);
            explain.push(te);
            explain_full.push(tx);
            bw.extend(tw);
            bw_all.extend(ta);
        }
    }
    let b50 = percentile(&mut bare, 0.5);
    let f50 = percentile(&mut exec, 0.5);
    let e50 = percentile(&mut explain, 0.5);
    let x50 = percentile(&mut explain_full, 0.5);
    let added = ms(f50) - ms(b50);
    rows.push(row(
        "launch: bare `/bin/true`, median",
        format!("{:.2} ms", ms(b50)),
        "",
        "",
        "",
        None,
    ));
    let bwrap_rows = [
        (
            "`bwrap --ro-bind / / --dev /dev --proc /proc /bin/true`",
            &mut bw,
        ),
        (
            "`bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp /bin/true`",
            &mut bw_all,
        ),
    ];
    let mut bw_added = Vec::new();
    for (name, times) in bwrap_rows {
        if times.is_empty() {
            eprintln!(
                "launch: {name} skipped: bwrap is not installed (apt-get install bubblewrap)"
            );
            rows.push(row(
                format!("launch: {name}, median"),
                "",
                "",
                "skipped: bwrap not installed",
                "",
                None,
            ));
            continue;
        }
        let w50 = percentile(times, 0.5);
        bw_added.push(ms(w50) - ms(b50));
        rows.push(row(
            format!("launch: {name}, median"),
            format!("{:.2} ms", ms(b50)),
            format!("bwrap {:.2} ms", ms(w50)),
            format!("bwrap +{:.2} ms", ms(w50) - ms(b50)),
            "",
            None,
        ));
    }
    // The goal is the plain bwrap line; the target the one with every
    // namespace of its own, as rootfence gives its servers.
    let (met, target) = match bw_added.as_slice() {
        [plain, all] => (
            Some(added <= *all),
            format!("added <= bwrap --unshare-all's +{all:.2} ms (goal: plain's +{plain:.2} ms)"),
        ),
        _ => (
            None,
            "added <= bwrap --unshare-all's (bwrap not installed)".into(),
        ),
    };
    rows.push(row(
        "launch: `rootfence exec -- /bin/true`, median",
        format!("{:.2} ms", ms(b50)),
        format!("{:.2} ms", ms(f50)),
        format!("+{added:.2} ms"),
        target,
        met,
    ));
    rows.push(row(
        "plan only: `rootfence explain -- /bin/true`, median",
        "",
        format!("{:.2} ms", ms(e50)),
        "",
        "< 3 ms",
        Some(ms(e50) < 3.0),
    ));
    rows.push(row(
        "plan only, empty home vs a full one (npm and uv caches of thousands of packages, a 12-entry PATH), median",
        format!("{:.2} ms", ms(e50)),
        format!("{:.2} ms", ms(x50)),
        format!("{:.2}x", ms(x50) / ms(e50)),
        "flat (<= 1.2x)",
        Some(ms(x50) <= 1.2 * ms(e50)),
    ));
}

// ---------------------------------------------------------------- ping

/// Pin this process (and the children it starts from now on) to `cpus`.
fn pin(cpus: &[usize]) {
    // SAFETY: cpu_set_t is plain data; CPU_SET indexes within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn all_cpus() -> Vec<usize> {
    (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
}

/// Round trips direct, through the byte relay and through rootfence,
/// in alternating blocks so all three see the same machine.
fn ping_three(a: &Path, n: usize) -> (Vec<Duration>, Vec<Duration>, Vec<Duration>) {
    let mut d = Peer::spawn(direct());
    d.initialize(false, "[]");
    let mut s = Peer::spawn_as_is(common::byte_relayed());
    s.initialize(false, "[]");
    let mut f = Peer::spawn(fenced(a, &[]));
    f.initialize(false, "[]");
    let (mut dv, mut sv, mut fv) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        dv.extend(common::ping_rtts(&mut d, n / 5));
        sv.extend(common::ping_rtts(&mut s, n / 5));
        fv.extend(common::ping_rtts(&mut f, n / 5));
    }
    d.close();
    s.close();
    f.close();
    (dv, sv, fv)
}

fn ping(a: &Path, rows: &mut Vec<Row>) {
    let n = 5000;
    for (label, cpus) in [("", all_cpus()), (", all on one CPU", vec![0])] {
        pin(&cpus);
        let (mut d, mut s, mut f) = ping_three(a, n);
        for (q, name, limit) in [(0.5, "median", 30.0), (0.99, "p99", 200.0)] {
            let dq = percentile(&mut d, q);
            let fq = percentile(&mut f, q);
            let added = us(fq) - us(dq);
            let sq = percentile(&mut s, q);
            let relay = format!("{:.1} µs", us(sq));
            let over = format!("; +{:.1} µs over the byte relay", us(fq) - us(sq));
            let mut r = row(
                format!("ping round trip{label}, {name}"),
                format!("{:.1} µs", us(dq)),
                format!("{:.1} µs", us(fq)),
                format!("+{added:.1} µs{over}"),
                format!("added < {limit:.0} µs"),
                Some(added < limit),
            );
            r.relay = relay;
            rows.push(r);
        }
    }
    pin(&all_cpus());
}

// ---------------------------------------------------------------- throughput

fn throughput(a: &Path, small: bool, big: bool, rows: &mut Vec<Row>) {
    for (n, size, label) in [(10_000usize, 1024usize, "1 KiB"), (100, 4 << 20, "4 MiB")] {
        if (size <= 1024 && !small) || (size > 1024 && !big) {
            continue;
        }
        let msgs = common::calls(n, size);
        let (mut dt, mut st, mut ft) = (Vec::new(), Vec::new(), Vec::new());
        let mut bytes = 0;
        // Interleaved runs (the VM's speed drifts); the median is reported.
        let runs = if size <= 1024 { 9 } else { 5 };
        for _ in 0..runs {
            let mut p = Peer::spawn(direct());
            p.initialize(false, "[]");
            let (t, by, _) = pipelined(p, &msgs);
            dt.push(t);
            bytes = by;
            let mut p = Peer::spawn_as_is(common::byte_relayed());
            p.initialize(false, "[]");
            st.push(pipelined(p, &msgs).0);
            let mut p = Peer::spawn(fenced(a, &[]));
            p.initialize(false, "[]");
            ft.push(pipelined(p, &msgs).0);
        }
        let (d, f) = (percentile(&mut dt, 0.5), percentile(&mut ft, 0.5));
        let sm = percentile(&mut st, 0.5);
        let calls = |t: Duration| n as f64 / t.as_secs_f64();
        let gbs = |t: Duration| bytes as f64 / t.as_secs_f64() / 1e9;
        let r = if size <= 1024 {
            let over = format!("; {:.1} % of the byte relay", 100.0 * calls(f) / calls(sm));
            let mut r = row(
                format!("{n} pipelined `tools/call`, {label} each way"),
                format!("{:.0} calls/s", calls(d)),
                format!("{:.0} calls/s", calls(f)),
                format!("{:.1} % of direct{over}", 100.0 * calls(f) / calls(d)),
                ">= 80 % of direct",
                Some(calls(f) / calls(d) >= 0.8),
            );
            r.relay = format!("{:.0} calls/s", calls(sm));
            r
        } else {
            let over = format!("; {:.1} % of the byte relay", 100.0 * gbs(f) / gbs(sm));
            let mut r = row(
                format!("{n} pipelined `tools/call`, {label} each way (bytes both ways)"),
                format!("{:.2} GB/s", gbs(d)),
                format!("{:.2} GB/s", gbs(f)),
                format!("{:.1} % of direct{over}", 100.0 * gbs(f) / gbs(d)),
                ">= 1 GB/s relayed",
                Some(gbs(f) >= 1.0),
            );
            r.relay = format!("{:.2} GB/s", gbs(sm));
            r
        };
        rows.push(r);
    }
}

// ---------------------------------------------------------------- rebuild

fn rebuild(a: &Path, b: &Path, rows: &mut Vec<Row>) {
    let mut starts = Vec::new();
    for _ in 0..40 {
        let t = Instant::now();
        let mut p = Peer::spawn(direct());
        p.initialize(false, "[]");
        starts.push(t.elapsed());
        p.close();
    }
    let start50 = percentile(&mut starts, 0.5);
    let RootChanges {
        first,
        mut rebuilds,
        mut revocations,
        cpu: cpu_ns,
    } = root_changes(a, b, &[]);
    let rb50 = percentile(&mut rebuilds, 0.5);
    let over = ms(rb50) - ms(start50);
    rows.push(row(
        "rebuild: host `list_changed` to the new server answering, median",
        format!("server start {:.2} ms", ms(start50)),
        format!("{:.2} ms", ms(rb50)),
        format!("start + {over:.2} ms"),
        "< server start + 5 ms",
        Some(over < 5.0),
    ));
    // The same without the server's own namespaces and filesystem view:
    // what the session core and the Landlock launch cost, apart from the
    // namespaces' set-up (which every launch pays, see `launch`). Not with
    // another build (`ROOTFENCE_BENCH_BIN`), which may not know the option.
    let other_build = std::env::var_os("ROOTFENCE_BENCH_BIN").is_some();
    let (pl50, cpu_plain) = if other_build {
        (None, None)
    } else {
        let dir = tempfile::tempdir().unwrap();
        let off = dir.path().join("no-namespaces.toml");
        std::fs::write(&off, "version = 1\n[isolation]\nnamespaces = \"off\"\n").unwrap();
        let RootChanges {
            rebuilds: mut plain,
            cpu,
            ..
        } = root_changes(a, b, &["--policy", off.to_str().unwrap()]);
        (Some(percentile(&mut plain, 0.5)), Some(cpu))
    };
    let show =
        |d: Option<Duration>| d.map_or("not run".to_string(), |d| format!("{:.2} ms", ms(d)));
    rows.push(row(
        "rebuild, server without namespaces (`[isolation] namespaces = \"off\"`), median",
        format!("server start {:.2} ms", ms(start50)),
        show(pl50),
        pl50.map_or(String::new(), |d| {
            format!("start + {:.2} ms", ms(d) - ms(start50))
        }),
        "",
        None,
    ));
    rows.push(row(
        "rootfence's own CPU per root change (its threads alive at the end, from schedstat), in namespaces / without",
        "",
        format!("{} / {}", show(Some(cpu_ns)), show(cpu_plain)),
        "",
        "",
        None,
    ));
    let rv50 = percentile(&mut revocations, 0.5);
    let rv99 = percentile(&mut revocations, 1.0);
    rows.push(row(
        "revocation: host `list_changed` to the revoked server gone (median / max of 20)",
        "",
        format!("{:.2} / {:.2} ms", ms(rv50), ms(rv99)),
        "",
        "",
        None,
    ));
    rows.push(row(
        "first launch with host roots (`initialize` to first answer, one rebuild)",
        "",
        format!("{:.2} ms", ms(first)),
        "",
        "",
        None,
    ));
}

/// What [`root_changes`] measured.
struct RootChanges {
    /// The first launch with host roots.
    first: Duration,
    /// Each rebuild: host `list_changed` to the new server answering.
    rebuilds: Vec<Duration>,
    /// Each revocation: host `list_changed` to the revoked server gone.
    revocations: Vec<Duration>,
    /// rootfence's own CPU time per root change, summed over the threads
    /// alive at the end (`/proc/PID/task/*/schedstat`; a thread that ended
    /// during the run, such as a reaper, is not counted).
    cpu: Duration,
}

/// CPU time of `pid`'s threads alive now.
fn cpu_of(pid: u32) -> Duration {
    let mut ns = 0u64;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let stat = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
            ns += stat
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Duration::from_nanos(ns)
}

/// 40 root changes through `rootfence run` (with `extra` arguments).
fn root_changes(a: &Path, b: &Path, extra: &[&str]) -> RootChanges {
    let ra = format!(r#"[{{"uri":"{}"}}]"#, rootfence::roots::path_to_uri(a));
    let rb = format!(r#"[{{"uri":"{}"}}]"#, rootfence::roots::path_to_uri(b));
    let mut p = Peer::spawn(fenced(a, extra));
    let t = Instant::now();
    p.initialize(true, &ra);
    p.send(r#"{"jsonrpc":"2.0","id":"first","method":"ping"}"#);
    p.recv_until("\"first\"", &ra);
    let first = t.elapsed();
    let mut rebuilds = Vec::new();
    let mut revocations = Vec::new();
    let cpu_before = cpu_of(p.child.id());
    const CHANGES: u32 = 40;
    for i in 0..CHANGES {
        // The server always has A (command line); B comes and goes: adding
        // it relaunches (the old server drains), removing it revokes it
        // (the server holding it is killed). Watch the old server exit.
        let revoking = i % 2 == 1;
        let roots = if revoking { &ra } else { &rb };
        let old = loop {
            let c = common::children(p.child.id());
            if c.len() == 1 {
                break c[0];
            }
            std::thread::sleep(Duration::from_micros(200));
        };
        let gone = common::exit_watch(old);
        let t = Instant::now();
        p.send(r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#);
        // Held until the rebuilt server is up, then answered by it.
        p.send(&format!(
            r#"{{"jsonrpc":"2.0","id":"r{i}","method":"ping"}}"#
        ));
        p.recv_until(&format!("\"r{i}\""), roots);
        rebuilds.push(t.elapsed());
        let at = gone.join().unwrap();
        if revoking {
            revocations.push(at.saturating_duration_since(t));
        }
    }
    let cpu = cpu_of(p.child.id()).saturating_sub(cpu_before) / CHANGES;
    p.close();
    RootChanges {
        first,
        rebuilds,
        revocations,
        cpu,
    }
}

// ---------------------------------------------------------------- startup

/// Roots from the host only (no `--root`), as VS Code launches servers:
/// `initialize` sent to the first `ping` answered, the host answering
/// `roots/list`. Direct; through rootfence with nothing remembered (two
/// server starts: one for `initialize`, one under the host's roots); and
/// with the server's `initialize` answer remembered from a previous run
/// (one start).
fn startup(a: &Path, rows: &mut Vec<Row>) {
    let roots = format!(r#"[{{"uri":"{}"}}]"#, rootfence::roots::path_to_uri(a));
    let cache = tempfile::tempdir().unwrap();
    let fenced_host_roots = |cache: &Path| {
        let mut c = Command::new(common::rootfence_bin());
        c.args(["run", "--no-watch", "--"])
            .arg(std::env::current_exe().unwrap())
            .env("XDG_CACHE_HOME", cache);
        c
    };
    let once = |cmd: Command| {
        let t = Instant::now();
        let mut p = Peer::spawn(cmd);
        p.initialize(true, &roots);
        p.send(r#"{"jsonrpc":"2.0","id":"first","method":"ping"}"#);
        p.recv_until("\"first\"", &roots);
        let d = t.elapsed();
        p.close();
        d
    };
    let (mut direct_t, mut cold, mut warm) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..20 {
        direct_t.push(once(direct()));
        // A fresh cache directory: nothing remembered.
        let fresh = cache.path().join(format!("cold-{i}"));
        cold.push(once(fenced_host_roots(&fresh)));
        // The same cache directory each time: remembered after the first.
        let kept = cache.path().join("warm");
        let t = once(fenced_host_roots(&kept));
        if i > 0 {
            warm.push(t);
        }
    }
    let d = percentile(&mut direct_t, 0.5);
    let c = percentile(&mut cold, 0.5);
    let w = percentile(&mut warm, 0.5);
    // The minimal server starts in about 2 ms, so rootfence's own start
    // (policy, plan, sandbox, the host's roots round trip) dominates the
    // ratio here; the added time is the measure. Real servers start in
    // 0.3 to 2 s: `benches/real_servers.py` measures them.
    rows.push(row(
        "startup, roots from the host only: `initialize` to first answer, nothing remembered, median",
        format!("{:.2} ms", ms(d)),
        format!("{:.2} ms", ms(c)),
        format!("+{:.2} ms (two server starts)", ms(c) - ms(d)),
        "",
        None,
    ));
    rows.push(row(
        "startup, roots from the host only, `initialize` remembered, median",
        format!("{:.2} ms", ms(d)),
        format!("{:.2} ms", ms(w)),
        format!("+{:.2} ms (one server start)", ms(w) - ms(d)),
        "one server start",
        None,
    ));
}

// ---------------------------------------------------------------- observe

/// A real server's start through `rootfence run --root`, `initialize` to
/// the answer of `tools/list`: observed (a fresh state directory each
/// time: the server never started before) and not (the same state
/// directory: started before). The servers of `tests/peers` (installed by
/// `tests/peers/install.sh`); a missing one is a row saying so.
fn observe(a: &Path, rows: &mut Vec<Row>) {
    let peers = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers");
    let fs_server =
        peers.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    let time_server = peers.join(".venv-servers/bin/mcp-server-time");
    let servers: [(&str, Vec<std::ffi::OsString>, &Path); 2] = [
        (
            "node, server-filesystem",
            vec!["node".into(), fs_server.clone().into(), a.into()],
            &fs_server,
        ),
        (
            "python, mcp-server-time",
            vec![time_server.clone().into()],
            &time_server,
        ),
    ];
    let states = tempfile::tempdir().unwrap();
    for (name, argv, needs) in servers {
        let measure =
            format!("a real server's start through `run` ({name}), observed vs not, median");
        if !needs.exists() {
            rows.push(row(
                measure,
                "skipped",
                "",
                format!("{} missing: run tests/peers/install.sh", needs.display()),
                "",
                None,
            ));
            continue;
        }
        let once = |state: &Path| {
            let mut c = Command::new(common::rootfence_bin());
            c.env_clear();
            for key in ["PATH", "HOME"] {
                if let Some(v) = std::env::var_os(key) {
                    c.env(key, v);
                }
            }
            c.env("XDG_STATE_HOME", state)
                .args(["run", "--no-watch", "--root"])
                .arg(a)
                .arg("--")
                .args(&argv);
            let t = Instant::now();
            let mut p = Peer::spawn_as_is(c);
            p.initialize(false, "[]");
            p.send(r#"{"jsonrpc":"2.0","id":"first","method":"tools/list"}"#);
            p.recv_until("\"first\"", "[]");
            let d = t.elapsed();
            p.close();
            d
        };
        let kept = states.path().join(format!("kept-{}", rows.len()));
        once(&kept);
        let (mut observed, mut plain) = (Vec::new(), Vec::new());
        for i in 0..10 {
            observed.push(once(
                &states.path().join(format!("fresh-{}-{i}", rows.len())),
            ));
            plain.push(once(&kept));
        }
        let (o, n) = (percentile(&mut observed, 0.5), percentile(&mut plain, 0.5));
        rows.push(row(
            measure,
            format!("{:.1} ms", ms(n)),
            format!("{:.1} ms", ms(o)),
            format!("+{:.1} ms observed", ms(o) - ms(n)),
            "",
            None,
        ));
    }
}

// ---------------------------------------------------------------- plan

fn plan_scale(rows: &mut Vec<Row>) {
    use rootfence::runtime::{self, HostEnv};
    let env = HostEnv::current();
    let policy = rootfence::policy::Policy::builtin(env.home.as_deref()).unwrap();
    let command = runtime::discover(&["/bin/true".into()], &policy, &env).unwrap();
    let mut per_root = Vec::new();
    let mut at_1000 = Duration::ZERO;
    for (n, reps) in [(1usize, 300usize), (10, 200), (100, 100), (1000, 30)] {
        let (_dir, inputs) = common::root_dirs(n);
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t = Instant::now();
            let plan = rootfence::plan::with_roots(&policy, &inputs, command.clone(), &env);
            rootfence::sandbox::build_ruleset(&plan).unwrap();
            times.push(t.elapsed());
        }
        let m = percentile(&mut times, 0.5);
        per_root.push((n, m));
        if n == 1000 {
            at_1000 = m;
        }
    }
    let list = per_root
        .iter()
        .map(|(n, m)| format!("{n}: {:.2} ms", ms(*m)))
        .collect::<Vec<_>>()
        .join(", ");
    rows.push(row(
        "plan + Landlock ruleset, 1,000 roots, median",
        "",
        format!("{:.2} ms", ms(at_1000)),
        list,
        "< 10 ms",
        Some(ms(at_1000) < 10.0),
    ));
    // Linear: the cost per root from 100 to 1,000 roots is no more than
    // from 10 to 100 (with 50 % for noise).
    let slope = |i: usize, j: usize| {
        (per_root[j].1.as_secs_f64() - per_root[i].1.as_secs_f64())
            / (per_root[j].0 - per_root[i].0) as f64
    };
    let (s1, s2) = (slope(1, 2), slope(2, 3));
    rows.push(row(
        "plan growth: cost per added root, 10→100 vs 100→1,000",
        format!("{:.1} µs/root", s1 * 1e6),
        format!("{:.1} µs/root", s2 * 1e6),
        format!("{:.2}x", s2 / s1),
        "linear (<= 1.5x)",
        Some(s2 <= 1.5 * s1),
    ));
}

// ---------------------------------------------------------------- memory

fn memory(base: &Path, a: &Path, rows: &mut Vec<Row>) {
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
    let mut p = Peer::spawn(fenced(a, &["--policy", &pol]));
    p.initialize(false, "[]");
    let idle = common::peak_rss_kib(p.child.id());
    p.send(&big_call("big"));
    let answer_len = p.recv().len();
    let relaying = common::peak_rss_kib(p.child.id());
    p.close();
    std::fs::write(&policy, format!("[limits]\nmax_message_bytes = {mb}\n")).unwrap();
    let mut p = Peer::spawn(fenced(a, &["--policy", &pol]));
    p.initialize(false, "[]");
    let idle_small = common::peak_rss_kib(p.child.id());
    p.send(&big_call("over"));
    let refused = p.recv_string().contains("exceeds the limit");
    let oversized = common::peak_rss_kib(p.child.id());
    p.close();
    let mib = |k: u64| k as f64 / 1024.0;
    rows.push(row(
        "peak RSS of rootfence, idle",
        "",
        format!("{:.1} MiB", mib(idle)),
        "",
        "< 10 MiB",
        Some(mib(idle) < 10.0),
    ));
    let times = relaying.saturating_sub(idle) as f64 * 1024.0 / answer_len as f64;
    rows.push(row(
        "peak RSS relaying a 64 MiB request and its 64 MiB answer",
        format!("idle {:.1} MiB", mib(idle)),
        format!("{:.1} MiB", mib(relaying)),
        format!("{times:.2} x one message over idle"),
        "<= about 2 x the message",
        Some(times <= 2.2),
    ));
    // A stream: 100 pipelined 4 MiB round trips, the host writing all of
    // them at once. What rootfence reads ahead is bounded in bytes, so the
    // peak is a few messages, not the backlog.
    let msgs = common::calls(100, 4 << 20);
    let mut p = Peer::spawn(fenced(a, &[]));
    p.initialize(false, "[]");
    let (_, _, stream) = pipelined(p, &msgs);
    let per = stream as f64 * 1024.0 / msgs[0].len() as f64;
    rows.push(row(
        "peak RSS relaying 100 pipelined 4 MiB round trips",
        format!("idle {:.1} MiB", mib(idle)),
        format!("{:.1} MiB", mib(stream)),
        format!("{per:.1} x one message"),
        "bounded (a few messages)",
        Some(per <= 12.0),
    ));
    let extra = mib(oversized.saturating_sub(idle_small));
    rows.push(row(
        format!(
            "peak RSS refusing a 64 MiB line over a 1 MiB limit ({})",
            if refused { "refused" } else { "NOT REFUSED" }
        ),
        format!("idle {:.1} MiB", mib(idle_small)),
        format!("{:.1} MiB", mib(oversized)),
        format!("+{extra:.1} MiB"),
        "<= the limit (1 MiB) + slack",
        Some(refused && extra <= 1.5),
    ));
}

// ---------------------------------------------------------------- network

/// A TCP peer on 127.0.0.1 for the network rows, serving each connection
/// by its first byte: `e` echoes 64-byte messages back, `d` then an
/// 8-byte count sends that many bytes and closes; an HTTP request line
/// gets a response of `http_body` bytes (for curl).
fn network_peer(http_body: u64) -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let _ = s.set_nodelay(true);
            std::thread::spawn(move || {
                let mut first = [0u8; 1];
                if s.read_exact(&mut first).is_err() {
                    return;
                }
                let zeros = vec![0u8; 1 << 20];
                let send = |s: &mut std::net::TcpStream, mut n: u64| {
                    while n > 0 {
                        let k = n.min(zeros.len() as u64) as usize;
                        if s.write_all(&zeros[..k]).is_err() {
                            return;
                        }
                        n -= k as u64;
                    }
                };
                match first[0] {
                    b'e' => {
                        let mut m = [0u8; 64];
                        while s.read_exact(&mut m).is_ok() {
                            if s.write_all(&m).is_err() {
                                return;
                            }
                        }
                    }
                    b'd' => {
                        let mut n = [0u8; 8];
                        if s.read_exact(&mut n).is_ok() {
                            send(&mut s, u64::from_le_bytes(n));
                        }
                    }
                    _ => {
                        // An HTTP request: read its head, answer.
                        let mut head = vec![first[0]];
                        let mut b = [0u8; 1];
                        while !head.ends_with(b"\r\n\r\n") && s.read_exact(&mut b).is_ok() {
                            head.push(b[0]);
                        }
                        let _ = write!(
                            s,
                            "HTTP/1.1 200 OK\r\nContent-Length: {http_body}\r\nConnection: close\r\n\r\n"
                        );
                        send(&mut s, http_body);
                    }
                }
            });
        }
    });
    port
}

/// A connection to 127.0.0.1:`port`: direct, or through the proxy at
/// `proxy` (a CONNECT tunnel).
fn network_connect(port: u16, proxy: Option<u16>) -> std::net::TcpStream {
    use std::io::{Read, Write};
    let Some(p) = proxy else {
        let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_nodelay(true).unwrap();
        return s;
    };
    let mut s = std::net::TcpStream::connect(("127.0.0.1", p)).unwrap();
    s.set_nodelay(true).unwrap();
    write!(
        s,
        "CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut b).unwrap();
        head.push(b[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    s
}

fn network(base: &Path, home: &Path, rows: &mut Vec<Row>) {
    use std::io::{Read, Write};
    let peer = network_peer(1 << 30);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_port = listener.local_addr().unwrap().port();
    let config = rootfence::netproxy::Config {
        rules: vec![rootfence::netproxy::DomainRule::parse(&format!("127.0.0.1:{peer}")).unwrap()],
        pins: Default::default(),
        policy: "bench".into(),
    };
    let _proxy = rootfence::netproxy::Proxy::start(listener, config, None).unwrap();
    let both = |f: &dyn Fn(Option<u16>) -> Vec<Duration>| (f(None), f(Some(proxy_port)));

    // Round trips of 64 bytes on an open connection (a tunnel once made).
    let (mut d, mut p) = both(&|proxy| {
        let mut s = network_connect(peer, proxy);
        s.write_all(b"e").unwrap();
        let mut m = [7u8; 64];
        let mut out = Vec::new();
        for i in 0..11_000 {
            let t = Instant::now();
            s.write_all(&m).unwrap();
            s.read_exact(&mut m).unwrap();
            if i >= 1000 {
                out.push(t.elapsed());
            }
        }
        out
    });
    let (d50, p50) = (percentile(&mut d, 0.5), percentile(&mut p, 0.5));
    rows.push(row(
        "network: 64-byte round trip on an open connection, direct vs through the proxy's tunnel, median",
        format!("{:.1} µs", us(d50)),
        format!("{:.1} µs", us(p50)),
        format!("+{:.1} µs", us(p50) - us(d50)),
        "",
        None,
    ));

    // A new connection and its first round trip (the proxy reads the
    // CONNECT, judges it, connects, answers).
    let (mut d, mut p) = both(&|proxy| {
        let mut out = Vec::new();
        for i in 0..2200 {
            let t = Instant::now();
            let mut s = network_connect(peer, proxy);
            s.write_all(b"e").unwrap();
            let mut m = [7u8; 64];
            s.write_all(&m).unwrap();
            s.read_exact(&mut m).unwrap();
            if i >= 200 {
                out.push(t.elapsed());
            }
        }
        out
    });
    let (d50, p50) = (percentile(&mut d, 0.5), percentile(&mut p, 0.5));
    rows.push(row(
        "network: new connection + first 64-byte round trip, direct vs CONNECT through the proxy, median",
        format!("{:.1} µs", us(d50)),
        format!("{:.1} µs", us(p50)),
        format!("+{:.1} µs", us(p50) - us(d50)),
        "",
        None,
    ));

    // Downloads of 1 GiB, best of 5.
    let gib: u64 = 1 << 30;
    let (mut d, mut p) = both(&|proxy| {
        (0..5)
            .map(|_| {
                let mut s = network_connect(peer, proxy);
                let t = Instant::now();
                s.write_all(b"d").unwrap();
                s.write_all(&gib.to_le_bytes()).unwrap();
                let mut buf = vec![0u8; 1 << 20];
                let mut got = 0u64;
                while got < gib {
                    let n = s.read(&mut buf).unwrap();
                    assert!(n > 0, "short download");
                    got += n as u64;
                }
                t.elapsed()
            })
            .collect()
    });
    let (db, pb) = (percentile(&mut d, 0.0), percentile(&mut p, 0.0));
    let gbs = |t: Duration| gib as f64 / t.as_secs_f64() / 1e9;
    rows.push(row(
        "network: 1 GiB download, direct vs through the proxy's tunnel, best of 5",
        format!("{:.2} GB/s", gbs(db)),
        format!("{:.2} GB/s", gbs(pb)),
        format!("{:.0} % of direct", 100.0 * gbs(pb) / gbs(db)),
        "",
        None,
    ));

    // End to end: curl downloading 1 GiB over plain HTTP, direct and
    // confined by `rootfence exec` with the address listed (the server in
    // its own network namespace where the kernel grants it; launch
    // included), median of 5.
    let policy = base.join("network-policy.toml");
    std::fs::write(
        &policy,
        format!("version = 1\n[network]\nallow_domains = [\"127.0.0.1:{peer}\"]\n"),
    )
    .unwrap();
    let url = format!("http://127.0.0.1:{peer}/big");
    let curl = |fenced: bool| -> Duration {
        let mut c = if fenced {
            let mut c = Command::new(common::rootfence_bin());
            c.args(["exec", "--policy", policy.to_str().unwrap(), "--", "curl"]);
            c
        } else {
            let mut c = Command::new("curl");
            c.args(["--noproxy", "*"]);
            c
        };
        c.args(["-sS", "-o", "/dev/null", &url])
            .env("HOME", home)
            .env("RUST_LOG", "warn");
        time_status(&mut c)
    };
    let mut d: Vec<Duration> = (0..5).map(|_| curl(false)).collect();
    let mut f: Vec<Duration> = (0..5).map(|_| curl(true)).collect();
    let (d50, f50) = (percentile(&mut d, 0.5), percentile(&mut f, 0.5));
    rows.push(row(
        "network: curl downloading 1 GiB, direct vs under `rootfence exec` through the proxy, median of 5",
        format!("{:.2} GB/s", gbs(d50)),
        format!("{:.2} GB/s", gbs(f50)),
        format!("{:.0} % of direct", 100.0 * gbs(f50) / gbs(d50)),
        "",
        None,
    ));
}
