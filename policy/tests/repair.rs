//! Repair on hand-checked instances: over a processor's N_j, the model whose
//! requests cost least elsewhere is evicted, and a model that could only be
//! re-hosted by displacing another one is kept.

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

/// a could only move to p1 by displacing b; b keeps p1 anyway, so b leaves p0.
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

const THREE_UNITS: &str = r#"
name = "three"
max_batch = 4

[[processor]]
name = "p0"
kind = "cpu"
max_resident = 2

[[processor]]
name = "p1"
kind = "gpu"
max_resident = 2

[[processor]]
name = "p2"
kind = "dsp"
max_resident = 2

[[model]]
name = "detector"

[[model]]
name = "x"
parent = "detector"
classes = ["x"]

[[model]]
name = "y"
parent = "detector"
classes = ["y"]

[[model]]
name = "z"
parent = "detector"
classes = ["z"]

[profile.detector.p1]
exec_ms = [10.0]
load_ms = 5.0

[profile.x.p0]
exec_ms = [8.0, 14.0, 20.0, 26.0]
load_ms = 6.0

[profile.x.p1]
exec_ms = [30.0, 55.0, 80.0, 100.0]
load_ms = 6.0

[profile.y.p0]
exec_ms = [8.0, 14.0, 20.0, 26.0]
load_ms = 6.0

[profile.y.p2]
exec_ms = [5.0, 9.0, 13.0, 17.0]
load_ms = 6.0

[profile.z.p0]
exec_ms = [8.0, 14.0, 20.0, 26.0]
load_ms = 6.0
"#;

/// Of two models that both keep another host, the one whose requests cost
/// less there leaves, though it serves more here.
#[test]
fn the_model_cheapest_to_serve_elsewhere_is_evicted() {
    let system = System::from_toml(THREE_UNITS).unwrap();
    let id = |name: &str| system.model_by_name(name).unwrap();
    let (det, x, y, z) = (id("detector"), id("x"), id("y"), id("z"));
    let (p0, p1, p2) = (ProcId(0), ProcId(1), ProcId(2));
    let np = system.num_processors();
    let mut residency = vec![false; system.num_models() * np];
    residency[det.0 * np + p1.0] = true;
    let mut scene = vec![0; system.num_models()];
    scene[x.0] = 3;
    scene[y.0] = 4;
    scene[z.0] = 3;
    let input = PlanInput {
        scene: &scene,
        rem_ms: &[0.0, 0.0, 0.0],
        residency: &residency,
        frames_per_epoch: 10.0,
    };
    // p0 holds two but gets x (2 here, 1 on the slow p1), y (3 here, 1 on
    // the fast p2) and z (its only host).
    let mut plan = Plan::empty(&system);
    plan.set_resident(det, p1, true);
    for (m, j, k) in [(x, p0, 2), (y, p0, 3), (z, p0, 3), (x, p1, 1), (y, p2, 1)] {
        plan.set_resident(m, j, true);
        plan.set_batches(m, j, k, 1);
    }
    let fixed = repair(&system, &input, &plan).unwrap();
    assert!(
        fixed.resident(x, p0),
        "x would cost 55 ms on p1, y 13 ms on p2"
    );
    assert!(!fixed.resident(y, p0));
    assert_eq!(fixed.served_on(y, p2), 4);
    assert!(fixed.resident(z, p0) && fixed.served_on(z, p0) == 3);
    assert!(fixed.infeasibility(&system, &input).is_none());
}
