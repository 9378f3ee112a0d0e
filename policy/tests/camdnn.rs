//! The full camdnn scheduler (global step + plan-following dispatcher) on
//! the RB5-like profile: it beats the local dispatcher alone and the
//! paper's baselines on the paper's trace, its dispatcher follows the
//! plan's split, adoption evicts only to make room, and start-up fills
//! free slots within N_j.

use camdnn_policy::admission::FrameAdmission;
use camdnn_policy::gen::{self, Shape};
use camdnn_policy::mlp::MlpPolicy;
use camdnn_policy::plan::{fastest_hosts, fill_free_slots};
use camdnn_policy::scheduler::Scheduler;
use camdnn_policy::schedulers::{self, keep_idle_residents, Camdnn, GreedyPlanner, Mode};
use camdnn_policy::sim::{default_deadline_ms, full_scene, simulate, SimConfig, Trace};
use camdnn_policy::suite::headline;
use camdnn_policy::{Cluster, HostRule, Plan, PlanInput, System};

const RB5: &str = include_str!("../../config/profiles/rb5.toml");
const ONNX: &[u8] = include_bytes!("../../config/policies/rb5.onnx");
const SIDECAR: &str = include_str!("../../config/policies/rb5.policy.json");

fn rb5() -> System {
    System::from_toml(RB5).unwrap()
}

fn mean(system: &System, s: &mut dyn Scheduler) -> (f64, usize) {
    let r = simulate(system, s, &Trace::paper_fig11(), &SimConfig::default()).unwrap();
    (r.delay().mean, r.dropped())
}

#[test]
fn global_step_beats_the_local_dispatcher_and_the_baselines() {
    let system = rb5();
    let (greedy, greedy_drops) = mean(&system, &mut Camdnn::new(GreedyPlanner::default(), 5.0));
    let mlp = MlpPolicy::new(&system, ONNX, SIDECAR).unwrap();
    let (camdnn, camdnn_drops) = mean(&system, &mut Camdnn::new(mlp, 5.0));
    for name in [
        "camdnn-local",
        "heft",
        "cq",
        "static-dist",
        "cpu-only",
        "gpu-only",
    ] {
        let mut s = schedulers::by_name(&system, name, 5.0).unwrap();
        let (base, base_drops) = mean(&system, s.as_mut());
        assert!(
            greedy < base,
            "camdnn-greedy {greedy:.1} ms vs {name} {base:.1} ms"
        );
        assert!(
            camdnn < base,
            "camdnn (MLP) {camdnn:.1} ms vs {name} {base:.1} ms"
        );
        // Not by dropping many more frames (one or two frames of slack).
        assert!(
            greedy_drops <= base_drops + 2 && camdnn_drops <= base_drops + 2,
            "{name}"
        );
    }
}

#[test]
fn dispatcher_follows_the_plan_split_of_a_frame() {
    let system = rb5();
    let mut s = Camdnn::new(GreedyPlanner::default(), 5.0).starting_in(Mode::Plan);
    let mut cluster = Cluster::new(&system);
    let start = s.initial_plan(&system);
    cluster.preload(&system, &start);
    let scene = full_scene(&system, &[13, 11, 2]);
    s.observe_scene(&system, &cluster, 0.0, &scene);
    let plan = s.plan().unwrap().clone();
    let np = system.num_processors();
    let mut placed = vec![0u32; system.num_models() * np];
    for i in system.request_models() {
        let mut left = scene[i.0] as usize;
        while left > 0 {
            let (j, k) = s.place(&system, &cluster, 0.0, i, left).unwrap();
            assert!(k >= 1 && k <= left);
            cluster.run(&system, 0.0, i, j, k);
            placed[i.0 * np + j.0] += k as u32;
            left -= k;
        }
        for j in system.proc_ids() {
            assert_eq!(
                placed[i.0 * np + j.0],
                plan.served_on(i, j),
                "{} on {}",
                system.models[i.0].name,
                system.processors[j.0].name
            );
        }
    }
}

