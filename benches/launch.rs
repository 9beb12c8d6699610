//! Launch latency: `rootfence exec -- /bin/true` against a bare spawn of
//! `/bin/true` and against `bwrap --ro-bind / / --dev /dev --proc /proc
//! /bin/true` (Debian's bubblewrap).
//!
//! Two measurements of the same launches:
//!
//! - `launch-wall`: wall-clock time of one launch, what a host waits;
//! - `launch-cpu`: CPU time (user + system) of the launched process tree,
//!   from `getrusage(RUSAGE_CHILDREN)`. It is what the launch costs the
//!   machine, and stays meaningful on a machine busy with other work,
//!   where wall-clock times mostly measure waiting for a CPU.
//!
//! - `launch-lib`: the same launch from inside a running rootfence (what
//!   the MCP proxy pays per server start or rebuild): `sandbox::spawn` of a
//!   ready plan, and planning plus spawning, against a bare
//!   `std::process::Command` spawn from the same process.
//! - `launch-observed`: `sandbox::spawn` of `/bin/true` and of a python
//!   start (`import json, asyncio`), plain and observed as `rootfence
//!   learn` runs them (every call naming a path goes through the
//!   supervisor): what observing costs a server's start, in wall-clock
//!   time and (`launch-observed-cpu`) in CPU time of the whole launch:
//!   the bench process (where the supervisor runs) and the launched tree.
//!
//! Results and the machine they were measured on: benches/RESULTS-launch.md.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};

fn run(cmd: &mut Command) {
    let status = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("spawn");
    assert!(status.success(), "{cmd:?} failed: {status}");
}

fn launches<M: Measurement>(g: &mut BenchmarkGroup<'_, M>, home: &std::path::Path) {
    let rootfence = env!("CARGO_BIN_EXE_rootfence");
    g.bench_function("bare /bin/true", |b| {
        b.iter(|| run(&mut Command::new("/bin/true")))
    });
    g.bench_function("rootfence exec -- /bin/true", |b| {
        b.iter(|| {
            run(Command::new(rootfence)
                .args(["exec", "--", "/bin/true"])
                .env("HOME", home))
        })
    });
    match common::bwrap() {
        Some(bwrap) => g.bench_function("bwrap /bin/true", |b| {
            b.iter(|| run(&mut common::bwrap_true(bwrap)))
        }),
        None => {
            eprintln!("bwrap not found (apt-get install -y bubblewrap): not compared");
            g
        }
    };
}

fn wall(c: &mut Criterion) {
    let home = tempfile::tempdir().expect("temporary home");
    let mut g = c.benchmark_group("launch-wall");
    g.sample_size(200)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(8));
    launches(&mut g, home.path());
    g.finish();
}

fn plan_true(home: &std::path::Path) -> rootfence::plan::SandboxPlan {
    plan_for(home, &["/bin/true"])
}

fn plan_for(home: &std::path::Path, argv: &[&str]) -> rootfence::plan::SandboxPlan {
    use rootfence::runtime::HostEnv;
    let mut env = HostEnv::current();
    env.home = Some(home.to_path_buf());
    env.vars
        .insert("HOME".into(), home.to_string_lossy().into_owned());
    let policy = rootfence::policy::Policy::builtin(Some(home)).expect("built-in policy");
    let argv: Vec<std::ffi::OsString> = argv.iter().map(Into::into).collect();
    rootfence::plan::for_launch(&policy, &[], &argv, &env).expect("discover the command")
}

fn observed(c: &mut Criterion) {
    let mut g = c.benchmark_group("launch-observed");
    g.sample_size(60)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(8));
    observed_launches(&mut g);
    g.finish();
}

fn observed_cpu(c: &mut Criterion<Cpu>) {
    let mut g = c.benchmark_group("launch-observed-cpu");
    g.sample_size(60)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(8));
    observed_launches(&mut g);
    g.finish();
}

