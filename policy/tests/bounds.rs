//! The bounds hold against every scheduler the simulator runs: no frame is
//! answered faster than its makespan lower bound, and no scheduler answers
//! frames faster than the sustainable rate.

use camdnn_policy::bound::{frame_bound, sustainable_fps};
use camdnn_policy::schedulers::{self, BASELINES};
use camdnn_policy::sim::{full_scene, mean_scene, rate_bound, simulate, SimConfig, Trace};
use camdnn_policy::System;

const RB5: &str = include_str!("../../config/profiles/rb5.toml");

#[test]
fn no_scheduler_beats_the_frame_bound_or_the_rate_bound() {
    let system = System::from_toml(RB5).unwrap();
    let trace = Trace::random(3, 3, 6, 20, 14);
    for name in BASELINES {
        let mut s = schedulers::by_name(&system, name, 5.0).unwrap();
        let r = simulate(&system, s.as_mut(), &trace, &SimConfig::default()).unwrap();
        for (n, f) in r.frames.iter().enumerate() {
            assert!(
                f.bound_ms.is_finite() && f.bound_ms > 0.0,
                "{name} frame {n}"
            );
            if let Some(d) = f.delay_ms {
                assert!(
                    d >= f.bound_ms - 1e-9,
                    "{name} frame {n}: {d} < {}",
                    f.bound_ms
                );
            }
        }
        let b = r.bound_ratio();
        assert!(b.p50 >= 1.0 && b.p90 >= b.p50, "{name}: {b:?}");
        let mut fresh = schedulers::by_name(&system, name, 5.0).unwrap();
        let rate = rate_bound(&system, fresh.as_mut(), &trace, &SimConfig::default()).unwrap();
        assert!(rate.achieved_fps > 0.0, "{name}: {rate:?}");
        assert!(rate.ratio() <= 1.0 + 1e-9, "{name}: {rate:?}");
    }
}

#[test]
fn the_rate_bound_is_the_mean_scene_of_the_trace() {
    let system = System::from_toml(RB5).unwrap();
    let trace = Trace::parse("10 2 0 0\n30 0 4 0\n", 3).unwrap();
    // Detector once per frame; 10 x 2 person crops and 30 x 4 car crops
    // over 40 frames: 0.5 and 3 per frame.
    assert_eq!(mean_scene(&system, &trace, 1), vec![1.0, 0.5, 3.0, 0.0]);
    let one = sustainable_fps(&system, &[1.0, 0.5, 3.0, 0.0]);
    let more = sustainable_fps(&system, &[1.0, 1.0, 6.0, 0.0]);
    assert!(
        more < one,
        "more work per frame, a lower rate: {more} vs {one}"
    );
}

#[test]
fn loads_raise_the_frame_bound_only_when_nothing_is_resident() {
    let system = System::from_toml(RB5).unwrap();
    let scene = full_scene(&system, &[13, 11, 2]);
    let warm = frame_bound(&system, &scene, |_, _| true).bound_ms();
    let cold = frame_bound(&system, &scene, |_, _| false).bound_ms();
    assert!(cold > warm, "cold {cold} warm {warm}");
    // The ILP's optimum for this scene with loads free is 71.4 ms
    // (docs/results.md, Fig. 6): the bound must not exceed it.
    assert!(warm <= 71.4, "{warm}");
}