#[test]
fn adoption_keeps_idle_residents_while_their_slot_is_free() {
    let system = rb5();
    let np = system.num_processors();
    let gpu = system.proc_by_name("gpu").unwrap();
    let (inc, squ, mob) = (
        system.model_by_name("inception_v1").unwrap(),
        system.model_by_name("squeezenet").unwrap(),
        system.model_by_name("mobilenet_v1").unwrap(),
    );
    let mut old = vec![false; system.num_models() * np];
    old[inc.0 * np + gpu.0] = true;
    let scene = full_scene(&system, &[0, 4, 0]);
    let rem = vec![0.0; np];
    let input = PlanInput {
        scene: &scene,
        rem_ms: &rem,
        residency: &old,
        frames_per_epoch: 70.0,
    };
    let mut plan = Plan::empty(&system);
    plan.set_resident(squ, gpu, true);
    let kept = keep_idle_residents(&system, &input, &plan);
    assert!(
        kept.resident(squ, gpu) && kept.resident(inc, gpu),
        "one slot left: kept"
    );
    plan.set_resident(mob, gpu, true);
    let full = keep_idle_residents(&system, &input, &plan);
    assert!(
        !full.resident(inc, gpu),
        "N_gpu = 2 is full: the idle model goes"
    );
    assert_eq!(full.resident_count(gpu), 2);
}

#[test]
fn start_up_fills_free_slots_but_not_the_detector_unit() {
    let system = rb5();
    let base = fastest_hosts(&system);
    let filled = fill_free_slots(&system, &base);
    let cpu = system.proc_by_name("cpu").unwrap();
    for j in system.proc_ids() {
        assert!(filled.resident_count(j) <= system.processors[j.0].max_resident);
        for i in system.model_ids() {
            assert!(!filled.resident(i, j) || system.supports(i, j));
            if base.resident(i, j) {
                assert!(filled.resident(i, j), "filling never evicts");
            }
        }
    }
    assert_eq!(filled.resident_count(cpu), base.resident_count(cpu));
    let gpu = system.proc_by_name("gpu").unwrap();
    assert_eq!(
        filled.resident_count(gpu),
        2,
        "the idle GPU gets two models"
    );
}

/// The paper's Sec. 5.3 scene (13 people, 11 cars, 2 bicycles) on rb5 with
/// the models resident where the paper starts (detector on the CPU, cars on
/// the GPU, people and bicycles on the DSP), checked by hand.
#[test]
fn the_adoption_test_weighs_the_bottleneck_under_load_then_the_makespan() {
    use camdnn_policy::schedulers::beats;
    use camdnn_policy::Detector;
    let system = rb5();
    let m = |n: &str| system.model_by_name(n).unwrap();
    let p = |n: &str| system.proc_by_name(n).unwrap();
    let (cpu, gpu, dsp) = (p("cpu"), p("gpu"), p("dsp"));
    let scene = full_scene(&system, &[13, 11, 2]);
    let mut stay = Plan::empty(&system);
    stay.set_resident(m("detector"), cpu, true);
    stay.set_resident(m("squeezenet"), gpu, true);
    stay.set_resident(m("inception_v1"), dsp, true);
    stay.set_resident(m("mobilenet_v1"), dsp, true);
    let residency = stay.residency().to_vec();
    // Cars 5+5+1 on the GPU: 27.4 * 2 + 15.2 = 70.0 ms; people 5+5+3 and
    // bicycles 2 on the DSP: 14.8 * 2 + 10.4 + 4.4 = 44.4 ms.
    stay.set_batches(m("squeezenet"), gpu, 5, 2);
    stay.set_batches(m("squeezenet"), gpu, 1, 1);
    stay.set_batches(m("inception_v1"), dsp, 5, 2);
    stay.set_batches(m("inception_v1"), dsp, 3, 1);
    stay.set_batches(m("mobilenet_v1"), dsp, 2, 1);
    // The paper's step 3: two cars to the CPU (load 20.6 ms over 70 frames),
    // cars 5+4 on the GPU: 49.4 ms; the CPU: 23.0 + 20.6 / 70 ms plus the
    // detector's 27 ms.
    let mut new = stay.clone();
    new.set_resident(m("squeezenet"), cpu, true);
    new.set_batches(m("squeezenet"), gpu, 1, 0);
    new.set_batches(m("squeezenet"), gpu, 5, 1);
    new.set_batches(m("squeezenet"), gpu, 4, 1);
    new.set_batches(m("squeezenet"), cpu, 2, 1);
    let rem = vec![0.0; system.num_processors()];
    let input = PlanInput {
        scene: &scene,
        rem_ms: &rem,
        residency: &residency,
        frames_per_epoch: 70.0,
    };
    assert_eq!(stay.infeasibility(&system, &input), None);
    assert_eq!(new.infeasibility(&system, &input), None);
    let det = Detector::fastest(&system);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(stay.cycle_ms(&system, &input, det), 70.0));
    assert!(close(stay.makespan_ms(&system, &input, det), 97.0));
    let cpu_cycle = 27.0 + 23.0 + 20.6 / 70.0;
    assert!(close(new.cycle_ms(&system, &input, det), cpu_cycle));
    // Frames every 40 ms: neither plan keeps up, the one with the lighter
    // bottleneck falls behind more slowly.
    assert!(beats(&system, &input, &new, &stay, 40.0));
    assert!(!beats(&system, &input, &stay, &new, 40.0));
    // Frames every 100 ms: both keep up, so one frame's makespan decides.
    assert!(beats(&system, &input, &new, &stay, 100.0));
    assert!(!beats(&system, &input, &stay, &stay, 100.0));
}

