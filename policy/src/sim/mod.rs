//! A discrete-event simulator of the whole pipeline: a camera at F fps, the
//! detector on its processor, per-object requests prepared after it,
//! batching, dispatch, processors working through their queues, model loads,
//! an optional global step every epoch, and the daemon's frame admission
//! ([`FrameAdmission`]): real-time dropping by default.
//! Deterministic: the same system, trace, config and scheduler give the
//! same report.

mod measure;
mod rate;
mod throttle;
mod trace;

use std::cmp::Ordering;
use std::collections::BinaryHeap;

pub use measure::{default_deadline_ms, fmt_delay, Accounting, BoundRatio, OfferedDelay};
pub use rate::{mean_scene, rate_bound, RateBound, OVERLOAD};
pub use throttle::{throttled_board, windowed_goodput, Throttle};
pub use trace::{frame_scene, full_scene, Segment, Trace};

use crate::adapt::{Adapt, AdaptConfig, AdaptCounts};
use crate::admission::{behind_at_fan_out, detector_behind};
use crate::batcher::{Flush, FlushReason, SyncBatcher};
use crate::bound::frame_bound;
use crate::late_binding::{Batch, Placer};
use crate::scene::SceneEstimator;
use crate::schedulers::{Batching, Scheduler};
use crate::stats::Summary;
use crate::stepper::{Cause, StartedStep, Stepper};
use crate::{Cluster, InputError, ModelId, Placement, ProcId, System};

/// Simulation knobs.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// Camera frame rate.
    pub fps: f64,
    /// Interval between global steps, ms (0: no timer; adaptation's
    /// triggers and drops still step).
    pub epoch_ms: f64,
    /// A dropped frame brings the global step forward when none has run yet
    /// or the last one ran at least this long ago, ms (0: the timer alone;
    /// [`crate::stepper::DROP_STEP_GAP_MS`] by default).
    pub drop_step_gap_ms: f64,
    /// Time to prepare one object's crop after its parent model ran, ms.
    pub crop_ms: f64,
    /// Crops prepared in parallel.
    pub crop_threads: usize,
    /// Which frames enter the pipeline and when.
    pub admission: FrameAdmission,
    /// Late binding as the daemon's `pipeline.dispatch_ahead_ms`: a batch
    /// whose chosen host has more queued work than this waits and is placed
    /// when a host catches up, or taken by a nearly idle host that finishes
    /// it sooner (`None`: every batch placed at once).
    pub dispatch_ahead_ms: Option<f64>,
    /// Requests each root model runs per frame, all released at arrival (a
    /// detector on an image pyramid runs one per scale; 1 for most graphs).
    pub root_items: u32,
    /// Time from a frame's arrival to its root requests' release: decoding
    /// the frame and preparing the detector's input, ms (0: frames arrive
    /// ready, as on the paper's boards where the camera pipeline does it).
    pub frame_prep_ms: f64,
    /// Time each batch costs its processor beyond t_e: handing it to the
    /// processor's thread and its results back, ms (0 on an ideal board).
    pub batch_overhead_ms: f64,
    /// Processors slowed by a factor over a time window (DVFS, thermal
    /// throttling): batches starting inside it take that much longer than
    /// the profile says, and the scheduler is not told.
    pub throttles: Vec<Throttle>,
    /// Live estimates and early global steps ([`crate::adapt`]); `None`:
    /// the scheduler plans with the profile as given, re-planning on the
    /// epoch timer only.
    pub adapt: Option<AdaptConfig>,
    /// Deadline admission ([`crate::admission`]): a frame whose earliest
    /// answer is later than its deadline is dropped at arrival (`None`: off).
    pub deadline_admission: Option<DeadlineAdmission>,
    /// Time a global step takes to compute, ms: it decides on the state at
    /// its start and its choice applies (loads start, the dispatcher
    /// switches) this much later, while the dispatcher goes on as it was,
    /// as on the daemon's step thread (0: applied at once; the daemon
    /// reports its steps' time as `camdnn_global_step_seconds`).
    pub step_cost_ms: f64,
}

/// How camera frames enter the pipeline: the daemon's admission rules.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FrameAdmission {
    /// Real-time dropping, the daemon's `pipeline.drop_behind_ms`, ms
    /// (`None`: one frame period): a frame whose detector could not start
    /// within this long is dropped at its arrival
    /// ([`crate::admission::detector_behind`]); one whose detector ran is
    /// dropped before its objects start when the pipeline is further behind
    /// than this less the frame's age ([`crate::admission::behind_at_fan_out`]).
    Behind(Option<f64>),
    /// The daemon's `pipeline.max_in_flight` alone (no `drop_behind_ms`):
    /// at most this many frames are in the pipeline; a frame arriving while
    /// it is full waits, and a newer frame supersedes it (the older one is
    /// dropped, newest wins, as the server's pending table does). A waiting
    /// frame enters when a frame in the pipeline is answered, its delay
    /// counted from its arrival.
    InFlight(usize),
    /// Every frame enters at its arrival however far behind the pipeline is:
    /// the paper's no-drop mode ([`SimConfig::no_drop`]).
    QueueAll,
}

