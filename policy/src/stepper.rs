//! When the global step runs and with what. The simulator and the daemon's
//! scheduler thread both drive one [`Stepper`], so the simulator predicts
//! the scheduler the daemon runs: the epoch timer, the frames offered since
//! the last step, the scene the step plans for, the adaptation triggers
//! that bring a step forward ([`crate::adapt`]), and the step itself
//! (re-probe, [`Scheduler::start_epoch`], [`Adapt::stepped`], and
//! [`Scheduler::finish_epoch`] when the driver applies it). A driver turns
//! the [`Step`] it gets back into its own side effects (the daemon: model
//! loads and metrics; the simulator: report counters).
//!
//! The semantics, the same for both drivers:
//! - **Start and apply.** A step starts ([`Stepper::start_if_due`]: the
//!   scheduler packs its work with a snapshot of the cluster) and is applied
//!   by [`Stepper::finish`] once the driver has computed it: the daemon on
//!   its step thread, the simulator `SimConfig::step_cost_ms` later (at once
//!   at 0, [`Stepper::step_if_due`]). The dispatcher goes on meanwhile; no
//!   other step starts while one is away. The timer and the frame count
//!   restart when it starts.
//! - **Timer.** The first step is due `epoch_ms` after the start; after any
//!   step, by the timer or by a trigger, the next is due `epoch_ms` after
//!   it ran. The epoch is the longest time without a step, and a triggered
//!   step is not followed by a timer step shortly after it. A step the
//!   driver runs late (the daemon's loop wakes when it can) moves the timer
//!   by as much. `epoch_ms` of 0 turns the timer off (triggers still step).
//! - **Frames.** The step is given the frames offered since the previous
//!   step (arrived, whether they were then dropped or not), counted, at
//!   least 1: camdnn's step judges its choices on that window and derives
//!   the frame period from it, which an assumed `epoch_ms * fps` gets wrong
//!   for a step that came early.
//! - **Triggers.** When adaptation asks for a step (a lasting change of a
//!   processor's speed or of the scene mix, past its `min_gap_ms` guard), a
//!   step is due at once; the driver runs it at its next turn (the
//!   simulator right after the event, the daemon at the end of its loop).
//! - **Drops.** A frame dropped because the pipeline fell behind makes a
//!   step due at once too, when no step has run yet or the last one ran
//!   at least the drop gap ago ([`Stepper::with_drop_steps`];
//!   [`DROP_STEP_GAP_MS`] by default in the simulator and the daemon).
//!   The start-up residency is no step's choice, so the first drop does
//!   not wait a gap for it. The last step's choice is failing now:
//!   waiting out the epoch costs up to an epoch of drops, a look once a
//!   second costs one step. No frame is dropped in the paper's no-drop
//!   mode, so its runs step on the timer alone.
//! - **Late answers.** The first frame answered past its deadline after
//!   one answered within it counts as a drop ([`Stepper::frame_answered`]):
//!   the pipeline has begun to fall behind although nothing was dropped.
//!   A run of late answers does not: on a board that cannot keep up every
//!   answer is late, and a step a second would only churn. The simulator
//!   holds frames to a deadline except in the no-drop mode (whose runs
//!   still step on the timer alone); the daemon, a frame with a deadline.

use crate::adapt::{Adapt, AdaptConfig, Trigger};
use crate::scheduler::{EpochJob, EpochOutcome, Scheduler};
use crate::{Cluster, ModelId, ProcId, System};

/// The least time from the last global step to one a dropped frame brings
/// forward, ms: as adaptation's guard (`AdaptConfig::min_gap_ms`), at most
/// one such step a second, so a board that drops every frame steps once a
/// second, not once a frame.
pub const DROP_STEP_GAP_MS: f64 = 1000.0;

/// Why a global step ran.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cause {
    /// The epoch timer.
    Timer,
    /// Adaptation asked for it before the timer.
    Trigger(Trigger),
    /// A frame was dropped, or answered late after on-time ones: the
    /// pipeline fell behind under the last choice.
    Drops,
}

/// What a global step did, for the driver to act on.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// When it started, ms (the driver applied it at its finish).
    pub at_ms: f64,
    /// Why.
    pub cause: Cause,
    /// The frames it was given: those offered since the previous step, at
    /// least 1.
    pub frames: u64,
    /// The scheduler's outcome (the models its re-plan loaded).
    pub outcome: EpochOutcome,
    /// Processors given their profile's speed back before it planned
    /// ([`Adapt::reprobe`]).
    pub reprobed: Vec<ProcId>,
}

