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
    /// does ([`Stepper::frame_dropped`]); the late answers after it do not:
    /// frames lost to lateness alone, with no drop, would otherwise wait
    /// for the timer's step. Returns whether a step is now due.
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
#[path = "stepper_tests.rs"]
mod tests;