/// Knobs of deadline admission.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeadlineAdmission {
    /// Every t_e is taken at the live estimates' mean + this many standard
    /// deviations (without adaptation there is no spread: the profile's t_e).
    pub tail_z: f64,
    /// The deadline from a frame's arrival, ms (`None`: two frame periods).
    pub deadline_ms: Option<f64>,
}

impl Default for SimConfig {
    /// The paper's setting: 14 fps, 5 s epochs; crops at 0.5 ms on 4 cores.
    fn default() -> Self {
        SimConfig {
            fps: 14.0,
            epoch_ms: 5000.0,
            drop_step_gap_ms: crate::stepper::DROP_STEP_GAP_MS,
            crop_ms: 0.5,
            crop_threads: 4,
            admission: FrameAdmission::Behind(None),
            dispatch_ahead_ms: None,
            root_items: 1,
            frame_prep_ms: 0.0,
            batch_overhead_ms: 0.0,
            throttles: Vec::new(),
            adapt: None,
            deadline_admission: None,
            step_cost_ms: 0.0,
        }
    }
}

impl SimConfig {
    /// The no-drop mode, as the paper measured: every frame is queued,
    /// however far behind the pipeline is.
    pub fn no_drop(self) -> SimConfig {
        SimConfig {
            admission: FrameAdmission::QueueAll,
            deadline_admission: None,
            ..self
        }
    }

    /// The default deadline for these knobs: two frame periods, ms.
    pub fn default_deadline_ms(&self) -> f64 {
        default_deadline_ms(self.fps)
    }

    /// The deadline the run holds a frame to, ms: deadline admission's
    /// when it has one, else the default.
    pub fn frame_deadline_ms(&self) -> f64 {
        self.deadline_admission
            .and_then(|d| d.deadline_ms)
            .unwrap_or(self.default_deadline_ms())
    }
}

/// What happened to one frame.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameOutcome {
    /// When the camera produced it, ms.
    pub arrival_ms: f64,
    /// Processing delay (last result minus arrival), ms; `None` if dropped.
    pub delay_ms: Option<f64>,
    /// Model loads its requests triggered.
    pub loads: u32,
    /// Busy time (loads + execution) its work took on each processor, ms.
    pub busy_ms: Vec<f64>,
    /// rem_j of every processor when the frame arrived, ms (the backlog it
    /// found).
    pub rem_at_arrival_ms: Vec<f64>,
    /// Lower bound on its makespan on idle units with the residency it
    /// found at arrival ([`crate::bound::frame_bound`]), ms.
    pub bound_ms: f64,
}

/// A simulation's results.
#[derive(Clone, Debug, PartialEq)]
pub struct SimReport {
    /// The scheduler's name.
    pub scheduler: String,
    /// Every frame, in order.
    pub frames: Vec<FrameOutcome>,
    /// Busy time (loads + execution) per processor, ms.
    pub busy_ms: Vec<f64>,
    /// Model loads (by the dispatcher and by global steps).
    pub loads: u32,
    /// Time spent loading, ms.
    pub load_ms: f64,
    /// Models evicted to make room for another.
    pub evictions: u32,
    /// Dispatch decisions taken.
    pub decisions: u64,
    /// Requests executed per model (detector runs included).
    pub served: Vec<u64>,
    /// Batches flushed by the sync timer, by reason (full, complete, timer).
    pub flushes: [u64; 3],
    /// Global steps taken.
    pub epochs: u32,
    /// Loads started by global steps (included in `loads`).
    pub epoch_loads: u32,
    /// Simulated time from the first frame to the last result (or the last
    /// detector of a frame dropped after it), ms.
    pub duration_ms: f64,
    /// Global steps a detector triggered before the epoch timer (included
    /// in `epochs`).
    pub triggered_epochs: u32,
    /// Global steps a dropped frame brought forward (included in `epochs`).
    pub drop_epochs: u32,
    /// Frames deadline admission dropped at arrival (among the dropped).
    pub admission_drops: u32,
    /// What adaptation did, when it was on.
    pub adapt: Option<AdaptCounts>,
}

impl SimReport {
    /// Every offered frame accounted as on time, late or dropped against
    /// `deadline_ms`, with delay percentiles over all of them (the headline
    /// measure: [`Accounting`]).
    pub fn accounting(&self, deadline_ms: f64) -> Accounting {
        Accounting::of(&self.frames, deadline_ms)
    }