/// A global step started and not yet applied: its job, if the scheduler has
/// a step, is for the driver to compute (on another thread, or at once)
/// before handing it to [`Stepper::finish`].
#[derive(Debug)]
pub struct StartedStep {
    /// When it started, ms.
    pub at_ms: f64,
    /// Why.
    pub cause: Cause,
    /// The frames it was given: those offered since the previous step, at
    /// least 1.
    pub frames: u64,
    /// Processors given their profile's speed back before it planned.
    pub reprobed: Vec<ProcId>,
    /// The scheduler's work ([`Scheduler::start_epoch`]); `None` for a
    /// scheduler without a global step.
    pub job: Option<EpochJob>,
}

/// The global step's clock, inputs and sequence (see the module's doc).
#[derive(Clone, Debug)]
pub struct Stepper {
    /// The epoch, ms (infinite: no timer).
    epoch_ms: f64,
    /// When the timer's next step is due, ms.
    timer_due_ms: f64,
    /// Why a step is due before the timer (a trigger adaptation raised, or
    /// a drop) and since when; the first stands until a step answers it.
    early: Option<(f64, Cause)>,
    /// Least time from the last step to one a drop brings forward, ms
    /// (infinite: drops do not step).
    drop_gap_ms: f64,
    /// When the last step ran, ms (minus infinity before any).
    last_step_ms: f64,
    /// Frames offered since the last step.
    frames: u64,
    /// The scene the next step plans for: the latest frame's.
    scene: Vec<u32>,
    adapt: Option<Adapt>,
    /// A started step's job is away (being computed): none starts until it
    /// is finished.
    away: bool,
    /// Whether the last frame answered was late ([`Stepper::frame_answered`]).
    answered_late: bool,
}

impl Stepper {
    /// A stepper started at `start_ms`, the first step due `epoch_ms` later
    /// (0: no timer), planning for `scene` until a frame's is observed, with
    /// adaptation when `adapt` is given.
    pub fn new(
        system: &System,
        epoch_ms: f64,
        start_ms: f64,
        scene: Vec<u32>,
        adapt: Option<&AdaptConfig>,
    ) -> Self {
        let epoch_ms = if epoch_ms.is_finite() && epoch_ms > 0.0 {
            epoch_ms
        } else {
            f64::INFINITY
        };
        Stepper {
            epoch_ms,
            timer_due_ms: start_ms + epoch_ms,
            early: None,
            drop_gap_ms: f64::INFINITY,
            last_step_ms: f64::NEG_INFINITY,
            frames: 0,
            scene,
            adapt: adapt.map(|c| Adapt::new(system, c)),
            away: false,
            answered_late: false,
        }
    }

    /// Lets a dropped frame bring the step forward ([`Stepper::frame_dropped`])
    /// once `gap_ms` have passed since the last step (0 or not finite: off).
    pub fn with_drop_steps(mut self, gap_ms: f64) -> Self {
        self.drop_gap_ms = if gap_ms.is_finite() && gap_ms > 0.0 {
            gap_ms
        } else {
            f64::INFINITY
        };
        self
    }

    /// When the next step is due, ms: now when a trigger or a drop is
    /// pending, else the timer's (infinite without a timer). A driver wakes
    /// by then.
    pub fn due_ms(&self) -> f64 {
        if self.away {
            return f64::INFINITY;
        }
        self.early.map_or(self.timer_due_ms, |(at, _)| at)
    }

    /// When the timer's next step is due, ms (infinite without a timer).
    pub fn timer_due_ms(&self) -> f64 {
        self.timer_due_ms
    }

    /// A frame was offered (before any drop decision).
    pub fn frame_offered(&mut self) {
        self.frames += 1;
    }

    /// The scene the next step plans for.
    pub fn scene(&self) -> &[u32] {
        &self.scene
    }

    /// Adaptation (live estimates and counters), when on.
    pub fn adapt(&self) -> Option<&Adapt> {
        self.adapt.as_ref()
    }

    /// A frame was dropped at `now` because the pipeline is behind: a step
    /// is due at once when none has run yet or the last one ran at least
    /// the drop gap ago.
    /// Returns whether a step is now due.
    pub fn frame_dropped(&mut self, now: f64) -> bool {
        // Off (an infinite gap) must stay off before the first step, where
        // the time since the last is infinite too.
        if self.early.is_none()
            && self.drop_gap_ms.is_finite()
            && now - self.last_step_ms >= self.drop_gap_ms
        {
            self.early = Some((now, Cause::Drops));
        }
        self.early.is_some_and(|(at, _)| now >= at)
    }

    /// A frame was answered at `now`, `late` past its deadline. The first
    /// late answer after an on-time one brings the step forward as a drop
    /// does ([`Stepper::frame_dropped`]); the late answers after it do not.
    /// On gen-22's bursts trace the first five seconds lost frames to
    /// lateness only, and the step that would have fixed them waited for
    /// the timer. Returns whether a step is now due.
    pub fn frame_answered(&mut self, now: f64, late: bool) -> bool {
        let falls_behind = late && !self.answered_late;
        self.answered_late = late;
        falls_behind && self.frame_dropped(now)
    }

