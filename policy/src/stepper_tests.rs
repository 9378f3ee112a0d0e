use super::*;
use crate::drift::SceneShiftConfig;
use crate::estimate::tests::board;
use crate::scheduler::Batching;

/// Records every global step it is asked for: (now, scene, frames, the
/// GPU's t_e of model a at batch 1 in the view it planned with).
#[derive(Default)]
struct Recorder {
    steps: Vec<(f64, Vec<u32>, f64, f64)>,
}

impl Scheduler for Recorder {
    fn name(&self) -> String {
        "recorder".into()
    }
    fn batching(&self) -> Batching {
        Batching::PerRequest
    }
    fn place(
        &mut self,
        _: &System,
        _: &Cluster,
        _: f64,
        _: ModelId,
        _: usize,
    ) -> Option<(ProcId, usize)> {
        None
    }
    fn start_epoch(
        &mut self,
        system: &System,
        _: &Cluster,
        now: f64,
        scene: &[u32],
        frames: f64,
        _: f64,
    ) -> Option<EpochJob> {
        let gpu_a = system.exec_ms(A, GPU, 1);
        self.steps.push((now, scene.to_vec(), frames, gpu_a));
        Some(EpochJob::new(|| 2u32))
    }
    fn finish_epoch(&mut self, _: &System, _: &mut Cluster, _: f64, job: EpochJob) -> EpochOutcome {
        EpochOutcome {
            loads: job.into_result::<u32>().unwrap_or(0),
        }
    }
}

const A: ModelId = ModelId(1);
const GPU: ProcId = ProcId(1);

/// Adaptation whose scene detector fires on the first frame that
/// differs from the planned scene by more than half its requests.
fn scene_adapt(min_gap_ms: f64) -> AdaptConfig {
    AdaptConfig {
        scene: Some(SceneShiftConfig {
            slack: 0.0,
            threshold: 0.5,
        }),
        min_gap_ms,
        reprobe_ms: None,
        ..AdaptConfig::default()
    }
}

struct Rig {
    view: System,
    cluster: Cluster,
    sched: Recorder,
    stepper: Stepper,
}

impl Rig {
    fn new(epoch_ms: f64, adapt: Option<&AdaptConfig>) -> Rig {
        let view = board();
        Rig {
            cluster: Cluster::new(&view),
            stepper: Stepper::new(&view, epoch_ms, 0.0, vec![1, 2], adapt),
            view,
            sched: Recorder::default(),
        }
    }
    fn step(&mut self, now: f64) -> Option<Step> {
        self.stepper
            .step_if_due(&mut self.sched, &mut self.view, &mut self.cluster, now)
    }
    fn scene(&mut self, now: f64, scene: &[u32]) -> Option<Trigger> {
        self.stepper.observe_scene(
            &mut self.sched,
            &self.view,
            &self.cluster,
            now,
            scene.to_vec(),
        )
    }
}

#[test]
fn the_timer_restarts_from_when_each_step_ran() {
    let mut r = Rig::new(1000.0, None);
    assert_eq!(r.stepper.due_ms(), 1000.0);
    assert_eq!(r.step(999.0), None);
    let s = r.step(1000.0).expect("due at 1000");
    assert_eq!((s.at_ms, s.cause), (1000.0, Cause::Timer));
    assert_eq!(s.outcome.loads, 2, "the scheduler's outcome is handed back");
    assert_eq!(r.stepper.due_ms(), 2000.0);
    // Run late (a busy daemon loop): the next is an epoch after that.
    assert!(r.step(2300.0).is_some());
    assert_eq!(r.stepper.due_ms(), 3300.0);
    assert_eq!(r.step(3299.0), None);
    let at: Vec<f64> = r.sched.steps.iter().map(|s| s.0).collect();
    assert_eq!(at, vec![1000.0, 2300.0]);
}

#[test]
fn no_step_starts_while_one_is_away_and_one_due_meanwhile_starts_after() {
    let mut r = Rig::new(1000.0, None);
    r.stepper = r.stepper.with_drop_steps(100.0);
    let started = r
        .stepper
        .start_if_due(&mut r.sched, &mut r.view, &r.cluster, 1000.0)
        .expect("the timer's step");
    assert!(started.job.is_some());
    // Away: nothing is due, not even the timer long past or a drop.
    assert_eq!(r.stepper.due_ms(), f64::INFINITY);
    assert!(r.stepper.frame_dropped(1200.0), "the drop's step is due");
    let none = r
        .stepper
        .start_if_due(&mut r.sched, &mut r.view, &r.cluster, 5000.0);
    assert!(none.is_none(), "a second step started while one is away");
    assert_eq!(r.stepper.due_ms(), f64::INFINITY);
    // Applied later: its outcome comes back, and the drop's step is due.
    let s = r
        .stepper
        .finish(&mut r.sched, &r.view, &mut r.cluster, 1050.0, started);
    assert_eq!((s.at_ms, s.outcome.loads), (1000.0, 2));
    assert_eq!(r.stepper.due_ms(), 1200.0);
    assert_eq!(r.step(1200.0).map(|s| s.cause), Some(Cause::Drops));
    assert_eq!(r.sched.steps.len(), 2);
}

