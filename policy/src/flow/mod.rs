//! The frame flow: every scheduling decision of a frame's life, as one
//! I/O-free state machine that the simulator and the daemon both drive.
//!
//! A driver hands it [`Event`]s with the time they happen at (a frame
//! entered, its input is ready, a batch or a load finished, a step was
//! computed, time passed) and carries out the [`Effect`]s it hands back
//! (prepare inputs, load or unload a model, run a batch on a processor,
//! compute a global step, answer or drop a frame), then wakes it again at
//! [`FrameFlow::next_wake_ms`]. The simulator supplies physics (profiled
//! times, throttles, crop time); the daemon's scheduler thread turns the
//! effects into engine commands, replies and metrics. The same events in
//! the same order give the same decisions: [`Decision`] logs them.
//!
//! A frame's path: it enters (real-time dropping's first stage); its
//! detector input is prepared and its detector requests placed; when its
//! detector items are all done, its level-1 requests fan out (real-time
//! dropping's second stage and deadline admission decide first, the scene
//! is observed); each request's input is prepared and goes to the sync
//! batcher, which releases groups to the placer (late binding), which asks
//! the scheduler for a host and runs the batch on the [`Cluster`]; each
//! finished item releases its children's requests the same way; when
//! nothing of it is left it is answered. Before every event a processor
//! whose oldest batch is overdue by its own run time is seen busy for as
//! long again, then timers due by then fire in a fixed order: batcher
//! timers, deadlines, load retries, held batches, the global step
//! ([`crate::stepper::Stepper`]).

mod config;
mod event;
mod frames;
mod placing;
mod stats;
mod units;

pub use config::{Behind, FlowConfig, FlowConfigError};
pub use event::{
    BatchId, BatchOutcome, Decision, DropCause, Effect, Event, FrameId, FrameIn, ItemFailed, Lost,
    Request, Run,
};
pub use stats::FlowStats;

use std::collections::BTreeMap;

use crate::admission::Admission;
use crate::batcher::SyncBatcher;
use crate::frame_period::FramePeriods;
use crate::late_binding::Placer;
use crate::retry::LoadRetries;
use crate::scene::SceneEstimator;
use crate::scheduler::{Batching, Scheduler};
use crate::stepper::Stepper;
use crate::{Cluster, FinishMark, ModelId, ProcId, System};

/// Where the flow's scheduler lives: borrowed (the simulator) or owned
/// (the daemon).
pub trait SchedulerSlot {
    /// The scheduler.
    fn get(&mut self) -> &mut dyn Scheduler;
    /// The scheduler, to read.
    fn get_ref(&self) -> &dyn Scheduler;
}

impl SchedulerSlot for &mut dyn Scheduler {
    fn get(&mut self) -> &mut dyn Scheduler {
        &mut **self
    }
    fn get_ref(&self) -> &dyn Scheduler {
        &**self
    }
}

impl SchedulerSlot for Box<dyn Scheduler + Send> {
    fn get(&mut self) -> &mut dyn Scheduler {
        &mut **self
    }
    fn get_ref(&self) -> &dyn Scheduler {
        &**self
    }
}

/// A frame in the pipeline.
#[derive(Debug)]
struct FrameState {
    arrival_ms: f64,
    deadline_ms: Option<f64>,
    /// Real-time dropping's limit for it, ms.
    behind_ms: Option<f64>,
    priority: u8,
    /// Requests released and not yet finished (each from its release: its
    /// input's preparation, then its run), plus one for a frame being read.
    pending: u32,
    /// Detector requests not yet finished.
    roots_left: u32,
    /// Detector requests made (one per item).
    root_items: u32,
    /// Level-1 requests its detector items released so far.
    level1: Vec<crate::flow::Request>,
    /// Its level-1 requests were let through: from then on only a failure
    /// or its deadline drops it.
    fanned_out: bool,
    /// Requests made per model.
    requests: Vec<u32>,
    /// Per level: requests released so far.
    announced: Vec<u32>,
    /// Per level: requests whose input was prepared (or failed).
    arrived: Vec<u32>,
    /// Per level: requests released and not yet finished
    /// ([`Batching::WholeFrame`] places a level once none of the levels
    /// above it has any).
    open: Vec<u32>,
}

/// A batch on a processor.
#[derive(Debug)]
struct BatchState {
    frame: FrameId,
    model: ModelId,
    proc: ProcId,
    objects: Vec<u32>,
    mark: FinishMark,
    /// Its finish as placed, ms.
    planned_finish_ms: f64,
    /// Its profiled run time when placed, ms.
    run_ms: f64,
}

