//! Simulated frames per second: the whole pipeline (batcher, dispatcher,
//! events) over the paper's 800-frame trace on the RB5-like profile.

use camdnn_policy::schedulers;
use camdnn_policy::sim::{simulate, SimConfig, Trace};
use camdnn_policy::System;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn simulate_bench(c: &mut Criterion) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/profiles/rb5.toml");
    let system =
        System::from_toml(&std::fs::read_to_string(path).expect("config/profiles/rb5.toml"))
            .expect("the shipped profile is valid");
    let trace = Trace::paper_fig11();
    let cfg = SimConfig::default();
    let mut group = c.benchmark_group("simulate");
    group.throughput(Throughput::Elements(trace.frames() as u64));
    group.sample_size(20);
    for name in ["camdnn-local", "heft"] {
        group.bench_function(format!("{name}, paper trace (800 frames)"), |b| {
            b.iter(|| {
                let mut s = schedulers::by_name(&system, name, 5.0).unwrap();
                simulate(&system, s.as_mut(), &trace, &cfg).unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, simulate_bench);
criterion_main!(benches);