#[test]
fn no_timer_at_epoch_zero() {
    let mut r = Rig::new(0.0, None);
    assert_eq!(r.stepper.due_ms(), f64::INFINITY);
    assert_eq!(r.step(1e9), None);
}

#[test]
fn each_step_gets_the_frames_offered_since_the_last_at_least_one() {
    let mut r = Rig::new(1000.0, None);
    for _ in 0..3 {
        r.stepper.frame_offered();
    }
    assert_eq!(r.step(1000.0).map(|s| s.frames), Some(3));
    assert_eq!(r.step(2000.0).map(|s| s.frames), Some(1), "none offered");
    for _ in 0..12 {
        r.stepper.frame_offered();
    }
    assert_eq!(r.step(3000.0).map(|s| s.frames), Some(12));
    let frames: Vec<f64> = r.sched.steps.iter().map(|s| s.2).collect();
    assert_eq!(frames, vec![3.0, 1.0, 12.0]);
}

#[test]
fn a_dropped_frame_steps_at_once_at_most_once_per_drop_gap() {
    let mut r = Rig::new(5000.0, None);
    r.stepper = r.stepper.with_drop_steps(1000.0);
    // Before any step: due at once, however soon after the start, and
    // the timer restarts from that step.
    assert_eq!(r.stepper.due_ms(), 5000.0);
    assert!(r.stepper.frame_dropped(200.0));
    assert_eq!(r.stepper.due_ms(), 200.0);
    let s = r.step(200.0).expect("the first drop's step");
    assert_eq!(s.cause, Cause::Drops);
    assert_eq!(r.stepper.due_ms(), 5200.0);
    // Drops within the gap of a step wait, the timer standing; the next
    // after it does not.
    assert!(!r.stepper.frame_dropped(900.0));
    assert_eq!(r.step(900.0), None);
    assert_eq!(r.stepper.due_ms(), 5200.0);
    assert!(r.stepper.frame_dropped(1200.0));
    assert_eq!(r.step(1200.0).map(|s| s.cause), Some(Cause::Drops));
    assert!(!r.stepper.frame_dropped(1900.0));
    assert!(r.stepper.frame_dropped(2200.0));
    assert_eq!(r.step(2200.0).map(|s| s.cause), Some(Cause::Drops));
    let at: Vec<f64> = r.sched.steps.iter().map(|s| s.0).collect();
    assert_eq!(at, vec![200.0, 1200.0, 2200.0]);
}

#[test]
fn the_first_late_answer_after_on_time_ones_steps_as_a_drop() {
    let mut r = Rig::new(5000.0, None);
    r.stepper = r.stepper.with_drop_steps(1000.0);
    // On time, then late: the first late answer steps.
    assert!(!r.stepper.frame_answered(1100.0, false));
    assert!(r.stepper.frame_answered(1200.0, true));
    assert_eq!(r.step(1200.0).map(|s| s.cause), Some(Cause::Drops));
    // Late answers after it do not, even past the gap.
    assert!(!r.stepper.frame_answered(2500.0, true));
    assert_eq!(r.step(2500.0), None);
    // On time again, then late: a step again.
    assert!(!r.stepper.frame_answered(2600.0, false));
    assert!(r.stepper.frame_answered(2700.0, true));
    assert_eq!(r.step(2700.0).map(|s| s.cause), Some(Cause::Drops));
    // Within the gap of that step, the falling behind is not stepped
    // on, and the late answers after it are not a new one.
    assert!(!r.stepper.frame_answered(2800.0, false));
    assert!(!r.stepper.frame_answered(2900.0, true));
    assert!(!r.stepper.frame_answered(3900.0, true));
    assert_eq!(r.step(3900.0), None);
    let at: Vec<f64> = r.sched.steps.iter().map(|s| s.0).collect();
    assert_eq!(at, vec![1200.0, 2700.0]);
    // Without drop steps, late answers step nothing either.
    let mut off = Rig::new(5000.0, None);
    assert!(!off.stepper.frame_answered(1000.0, false));
    assert!(!off.stepper.frame_answered(2000.0, true));
    assert_eq!(off.step(2000.0), None);
}

