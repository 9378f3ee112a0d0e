//! The simulator admits camera frames by the daemon's rules: dropped while
//! the pipeline is more than a frame period behind (the default), or at most
//! `max_in_flight` frames in the pipeline with one frame waiting (a newer
//! one supersedes it and the older is dropped; a waiting frame enters when a
//! frame is answered, its delay counted from its arrival), or every frame
//! queued. Outcomes checked by hand on one unit whose detector takes 150 ms,
//! frames every 1000/14 ms.

use camdnn_policy::schedulers;
use camdnn_policy::sim::{simulate, FrameAdmission, SimConfig, SimError, Trace};
use camdnn_policy::System;

mod common;

/// The tests' board (`common::one_unit`).
fn one_unit() -> System {
    common::one_unit(150.0)
}

/// Each frame's delay (None: dropped) over five empty frames.
fn delays(admission: FrameAdmission) -> Vec<Option<f64>> {
    let system = one_unit();
    let mut s = schedulers::by_name(&system, "camdnn-local", 5.0).unwrap();
    let cfg = SimConfig {
        admission,
        epoch_ms: 0.0,
        ..SimConfig::default()
    };
    let trace = Trace::parse("5 0\n", 1).unwrap();
    let r = simulate(&system, s.as_mut(), &trace, &cfg).unwrap();
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