/// The frame flow (see the module doc).
pub struct FrameFlow<S: SchedulerSlot> {
    cfg: FlowConfig,
    /// The board as the scheduler sees it (live estimates refine it).
    view: System,
    sched: S,
    batching: Batching,
    cluster: Cluster,
    batcher: SyncBatcher,
    placer: Placer,
    stepper: Stepper,
    scene: SceneEstimator,
    retries: LoadRetries,
    deadline_admission: Option<Admission>,
    periods: FramePeriods,
    frames: BTreeMap<FrameId, FrameState>,
    /// Requests ready to run and not yet placed, per (frame, model).
    ready: BTreeMap<(FrameId, ModelId), std::collections::VecDeque<u32>>,
    batches: BTreeMap<crate::flow::BatchId, BatchState>,
    next_batch: u64,
    /// What the processors were told to hold (index i * np + j).
    commanded: Vec<bool>,
    /// No global step starts at or after this time, ms.
    steps_until_ms: f64,
    /// The time of the last event, ms.
    now_ms: f64,
    effects: Vec<Effect>,
    log: Vec<Decision>,
    stats: FlowStats,
}

impl<S: SchedulerSlot> FrameFlow<S> {
    /// A flow over `view` starting at `now` with the processors in
    /// `cluster`'s state (their residency already loaded), placing with
    /// `sched`, planning for `scene` until a frame's is seen.
    pub fn new(
        view: System,
        mut sched: S,
        cluster: Cluster,
        cfg: FlowConfig,
        now: f64,
        scene: Vec<u32>,
    ) -> Result<Self, FlowConfigError> {
        cfg.validate()?;
        let batching = sched.get().batching();
        let wait_ms = match batching {
            Batching::SyncTimer { wait_ms } => wait_ms,
            _ => 0.0,
        };
        let stepper = Stepper::new(&view, cfg.epoch_ms, now, scene, cfg.adapt.as_ref())
            .with_drop_steps(cfg.drop_step_gap_ms);
        let commanded = cluster.residency().to_vec();
        Ok(FrameFlow {
            batching,
            batcher: SyncBatcher::new(wait_ms),
            placer: Placer::new(cfg.dispatch_ahead_ms),
            deadline_admission: cfg.deadline_admission_z.map(Admission::new),
            scene: SceneEstimator::new(&view),
            stats: FlowStats::new(&view),
            retries: LoadRetries::default(),
            periods: FramePeriods::new(),
            frames: BTreeMap::new(),
            ready: BTreeMap::new(),
            batches: BTreeMap::new(),
            next_batch: 0,
            commanded,
            steps_until_ms: f64::INFINITY,
            now_ms: now,
            effects: Vec::with_capacity(64),
            log: Vec::new(),
            stepper,
            cluster,
            sched,
            view,
            cfg,
        })
    }

    /// Handles `event` at `now` (timers due by then fire first); its
    /// effects are in [`FrameFlow::take_effects`].
    pub fn handle(&mut self, now: f64, event: Event) {
        self.now_ms = self.now_ms.max(now);
        self.hold_overdue(now);
        // A frame comes before the timers due at its arrival (a step at
        // that instant counts it); timers due earlier fire first.
        if matches!(event, Event::FrameIn(_)) {
            self.fire_timers(just_before(now));
        } else {
            self.fire_timers(now);
        }
        match event {
            Event::Tick => {}
            Event::FrameIn(f) => self.frame_in(now, f),
            Event::DroppedBeforeEntry => self.dropped_before_entry(now),
            Event::RootReady { frame, requests } => self.root_ready(now, frame, requests),
            Event::Prepared {
                frame,
                ready,
                failed,
            } => self.prepared(now, frame, ready, failed),
            Event::Invalid(frame) => self.invalid(now, frame),
            Event::BatchDone {
                batch,
                finished_ms,
                outcome,
            } => self.batch_done(now, batch, finished_ms, outcome),
            Event::LoadDone { model, proc, ok } => self.load_done(now, model, proc, ok),
            Event::StepComputed(step) => self.apply_step(now, step),
            Event::ProcessorGone(j) => self.processor_gone(now, j),
        }
        if !self.placer.is_empty() {
            self.release_held(now);
        }
        self.fire_timers(now);
    }