    /// Every offered frame's makespan over its lower bound (a dropped frame
    /// is a miss).
    pub fn bound_ratio(&self) -> BoundRatio {
        BoundRatio::of(&self.frames)
    }

    /// On-time share of offered frames against `deadline_ms`.
    pub fn goodput(&self, deadline_ms: f64) -> f64 {
        self.accounting(deadline_ms).goodput()
    }

    /// Delay statistics over the frames that were processed only. A
    /// scheduler that drops slow frames looks better here: not a ranking
    /// measure (see [`SimReport::accounting`]); it is the paper's figure in
    /// no-drop runs, where every frame is processed.
    pub fn delay(&self) -> Summary {
        let d: Vec<f64> = self.frames.iter().filter_map(|f| f.delay_ms).collect();
        Summary::of(&d)
    }

    /// Frames dropped.
    pub fn dropped(&self) -> usize {
        self.frames.iter().filter(|f| f.delay_ms.is_none()).count()
    }

    /// Busy fraction of each processor over the run.
    pub fn utilisation(&self) -> Vec<f64> {
        self.busy_ms
            .iter()
            .map(|b| b / self.duration_ms.max(1e-9))
            .collect()
    }
}

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SimError {
    /// The trace does not fit the system.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A knob is out of range.
    #[error("sim config {field} = {value}: {reason}")]
    Config {
        /// The field.
        field: &'static str,
        /// Its value.
        value: f64,
        /// What it must be.
        reason: &'static str,
    },
    /// The scheduler found no processor able to host a model.
    #[error("scheduler {scheduler} found no processor that can host {model}")]
    NoHost {
        /// The scheduler.
        scheduler: String,
        /// The model.
        model: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    FrameArrives(usize),
    /// Its input is prepared: the root requests are released.
    FramePrepared(usize),
    Ready {
        frame: usize,
        model: ModelId,
    },
    ModelDone {
        frame: usize,
        model: ModelId,
    },
    /// A batch finished: what it really took, for the live estimates.
    BatchDone {
        model: ModelId,
        proc: ProcId,
        size: usize,
        exec_ms: f64,
        load_ms: f64,
    },
    Timer,
    /// A host with held work behind it is within the horizon of idle.
    Retry,
    Epoch,
    /// The global step started `step_cost_ms` ago applies.
    StepApplies,
}

#[derive(Clone, Copy, Debug)]
struct Event {
    t: f64,
    seq: u64,
    kind: Kind,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    /// Reversed so that `BinaryHeap` pops the earliest event first.
    fn cmp(&self, o: &Self) -> Ordering {
        o.t.total_cmp(&self.t).then(o.seq.cmp(&self.seq))
    }
}

struct FrameState {
    arrival: f64,
    scene: Vec<u32>,
    to_place: Vec<u32>,
    arrived: Vec<u32>,
    latest: Vec<f64>,
    models_left: usize,
    /// Detectors (roots) still to finish.
    roots_left: usize,
    /// Whether any per-object request was released: from then on the frame
    /// is never dropped.
    objects_started: bool,
    finish: f64,
}

struct Sim<'a> {
    /// The board as it really runs (before throttling).
    system: &'a System,
    /// The profile the scheduler plans with: the given one, refined by live
    /// estimates when adaptation is on.
    view: System,
    /// When the global step runs and with what, adaptation's triggers
    /// included (the daemon's code).
    stepper: Stepper,
    /// Deadline admission, when on.
    admission: Option<crate::admission::Admission>,
    /// When the camera stops, ms (no global step after it).
    end_of_camera_ms: f64,
    cfg: &'a SimConfig,
    sched: &'a mut dyn Scheduler,
    cluster: Cluster,
    batcher: SyncBatcher,
    events: BinaryHeap<Event>,
    seq: u64,
    frames: Vec<Option<FrameState>>,
    report: SimReport,
    /// The scene a frame is planned for once its detector ran, as the
    /// daemon estimates it (deeper models from their parents' recent share).
    scene: SceneEstimator,
    /// Places released requests, with late binding (the daemon's code).
    placer: Placer,
    /// When a `Retry` is already scheduled (0: none pending).
    next_retry: f64,
    /// The last frame bound computed: (scene, residency, bound ms).
    last_bound: Option<(Vec<u32>, Vec<bool>, f64)>,
    /// Frames admitted and not yet answered.
    in_flight: usize,
    /// The frame waiting for a place in the pipeline, if any
    /// ([`FrameAdmission::InFlight`]).
    waiting: Option<usize>,
    /// The global step being computed, applied at its `StepApplies` event.
    away_step: Option<StartedStep>,
}