/// Board x shape cases of `camdnnd suite` where the global step used to lose
/// to Algorithm 1 alone on the on-time share (gen-23/bursts 0.750x before
/// the replayed choice; gen-7/dominance 0.925x with a one-epoch window;
/// gen-13/walk 0.973x while a choice could win the first step on 5 % less
/// delay): camdnn-greedy now keeps at least 0.98x of camdnn-local's share
/// there.
#[test]
fn global_step_keeps_the_local_dispatchers_on_time_share_on_generated_boards() {
    let cfg = SimConfig::default();
    let deadline = default_deadline_ms(cfg.fps);
    for (seed, shape) in [
        (23, Shape::Bursts),
        (7, Shape::DominanceShift),
        (13, Shape::RandomWalk),
    ] {
        let system = System::from_spec(&gen::board(seed)).unwrap();
        let trace = shape.trace(&system, seed, gen::heavy_count(&system, cfg.fps));
        let on_time = |s: &mut dyn Scheduler| {
            headline(&simulate(&system, s, &trace, &cfg).unwrap(), deadline).on_time
        };
        let full = on_time(&mut Camdnn::new(GreedyPlanner::default(), 5.0));
        let local = on_time(
            schedulers::by_name(&system, "camdnn-local", 5.0)
                .unwrap()
                .as_mut(),
        );
        assert!(
            full >= 0.98 * local,
            "gen-{seed}/{}: camdnn-greedy {full:.3} vs camdnn-local {local:.3}",
            shape.name()
        );
    }
}

/// On board gen-2214 (outside the suite's 30) the GPU holds one model: the
/// detector, fastest there. On the dominance trace a step chose the
/// static-DIST mapping, which moved the detector to the CPU (an 802 ms
/// load); when the dominant type changed, no choice could move it back, as
/// every choice without loads keeps the residency it finds, and camdnn-greedy
/// was on time for 0.235 of the frames against camdnn-local's 0.718. The
/// step now also offers Algorithm 1's start-up residency, and takes it once
/// the GPU's 938 ms load can pay back: with steps on the epoch timer, 0.731.
/// With real-time dropping in two stages and steps brought forward by drops
/// (about one a second here), the record of the choices that load trailed
/// and kept them out (0.580) until a large replayed gain could override it
/// (`Tuning::record_override`): 0.809 (docs/decisions.md).
#[test]
fn the_global_step_can_move_the_detector_back_to_its_fastest_unit() {
    let (full, on_time) = greedy_on_generated_with(2214, Shape::DominanceShift, timer_steps());
    assert!(
        on_time > 0.7,
        "camdnn-greedy on time {on_time:.3}, choices {:?}",
        full.choices()
    );
    let (_, on_time) = greedy_on_generated(2214, Shape::DominanceShift);
    assert!(on_time > 0.75, "camdnn-greedy on time {on_time:.3}");
}

/// On board gen-3130 (outside the suite's 30; each type absent for 200
/// frames in turn) loading a classifier on the GPU lost while its type was
/// absent, and the out-of-sample record, which remembers about five epochs,
/// kept that load out when the type came back, while the CPU that held the
/// classifier fell behind: camdnn-greedy on time for 0.938 against
/// camdnn-local's 1.000. A choice whose record trails is still replayed and
/// is taken on a gain of `Tuning::record_override` of the replayed frames: 0.985.
#[test]
fn a_choice_whose_record_trails_is_taken_on_a_large_replayed_gain() {
    let (_, on_time) = greedy_on_generated(3130, Shape::AbsentType);
    assert!(on_time >= 0.98, "camdnn-greedy on time {on_time:.3}");
}