    /// The effects of the events handled so far, in order.
    pub fn take_effects(&mut self) -> std::vec::Drain<'_, Effect> {
        self.effects.drain(..)
    }

    /// When the flow wants the next [`Event::Tick`] at the latest, ms
    /// (infinite: only events wake it).
    pub fn next_wake_ms(&self) -> f64 {
        let deadline = if self.cfg.expire_at_deadline {
            self.frames
                .values()
                .filter_map(|f| f.deadline_ms)
                .fold(f64::INFINITY, f64::min)
        } else {
            f64::INFINITY
        };
        let step = if self.stepper.due_ms() < self.steps_until_ms {
            self.stepper.due_ms()
        } else {
            f64::INFINITY
        };
        self.batcher
            .next_deadline()
            .unwrap_or(f64::INFINITY)
            .min(deadline)
            .min(self.retries.next_due().unwrap_or(f64::INFINITY))
            .min(self.placer.wake_ms(&self.view, &self.cluster, self.now_ms))
            .min(self.next_overdue_ms())
            .min(step)
    }

    /// No global step starts at or after `at_ms` (the simulator's camera
    /// has stopped by then).
    pub fn stop_steps_at(&mut self, at_ms: f64) {
        self.steps_until_ms = at_ms;
    }

    /// The board as the scheduler sees it now.
    pub fn view(&self) -> &System {
        &self.view
    }

    /// The processors' state as the scheduler sees it now.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The scheduler.
    pub fn scheduler(&self) -> &dyn Scheduler {
        self.sched.get_ref()
    }

    /// The step's clock and adaptation.
    pub fn stepper(&self) -> &Stepper {
        &self.stepper
    }

    /// Pairs out of service and their retries.
    pub fn retries(&self) -> &LoadRetries {
        &self.retries
    }

    /// What the flow has done so far.
    pub fn stats(&self) -> &FlowStats {
        &self.stats
    }

    /// The decisions so far ([`FlowConfig::log`]).
    pub fn log(&self) -> &[Decision] {
        &self.log
    }

    /// Frames in the pipeline now.
    pub fn frames_in_flight(&self) -> usize {
        self.frames.len()
    }

    /// Frames in the pipeline now, oldest first.
    pub fn frame_ids(&self) -> impl Iterator<Item = FrameId> + '_ {
        self.frames.keys().copied()
    }

    /// Timers due by `now`, in a fixed order: batcher timers, deadlines,
    /// load retries, held batches, then the global step.
    fn fire_timers(&mut self, now: f64) {
        let mut flushes = Vec::new();
        self.batcher.expire(now, &mut flushes);
        for fl in flushes {
            self.flush(now, fl);
        }
        if self.cfg.expire_at_deadline {
            let expired: Vec<FrameId> = self
                .frames
                .iter()
                .filter(|(_, f)| f.deadline_ms.is_some_and(|d| d <= now))
                .map(|(id, _)| *id)
                .collect();
            for frame in expired {
                self.drop_frame(now, frame, DropCause::DeadlinePassed);
            }
        }
        self.retry_loads(now);
        self.start_step_if_due(now);
    }

    fn record(&mut self, d: Decision) {
        if self.cfg.log {
            self.log.push(d);
        }
    }
}

impl<S: SchedulerSlot> FrameFlow<S> {
    /// Per processor, its outstanding batch expected to finish first, with
    /// that expected finish.
    fn oldest_batches(&self) -> BTreeMap<ProcId, (f64, &BatchState)> {
        let mut oldest: BTreeMap<ProcId, (f64, &BatchState)> = BTreeMap::new();
        for b in self.batches.values() {
            let expected = self.cluster.expected_finish(b.mark);
            let slot = oldest.entry(b.proc).or_insert((expected, b));
            if expected < slot.0 {
                *slot = (expected, b);
            }
        }
        oldest
    }

    /// When a processor's oldest batch is first seen overdue, ms: past its
    /// expected finish and late by its own run time.
    fn overdue_from(expected: f64, b: &BatchState) -> f64 {
        expected.max(b.planned_finish_ms + b.run_ms)
    }

    /// A processor whose oldest outstanding batch is still out past its
    /// expected finish, late by at least its own profiled run time (so it
    /// takes at least twice as long as planned, or hangs until its run
    /// limit answers it), is seen busy for as long again as the batch is
    /// late, so new batches go to processors that are not stuck. The
    /// batch's real finish corrects the estimate back.
    fn hold_overdue(&mut self, now: f64) {
        let held: Vec<(FinishMark, f64)> = self
            .oldest_batches()
            .into_values()
            .filter(|(expected, b)| b.run_ms.is_finite() && now >= Self::overdue_from(*expected, b))
            .map(|(_, b)| (b.mark, now + (now - b.planned_finish_ms)))
            .collect();
        for (mark, until) in held {
            self.cluster.correct_finish(mark, until);
        }
    }

    /// Frames with a batch late by at least its own run time (a processor
    /// hangs on it, or runs it at half speed or worse): the daemon lets as
    /// many more frames in, so a stalled processor does not hold the frames
    /// that do not need it.
    pub fn stuck_frames(&self) -> usize {
        let now = self.now_ms;
        let stuck: std::collections::BTreeSet<FrameId> = self
            .batches
            .values()
            .filter(|b| b.run_ms.is_finite() && now >= b.planned_finish_ms + b.run_ms)
            .map(|b| b.frame)
            .collect();
        stuck.len()
    }

    /// When [`FrameFlow::hold_overdue`] next has something to do, ms.
    fn next_overdue_ms(&self) -> f64 {
        self.oldest_batches()
            .into_values()
            .filter(|(_, b)| b.run_ms.is_finite())
            .map(|(expected, b)| Self::overdue_from(expected, b))
            .filter(|t| *t > self.now_ms)
            .fold(f64::INFINITY, f64::min)
    }
}

/// The largest time before `t` (ms), for timers due strictly before it.
fn just_before(t: f64) -> f64 {
    if t.is_finite() && t > 0.0 {
        f64::from_bits(t.to_bits() - 1)
    } else {
        t - f64::MIN_POSITIVE
    }
}
