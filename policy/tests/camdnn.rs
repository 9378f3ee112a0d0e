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
use camdnn_policy::schedulers::{
    self, keep_idle_residents, Camdnn, Choice, GreedyPlanner, Mode, Tuning,
};
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

/// Board x shape cases of `camdnnd suite` where a global step can lose to
/// Algorithm 1 alone (a burst after empty frames, a dominant type that
/// changes, a random walk): camdnn-greedy keeps at least 0.98x of
/// camdnn-local's on-time share there.
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

/// The step replays each choice on the scene on camera held for two epochs
/// (`Tuning::lookahead_epochs`) as well as on the last epochs: when the
/// dominant type changes, the past window is mostly the old scene, and
/// judged on it alone a step keeps a choice made for a scene that is gone
/// (gen-2004's dominance trace).
#[test]
fn the_global_step_judges_its_choices_on_the_scene_on_camera_too() {
    let shape = Shape::DominanceShift;
    let (_, on_time) = greedy_on_generated(2004, shape);
    let (_, without) = greedy_with_tuning(2004, shape, |t| t.lookahead_epochs = 0.0);
    assert!(
        without + 0.05 < on_time,
        "on time {on_time:.3}, without the lookahead {without:.3}"
    );
}

/// Under load a stream is limited by its bottleneck unit: on gen-17's
/// dominance trace, 20 objects a frame of a classifier an NPU with one
/// slot runs fastest, the step takes a residency planned for the stream's
/// bottleneck (`stream_residency`).
#[test]
fn the_global_step_can_plan_residency_for_the_streams_bottleneck() {
    let (full, on_time) = greedy_on_generated(17, Shape::DominanceShift);
    let stream = full.kept(Choice::StreamSplit);
    assert!(stream >= 1, "choices: {:?}", full.choices());
    assert!(on_time > 0.9, "camdnn-greedy on time {on_time:.3}");
}

/// A frame late after on-time ones brings the step forward as a drop does
/// (`policy::stepper`): from the paper's host rule on gen-22's bursts trace,
/// frames are lost to lateness alone, and waiting for the epoch timer
/// costs them.
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

/// camdnn-greedy with one change to its tuning after a run of board
/// `gen-SEED`'s `shape` trace, and its on-time share.
fn greedy_with_tuning(
    seed: u64,
    shape: Shape,
    change: fn(&mut Tuning),
) -> (Camdnn<GreedyPlanner>, f64) {
    let mut tuning = Tuning::default();
    change(&mut tuning);
    let full = Camdnn::with_tuning(GreedyPlanner::default(), 5.0, tuning);
    greedy_from(full, seed, shape, SimConfig::default())
}

/// When every frame needs more models than the slots hold (gen-3298: five
/// models, four slots), no plan of the policy's fits; the step still
/// offers its other choices.
#[test]
fn the_global_step_offers_its_other_choices_when_no_plan_fits() {
    let (full, on_time) = greedy_on_generated(3298, Shape::Paper);
    let steps: u32 = full.choices().iter().sum();
    assert!(steps >= 10, "choices: {:?}", full.choices());
    assert!(on_time > 0.5, "camdnn-greedy on time {on_time:.3}");
}

/// The step replays its choices under the pipeline's own admission: with
/// the daemon's default (at most two frames in the pipeline, the newest
/// waiting frame wins, no real-time dropping) on gen-18's dominance trace.
#[test]
fn the_global_step_replays_its_choices_under_the_pipelines_admission() {
    let cfg = SimConfig {
        admission: FrameAdmission::InFlight(2),
        ..SimConfig::default()
    };
    let (_, on_time) = greedy_on_generated_with(18, Shape::DominanceShift, cfg);
    assert!(on_time > 0.8, "camdnn-greedy on time {on_time:.3}");
}

/// When a frame brings a few requests of each classifier, both of
/// Algorithm 1's other rules send one model's requests to one unit as one
/// batch; the group-split rule (`HostRule::GroupFinish`) spreads them so
/// the last finishes soonest, and the step takes it with the stream's
/// residency on gen-2183's dominance trace.
#[test]
fn the_global_step_can_split_a_frames_requests_over_the_units() {
    let (full, on_time) = greedy_on_generated(2183, Shape::DominanceShift);
    let split = full.kept(Choice::StreamSplit);
    assert!(split >= 1, "choices: {:?}", full.choices());
    assert!(on_time > 0.9, "camdnn-greedy on time {on_time:.3}");
}
