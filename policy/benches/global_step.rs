//! The global step of the learned policy on the rb5 profile: features, MLP
//! (tract), decoding, repair and local search, per call.

use camdnn_policy::mlp::MlpPolicy;
use camdnn_policy::{GlobalPolicy, PlanInput, System};
use criterion::{criterion_group, criterion_main, Criterion};

const RB5: &str = include_str!("../../config/profiles/rb5.toml");
const ONNX: &[u8] = include_bytes!("../../config/policies/rb5.onnx");
const SIDECAR: &str = include_str!("../../config/policies/rb5.policy.json");

fn global_step(c: &mut Criterion) {
    let system = System::from_toml(RB5).expect("rb5 profile");
    let mut policy = MlpPolicy::new(&system, ONNX, SIDECAR).expect("committed policy");
    // The paper's Sec. 5.3 scene (13 people, 11 cars, 2 bicycles), the GPU
    // still busy, detector + cars on the CPU, people on the DSP.
    let scene = [0, 13, 11, 2];
    let rem = [0.0, 25.0, 0.0];
    let mut a_old = vec![false; 12];
    a_old[0] = true; // detector@cpu
    a_old[2 * 3 + 1] = true; // squeezenet@gpu
    a_old[3 + 2] = true; // inception_v1@dsp
    a_old[3 * 3 + 2] = true; // mobilenet_v1@dsp
    let input = PlanInput {
        scene: &scene,
        rem_ms: &rem,
        residency: &a_old,
        frames_per_epoch: 70.0,
    };
    let mut group = c.benchmark_group("global_step_rb5");
    for (name, search) in [("mlp_repair_search", true), ("mlp_repair", false)] {
        policy.set_local_search(search);
        group.bench_function(name, |b| {
            b.iter(|| policy.plan(&system, std::hint::black_box(&input)))
        });
    }
    group.finish();
}

criterion_group!(benches, global_step);
criterion_main!(benches);
