//! The simulator runs the global step when `policy::stepper` says, with the
//! frames it counts: checked on the scheduler's side, by recording every
//! `on_epoch` call against step times and frame counts derived from the
//! camera's rate and the epoch alone.

use camdnn_policy::adapt::AdaptConfig;
use camdnn_policy::scheduler::Scheduler;
use camdnn_policy::schedulers::{self, Camdnn, GreedyPlanner, Mode, Recording};
use camdnn_policy::sim::{simulate, SimConfig, SimReport, Throttle, Trace};
use camdnn_policy::{HostRule, System};

const RB5: &str = include_str!("../../config/profiles/rb5.toml");

fn run(trace: &str, cfg: &SimConfig) -> (SimReport, Vec<(f64, f64)>) {
    let system = System::from_toml(RB5).expect("rb5 is valid");
    let greedy = schedulers::by_name(&system, "camdnn-greedy", 5.0).expect("a known scheduler");
    run_with(greedy, trace, cfg)
}

/// The same with `scheduler` in place of camdnn-greedy.
fn run_with(
    scheduler: Box<dyn Scheduler + Send>,
    trace: &str,
    cfg: &SimConfig,
) -> (SimReport, Vec<(f64, f64)>) {
    let system = System::from_toml(RB5).expect("rb5 is valid");
    let (mut s, steps) = Recording::new(scheduler);
    let trace = Trace::parse(trace, 3).expect("a valid trace");
    let report = simulate(&system, &mut s, &trace, cfg).expect("the run completes");
    let steps = steps.lock().expect("not poisoned").clone();
    (report, steps)
}

#[test]
fn the_timer_steps_every_epoch_with_the_frames_that_arrived() {
    // 10 fps: frame k arrives at 100 k ms; 35 frames, the camera stops at
    // 3500 ms. An epoch of 1030 ms (no arrival on a step): steps at 1030
    // (frames 0..=10), 2060 (11..=20) and 3090 (21..=30); none after the
    // camera stopped.
    let cfg = SimConfig {
        fps: 10.0,
        epoch_ms: 1030.0,
        ..SimConfig::default()
    };
    let (report, steps) = run("35 2 1 1\n", &cfg);
    assert_eq!(steps, vec![(1030.0, 11.0), (2060.0, 10.0), (3090.0, 10.0)]);
    assert_eq!((report.epochs, report.triggered_epochs), (3, 0));
}

#[test]
fn no_timer_at_epoch_zero() {
    let cfg = SimConfig {
        fps: 10.0,
        epoch_ms: 0.0,
        ..SimConfig::default()
    };
    let (report, steps) = run("35 2 1 1\n", &cfg);
    assert!(steps.is_empty(), "{steps:?}");
    assert_eq!(report.epochs, 0);
}

#[test]
fn a_triggered_step_restarts_the_timer_and_every_step_counts_its_frames() {
    // A scene change and a GPU slowed 2x from 1.5 s: adaptation triggers
    // steps between the timer's.
    let system = System::from_toml(RB5).expect("rb5 is valid");
    let gpu = system.proc_by_name("gpu").expect("rb5 has a gpu");
    let (fps, epoch) = (14.0, 1500.0);
    let cfg = SimConfig {
        fps,
        epoch_ms: epoch,
        throttles: vec![Throttle {
            proc: gpu,
            factor: 2.0,
            from_ms: 1500.0,
            until_ms: f64::INFINITY,
        }],
        adapt: Some(AdaptConfig::default()),
        ..SimConfig::default()
    };
    let (report, steps) = run("30 2 2 2\n30 12 12 12\n40 2 2 2\n", &cfg);
    assert!(report.triggered_epochs > 0, "{report:?}");
    assert_eq!(steps.len(), report.epochs as usize);
    let camera_stops = 100.0 * 1000.0 / fps;
    let arrivals: Vec<f64> = (0..100).map(|k| k as f64 * 1000.0 / fps).collect();
    let mut prev = 0.0;
    let mut on_timer = 0;
    for (n, &(t, frames)) in steps.iter().enumerate() {
        assert!(
            t < camera_stops,
            "step {n} at {t} ms after the camera stopped"
        );
        // The epoch is the longest time without a step, from the start or
        // the last step, whatever ran it.
        let gap = t - prev;
        assert!(
            gap <= epoch + 1e-9,
            "step {n} at {t} ms: {gap} ms after the last"
        );
        if (gap - epoch).abs() < 1e-9 {
            on_timer += 1;
        }
        // The frames offered since the last step (a frame arriving at a
        // step's time was offered before it), at least 1.
        let counted = arrivals
            .iter()
            .filter(|&&a| a <= t && (n == 0 || a > prev))
            .count()
            .max(1);
        assert_eq!(frames, counted as f64, "step {n} at {t} ms");
        prev = t;
    }
    // Every step the timer ran came exactly an epoch after the one before
    // (not on a fixed grid from the start).
    assert_eq!(
        on_timer,
        report.epochs - report.triggered_epochs - report.drop_epochs,
        "{steps:?}"
    );
}

