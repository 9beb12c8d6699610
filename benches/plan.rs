//! Scale of the plan: resolving N roots, building the plan, and building
//! the Landlock ruleset from it, for N = 1, 10, 100 and 1,000 roots.
//!
//!     cargo bench --bench plan

mod common;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rootfence::plan;
use rootfence::policy::Policy;
use rootfence::runtime::{self, HostEnv};

fn bench(c: &mut Criterion) {
    let env = HostEnv::current();
    let policy = Policy::builtin(env.home.as_deref()).unwrap();
    let command = runtime::discover(&["/bin/true".into()], &policy, &env).unwrap();
    let mut group = c.benchmark_group("plan");
    for n in [1usize, 10, 100, 1000] {
        let (_dir, inputs) = common::root_dirs(n);
        group.bench_with_input(BenchmarkId::new("resolve+plan", n), &n, |b, _| {
            b.iter(|| plan::with_roots(&policy, &inputs, command.clone(), &env))
        });
        let p = plan::with_roots(&policy, &inputs, command.clone(), &env);
        group.bench_with_input(BenchmarkId::new("landlock-ruleset", n), &n, |b, _| {
            b.iter(|| rootfence::sandbox::build_ruleset(&p).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