/// On board gen-2150's bursts trace (10 empty frames, then 10 heavy ones,
/// repeated) a step brought forward by a dropped frame judged its choices on
/// the last epochs' scenes, most of them empty, and kept one that dropped
/// every other heavy frame: camdnn-greedy was on time for 0.500, as
/// camdnn-local. Each choice is now also replayed on the scene on camera,
/// held for two epochs (`Tuning::lookahead_epochs`).
#[test]
fn the_global_step_judges_its_choices_on_the_scene_on_camera_too() {
    let (_, on_time) = greedy_on_generated(2150, Shape::Bursts);
    assert!(on_time > 0.9, "camdnn-greedy on time {on_time:.3}");
}

/// On board gen-3181's walk trace (outside the suite's 30) a step one
/// second in took the static-DIST mapping, which put the detector on the
/// GPU (67 ms against 23 on the CPU); no choice brought it back beside the
/// classifier the CPU runs best, and the replay of the start-up residency
/// (the other classifier on the CPU) lost: camdnn-greedy was on time for
/// 0.880 against camdnn-local's 0.978. The step now also offers the
/// detector back on its fastest unit with the classifiers where they are
/// (`detector_home`), and while its loads are under way the dispatcher does
/// not pin a detector copy over the GPU's one classifier
/// (`strands_a_classifier`), which made every frame load a classifier.
/// Since the stream residency (choices 11 and 12) the walk trace no longer
/// takes static-DIST's mapping at all (0.988). Since a detector's extra
/// copies can be evicted, the dominance trace no longer does either, but
/// it still brings the detector home with `detector_home` (0.971, against
/// camdnn-local's 0.497).
#[test]
fn the_global_step_can_move_the_detector_home_keeping_the_classifiers() {
    let (_, on_time) = greedy_on_generated(3181, Shape::RandomWalk);
    assert!(on_time >= 0.97, "camdnn-greedy on time {on_time:.3}");
    let (full, on_time) = greedy_on_generated(3181, Shape::DominanceShift);
    let choices = full.choices();
    assert!(choices[9] >= 1, "choices: {choices:?}");
    assert!(on_time > 0.95, "camdnn-greedy on time {on_time:.3}");
}

/// On board gen-2283 (outside the suite's 30) the CPU runs every model
/// fastest but cannot keep up alone (the detector takes 48 ms of a 71 ms
/// period); the NPU runs the detector in 78 ms. Every rule of Algorithm 1
/// counts the NPU's load and slower run against it, so every frame queued on
/// the CPU and camdnn-greedy was on time for 0.102 of the paper trace; the
/// central queue (`cq`), which sends each request to the unit free first,
/// put a detector copy on the NPU and was on time for 0.370. The step now
/// offers that rule too (`Mode::Queue`, choice 10): 0.520.
#[test]
fn the_global_step_can_take_the_central_queues_rule() {
    let (full, on_time) = greedy_on_generated(2283, Shape::Paper);
    assert!(full.choices()[10] >= 1, "choices: {:?}", full.choices());
    assert!(on_time > 0.45, "camdnn-greedy on time {on_time:.3}");
}

/// On board gen-29 an NPU with one slot runs every model fastest, and
/// Algorithm 1's start-up puts the detector there. The dominance trace then
/// brings 20 objects a frame of a classifier the NPU runs 6x faster than
/// the CPU: no choice without loads moved the detector, the CPU fell behind,
/// and camdnn-greedy was on time for 0.491 of the frames. The step now
/// offers a residency for the stream's bottleneck (choices 11 and 12). Since
/// a detector's extra copies can be evicted, gen-29 gets there without it
/// (camdnn-local 0.995 too); gen-17's dominance trace still takes it:
/// camdnn-greedy 0.988, camdnn-local 0.530.
#[test]
fn the_global_step_can_plan_residency_for_the_streams_bottleneck() {
    let (full, on_time) = greedy_on_generated(17, Shape::DominanceShift);
    let stream = full.choices()[11] + full.choices()[12];
    assert!(stream >= 1, "choices: {:?}", full.choices());
    assert!(on_time > 0.9, "camdnn-greedy on time {on_time:.3}");
}

