//! The whole global step of the full camdnn scheduler on the rb5 profile, as
//! the daemon's scheduler thread runs it every epoch: the MLP's plan, the
//! stay plan, every choice replayed on the last three epochs' scenes (210
//! frames at 14 fps) and on the scene on camera held. `global_step` times
//! the planner alone.

use camdnn_policy::mlp::MlpPolicy;
use camdnn_policy::scheduler::Scheduler;
use camdnn_policy::schedulers::Camdnn;
use camdnn_policy::sim::{full_scene, Trace};
use camdnn_policy::{Cluster, System};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};

const RB5: &str = include_str!("../../config/profiles/rb5.toml");
const ONNX: &[u8] = include_bytes!("../../config/policies/rb5.onnx");
const SIDECAR: &str = include_str!("../../config/policies/rb5.policy.json");

/// Frames per 5 s epoch at 14 fps.
const EPOCH_FRAMES: usize = 70;

/// A camdnn that has seen `epochs` epochs of the paper's trace (one global
/// step after each), with its cluster, and the scene of the next step.
fn warmed(system: &System, epochs: usize) -> (Camdnn<MlpPolicy>, Cluster, Vec<u32>) {
    let policy = MlpPolicy::new(system, ONNX, SIDECAR).expect("committed policy");
    let mut camdnn = Camdnn::new(policy, 5.0);
    let mut cluster = Cluster::new(system);
    let start = camdnn.initial_plan(system);
    cluster.preload(system, &start);
    // Every frame's full scene (detectors' entries 1), in trace order.
    let scenes: Vec<Vec<u32>> = Trace::paper_fig11()
        .segments
        .iter()
        .flat_map(|s| std::iter::repeat_n(full_scene(system, &s.scene), s.frames))
        .collect();
    let mut frame = 0;
    for epoch in 1..=epochs + 1 {
        for _ in 0..EPOCH_FRAMES {
            let now = frame as f64 * 1000.0 / 14.0;
            camdnn.observe_scene(system, &cluster, now, &scenes[frame % scenes.len()]);
            frame += 1;
        }
        if epoch <= epochs {
            let scene = &scenes[frame % scenes.len()];
            camdnn.on_epoch(
                system,
                &mut cluster,
                epoch as f64 * 5000.0,
                scene,
                70.0,
                5000.0,
            );
        }
    }
    let scene = scenes[frame % scenes.len()].clone();
    (camdnn, cluster, scene)
}

fn global_step_full(c: &mut Criterion) {
    let system = System::from_toml(RB5).expect("rb5 profile");
    let mut group = c.benchmark_group("global_step_full_rb5");
    group.sample_size(20);
    group.bench_function("on_epoch_three_epoch_window", |b| {
        b.iter_batched(
            || warmed(&system, 3),
            |(mut camdnn, mut cluster, scene)| {
                camdnn.on_epoch(&system, &mut cluster, 20_000.0, &scene, 70.0, 5000.0)
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, global_step_full);
criterion_main!(benches);