/// Runs `scheduler` over `trace` on `system`.
pub fn simulate(
    system: &System,
    scheduler: &mut dyn Scheduler,
    trace: &Trace,
    cfg: &SimConfig,
) -> Result<SimReport, SimError> {
    run(system, scheduler, trace, cfg, None)
}

/// Runs `scheduler` over `trace` from a cluster already in use at
/// `start_ms` (its residency and queued work), the first frame arriving at
/// `start_ms`: a look-ahead from the present state, as a global step
/// evaluates a choice. The scheduler's initial plan is not asked for.
pub fn simulate_from(
    system: &System,
    scheduler: &mut dyn Scheduler,
    trace: &Trace,
    cfg: &SimConfig,
    cluster: Cluster,
    start_ms: f64,
) -> Result<SimReport, SimError> {
    run(system, scheduler, trace, cfg, Some((cluster, start_ms)))
}

fn run(
    system: &System,
    scheduler: &mut dyn Scheduler,
    trace: &Trace,
    cfg: &SimConfig,
    start: Option<(Cluster, f64)>,
) -> Result<SimReport, SimError> {
    scheduler.set_admission(cfg.admission);
    let adapted = scheduler.system_override(system);
    let system = adapted.as_ref().unwrap_or(system);
    trace.validate(system)?;
    let positive = |field, value: f64| {
        if value.is_finite() && value > 0.0 {
            Ok(())
        } else {
            Err(SimError::Config {
                field,
                value,
                reason: "must be a positive number",
            })
        }
    };
    positive("fps", cfg.fps)?;
    if !(cfg.epoch_ms.is_finite() && cfg.epoch_ms >= 0.0) {
        return Err(SimError::Config {
            field: "epoch_ms",
            value: cfg.epoch_ms,
            reason: "must be >= 0",
        });
    }
    for (field, value) in [
        ("drop_step_gap_ms", cfg.drop_step_gap_ms),
        ("crop_ms", cfg.crop_ms),
        ("frame_prep_ms", cfg.frame_prep_ms),
        ("batch_overhead_ms", cfg.batch_overhead_ms),
        ("step_cost_ms", cfg.step_cost_ms),
    ] {
        if !(value.is_finite() && value >= 0.0) {
            return Err(SimError::Config {
                field,
                value,
                reason: "must be >= 0",
            });
        }
    }
    if let Some(h) = cfg.dispatch_ahead_ms {
        if !(h.is_finite() && h >= 0.0) {
            return Err(SimError::Config {
                field: "dispatch_ahead_ms",
                value: h,
                reason: "must be >= 0",
            });
        }
    }
    if cfg.admission == FrameAdmission::InFlight(0) {
        return Err(SimError::Config {
            field: "max_in_flight (FrameAdmission::InFlight)",
            value: 0.0,
            reason: "must be at least 1",
        });
    }
    if cfg.root_items == 0 {
        return Err(SimError::Config {
            field: "root_items",
            value: 0.0,
            reason: "must be at least 1",
        });
    }
    for t in &cfg.throttles {
        t.validate(system)?;
    }
    if cfg.crop_threads == 0 {
        return Err(SimError::Config {
            field: "crop_threads",
            value: 0.0,
            reason: "must be at least 1",
        });
    }
    let wait = match scheduler.batching() {
        Batching::SyncTimer { wait_ms } => wait_ms,
        _ => 0.0,
    };
    let (cluster, t0) = match start {
        Some(start) => start,
        None => {
            let mut cluster = Cluster::new(system);
            let initial = scheduler.initial_plan(system);
            cluster.preload(system, &initial);
            (cluster, 0.0)
        }
    };
    let n_frames = trace.frames();
    let mut sim = Sim {
        system,
        view: system.clone(),
        stepper: Stepper::new(
            system,
            cfg.epoch_ms,
            t0,
            full_scene(system, &trace.segments[0].scene),
            cfg.adapt.as_ref(),
        )
        .with_drop_steps(cfg.drop_step_gap_ms),
        admission: cfg
            .deadline_admission
            .map(|d| crate::admission::Admission::new(d.tail_z)),
        end_of_camera_ms: t0 + n_frames as f64 * 1000.0 / cfg.fps,
        cfg,
        cluster,
        batcher: SyncBatcher::new(wait),
        events: BinaryHeap::with_capacity(1024),
        seq: 0,
        frames: (0..n_frames).map(|_| None).collect(),
        report: SimReport {
            scheduler: scheduler.name(),
            frames: Vec::with_capacity(n_frames),
            busy_ms: vec![0.0; system.num_processors()],
            loads: 0,
            load_ms: 0.0,
            evictions: 0,
            decisions: 0,
            served: vec![0; system.num_models()],
            flushes: [0; 3],
            epochs: 0,
            epoch_loads: 0,
            duration_ms: 0.0,
            triggered_epochs: 0,
            drop_epochs: 0,
            admission_drops: 0,
            adapt: None,
        },
        sched: scheduler,
        scene: SceneEstimator::new(system),
        placer: Placer::new(cfg.dispatch_ahead_ms),
        next_retry: 0.0,
        last_bound: None,
        in_flight: 0,
        waiting: None,
        away_step: None,
    };
    let period = 1000.0 / cfg.fps;
    let mut f = 0;
    for seg in &trace.segments {
        let scene = frame_scene(system, &seg.scene, cfg.root_items);
        for _ in 0..seg.frames {
            let arrival = t0 + f as f64 * period;
            sim.report.frames.push(FrameOutcome {
                arrival_ms: arrival,
                delay_ms: None,
                loads: 0,
                busy_ms: vec![0.0; system.num_processors()],
                rem_at_arrival_ms: Vec::new(),
                bound_ms: f64::NAN,
            });
            sim.frames[f] = Some(FrameState {
                arrival,
                to_place: scene.clone(),
                arrived: vec![0; scene.len()],
                latest: vec![arrival; scene.len()],
                models_left: scene.iter().filter(|&&r| r > 0).count(),
                roots_left: system.roots().filter(|i| scene[i.0] > 0).count(),
                objects_started: false,
                scene: scene.clone(),
                finish: arrival,
            });
            f += 1;
        }
    }
    // The camera's frames come in order: each arrival schedules the next
    // (a heap of the events in flight, not of the whole trace). Frame f's
    // event keeps sequence number f + 1, the order it would have had pushed
    // up front, so ties with other events break as they always did.
    sim.seq = n_frames as u64;
    sim.push_arrival(0);
    sim.push_epoch();
    while let Some(ev) = sim.events.pop() {
        match ev.kind {
            Kind::FrameArrives(f) => {
                sim.push_arrival(f + 1);
                sim.frame_arrives(ev.t, f)?
            }
            Kind::FramePrepared(f) => sim.frame_prepared(ev.t, f)?,
            Kind::Ready { frame, model } => sim.ready(ev.t, frame, model)?,
            Kind::ModelDone { frame, model } => sim.model_done(ev.t, frame, model)?,
            Kind::Retry => {
                if ev.t >= sim.next_retry {
                    sim.next_retry = 0.0;
                }
                sim.release_held(ev.t)?;
            }
            Kind::Timer => {
                let mut out = Vec::new();
                sim.batcher.expire(ev.t, &mut out);
                for fl in out {
                    sim.flush(ev.t, fl)?;
                }
            }
            Kind::Epoch => sim.step_if_due(ev.t),
            Kind::StepApplies => {
                if let Some(started) = sim.away_step.take() {
                    sim.apply_step(ev.t, started);
                }
                // A trigger raised while it was away steps now.
                sim.step_if_due(ev.t);
            }
            Kind::BatchDone {
                model,
                proc,
                size,
                exec_ms,
                load_ms,
            } => {
                let load = (load_ms > 0.0).then_some(load_ms);
                let view = &mut sim.view;
                if sim
                    .stepper
                    .observe_batch(view, ev.t, model, proc, size, exec_ms, load)
                    .is_some()
                {
                    sim.step_if_due(ev.t);
                }
            }
        }
    }
    sim.report.adapt = sim.stepper.adapt().map(Adapt::counts);
    Ok(sim.report)
}

