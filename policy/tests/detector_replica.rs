//! Start-up gives a detector a replica on another unit when a slot is free
//! there after its classifiers, so a detector with several items per frame
//! (MTCNN's pyramid) spreads them over both units instead of queueing every
//! item on one while the other idles.

use camdnn_policy::plan::{fastest_hosts, fill_free_slots};
use camdnn_policy::schedulers;
use camdnn_policy::sim::{simulate, SimConfig, Trace};
use camdnn_policy::System;

/// Two CPU units `a` and `b` (`b` holding `b_slots` models), a detector
/// and one face model, with the given batch-1 times (ms) on each unit.
fn two_units(names: [&str; 2], b_slots: usize, detector_ms: [f64; 2], face_ms: [f64; 2]) -> System {
    let [a, b] = names;
    System::from_toml(&format!(
        r#"
name = "two-units"
max_batch = 1

[[processor]]
name = "{a}"
kind = "cpu"
max_resident = 2

[[processor]]
name = "{b}"
kind = "cpu"
max_resident = {b_slots}

[[model]]
name = "detector"

[[model]]
name = "face"
parent = "detector"
classes = ["face"]

[profile.detector.{a}]
exec_ms = [{}]
load_ms = 20.0

[profile.detector.{b}]
exec_ms = [{}]
load_ms = 40.0

[profile.face.{a}]
exec_ms = [{}]
load_ms = 5.0

[profile.face.{b}]
exec_ms = [{}]
load_ms = 5.0
"#,
        detector_ms[0], detector_ms[1], face_ms[0], face_ms[1]
    ))
    .unwrap()
}

/// Two CPUs; the detector runs twice as fast on `fast` as on `slow`; one
/// light classifier. `slow` holds `slow_slots` models.
fn two_cores(slow_slots: usize) -> System {
    two_units(["fast", "slow"], slow_slots, [5.0, 10.0], [1.0, 1.0])
}

#[test]
fn a_free_slot_after_the_classifiers_gets_a_detector_replica() {
    let system = two_cores(2);
    let (det, face) = (
        system.model_by_name("detector").unwrap(),
        system.model_by_name("face").unwrap(),
    );
    let (fast, slow) = (
        system.proc_by_name("fast").unwrap(),
        system.proc_by_name("slow").unwrap(),
    );
    let base = fastest_hosts(&system);
    assert!(base.resident(det, fast) && !base.resident(det, slow));
    let filled = fill_free_slots(&system, &base);
    assert!(filled.resident(face, slow), "classifiers come first");
    assert!(filled.resident(det, slow), "then the detector's replica");

    // No slot left after the classifier: no replica.
    let tight = two_cores(1);
    let filled = fill_free_slots(&tight, &fastest_hosts(&tight));
    assert!(filled.resident(face, slow) && !filled.resident(det, slow));
}

#[test]
fn eight_detector_items_per_frame_use_the_replica() {
    // One frame every 200 ms, 8 detector items (pyramid scales), 1 face.
    let run = |slow_slots| {
        let system = two_cores(slow_slots);
        let mut s = schedulers::by_name(&system, "camdnn-greedy", 5.0).unwrap();
        let cfg = SimConfig {
            fps: 5.0,
            root_items: 8,
            ..SimConfig::default()
        };
        let r = simulate(
            &system,
            s.as_mut(),
            &Trace::parse("20 1\n", 1).unwrap(),
            &cfg,
        )
        .unwrap();
        assert_eq!(r.dropped(), 0);
        (r.delay().mean, r.utilisation())
    };
    let (alone, _) = run(1);
    let (spread, busy) = run(2);
    // 8 x 5 ms on `fast` alone; with the replica, 2-3 items go to `slow`.
    assert!(busy[1] > 0.0, "the replica ran nothing: {busy:?}");
    assert!(
        spread < alone * 0.9,
        "the replica should shorten the frame: {spread:.1} ms vs {alone:.1} ms alone"
    );
}

/// Two units, the detector fastest on `a` and the face model on `b` (by a
/// few percent, as on two equal cores); `b` holds `b_slots` models.
fn two_equal(b_slots: usize) -> System {
    two_units(["a", "b"], b_slots, [44.0, 46.0], [14.0, 13.6])
}

#[test]
fn a_detector_unit_whose_detector_is_replicated_takes_classifiers_too() {
    // Start-up: detector on `a`; `b` gets the face model and a detector
    // replica. `a` then carries the detector no more than `b` does, and its
    // free slot takes the face model, so face requests can run on both
    // (before: `a` ran only its share of the detector).
    let system = two_equal(2);
    let (det, face) = (
        system.model_by_name("detector").unwrap(),
        system.model_by_name("face").unwrap(),
    );
    let (a, b) = (
        system.proc_by_name("a").unwrap(),
        system.proc_by_name("b").unwrap(),
    );
    let base = fastest_hosts(&system);
    assert!(base.resident(det, a) && base.resident(face, b) && !base.resident(face, a));
    let filled = fill_free_slots(&system, &base);
    assert!(filled.resident(det, b), "the detector's replica");
    assert!(filled.resident(face, a), "the detector unit's free slot");
    // Without the replica (no slot for it on `b`), `a` stays the detector's.
    let tight = two_equal(1);
    let filled = fill_free_slots(&tight, &fastest_hosts(&tight));
    assert!(!filled.resident(det, b) && !filled.resident(face, a));
}