#[test]
fn no_median_delay_is_below_the_suites_median_bound() {
    use camdnn_policy::gen::{self, Shape};
    use camdnn_policy::suite::{median_bound_ms, run_case};
    let cfg = SimConfig::default();
    for seed in [2, 7, 13] {
        let system = System::from_spec(&gen::board(seed)).unwrap();
        let heavy = gen::heavy_count(&system, cfg.fps);
        for shape in Shape::ALL {
            let trace = shape.trace(&system, seed, heavy);
            let mut scheds: Vec<_> = ["camdnn-local", "heft", "camdnn-greedy"]
                .iter()
                .map(|n| schedulers::by_name(&system, n, 5.0).unwrap())
                .collect();
            let case = run_case(&system, "b", shape.name(), &trace, &mut scheds, &cfg).unwrap();
            let bound = median_bound_ms(&system, &trace, cfg.root_items);
            assert_eq!(case.median_bound_ms, bound);
            assert!(
                bound.is_finite() && bound > 0.0,
                "gen-{seed}/{}",
                shape.name()
            );
            for (name, h) in &case.results {
                assert!(
                    h.median_ms >= bound - 1e-9,
                    "{name} on gen-{seed}/{}: median {} < bound {bound}",
                    shape.name(),
                    h.median_ms
                );
            }
        }
    }
}

#[test]
fn no_frame_beats_its_bound_within_the_units_slots() {
    // Each frame's bound over every residency the units can hold at once
    // (the suite's median bound is the median of these): no schedule meets
    // a frame with a residency outside that set, so none answers it sooner.
    // rb5 with the paper's trace, and three generated boards whose units
    // hold few models.
    use camdnn_policy::gen::{self, Shape};
    let cfg = SimConfig::default();
    assert_no_frame_beats_its_bound(
        &System::from_toml(RB5).unwrap(),
        "rb5",
        &Trace::paper_fig11(),
        &cfg,
    );
    for seed in [9, 13, 25] {
        let system = System::from_spec(&gen::board(seed)).unwrap();
        let heavy = gen::heavy_count(&system, cfg.fps);
        for shape in [Shape::Paper, Shape::DominanceShift, Shape::RandomWalk] {
            let trace = shape.trace(&system, seed, heavy);
            let case = format!("gen-{seed}/{}", shape.name());
            assert_no_frame_beats_its_bound(&system, &case, &trace, &cfg);
        }
    }
}

fn assert_no_frame_beats_its_bound(system: &System, case: &str, trace: &Trace, cfg: &SimConfig) {
    use camdnn_policy::bound::frame_bound_within_slots;
    use camdnn_policy::sim::frame_scene;
    let bounds: Vec<f64> = trace
        .segments
        .iter()
        .flat_map(|seg| {
            let b =
                frame_bound_within_slots(system, &frame_scene(system, &seg.scene, cfg.root_items));
            std::iter::repeat_n(b, seg.frames)
        })
        .collect();
    for name in ["camdnn-local", "camdnn-greedy", "static-dist", "heft"] {
        let mut s = schedulers::by_name(system, name, 5.0).unwrap();
        let r = simulate(system, s.as_mut(), trace, cfg).unwrap();
        for (n, (f, b)) in r.frames.iter().zip(&bounds).enumerate() {
            if let Some(d) = f.delay_ms {
                assert!(d >= b - 1e-9, "{name} on {case} frame {n}: {d} < {b}");
            }
        }
    }
}

#[test]
fn frames_dropped_at_admission_are_no_throughput() {
    // The rate bound's overload run queues every frame (the no-drop mode),
    // whatever the configuration's deadline admission: a scheduler cannot
    // reach above the sustainable rate by dropping frames it was offered.
    use camdnn_policy::admission::DeadlineAdmission;
    let system = System::from_toml(RB5).unwrap();
    let trace = Trace::random(3, 3, 6, 20, 14);
    let cfg = SimConfig {
        deadline_admission: Some(DeadlineAdmission {
            tail_z: 0.0,
            deadline_ms: Some(60.0),
        }),
        ..SimConfig::default()
    };
    assert!(cfg.clone().no_drop().deadline_admission.is_none());
    for name in ["camdnn-local", "heft"] {
        let mut s = schedulers::by_name(&system, name, 5.0).unwrap();
        let rate = rate_bound(&system, s.as_mut(), &trace, &cfg).unwrap();
        assert!(rate.ratio() <= 1.0 + 1e-9, "{name}: {rate:?}");
    }
}
