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
    use rootfence::runtime::HostEnv;
    let mut env = HostEnv::current();
    env.home = Some(home.to_path_buf());
    env.vars
        .insert("HOME".into(), home.to_string_lossy().into_owned());
    let policy = rootfence::policy::Policy::builtin(Some(home)).expect("built-in policy");
    rootfence::plan::for_launch(&policy, &[], &["/bin/true".into()], &env)
        .expect("discover /bin/true")
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

fn cpu(c: &mut Criterion<ChildrenCpu>) {
    let home = tempfile::tempdir().expect("temporary home");
    let mut g = c.benchmark_group("launch-cpu");
    g.sample_size(200)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    launches(&mut g, home.path());
    g.finish();
}

/// CPU time (user + system) used by waited-for children, in nanoseconds.
struct ChildrenCpu;

fn children_cpu_ns() -> u64 {
    // SAFETY: getrusage fills the zeroed struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

impl Measurement for ChildrenCpu {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        children_cpu_ns()
    }
    fn end(&self, i: u64) -> u64 {
        children_cpu_ns().saturating_sub(i)
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

criterion_group!(wall_time, wall, lib);
criterion_group! {
    name = cpu_time;
    config = Criterion::default().with_measurement(ChildrenCpu);
    targets = cpu
}
criterion_main!(wall_time, cpu_time);
