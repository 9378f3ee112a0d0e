use super::choice::Choice;
use super::follow::Mode;
use super::record::TrackRecord;
use super::replay::Score;
use super::tuning::Tuning;
use super::Camdnn;
use crate::scheduler::Scheduler;
use crate::schedulers::{Fixed, GreedyPlanner};
use crate::{Cluster, ModelId, Plan, ProcId, System};

/// The frames each epoch keeps for the replays after `epochs` epochs of
/// `per_epoch` frames each, 5 s apart.
fn kept(per_epoch: usize, epochs: usize) -> Vec<usize> {
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
    s.planner
        .as_ref()
        .expect("no step away")
        .history
        .iter()
        .map(|w| w.len())
        .collect()
}

/// A GPU that runs the detector 4x and the classifier 10x faster than
/// the CPU, and takes 800 ms to load the classifier.
fn slow_classifier_load() -> System {
    let mut toml = String::from(
        "name = \"slow-load\"\nmax_batch = 1\n\n\
         [[processor]]\nname = \"cpu\"\nkind = \"cpu\"\nmax_resident = 2\n\n\
         [[processor]]\nname = \"gpu\"\nkind = \"gpu\"\nmax_resident = 2\n\n\
         [[model]]\nname = \"detector\"\n\n\
         [[model]]\nname = \"cls\"\nparent = \"detector\"\nclasses = [\"a\"]\n",
    );
    for (model, unit, exec, load) in [
        ("detector", "cpu", 20.0, 50.0),
        ("detector", "gpu", 5.0, 50.0),
        ("cls", "cpu", 10.0, 20.0),
        ("cls", "gpu", 1.0, 800.0),
    ] {
        toml += &format!("\n[profile.{model}.{unit}]\nexec_ms = [{exec}]\nload_ms = {load}\n");
    }
    System::from_toml(&toml).unwrap()
}

#[test]
fn under_the_static_mapping_a_resident_copy_serves_while_the_steps_load_runs() {
    let system = slow_classifier_load();
    let (det, cls) = (ModelId(0), ModelId(1));
    let (cpu, gpu) = (ProcId(0), ProcId(1));
    let mut s = Camdnn::new(GreedyPlanner::default(), 5.0);
    let mut cluster = Cluster::new(&system);
    // The detector on both units, the classifier on the CPU alone.
    let mut start = Plan::empty(&system);
    start.set_resident(det, cpu, true);
    start.set_resident(det, gpu, true);
    start.set_resident(cls, cpu, true);
    cluster.preload(&system, &start);
    // static-DIST maps both models to the GPU: taking its mapping at
    // t = 0 loads the classifier there, 800 ms of the GPU's queue.
    let fixed = Fixed::static_dist(&system, 5.0);
    assert_eq!((fixed.host(det), fixed.host(cls)), (gpu, gpu));
    let mut mapping = start.clone();
    mapping.set_resident(cls, gpu, true);
    let follow = &mut s.follow;
    follow.fixed = Some(fixed);
    follow.mode = Mode::Static;
    let loads = cluster.apply_residency(&system, 0.0, &mapping);
    assert_eq!(loads, 1);
    follow.loads_started(&cluster, 0.0, loads);
    // Meanwhile the detector runs on the idle CPU (20 ms) rather than
    // after the load on the GPU (805 ms), and the classifier where it
    // was already resident.
    assert_eq!(
        follow.place(&system, &cluster, 10.0, det, 1),
        Some((cpu, 1))
    );
    assert_eq!(
        follow.place(&system, &cluster, 10.0, cls, 1),
        Some((cpu, 1))
    );
    // Once the load is done, the mapping again.
    assert_eq!(
        follow.place(&system, &cluster, 900.0, det, 1),
        Some((gpu, 1))
    );
    assert_eq!(
        follow.place(&system, &cluster, 900.0, cls, 1),
        Some((gpu, 1))
    );
}

#[test]
fn a_fast_camera_replays_at_most_replay_frames_of_each_epoch() {
    let cap = Tuning::default().replay_frames;
    // 130 frames/s: 650 frames an epoch, of which the replays keep the first 150.
    assert_eq!(kept(650, 4), vec![cap; 3]);
    // 14 frames/s: whole epochs, the cap does not act.
    assert_eq!(kept(70, 2), vec![70, 70]);
}

fn epoch(default: f64, static_dist: f64) -> [f64; Choice::COUNT] {
    let mut on_time = [default; Choice::COUNT];
    on_time[Choice::StaticDist.index()] = static_dist;
    on_time
}

fn record() -> TrackRecord {
    TrackRecord::new(&Tuning::default())
}