    /// The scene of a frame about to be planned, once its detector ran:
    /// kept for the next step, told to the scheduler and to the scene-change
    /// detector. Returns the trigger when a step is now due.
    pub fn observe_scene(
        &mut self,
        scheduler: &mut dyn Scheduler,
        view: &System,
        cluster: &Cluster,
        now: f64,
        scene: Vec<u32>,
    ) -> Option<Trigger> {
        self.scene = scene;
        scheduler.observe_scene(view, cluster, now, &self.scene);
        let t = self.adapt.as_mut()?.observe_scene(now, &self.scene);
        self.raise(now, t)
    }

    /// A batch of k requests of model i finished on p_j at `now`
    /// ([`Adapt::observe_batch`]: the live estimates and `view` learn from
    /// it). Returns the trigger when a step is now due.
    #[allow(clippy::too_many_arguments)]
    pub fn observe_batch(
        &mut self,
        view: &mut System,
        now: f64,
        i: ModelId,
        j: ProcId,
        k: usize,
        exec_ms: f64,
        load_ms: Option<f64>,
    ) -> Option<Trigger> {
        let t = self
            .adapt
            .as_mut()?
            .observe_batch(view, now, i, j, k, exec_ms, load_ms);
        self.raise(now, t)
    }

    /// Starts the global step if one is due at `now` and none is away:
    /// re-probes idle slow processors in `view`, has the scheduler pack its
    /// step for the latest scene with the frames counted
    /// ([`Scheduler::start_epoch`]), tells adaptation, and restarts the
    /// timer at `now + epoch_ms`. No other step starts until this one is
    /// handed to [`Stepper::finish`]. `None` when no step is due.
    pub fn start_if_due(
        &mut self,
        scheduler: &mut dyn Scheduler,
        view: &mut System,
        cluster: &Cluster,
        now: f64,
    ) -> Option<StartedStep> {
        if self.away {
            return None;
        }
        let cause = match self.early {
            Some((at, cause)) if now >= at => cause,
            _ if now >= self.timer_due_ms => Cause::Timer,
            _ => return None,
        };
        let reprobed = match &mut self.adapt {
            Some(a) => a.reprobe(view, now),
            None => Vec::new(),
        };
        let frames = self.frames.max(1);
        let job = scheduler.start_epoch(
            view,
            cluster,
            now,
            &self.scene,
            frames as f64,
            self.epoch_ms,
        );
        if let Some(a) = &mut self.adapt {
            a.stepped(now, &self.scene);
        }
        self.frames = 0;
        self.early = None;
        self.last_step_ms = now;
        self.timer_due_ms = now + self.epoch_ms;
        self.away = job.is_some();
        Some(StartedStep {
            at_ms: now,
            cause,
            frames,
            reprobed,
            job,
        })
    }

    /// Applies a step [`Stepper::start_if_due`] started, at `now` (computed
    /// first if the driver has not run its job).
    pub fn finish(
        &mut self,
        scheduler: &mut dyn Scheduler,
        view: &System,
        cluster: &mut Cluster,
        now: f64,
        started: StartedStep,
    ) -> Step {
        self.away = false;
        let outcome = match started.job {
            Some(job) => scheduler.finish_epoch(view, cluster, now, job),
            None => EpochOutcome::default(),
        };
        Step {
            at_ms: started.at_ms,
            cause: started.cause,
            frames: started.frames,
            outcome,
            reprobed: started.reprobed,
        }
    }

    /// The whole step at once if one is due at `now`: started, computed and
    /// applied ([`Stepper::start_if_due`], [`Stepper::finish`]).
    pub fn step_if_due(
        &mut self,
        scheduler: &mut dyn Scheduler,
        view: &mut System,
        cluster: &mut Cluster,
        now: f64,
    ) -> Option<Step> {
        let started = self.start_if_due(scheduler, view, cluster, now)?;
        Some(self.finish(scheduler, view, cluster, now, started))
    }

    /// Records a trigger adaptation let through at `now` (the first one
    /// stands until a step answers it).
    fn raise(&mut self, now: f64, t: Option<Trigger>) -> Option<Trigger> {
        let t = t?;
        self.early.get_or_insert((now, Cause::Trigger(t)));
        Some(t)
    }
}

#[cfg(test)]
mod tests {
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
        fn finish_epoch(
            &mut self,
            _: &System,
            _: &mut Cluster,
            _: f64,
            job: EpochJob,
        ) -> EpochOutcome {
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
}
