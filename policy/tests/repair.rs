//! Repair on a hand-checked instance: over a processor's N_j, the model
//! that keeps another host is evicted before one that would be left without.

use camdnn_policy::{repair, Plan, PlanInput, ProcId, System};

const SYSTEM: &str = r#"
name = "crowded"
max_batch = 3

[[processor]]
name = "p0"
kind = "cpu"
max_resident = 2

[[processor]]
name = "p1"
kind = "gpu"
max_resident = 2

[[model]]
name = "detector"

[[model]]
name = "a"
parent = "detector"
classes = ["a"]

[[model]]
name = "b"
parent = "detector"
classes = ["b"]

[[model]]
name = "c"
parent = "detector"
classes = ["c"]

[profile.detector.p1]
exec_ms = [10.0]
load_ms = 5.0

[profile.a.p0]
exec_ms = [8.0, 14.0, 21.0]
load_ms = 6.0

[profile.a.p1]
exec_ms = [4.0, 6.0, 8.0]
load_ms = 12.0

[profile.b.p0]
exec_ms = [30.0, 55.0, 80.0]
load_ms = 6.0

[profile.b.p1]
exec_ms = [5.0, 9.0, 13.0]
load_ms = 10.0

[profile.c.p0]
exec_ms = [8.0, 14.0, 21.0]
load_ms = 6.0
"#;

#[test]
fn the_model_with_another_host_is_evicted_first() {
    let system = System::from_toml(SYSTEM).unwrap();
    let id = |name: &str| system.model_by_name(name).unwrap();
    let (det, a, b, c) = (id("detector"), id("a"), id("b"), id("c"));
    let (p0, p1) = (ProcId(0), ProcId(1));
    // b and c were on p0, b and the detector on p1; a is new.
    let mut residency = vec![false; system.num_models() * 2];
    for (m, j) in [(b, p0), (c, p0), (det, p1), (b, p1)] {
        residency[m.0 * 2 + j.0] = true;
    }
    let mut scene = vec![0; system.num_models()];
    scene[a.0] = 2;
    scene[b.0] = 5;
    scene[c.0] = 3;
    let input = PlanInput {
        scene: &scene,
        rem_ms: &[0.0, 0.0],
        residency: &residency,
        frames_per_epoch: 10.0,
    };
    // Three models on p0, which holds two: a (its only host), b (also on
    // p1) and c (its only host); a and b serve two requests each there.
    let mut plan = Plan::empty(&system);
    plan.set_resident(det, p1, true);
    for (m, j, k) in [(a, p0, 2), (b, p0, 2), (c, p0, 3), (b, p1, 3)] {
        plan.set_resident(m, j, true);
        plan.set_batches(m, j, k, 1);
    }
    let fixed = repair(&system, &input, &plan).unwrap();
    assert!(fixed.resident(a, p0) && fixed.served_on(a, p0) == 2);
    assert!(fixed.resident(c, p0) && fixed.served_on(c, p0) == 3);
    assert!(!fixed.resident(b, p0), "b keeps p1, so b leaves p0");
    assert_eq!(fixed.served_on(b, p1), 5);
    assert!(fixed.infeasibility(&system, &input).is_none());
}
