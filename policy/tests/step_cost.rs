//! A computed global step holds the scheduler thread for
//! `SimConfig::step_cost_ms`, as the daemon's step does: a frame that arrives
//! meanwhile is handled when the step ends. Checked by hand on one unit whose
//! detector takes 10 ms, frames every 1000/14 ms, steps every 530 ms.

use camdnn_policy::schedulers::{self, Camdnn, GreedyPlanner, Scheduler};
use camdnn_policy::sim::{simulate, SimConfig, SimError, Trace};
use camdnn_policy::System;

mod common;

/// The tests' board (`common::one_unit`).
fn one_unit() -> System {
    common::one_unit(10.0)
}

fn delays(s: &mut dyn Scheduler, step_cost_ms: f64) -> Vec<f64> {
    let system = one_unit();
    let cfg = SimConfig {
        epoch_ms: 530.0,
        drop_step_gap_ms: 0.0,
        step_cost_ms,
        ..SimConfig::default()
    };
    let trace = Trace::parse("20 0\n", 1).unwrap();
    let r = simulate(&system, s, &trace, &cfg).unwrap();
    assert_eq!(r.epochs, 2, "steps at 530 and 1060 ms");
    r.frames
        .iter()
        .map(|f| (f.delay_ms.expect("none dropped") * 100.0).round() / 100.0)
        .collect()
}

#[test]
fn a_frame_arriving_during_a_step_waits_for_its_end() {
    let period = 1000.0 / 14.0;
    let greedy = || Camdnn::new(GreedyPlanner::default(), 5.0);
    assert!(delays(&mut greedy(), 0.0).iter().all(|&d| d == 10.0));
    let d = delays(&mut greedy(), 50.0);
    // The step at 530 holds the thread until 580: frame 8 (571.4) runs
    // 580-590. The step at 1060 holds it until 1110: frame 15 (1071.4)
    // runs 1110-1120. Every other frame runs at its arrival.
    let late = |f: usize, end: f64| ((end - f as f64 * period) * 100.0).round() / 100.0;
    for (f, &delay) in d.iter().enumerate() {
        let want = match f {
            8 => late(8, 590.0),
            15 => late(15, 1120.0),
            _ => 10.0,
        };
        assert_eq!(delay, want, "frame {f}");
    }
}

#[test]
fn a_scheduler_without_a_global_step_pays_nothing() {
    let mut local = schedulers::by_name(&one_unit(), "camdnn-local", 5.0).unwrap();
    assert!(delays(local.as_mut(), 50.0).iter().all(|&d| d == 10.0));
}

#[test]
fn a_negative_step_cost_is_a_config_error() {
    let system = one_unit();
    let mut s = Camdnn::new(GreedyPlanner::default(), 5.0);
    let cfg = SimConfig {
        step_cost_ms: -1.0,
        ..SimConfig::default()
    };
    let trace = Trace::parse("1 0\n", 1).unwrap();
    let err = simulate(&system, &mut s, &trace, &cfg).unwrap_err();
    assert!(matches!(err, SimError::Config { .. }), "{err}");
    assert!(err.to_string().contains("step_cost_ms"), "{err}");
}