#[test]
fn drops_step_nothing_unless_drop_steps_are_on() {
    for gap in [None, Some(0.0), Some(f64::NAN)] {
        let mut r = Rig::new(5000.0, None);
        if let Some(g) = gap {
            r.stepper = r.stepper.with_drop_steps(g);
        }
        assert!(!r.stepper.frame_dropped(3000.0), "{gap:?}");
        assert_eq!(r.step(3000.0), None, "{gap:?}");
        assert_eq!(r.stepper.due_ms(), 5000.0, "{gap:?}");
    }
}

#[test]
fn a_trigger_steps_now_with_the_latest_scene_and_restarts_the_timer() {
    let cfg = scene_adapt(0.0);
    let mut r = Rig::new(1000.0, Some(&cfg));
    // The first scene is the detector's reference; the same again is no change.
    assert_eq!(r.scene(100.0, &[1, 2]), None);
    assert_eq!(r.scene(200.0, &[1, 2]), None);
    assert_eq!(r.stepper.due_ms(), 1000.0);
    // 2 -> 8 requests: 6 of 9 differ, past the threshold of half.
    r.stepper.frame_offered();
    assert_eq!(r.scene(400.0, &[1, 8]), Some(Trigger::Scene));
    assert_eq!(r.stepper.due_ms(), 400.0, "due at once");
    let s = r.step(400.0).expect("the trigger's step");
    assert_eq!((s.cause, s.frames), (Cause::Trigger(Trigger::Scene), 1));
    assert_eq!(
        r.sched.steps[0].1,
        vec![1, 8],
        "planned for the latest scene"
    );
    // The timer restarts from the triggered step: not at 1000.
    assert_eq!(r.stepper.due_ms(), 1400.0);
    assert_eq!(r.step(1000.0), None);
    assert_eq!(r.step(1400.0).map(|s| s.cause), Some(Cause::Timer));
}

#[test]
fn the_min_gap_holds_a_trigger_until_it_has_passed() {
    let cfg = scene_adapt(1000.0);
    let mut r = Rig::new(10_000.0, Some(&cfg));
    r.scene(100.0, &[1, 2]);
    assert_eq!(r.scene(400.0, &[1, 8]), Some(Trigger::Scene));
    assert!(r.step(400.0).is_some());
    // Back to 2 requests 500 ms later: a change, but within the gap.
    assert_eq!(r.scene(900.0, &[1, 2]), None);
    assert_eq!(r.stepper.due_ms(), 10_400.0);
    assert_eq!(r.step(900.0), None);
    // The next frame past the gap lets the held trigger through.
    assert_eq!(r.scene(1399.0, &[1, 2]), None);
    assert_eq!(r.scene(1400.0, &[1, 2]), Some(Trigger::Scene));
    let s = r.step(1400.0).expect("the held trigger's step");
    assert_eq!(s.cause, Cause::Trigger(Trigger::Scene));
    let counts = r.stepper.adapt().expect("adapting").counts();
    assert_eq!((counts.scene_shifts, counts.triggered), (2, 2));
}

#[test]
fn a_step_re_probes_before_the_scheduler_plans() {
    let cfg = AdaptConfig {
        scene: None,
        ..AdaptConfig::default()
    };
    let mut r = Rig::new(60_000.0, Some(&cfg));
    // A on the GPU at its profile's speed (4 ms at batch 1, 6 ms at 2),
    // then 2x slow until the drift detector fires.
    let mut now = 0.0;
    let mut trigger = None;
    let times = [[(1, 4.0), (2, 6.0)]; 5]
        .into_iter()
        .chain([[(1, 8.0), (2, 12.0)]; 20]);
    for (k, ms) in times.flatten() {
        now += 100.0;
        trigger = r
            .stepper
            .observe_batch(&mut r.view, now, A, GPU, k, ms, None);
        if trigger.is_some() {
            break;
        }
    }
    assert!(matches!(trigger, Some(Trigger::Drift(_))), "{trigger:?}");
    let s = r.step(now).expect("the drift's step");
    assert!(s.reprobed.is_empty(), "it ran a batch just now");
    let slow = r.sched.steps[0].3;
    assert!(slow > 6.0, "planned with the GPU estimated slow: {slow} ms");
    // Idle for the re-probe time (3 s) until the timer's step: the
    // scheduler plans with the profile's speed again.
    let s = r.step(now + 60_000.0).expect("the timer's step");
    assert_eq!((s.cause, s.reprobed), (Cause::Timer, vec![GPU]));
    let back = r.sched.steps[1].3;
    assert!(
        (back - 4.0).abs() < 0.5,
        "re-probed before planning: {back} ms"
    );
}