fn observed_launches<M: Measurement>(g: &mut BenchmarkGroup<'_, M>) {
    use rootfence::plan::NamespaceMode;
    use rootfence::sandbox::{self, StdioConfig};
    let home = tempfile::tempdir().expect("temporary home");
    let python = &["/usr/bin/python3", "-c", "import json, asyncio"][..];
    for (name, argv, namespaces) in [
        ("/bin/true", &["/bin/true"][..], NamespaceMode::Auto),
        (
            "python3 -c 'import json, asyncio'",
            python,
            NamespaceMode::Auto,
        ),
        (
            "python3 -c 'import json, asyncio' without namespaces",
            python,
            NamespaceMode::Off,
        ),
    ] {
        for observe in [false, true] {
            let mut plan = plan_for(home.path(), argv);
            plan.namespaces = namespaces;
            plan.observe_paths = observe;
            let how = if observe { "observed" } else { "plain" };
            g.bench_function(format!("sandbox::spawn {name}, {how}"), |b| {
                b.iter(|| {
                    let mut child = sandbox::spawn(&plan, StdioConfig::default()).expect("spawn");
                    assert!(child.wait().expect("wait").success());
                })
            });
        }
    }
}

fn lib(c: &mut Criterion) {
    use rootfence::sandbox::{self, StdioConfig};
    let home = tempfile::tempdir().expect("temporary home");
    let mut g = c.benchmark_group("launch-lib");
    g.sample_size(200)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(6));
    g.bench_function("bare Command /bin/true", |b| {
        b.iter(|| run(&mut Command::new("/bin/true")))
    });
    let plan = plan_true(home.path());
    g.bench_function("sandbox::spawn /bin/true (plan ready)", |b| {
        b.iter(|| {
            let mut child = sandbox::spawn(&plan, StdioConfig::default()).expect("spawn");
            assert!(child.wait().expect("wait").success());
        })
    });
    g.bench_function("plan + sandbox::spawn /bin/true", |b| {
        b.iter(|| {
            let plan = plan_true(home.path());
            let mut child = sandbox::spawn(&plan, StdioConfig::default()).expect("spawn");
            assert!(child.wait().expect("wait").success());
        })
    });
    g.finish();
}

fn cpu(c: &mut Criterion<Cpu>) {
    let home = tempfile::tempdir().expect("temporary home");
    let mut g = c.benchmark_group("launch-cpu");
    g.sample_size(200)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    launches(&mut g, home.path());
    g.finish();
}

/// CPU time (user + system) in nanoseconds, as the function reads it.
struct Cpu(fn() -> u64);

/// CPU time used by `who` (`RUSAGE_SELF`, `RUSAGE_CHILDREN`).
fn cpu_ns(who: libc::c_int) -> u64 {
    // SAFETY: getrusage fills the zeroed struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time used by waited-for children.
fn children_cpu_ns() -> u64 {
    cpu_ns(libc::RUSAGE_CHILDREN)
}

/// CPU time used by this process (its threads: the supervisor's too) and
/// its waited-for children.
fn all_cpu_ns() -> u64 {
    cpu_ns(libc::RUSAGE_SELF) + cpu_ns(libc::RUSAGE_CHILDREN)
}

impl Measurement for Cpu {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        (self.0)()
    }
    fn end(&self, i: u64) -> u64 {
        (self.0)().saturating_sub(i)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuFormatter
    }
}

struct CpuFormatter;

impl ValueFormatter for CpuFormatter {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        let (div, unit) = if typical < 1e3 {
            (1.0, "ns cpu")
        } else if typical < 1e6 {
            (1e3, "µs cpu")
        } else {
            (1e6, "ms cpu")
        };
        for v in values {
            *v /= div;
        }
        unit
    }
    fn scale_throughputs(&self, _: f64, _: &Throughput, values: &mut [f64]) -> &'static str {
        for v in values {
            *v = 1e9 / *v;
        }
        "launches/cpu-s"
    }
    fn scale_for_machines(&self, _: &mut [f64]) -> &'static str {
        "ns cpu"
    }
}

criterion_group!(wall_time, wall, lib, observed);
criterion_group! {
    name = cpu_time;
    config = Criterion::default().with_measurement(Cpu(children_cpu_ns));
    targets = cpu
}
criterion_group! {
    name = observed_cpu_time;
    config = Criterion::default().with_measurement(Cpu(all_cpu_ns));
    targets = observed_cpu
}
criterion_main!(wall_time, cpu_time, observed_cpu_time);
