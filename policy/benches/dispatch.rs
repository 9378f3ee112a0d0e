//! One local dispatch decision (Algorithm 1) on the RB5-like profile:
//! host choice over the processors for a waiting group of requests.

use camdnn_policy::plan::fastest_hosts;
use camdnn_policy::{choose_host, Cluster, HostRule, System};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

fn rb5() -> System {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/profiles/rb5.toml");
    System::from_toml(&std::fs::read_to_string(path).expect("config/profiles/rb5.toml"))
        .expect("the shipped profile is valid")
}

fn dispatch(c: &mut Criterion) {
    let system = rb5();
    let mut cluster = Cluster::new(&system);
    cluster.preload(&system, &fastest_hosts(&system));
    let models: Vec<_> = system.request_models().collect();
    // Give the processors different backlogs so every branch is exercised.
    for (n, &i) in models.iter().enumerate() {
        let j = system.supporting(i).next().unwrap();
        cluster.run(&system, 0.0, i, j, n + 1);
    }
    let mut n = 0usize;
    c.bench_function("local dispatch decision (rb5, 3 processors)", |b| {
        b.iter(|| {
            n = n.wrapping_add(1);
            let i = models[n % models.len()];
            black_box(choose_host(
                &system,
                &cluster,
                HostRule::PerRequest,
                black_box(5.0),
                i,
                1 + n % 7,
            ))
        })
    });
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