/// On gen-28's bursts trace the step went back and forth between
/// Algorithm 1's two host rules every 1.4 s. Steps taken under the paper's
/// rule replayed the earliest-finish rule far ahead (111 of 197 frames on
/// time against 65); steps taken under the earliest-finish rule replayed
/// every choice about as poorly (32-34 of 206) and went back to the
/// paper's rule on 6 % less delay, losing the frames again (on time 0.562;
/// camdnn-local-eft 0.649). A delay gain now wins a step only on replays
/// on time for at least half their frames.
#[test]
fn a_delay_gain_on_replays_mostly_late_does_not_win_a_step() {
    let (full, on_time) = greedy_on_generated(28, Shape::Bursts);
    let c = full.choices();
    assert!(c[3] > 2 * c[2], "choices: {c:?}");
    assert!(on_time > 0.6, "camdnn-greedy on time {on_time:.3}");
}

/// On gen-22's bursts trace the first five seconds lost frames to lateness
/// alone (no drop), so the step that moved to the earliest-finish rule
/// waited for the timer: 0.961 on time against camdnn-local-eft's 1.000.
/// The first late answer after on-time ones now brings the step forward as
/// a drop does; with steps on the timer alone the old figure comes back.
/// Since camdnn starts in the earliest-finish rule, gen-22 loses no such
/// frames; the case starts in the paper's rule, as it did then.
#[test]
fn a_late_answer_after_on_time_ones_brings_the_step_forward() {
    let (_, on_time) = greedy_from_paper_rule(22, Shape::Bursts, SimConfig::default());
    assert!(on_time > 0.98, "camdnn-greedy on time {on_time:.3}");
    let (_, timer_only) = greedy_from_paper_rule(22, Shape::Bursts, timer_steps());
    assert!(timer_only < on_time, "{timer_only:.3} vs {on_time:.3}");
}

/// camdnn-greedy after a run of board `gen-SEED`'s `shape` trace, and its
/// on-time share.
fn greedy_on_generated(seed: u64, shape: Shape) -> (Camdnn<GreedyPlanner>, f64) {
    greedy_on_generated_with(seed, shape, SimConfig::default())
}

/// The default settings with global steps on the epoch timer alone (no
/// step brought forward by a dropped frame).
fn timer_steps() -> SimConfig {
    SimConfig {
        drop_step_gap_ms: 0.0,
        ..SimConfig::default()
    }
}

/// The same under `cfg`.
fn greedy_on_generated_with(
    seed: u64,
    shape: Shape,
    cfg: SimConfig,
) -> (Camdnn<GreedyPlanner>, f64) {
    greedy_from(Camdnn::new(GreedyPlanner::default(), 5.0), seed, shape, cfg)
}

/// The same starting in the paper's host rule (`camdnn-local`) until the
/// first step, as camdnn did before it started in the earliest-finish
/// rule: the cases below that show a step recovering from that rule.
fn greedy_from_paper_rule(seed: u64, shape: Shape, cfg: SimConfig) -> (Camdnn<GreedyPlanner>, f64) {
    let paper = Mode::Local(HostRule::PerRequest);
    let full = Camdnn::new(GreedyPlanner::default(), 5.0).starting_in(paper);
    greedy_from(full, seed, shape, cfg)
}

/// `full` after a run of board `gen-SEED`'s `shape` trace under `cfg`, and
/// its on-time share.
fn greedy_from(
    mut full: Camdnn<GreedyPlanner>,
    seed: u64,
    shape: Shape,
    cfg: SimConfig,
) -> (Camdnn<GreedyPlanner>, f64) {
    let system = System::from_spec(&gen::board(seed)).unwrap();
    let trace = shape.trace(&system, seed, gen::heavy_count(&system, cfg.fps));
    let report = simulate(&system, &mut full, &trace, &cfg).unwrap();
    let on_time = headline(&report, default_deadline_ms(cfg.fps)).on_time;
    (full, on_time)
}

/// On board gen-3298 (five models, four slots) every frame of the paper
/// trace needs all five models, so no plan of the policy's fits and repair
/// fails; the global step used to return there without offering its other
/// choices, and camdnn-greedy stayed Algorithm 1 alone, thrashing loads
/// (on time 0.199; static-DIST 1.000). The other choices are now offered.
#[test]
fn the_global_step_offers_its_other_choices_when_no_plan_fits() {
    let (full, on_time) = greedy_on_generated(3298, Shape::Paper);
    let steps: u32 = full.choices().iter().sum();
    assert!(steps >= 10, "choices: {:?}", full.choices());
    assert!(on_time > 0.5, "camdnn-greedy on time {on_time:.3}");
}

