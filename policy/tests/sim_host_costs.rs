//! Host costs beyond the profile: frame preparation (decoding, the
//! detector's input) before a frame's requests are released adds exactly
//! its time to every frame on an idle board; a per-batch overhead holds the
//! processor longer, so every frame takes longer; negative times are config
//! errors.

use camdnn_policy::schedulers;
use camdnn_policy::sim::{simulate, SimConfig, SimError, SimReport, Trace};
use camdnn_policy::System;

const RB5: &str = include_str!("../../config/profiles/rb5.toml");

fn run(frame_prep_ms: f64) -> Result<SimReport, SimError> {
    run_with(frame_prep_ms, 0.0)
}

fn run_with(frame_prep_ms: f64, batch_overhead_ms: f64) -> Result<SimReport, SimError> {
    let system = System::from_toml(RB5).unwrap();
    let mut s = schedulers::by_name(&system, "camdnn-local", 5.0).unwrap();
    let trace = Trace::parse("20 2 1 1\n", 3).unwrap();
    let cfg = SimConfig {
        fps: 2.0,
        epoch_ms: 0.0,
        frame_prep_ms,
        batch_overhead_ms,
        ..SimConfig::default()
    };
    simulate(&system, s.as_mut(), &trace, &cfg)
}

#[test]
fn preparation_time_adds_to_every_frame_on_an_idle_board() {
    let ready = run(0.0).unwrap();
    let prepared = run(3.0).unwrap();
    assert_eq!(ready.dropped() + prepared.dropped(), 0);
    for (a, b) in ready.frames.iter().zip(&prepared.frames) {
        let (a, b) = (a.delay_ms.unwrap(), b.delay_ms.unwrap());
        assert!(
            (b - a - 3.0).abs() < 1e-9,
            "{a} ms without, {b} ms with 3 ms of preparation"
        );
    }
}

#[test]
fn negative_preparation_time_is_a_config_error() {
    let e = run(-1.0).unwrap_err();
    assert!(
        matches!(
            e,
            SimError::Config {
                field: "frame_prep_ms",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn batch_overhead_lengthens_every_frame() {
    let ideal = run_with(0.0, 0.0).unwrap();
    let real = run_with(0.0, 0.5).unwrap();
    for (a, b) in ideal.frames.iter().zip(&real.frames) {
        let (a, b) = (a.delay_ms.unwrap(), b.delay_ms.unwrap());
        // At least the detector's batch and one classifier batch in a row.
        assert!(
            b >= a + 1.0 - 1e-9,
            "{a} ms ideal, {b} ms with 0.5 ms per batch"
        );
    }
    let e = run_with(0.0, -0.1).unwrap_err();
    assert!(
        matches!(
            e,
            SimError::Config {
                field: "batch_overhead_ms",
                ..
            }
        ),
        "{e}"
    );
}