/// 10 empty frames, then 10 frames of 14/14/14 objects, 10 times (the bursty
/// trace).
const BURSTY: &str = "10 0 0 0\n10 14 14 14\n10 0 0 0\n10 14 14 14\n10 0 0 0\n10 14 14 14\n\
    10 0 0 0\n10 14 14 14\n10 0 0 0\n10 14 14 14\n10 0 0 0\n10 14 14 14\n10 0 0 0\n10 14 14 14\n\
    10 0 0 0\n10 14 14 14\n10 0 0 0\n10 14 14 14\n10 0 0 0\n10 14 14 14\n";

#[test]
fn a_dropped_frame_brings_the_step_forward_and_the_stream_keeps_more_frames() {
    // On rb5's bursty trace, the paper's rule drops frames in the first
    // burst (frames 10-19, from 714 ms); with drop steps the first drop
    // steps at once, on the timer alone the first step comes at 5 s.
    // camdnn starts in the earliest-finish rule, which drops none there,
    // so this run starts in the paper's rule.
    let paper_start = || -> Box<dyn Scheduler + Send> {
        let paper = Mode::Local(HostRule::PerRequest);
        Box::new(Camdnn::new(GreedyPlanner::default(), 5.0).starting_in(paper))
    };
    let timer_alone = SimConfig {
        drop_step_gap_ms: 0.0,
        ..SimConfig::default()
    };
    let (t, t_steps) = run_with(paper_start(), BURSTY, &timer_alone);
    assert_eq!(t.drop_epochs, 0);
    assert_eq!(t_steps.first().map(|s| s.0), Some(5000.0));
    let (d, d_steps) = run_with(paper_start(), BURSTY, &SimConfig::default());
    assert!(d.drop_epochs > 0, "{d:?}");
    // Within the first burst: after its first frame, before the second.
    let first = d_steps.first().expect("a step").0;
    assert!(
        (10.0 * 1000.0 / 14.0..20.0 * 1000.0 / 14.0).contains(&first),
        "first step at {first} ms"
    );
    // At most one step a second.
    for w in d_steps.windows(2) {
        assert!(w[1].0 - w[0].0 >= 1000.0, "{d_steps:?}");
    }
    let deadline = SimConfig::default().default_deadline_ms();
    let (a, b) = (t.accounting(deadline), d.accounting(deadline));
    assert!(
        b.on_time > a.on_time,
        "timer alone {a:?}\nwith drop steps {b:?}"
    );
}

#[test]
fn the_no_drop_mode_steps_on_the_timer_alone() {
    let (r, steps) = run(BURSTY, &SimConfig::default().no_drop());
    assert_eq!((r.dropped(), r.drop_epochs), (0, 0));
    let at: Vec<f64> = steps.iter().map(|s| s.0).collect();
    assert_eq!(at, vec![5000.0, 10000.0]);
}
