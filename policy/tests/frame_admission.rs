//! The simulator admits camera frames by the daemon's rules: real-time
//! dropping at a frame period (the default: dropped at arrival when the
//! detector could not start within it, or after the detector when the
//! frame has objects and the pipeline is further behind than its age
//! leaves), or at most `max_in_flight` frames in the pipeline with one frame
//! waiting (a newer one supersedes it and the older is dropped; a waiting
//! frame enters when a frame is answered, its delay counted from its
//! arrival), or every frame queued. Outcomes checked by hand on one unit
//! whose detector takes 150 ms, and on a detector unit beside a classifier
//! unit, frames every 1000/14 ms.

use camdnn_policy::admission::FrameAdmission;
use camdnn_policy::schedulers;
use camdnn_policy::sim::{simulate, SimConfig, SimError, Trace};
use camdnn_policy::System;

mod common;

/// The tests' board (`common::one_unit`).
fn one_unit() -> System {
    common::one_unit(150.0)
}

/// Each frame's delay (None: dropped) over five empty frames.
fn delays(admission: FrameAdmission) -> Vec<Option<f64>> {
    delays_on(&one_unit(), "5 0\n", admission)
}

/// Each frame's delay (None: dropped, 0.01 ms steps) under camdnn-local
/// with no global step, on `system` and the trace `trace`.
fn delays_on(system: &System, trace: &str, admission: FrameAdmission) -> Vec<Option<f64>> {
    let mut s = schedulers::by_name(system, "camdnn-local", 5.0).unwrap();
    let cfg = SimConfig {
        admission,
        epoch_ms: 0.0,
        ..SimConfig::default()
    };
    let trace = Trace::parse(trace, 1).unwrap();
    let r = simulate(system, s.as_mut(), &trace, &cfg).unwrap();
    r.frames
        .iter()
        .map(|f| f.delay_ms.map(|d| (d * 100.0).round() / 100.0))
        .collect()
}

const P: f64 = 1000.0 / 14.0;

fn ms(x: f64) -> Option<f64> {
    Some((x * 100.0).round() / 100.0)
}

#[test]
fn a_frame_arriving_while_the_pipeline_is_a_period_behind_is_dropped() {
    // f0 runs 0-150. f1 (71.4) finds 78.6 ms queued: dropped. f2 (142.9)
    // finds 7.1: runs 150-300. f3 (214.3) finds 85.7: dropped. f4 (285.7)
    // finds 14.3: runs 300-450.
    let want = vec![
        ms(150.0),
        None,
        ms(300.0 - 2.0 * P),
        None,
        ms(450.0 - 4.0 * P),
    ];
    assert_eq!(delays(FrameAdmission::Behind(None)), want);
    assert_eq!(SimConfig::default().admission, FrameAdmission::Behind(None));
    // With 80 ms allowed, f1 finds 78.6 and enters: 150-300.
    assert_eq!(delays(FrameAdmission::Behind(Some(80.0)))[1], ms(300.0 - P));
}

#[test]
fn one_frame_in_flight_supersedes_the_waiting_frame() {
    // f0 runs 0-150. f1 (71.4) waits; f2 (142.9) supersedes it; f0 answered
    // at 150, f2 enters and runs 150-300. f3 (214.3) waits, f4 (285.7)
    // supersedes it and runs 300-450.
    assert_eq!(
        delays(FrameAdmission::InFlight(1)),
        vec![
            ms(150.0),
            None,
            ms(300.0 - 2.0 * P),
            None,
            ms(450.0 - 4.0 * P)
        ]
    );
}

#[test]
fn two_frames_in_flight_queue_one_behind_the_other() {
    // f0 runs 0-150, f1 enters at 71.4 and runs 150-300. f2 (142.9) waits
    // and enters when f0 is answered at 150: 300-450. f3 (214.3) waits, f4
    // (285.7) supersedes it and enters when f1 is answered at 300: 450-600.
    assert_eq!(
        delays(FrameAdmission::InFlight(2)),
        vec![
            ms(150.0),
            ms(300.0 - P),
            ms(450.0 - 2.0 * P),
            None,
            ms(600.0 - 4.0 * P)
        ]
    );
}

#[test]
fn the_no_drop_mode_queues_every_frame() {
    let want: Vec<Option<f64>> = (0..5)
        .map(|f| ms(150.0 * (f + 1) as f64 - f as f64 * P))
        .collect();
    assert_eq!(delays(FrameAdmission::QueueAll), want);
}

#[test]
fn no_frame_in_flight_is_a_config_error() {
    let system = one_unit();
    let mut s = schedulers::by_name(&system, "camdnn-local", 5.0).unwrap();
    let cfg = SimConfig {
        admission: FrameAdmission::InFlight(0),
        ..SimConfig::default()
    };
    let trace = Trace::parse("1 0\n", 1).unwrap();
    let err = simulate(&system, s.as_mut(), &trace, &cfg).unwrap_err();
    assert!(matches!(err, SimError::Config { .. }), "{err}");
    assert!(err.to_string().contains("max_in_flight"), "{err}");
}

/// A detector on an NPU and a classifier only on the CPU, both resident
/// from the start, one request per batch.
fn npu_and_cpu(detector_ms: f64, classifier_ms: f64) -> System {
    common::detector_and_classifier(
        &[("npu", "other", 1), ("cpu", "cpu", 1)],
        ("npu", detector_ms),
        ("cpu", classifier_ms),
    )
}

/// Each frame's delay (None: dropped) over frames of one object and of
/// none, alternating, on [`npu_and_cpu`] with the default admission.
fn alternating(detector_ms: f64, classifier_ms: f64) -> Vec<Option<f64>> {
    let system = npu_and_cpu(detector_ms, classifier_ms);
    delays_on(
        &system,
        "1 1\n1 0\n1 1\n1 0\n1 1\n",
        FrameAdmission::Behind(None),
    )
}

#[test]
fn a_frame_with_no_objects_is_answered_while_the_classifiers_are_behind() {
    // Detector 10 ms on the NPU, classifier 200 ms on the CPU, its crop
    // ready 0.5 ms after the detector. f0: 0-10, cls 10.5-210.5. f1 (71.4)
    // finds the CPU 139 ms behind but the NPU free: detected 71.4-81.4, no
    // objects, answered. f2 (142.9): detected by 152.9, when the CPU is
    // 57.6 ms behind, under the 71.4 - 10 its age leaves: cls 210.5-410.5.
    // f3 like f1. f4 (285.7): detected by 295.7, the CPU 114.8 ms behind:
    // dropped before its object starts.
    let want = vec![ms(210.5), ms(10.0), ms(410.5 - 2.0 * P), ms(10.0), None];
    assert_eq!(alternating(10.0, 200.0), want);
}

#[test]
fn a_frame_that_waited_for_its_detector_has_that_much_less_slack() {
    // Detector 20 ms: f0's cls runs 20.5-220.5. f2 is detected by 162.9,
    // 20 ms after its arrival, with the CPU 57.6 ms behind: more than the
    // 51.4 left of its 71.4, so it is dropped (at its arrival it would have
    // found 77.6 and been dropped by the same limit). f4 (285.7) finds the
    // CPU free of f2 and is served as f0 was: detected 285.7-305.7, cls
    // from its crop at 306.2 to 506.2, 220.5 ms after its arrival.
    let got = alternating(20.0, 200.0);
    assert_eq!(got, [ms(220.5), ms(20.0), None, ms(20.0), ms(220.5)]);
}