/// On board gen-5009 (outside the suite's 30) Algorithm 1 with the paper's
/// rule loads a model on its first epochs, and from the residency that
/// leaves, the earliest-finish rule is as lost as the paper's (on time
/// 0.006 and 0.003 on the dominance trace), while camdnn-local-eft, which
/// never left the start-up residency, is on time for 0.499. The step offered
/// the start-up residency with the paper's rule only; it now also offers it
/// with the earliest-finish rule and the group-split rule. With steps on the
/// epoch timer it goes back with the group-split rule (0.449); with
/// real-time dropping in two stages and steps brought forward by drops, it
/// takes the group-split rule on the residency it found, which does as well
/// (0.486; with one stage it went back with the earliest-finish rule;
/// 0.438 since a detector's extra copies can be evicted). camdnn now starts
/// in the earliest-finish rule (0.454 here), so the case starts in the
/// paper's rule, as it did then.
#[test]
fn the_global_step_can_go_back_to_the_start_up_residency_under_either_rule() {
    let dominance = Shape::DominanceShift;
    let (full, on_time) = greedy_from_paper_rule(5009, dominance, timer_steps());
    let c = full.choices();
    assert!(c[6] + c[8] >= 1, "choices: {c:?}");
    assert!(on_time > 0.4, "camdnn-greedy on time {on_time:.3}");
    let (_, on_time) = greedy_from_paper_rule(5009, dominance, SimConfig::default());
    assert!(on_time > 0.4, "camdnn-greedy on time {on_time:.3}");
    let (_, on_time) = greedy_on_generated(5009, dominance);
    assert!(on_time > 0.4, "camdnn-greedy on time {on_time:.3}");
}

/// On board gen-3211 (outside the suite's 30; one classifier and its
/// refinement, one scene held for 800 frames) the step kept the searched
/// stay plan at every step, its replays predicting 0.36-0.54 of the frames
/// on time, while the run delivered 0.115 (camdnn-local 0.400): a plan
/// adopted at a step a drop brought forward carried the backlog into its
/// fallen-behind threshold. A kind of choice whose delivery falls far short
/// of its own replay is no longer offered for a while, and the step moves
/// on to one that delivers.
#[test]
fn a_choice_that_delivers_far_less_than_its_replay_is_not_offered_again() {
    let (_, on_time) = greedy_on_generated(3211, Shape::DominanceShift);
    assert!(on_time > 0.4, "camdnn-greedy on time {on_time:.3}");
}

/// On board gen-2183 (outside the suite's 30) the dominance trace's heavy
/// frames bring a few requests of each classifier, and both of Algorithm
/// 1's host rules send a frame's requests of one model to one unit as one
/// batch: camdnn-greedy was on time for 0.352 of the frames (camdnn-local
/// 0.260, camdnn-local-eft 0.716). The step now also offers Algorithm 1
/// with the group-split rule (`HostRule::GroupFinish`), which spreads the
/// requests over the units so the last finishes soonest, and takes it.
/// The global step judges its choices under the pipeline's own admission.
/// On gen-18's dominance trace with the daemon's default admission (at most
/// two frames in the pipeline, newest waiting frame wins, no real-time
/// dropping) camdnn-greedy was on time for 0.509 when its replays dropped
/// frames a period behind, a rule that pipeline does not run; replayed as
/// the pipeline admits, 0.887.
#[test]
fn the_global_step_replays_its_choices_under_the_pipelines_admission() {
    let cfg = SimConfig {
        admission: FrameAdmission::InFlight(2),
        ..SimConfig::default()
    };
    let (_, on_time) = greedy_on_generated_with(18, Shape::DominanceShift, cfg);
    assert!(on_time > 0.8, "camdnn-greedy on time {on_time:.3}");
}

#[test]
fn the_global_step_can_split_a_frames_requests_over_the_units() {
    let (full, on_time) = greedy_on_generated(2183, Shape::DominanceShift);
    let split = full.choices()[7] + full.choices()[8];
    assert!(split >= 1, "choices: {:?}", full.choices());
    assert!(on_time > 0.9, "camdnn-greedy on time {on_time:.3}");
}