impl Sim<'_> {
    /// The global step, if the stepper says one is due at `now` and the
    /// camera still runs (none after it stopped), then the timer's next
    /// event. An `Epoch` event the step made stale (a triggered step moved
    /// the timer) finds nothing due. With a step cost the step applies that
    /// much later ([`SimConfig::step_cost_ms`]).
    fn step_if_due(&mut self, now: f64) {
        if now >= self.end_of_camera_ms {
            return;
        }
        let Some(started) =
            self.stepper
                .start_if_due(&mut *self.sched, &mut self.view, &self.cluster, now)
        else {
            return;
        };
        if started.job.is_some() && self.cfg.step_cost_ms > 0.0 {
            self.away_step = Some(started);
            self.push(now + self.cfg.step_cost_ms, Kind::StepApplies);
        } else {
            self.apply_step(now, started);
        }
        self.push_epoch();
    }

    /// Applies a started global step at `now` and counts it.
    fn apply_step(&mut self, now: f64, started: StartedStep) {
        let step = self.stepper.finish(
            &mut *self.sched,
            &self.view,
            &mut self.cluster,
            now,
            started,
        );
        self.report.loads += step.outcome.loads;
        self.report.epoch_loads += step.outcome.loads;
        self.report.epochs += 1;
        match step.cause {
            Cause::Trigger(_) => self.report.triggered_epochs += 1,
            Cause::Drops => self.report.drop_epochs += 1,
            Cause::Timer => {}
        }
    }

    /// An `Epoch` event when the stepper's timer is next due, if before the
    /// camera stops.
    fn push_epoch(&mut self) {
        let due = self.stepper.timer_due_ms();
        if due < self.end_of_camera_ms {
            self.push(due, Kind::Epoch);
        }
    }

    /// Frame f's arrival event, if the trace has a frame f.
    fn push_arrival(&mut self, f: usize) {
        if let Some(o) = self.report.frames.get(f) {
            self.events.push(Event {
                t: o.arrival_ms,
                seq: f as u64 + 1,
                kind: Kind::FrameArrives(f),
            });
        }
    }

    fn push(&mut self, t: f64, kind: Kind) {
        self.seq += 1;
        self.events.push(Event {
            t,
            seq: self.seq,
            kind,
        });
    }

    /// Drops frame f at its arrival, and runs the global step the drop
    /// brings forward, if any ([`Stepper::frame_dropped`]).
    fn drop_frame(&mut self, now: f64, f: usize) {
        self.frames[f] = None;
        self.sched.frame_done(now, None);
        if self.stepper.frame_dropped(now) {
            self.step_if_due(now);
        }
    }

    fn frame_arrives(&mut self, now: f64, f: usize) -> Result<(), SimError> {
        self.stepper.frame_offered();
        self.report.frames[f].rem_at_arrival_ms = self.cluster.rem_all(now);
        let scene = &self.frames[f].as_ref().expect("an arriving frame").scene;
        let fresh = match &self.last_bound {
            Some((s, a, _)) => s != scene || a.as_slice() != self.cluster.residency(),
            None => true,
        };
        if fresh {
            let b = frame_bound(self.system, scene, |i, j| self.cluster.is_resident(i, j));
            self.last_bound = Some((
                scene.clone(),
                self.cluster.residency().to_vec(),
                b.bound_ms(),
            ));
        }
        self.report.frames[f].bound_ms = self.last_bound.as_ref().map_or(f64::NAN, |b| b.2);
        match self.cfg.admission {
            FrameAdmission::Behind(_) => {
                let behind = self.behind_limit_ms().is_some_and(|limit| {
                    detector_behind(&self.view, &self.cluster, &self.placer, now, limit)
                });
                if behind {
                    self.drop_frame(now, f);
                    return Ok(());
                }
                self.enter(now, f)
            }
            FrameAdmission::InFlight(limit) if self.in_flight >= limit => {
                if let Some(older) = self.waiting.replace(f) {
                    self.drop_frame(now, older); // superseded: newest wins
                }
                Ok(())
            }
            FrameAdmission::InFlight(_) | FrameAdmission::QueueAll => self.enter(now, f),
        }
    }

    /// Frame f enters the pipeline at `now` (its arrival, or later when it
    /// waited for a place), unless deadline admission drops it.
    fn enter(&mut self, now: f64, f: usize) -> Result<(), SimError> {
        if let Some(admission) = &mut self.admission {
            let deadline = self.cfg.frame_deadline_ms();
            let scene = &self.frames[f].as_ref().expect("an arriving frame").scene;
            let estimates = self.stepper.adapt().map(Adapt::estimates);
            if !admission.admits(&self.view, estimates, &self.cluster, scene, now, deadline) {
                self.report.admission_drops += 1;
                self.drop_frame(now, f); // it cannot make its deadline
                return Ok(());
            }
        }
        self.in_flight += 1;
        if self.cfg.frame_prep_ms > 0.0 {
            self.push(now + self.cfg.frame_prep_ms, Kind::FramePrepared(f));
            return Ok(());
        }
        self.frame_prepared(now, f)
    }

    fn frame_prepared(&mut self, now: f64, f: usize) -> Result<(), SimError> {
        let roots: Vec<ModelId> = self.system.roots().collect();
        for root in roots {
            self.dispatch(now, f, root, self.cfg.root_items as usize)?;
        }
        Ok(())
    }

    /// Queues `count` requests of model i for frame f and places what the
    /// hosts can take now.
    fn dispatch(&mut self, now: f64, f: usize, i: ModelId, count: usize) -> Result<(), SimError> {
        self.placer.hold(f as u64, i, count);
        self.release_held(now)
    }

    /// A placing round of [`Placer`] (the daemon's scheduler thread runs the
    /// same), then a retry for what stays held.
    fn release_held(&mut self, now: f64) -> Result<(), SimError> {
        self.placer.start_round(&self.view);
        while let Some(next) =
            self.placer
                .next_batch(&self.view, &mut self.cluster, &mut *self.sched, now)
        {
            let (batch, placement) = next.map_err(|e| SimError::NoHost {
                scheduler: self.report.scheduler.clone(),
                model: self.system.models[e.model.0].name.clone(),
            })?;
            self.record_batch(batch, placement);
        }
        let wake = self.placer.wake_ms(&self.view, &self.cluster, now);
        if wake.is_finite() && (self.next_retry <= now || wake < self.next_retry) {
            self.next_retry = wake;
            self.push(wake, Kind::Retry);
        }
        Ok(())
    }

    /// Accounts a batch the placer ran on the cluster, with the host's
    /// hand-over cost.
    fn record_batch(&mut self, b: Batch, mut p: Placement) {
        let (f, i, j, k) = (b.frame as usize, b.model, b.proc, b.size);
        if !self.cfg.throttles.is_empty() || self.stepper.adapt().is_some() {
            // The batch really takes the board's times, throttled, not the
            // times the scheduler expected.
            let factor = Throttle::factor(&self.cfg.throttles, j, p.start_ms);
            let load = if p.load_ms > 0.0 {
                self.system.load_ms(i, j) * factor
            } else {
                0.0
            };
            let exec = self.system.exec_ms(i, j, k) * factor;
            let mark = self.cluster.finish_mark(j, p.finish_ms);
            p.load_ms = load;
            p.finish_ms = p.start_ms + load + exec + self.cfg.batch_overhead_ms;
            self.cluster.correct_finish(mark, p.finish_ms);
            if self.stepper.adapt().is_some() {
                let done = Kind::BatchDone {
                    model: i,
                    proc: j,
                    size: k,
                    exec_ms: exec,
                    load_ms: load,
                };
                self.push(p.finish_ms, done);
            }
        } else if self.cfg.batch_overhead_ms > 0.0 {
            // The processor is held for the overhead too, as a real
            // executor's correction of rem_j would show.
            let mark = self.cluster.finish_mark(j, p.finish_ms);
            p.finish_ms += self.cfg.batch_overhead_ms;
            self.cluster.correct_finish(mark, p.finish_ms);
        }
        self.report.decisions += 1;
        self.report.evictions += p.evictions;
        self.report.served[i.0] += k as u64;
        let busy = p.finish_ms - p.start_ms;
        self.report.busy_ms[j.0] += busy;
        self.report.frames[f].busy_ms[j.0] += busy;
        if p.load_ms > 0.0 {
            self.report.loads += 1;
            self.report.load_ms += p.load_ms;
            self.report.frames[f].loads += 1;
        }
        let fs = self.frames[f]
            .as_mut()
            .expect("dispatching for a live frame");
        fs.to_place[i.0] -= k as u32;
        fs.latest[i.0] = fs.latest[i.0].max(p.finish_ms);
        if fs.to_place[i.0] == 0 {
            let t = fs.latest[i.0];
            self.push(t, Kind::ModelDone { frame: f, model: i });
        }
    }

    /// Model i finished for frame f: its children's requests are released,
    /// and when it was the frame's last the frame is answered and a waiting
    /// frame takes its place.
    fn model_done(&mut self, now: f64, f: usize, i: ModelId) -> Result<(), SimError> {
        let system = self.system;
        let mut step_due = false;
        let fs = self.frames[f]
            .as_mut()
            .expect("a model finished for a live frame");
        fs.finish = fs.finish.max(now);
        fs.models_left -= 1;
        let root = system.models[i.0].parent.is_none();
        if root {
            fs.roots_left -= 1;
            // Planned as the daemon plans it: level-1 counts known, deeper
            // models estimated.
            let scene = self.scene.scene(system, &fs.scene, self.cfg.root_items);
            step_due = self
                .stepper
                .observe_scene(&mut *self.sched, &self.view, &self.cluster, now, scene)
                .is_some();
        }
        if root && self.drops_at_fan_out(now, f) {
            // Its detector's work counts in the run's span.
            self.report.duration_ms = self.report.duration_ms.max(now);
            self.in_flight -= 1;
            self.drop_frame(now, f);
            if step_due {
                self.step_if_due(now);
            }
            return Ok(());
        }
        let fs = self.frames[f].as_mut().expect("checked live above");
        // Release the children's requests, crops prepared in parallel,
        // interleaving the children round-robin.
        let children = &system.models[i.0].children;
        let mut left: Vec<u32> = children.iter().map(|c| fs.scene[c.0]).collect();
        let mut n = 0usize;
        let mut releases = Vec::new();
        while left.iter().any(|&r| r > 0) {
            for (c, l) in children.iter().zip(left.iter_mut()) {
                if *l > 0 {
                    *l -= 1;
                    let t = now + self.cfg.crop_ms * (n / self.cfg.crop_threads + 1) as f64;
                    releases.push((t, *c));
                    n += 1;
                    fs.objects_started = true;
                }
            }
        }
        if matches!(self.sched.batching(), Batching::SyncTimer { .. }) {
            for &c in children {
                self.batcher.expect(f as u64, c, fs.scene[c.0]);
            }
        }
        let answered = fs.models_left == 0;
        if answered {
            self.scene.learn(system, &fs.scene);
            self.report.frames[f].delay_ms = Some(fs.finish - fs.arrival);
            self.sched.frame_done(now, Some(fs.finish - fs.arrival));
            // Frames held to a deadline: in the no-drop mode every frame is
            // queued however late, as the paper measured, on the timer alone.
            if self.cfg.admission != FrameAdmission::QueueAll {
                let late = fs.finish - fs.arrival > self.cfg.frame_deadline_ms();
                step_due |= self.stepper.frame_answered(now, late);
            }
            self.report.duration_ms = self.report.duration_ms.max(fs.finish);
            self.frames[f] = None;
            self.in_flight -= 1;
        }
        for (t, c) in releases {
            self.push(t, Kind::Ready { frame: f, model: c });
        }
        if step_due {
            // The scene mix changed lastingly: re-plan before the epoch timer.
            self.step_if_due(now);
        }
        match self.waiting.take() {
            Some(next) if answered => self.enter(now, next),
            waiting => {
                self.waiting = waiting;
                Ok(())
            }
        }
    }

    /// Real-time dropping's second stage: whether frame f, its detectors all
    /// done and none of its objects started, finds the pipeline too far
    /// behind for them ([`behind_at_fan_out`]). A frame with no objects is
    /// never dropped here.
    fn drops_at_fan_out(&self, now: f64, f: usize) -> bool {
        let Some(limit) = self.behind_limit_ms() else {
            return false;
        };
        let fs = self.frames[f].as_ref().expect("a live frame");
        let has_objects = self
            .system
            .model_ids()
            .any(|m| self.system.models[m.0].level == 1 && fs.scene[m.0] > 0);
        if fs.roots_left > 0 || fs.objects_started || !has_objects {
            return false;
        }
        behind_at_fan_out(
            &self.view,
            &self.cluster,
            &self.placer,
            now,
            now - fs.arrival,
            limit,
        )
    }

    /// Real-time dropping's limit, ms (one frame period unless set), or
    /// `None` under another admission.
    fn behind_limit_ms(&self) -> Option<f64> {
        match self.cfg.admission {
            FrameAdmission::Behind(limit) => Some(limit.unwrap_or(1000.0 / self.cfg.fps)),
            _ => None,
        }
    }

    fn ready(&mut self, now: f64, f: usize, i: ModelId) -> Result<(), SimError> {
        match self.sched.batching() {
            Batching::PerRequest => self.dispatch(now, f, i, 1),
            Batching::SyncTimer { wait_ms } => {
                let target = self.sched.batch_target(&self.view, &self.cluster, i);
                match self.batcher.arrive(now, f as u64, i, target) {
                    Some(fl) => self.flush(now, fl),
                    None => {
                        // One wake-up per group's timer, at its deadline.
                        if self.batcher.timer_started(f as u64, i) {
                            self.push(now + wait_ms, Kind::Timer);
                        }
                        Ok(())
                    }
                }
            }
            Batching::WholeFrame => {
                let system = self.system;
                let fs = self.frames[f].as_mut().expect("a request for a live frame");
                fs.arrived[i.0] += 1;
                let level = system.models[i.0].level;
                let complete = system
                    .model_ids()
                    .filter(|m| system.models[m.0].level == level)
                    .all(|m| fs.arrived[m.0] == fs.scene[m.0]);
                if !complete {
                    return Ok(());
                }
                let mut models: Vec<ModelId> = system
                    .model_ids()
                    .filter(|m| system.models[m.0].level == level && fs.to_place[m.0] > 0)
                    .collect();
                self.sched.frame_order(system, &mut models);
                for m in models {
                    let n = self.frames[f].as_ref().map_or(0, |fs| fs.to_place[m.0]) as usize;
                    self.dispatch(now, f, m, n)?;
                }
                Ok(())
            }
        }
    }

    fn flush(&mut self, now: f64, fl: Flush) -> Result<(), SimError> {
        let slot = match fl.reason {
            FlushReason::Full => 0,
            FlushReason::Complete => 1,
            FlushReason::Timer => 2,
        };
        self.report.flushes[slot] += 1;
        self.dispatch(now, fl.frame as usize, fl.model, fl.count)
    }
}
