use super::choice::Choice;
use super::replay::Score;
use super::tuning::Tuning;
use super::Camdnn;
use crate::scheduler::Scheduler;
use crate::schedulers::GreedyPlanner;
use crate::{Cluster, System};

/// The frames the step keeps for the replays after `epochs` epochs of
/// `per_epoch` frames each, 5 s apart.
fn kept(per_epoch: usize, epochs: usize) -> usize {
    let system = System::from_toml(include_str!("../../../../config/profiles/rb5.toml")).unwrap();
    let mut s = Camdnn::new(GreedyPlanner::default(), 5.0);
    let mut cluster = Cluster::new(&system);
    let start = s.initial_plan(&system);
    cluster.preload(&system, &start);
    let scene = crate::sim::full_scene(&system, &[3, 2, 1]);
    for e in 1..=epochs {
        let t0 = (e - 1) as f64 * 5000.0;
        for f in 0..per_epoch {
            let now = t0 + f as f64 * 5000.0 / per_epoch as f64;
            s.observe_scene(&system, &cluster, now, &scene);
        }
        s.on_epoch(
            &system,
            &mut cluster,
            e as f64 * 5000.0,
            &scene,
            per_epoch as f64,
            5000.0,
        );
    }
    s.planner.as_ref().expect("no step away").last_window.len()
}

#[test]
fn a_fast_camera_replays_at_most_replay_frames_of_each_epoch() {
    let cap = Tuning::default().replay_frames;
    // 130 frames/s: 650 frames an epoch, of which the replays keep the first 150.
    assert_eq!(kept(650, 4), cap);
    // 14 frames/s: whole epochs, the cap does not act.
    assert_eq!(kept(70, 2), 70);
}

#[test]
fn a_challenger_wins_on_more_frames_on_time_then_on_less_delay() {
    let score = |on_time, cost_ms| Score { on_time, cost_ms };
    let incumbent = score(60, 3000.0);
    assert!(
        score(61, 9000.0).beats(&incumbent),
        "one frame more on time"
    );
    assert!(score(60, 2999.0).beats(&incumbent), "as many, less delay");
    assert!(
        !score(60, 3000.0).beats(&incumbent),
        "a tie keeps the incumbent"
    );
    assert!(
        !score(59, 100.0).beats(&incumbent),
        "fewer on time never wins"
    );
}

#[test]
fn a_choice_left_out_by_the_tuning_is_never_kept() {
    let system = System::from_toml(include_str!("../../../../config/profiles/rb5.toml")).unwrap();
    let trace = crate::sim::Trace::paper_fig11();
    let cfg = crate::sim::SimConfig::default();
    let mut tuning = Tuning::default();
    for c in Choice::ALL {
        tuning = tuning.without(c);
    }
    let mut s = Camdnn::with_tuning(GreedyPlanner::default(), 5.0, tuning);
    crate::sim::simulate(&system, &mut s, &trace, &cfg).unwrap();
    let kept: u32 = s.choices().iter().sum();
    assert!(kept >= 1, "the steps kept nothing: {:?}", s.choices());
    assert_eq!(kept, s.kept(Choice::DEFAULT), "{:?}", s.choices());
}