#[test]
fn a_choice_that_lost_out_of_sample_trails_until_it_catches_up() {
    let mut r = record();
    assert!(
        !r.trails(Choice::StaticDist),
        "no record: every choice is offered"
    );
    // 70 frames; static-DIST would have had 60 on time, the default 65:
    // 5 behind, over the margin of max(70 / 50, 1) = 1.4 frames.
    r.add(epoch(65.0, 60.0), 70, 5000.0, 5000.0);
    assert!(r.trails(Choice::StaticDist));
    assert!(!r.trails(Choice::Plan) && !r.trails(Choice::DEFAULT));
    // Next epoch it would have won by 5: 0.8 * -5 + 5 = +1, trusted again.
    r.add(epoch(60.0, 65.0), 70, 5000.0, 5000.0);
    assert!(!r.trails(Choice::StaticDist));
    // Without the record nothing ever trails.
    let mut off = TrackRecord::new(&Tuning {
        record: false,
        ..Tuning::default()
    });
    off.add(epoch(65.0, 10.0), 70, 5000.0, 5000.0);
    assert!(!off.trails(Choice::StaticDist));
}

#[test]
fn a_choice_wins_on_a_small_delay_gain_only_once_its_record_keeps_up() {
    let t = Tuning::default();
    let (old, faster) = (
        Score {
            on_time: 70,
            cost_ms: 5000.0,
        },
        Score {
            on_time: 70,
            cost_ms: 4300.0,
        },
    );
    // 14 % less delay: enough with a record, not without one.
    assert!(faster.beats(&old, 70, true, &t));
    assert!(!faster.beats(&old, 70, false, &t));
    let much_faster = Score {
        on_time: 70,
        cost_ms: 3900.0,
    };
    assert!(much_faster.beats(&old, 70, false, &t));
    // Two more frames on time out of 70 (margin max(70 / 50, 1) = 1) win
    // with or without a record.
    let more = Score {
        on_time: 72,
        cost_ms: 6000.0,
    };
    assert!(more.beats(&old, 70, false, &t));
    // On time for fewer than half the frames, no delay gain wins: 30 of
    // 70 at 40 % less delay stays behind; 35 of 70 wins.
    let behind = |on_time, cost_ms| Score { on_time, cost_ms };
    assert!(!behind(30, 3000.0).beats(&behind(30, 5000.0), 70, true, &t));
    assert!(behind(35, 3000.0).beats(&behind(35, 5000.0), 70, true, &t));
    // More frames on time still wins however few they are.
    assert!(behind(12, 9000.0).beats(&behind(10, 5000.0), 70, false, &t));
    let mut r = record();
    assert!(!r.proves(Choice::Plan), "no audit yet: nothing is proven");
    // The plan kept up with the default; static-DIST did not.
    r.add(epoch(60.0, 59.0), 70, 5000.0, 5000.0);
    assert!(r.proves(Choice::Plan) && r.proves(Choice::DEFAULT));
    assert!(!r.proves(Choice::StaticDist));
}

#[test]
fn the_record_decays_by_audited_time_not_by_steps() {
    // One 5 s epoch in which static-DIST lost 10 frames, then the same
    // 5 s audited once (the timer) or as five 1 s spans (steps that
    // dropped frames brought forward), in which it won 2 frames a second.
    let mut timer = record();
    timer.add(epoch(60.0, 50.0), 70, 5000.0, 5000.0);
    timer.add(epoch(60.0, 70.0), 70, 5000.0, 5000.0);
    let mut early = record();
    early.add(epoch(60.0, 50.0), 70, 5000.0, 5000.0);
    for _ in 0..5 {
        early.add(epoch(12.0, 14.0), 14, 1000.0, 5000.0);
    }
    // The old deficit weighs 0.8 either way: -8 + 10 = +2.
    let lead = |r: &TrackRecord| {
        r.on_time[Choice::StaticDist.index()] - r.on_time[Choice::DEFAULT.index()]
    };
    assert!((lead(&timer) - 2.0).abs() < 1e-9, "{}", lead(&timer));
    // Five short spans weigh like one epoch: 2 a span decayed 0.8^(k/5).
    let recent: f64 = (0..5).map(|k| 2.0 * 0.8_f64.powf(k as f64 / 5.0)).sum();
    assert!(
        (lead(&early) - (recent - 8.0)).abs() < 1e-9,
        "{}",
        lead(&early)
    );
    assert!(!timer.trails(Choice::StaticDist) && !early.trails(Choice::StaticDist));
}

#[test]
fn a_deficit_within_two_percent_of_the_frames_audited_is_noise() {
    let mut r = record();
    for _ in 0..10 {
        r.add(epoch(200.0, 198.0), 210, 5000.0, 5000.0);
    }
    // Decayed sums: frames 210 * (1 - 0.8^10) / 0.2 = 937.3, margin
    // 18.7; deficit 2 * 4.46 = 8.9.
    assert!(!r.trails(Choice::StaticDist));
    r.add(epoch(200.0, 180.0), 210, 5000.0, 5000.0);
    // Deficit 0.8 * 8.9 + 20 = 27.1 against a margin of 19.2.
    assert!(r.trails(Choice::StaticDist));
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
