//! The scheduler thread: one actor owning the policy state (cluster, batcher,
//! frames in flight). Typed events come in from the server, the preparation
//! pool and the processors' workers; decisions go out as commands to the
//! workers. Every scheduling decision is the policy crate's, the code the
//! simulator runs too: the scheduler object, the batcher, the placer (late
//! binding, `policy::late_binding`), the scene estimate (`policy::scene`),
//! deadline admission (`policy::admission`) and when the global step runs
//! and with what, adaptation included (`policy::stepper`); this thread
//! turns them into commands. Nothing here blocks on inference.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use camdnn_engine::{EngineError, ModelSource, Reply, RunReport, Tensor, WorkerHandle};
use camdnn_policy::batcher::{Flush, FlushReason, SyncBatcher};
use camdnn_policy::frame_period::FramePeriods;
use camdnn_policy::late_binding::Placer;
use camdnn_policy::retry::LoadRetries;
use camdnn_policy::scene::SceneEstimator;
use camdnn_policy::schedulers::Scheduler;
use camdnn_policy::stepper::{Cause, StartedStep, Stepper};
use camdnn_policy::{Cluster, FinishMark, ModelId, ProcId, System};
use camdnn_protocol::{
    BBox as WireBox, ClassRef, Deadline, DropReason, Frame, FrameResult, ObjectResult, Output,
    RejectReason, Timing,
};
use camdnn_vision::{keep_best, BBox, RgbImage, Transform};
use tokio::sync::oneshot;

use super::health::{PipelineHealth, HEARTBEAT};
use super::models::{Decoded, Found, ItemContext, ModelRuntime, Verdict};
use super::prep::{CropSpec, Job, PrepPool, Prepared};
use super::step_thread::StepThread;
use super::work::WorkEstimate;
use super::{FrameProcessor, Outcome};
use crate::server::metrics as names;

/// Messages to the scheduler thread.
pub enum Event {
    /// A frame from the server.
    Submit {
        /// The frame.
        frame: Frame,
        /// When the server had read it.
        received: Instant,
        /// Where its outcome goes.
        reply: oneshot::Sender<Outcome>,
    },
    /// Output of the preparation pool.
    Prepared(Prepared),
    /// A batch finished on a processor.
    BatchDone {
        /// Batch id.
        batch: u64,
        /// What the worker reported.
        result: Result<RunReport, EngineError>,
    },
    /// A model load on a processor finished (`Err`: the engine's message).
    LoadDone {
        /// The model.
        model: ModelId,
        /// The processor.
        proc: ProcId,
        /// What the worker reported.
        result: Result<(), String>,
    },
    /// The server dropped a frame before submitting it (superseded,
    /// overloaded or past its deadline): the pipeline is behind, and the
    /// global step may come early. At most one is queued at a time.
    Dropped,
    /// The step thread computed the global step the scheduler thread
    /// started: it applies now.
    StepComputed(StartedStep),
    /// Stop: answer what is left and end the thread.
    Shutdown,
}

/// The pipeline as the server holds it.
pub struct Pipeline {
    tx: mpsc::Sender<Event>,
    max_in_flight: usize,
    ready: Arc<AtomicBool>,
    in_flight: Arc<AtomicUsize>,
    /// An [`Event::Dropped`] is queued and not yet handled.
    drop_queued: Arc<AtomicBool>,
    work: Arc<WorkEstimate>,
    health: Arc<PipelineHealth>,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl FrameProcessor for Pipeline {
    fn submit(&self, frame: Frame, received: Instant, reply: oneshot::Sender<Outcome>) {
        if let Err(mpsc::SendError(Event::Submit { reply, .. })) = self.tx.send(Event::Submit {
            frame,
            received,
            reply,
        }) {
            let _ = reply.send(Outcome::Dropped(DropReason::ShuttingDown));
        }
    }

    fn max_in_flight(&self) -> usize {
        self.max_in_flight
    }

    fn frame_dropped(&self) {
        // Coalesced: a burst of drops queues one event, not one per frame.
        if !self.drop_queued.swap(true, Ordering::AcqRel) {
            let _ = self.tx.send(Event::Dropped);
        }
    }

    fn is_ready(&self) -> bool {
        self.not_ready_reason().is_none()
    }

    fn not_ready_reason(&self) -> Option<String> {
        if !self.ready.load(Ordering::Acquire) {
            return Some("the pipeline is starting".into());
        }
        self.health.ready(self.thread_ended()).err()
    }

    fn is_alive(&self) -> bool {
        self.health.alive(self.thread_ended()).is_ok()
    }

    fn expected_work_ms(&self, frame: &Frame) -> f64 {
        self.work.frame_ms(frame)
    }
}

impl Pipeline {
    /// True once the scheduler thread has ended (shut down or panicked).
    fn thread_ended(&self) -> bool {
        self.thread
            .lock()
            .map_or(true, |t| t.as_ref().is_none_or(|t| t.is_finished()))
    }

    /// Frames submitted and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Answers every frame still in flight with a drop notice, stops the
    /// workers and waits for the scheduler thread (blocking: not for async code).
    pub fn shutdown(&self) {
        if let Some(t) = self.stop() {
            let _ = t.join();
        }
    }

    /// Tells the scheduler thread to answer what it holds, stop the workers
    /// and end, without waiting; returns its handle to join (once).
    pub fn stop(&self) -> Option<std::thread::JoinHandle<()>> {
        let _ = self.tx.send(Event::Shutdown);
        self.thread.lock().ok().and_then(|mut g| g.take())
    }
}

/// Never blocks: the scheduler thread ends on its own after [`Pipeline::stop`].
impl Drop for Pipeline {
    fn drop(&mut self) {
        drop(self.stop());
    }
}

/// Everything the scheduler thread starts with.
pub struct Parts {
    /// The scheduler's view of the board.
    pub system: System,
    /// Per model: pre/post-processing.
    pub models: Vec<ModelRuntime>,
    /// Per model: how the engines load it.
    pub sources: Vec<ModelSource>,
    /// Per processor: its worker.
    pub workers: Vec<WorkerHandle>,
    /// Residency after start-up (already loaded and warmed up).
    pub cluster: Cluster,
    /// The policy crate's scheduler that places every batch and runs the
    /// global step (the same object the simulator drives).
    pub scheduler: Box<dyn Scheduler + Send>,
    /// WaitTime, ms.
    pub wait_ms: f64,
    /// Global step interval, ms (0: no timer, adaptation's triggers and drops alone;
    /// `policy::stepper`).
    pub epoch_ms: f64,
    /// A dropped frame (its deadline passed here, or the server dropped it)
    /// brings the global step forward when the last one ran at least this
    /// long ago, ms (0: off).
    pub drop_step_gap_ms: f64,
    /// Live estimates and early global steps (`None`: the profile as given,
    /// the epoch timer alone).
    pub adapt: Option<camdnn_policy::adapt::AdaptConfig>,
    /// Where the live estimates are written as a profile when the pipeline stops.
    pub adapt_profile_out: Option<std::path::PathBuf>,
    /// Frames processed at once.
    pub max_in_flight: usize,
    /// Threads of the preparation pool.
    pub prep_threads: usize,
    /// Late binding: hold batches whose host has more queued work than this, ms.
    pub dispatch_ahead_ms: Option<f64>,
    /// Deadline admission's z (`None`: off).
    pub deadline_admission: Option<f64>,
    /// Drop a frame submitted while the pipeline is this far behind (`None`: off).
    pub drop_behind: Option<DropBehind>,
    /// Most objects per frame (upstream boxes or detector objects), highest scores kept.
    pub max_objects: usize,
}

/// Real-time dropping's limit (`policy::admission::detector_behind` at
/// submission, `behind_at_fan_out` once the detector ran).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DropBehind {
    /// A fixed limit, ms (`pipeline.drop_behind_ms`).
    Ms(f64),
    /// This many of the frame's own stream period (`pipeline.drop_behind_periods`).
    Periods(f64),
}

/// Starts the scheduler thread and returns the pipeline handle.
pub fn start(parts: Parts) -> Pipeline {
    // Unbounded, bounded by what feeds it: the server admits at most
    // `max_in_flight` frames, and each admitted frame brings a bounded number
    // of events (one Submit, its preparation results, one BatchDone per batch
    // of its requests and a LoadDone per load the scheduler starts); a
    // bounded channel would let a worker thread block on the scheduler.
    let (tx, rx) = mpsc::channel();
    let ready = Arc::new(AtomicBool::new(true));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let drop_queued = Arc::new(AtomicBool::new(false));
    let inputs = Arc::new(parts.models.iter().map(|m| m.input.clone()).collect());
    let prep = PrepPool::start(parts.prep_threads, inputs, tx.clone());
    let nm_np = parts.system.num_models() * parts.system.num_processors();
    let loaded = parts.cluster.residency().to_vec();
    debug_assert_eq!(loaded.len(), nm_np);
    let max_in_flight = parts.max_in_flight;
    let upstream: Vec<bool> = parts
        .models
        .iter()
        .map(|m| m.decoder.is_upstream())
        .collect();
    let work = Arc::new(WorkEstimate::new(&parts.system, &upstream));
    let health = Arc::new(PipelineHealth::new());
    let mut actor = Actor {
        health: Arc::clone(&health),
        retries: LoadRetries::default(),
        dead: vec![false; parts.workers.len()],
        work: Arc::clone(&work),
        start: Instant::now(),
        batcher: SyncBatcher::new(parts.wait_ms),
        // The actor's clock starts now (`start` above): at 0 ms.
        stepper: Stepper::new(
            &parts.system,
            parts.epoch_ms,
            0.0,
            vec![0; parts.system.num_models()],
            parts.adapt.as_ref(),
        )
        .with_drop_steps(parts.drop_step_gap_ms),
        scene: SceneEstimator::new(&parts.system),
        adapt_profile_out: parts.adapt_profile_out,
        system: parts.system,
        models: parts.models,
        sources: parts.sources,
        last_finish: vec![None; parts.workers.len()],
        workers: parts.workers,
        cluster: parts.cluster,
        scheduler: parts.scheduler,
        loaded,
        frames: HashMap::new(),
        queues: HashMap::new(),
        placer: Placer::new(parts.dispatch_ahead_ms),
        deadline_admission: parts
            .deadline_admission
            .map(camdnn_policy::admission::Admission::new),
        drop_behind: parts.drop_behind,
        frame_periods: FramePeriods::new(),
        max_objects: parts.max_objects,
        batches: HashMap::new(),
        next_frame: 0,
        next_batch: 0,
        tx: tx.clone(),
        prep,
        step_thread: StepThread::start(tx.clone()),
        in_flight: Arc::clone(&in_flight),
        drop_queued: Arc::clone(&drop_queued),
    };
    let thread = std::thread::Builder::new()
        .name("camdnn-scheduler".into())
        .spawn(move || actor.run(rx))
        .expect("spawning the scheduler thread");
    Pipeline {
        tx,
        max_in_flight,
        ready,
        in_flight,
        drop_queued,
        work,
        health,
        thread: std::sync::Mutex::new(Some(thread)),
    }
}

struct Item {
    frame: u64,
    object: usize,
    tensor: Tensor,
}

struct BatchMeta {
    model: ModelId,
    proc: ProcId,
    items: Vec<(u64, usize)>,
    /// Its expected finish, for correcting rem_j when it completes.
    finish: FinishMark,
    dispatched: Instant,
}

struct ObjectState {
    bbox: BBox,
    /// The class as the result names it (the client's id when no label names it).
    class: ClassRef,
    score: f32,
    outputs: Vec<Output>,
    /// A model's verdict removed it (e.g. R-Net found no face): left out of the result.
    rejected: bool,
}

struct FrameState {
    stream_id: u32,
    seq: u64,
    received: Instant,
    deadline: Option<Instant>,
    /// Inherited by every batch the frame's requests ride in.
    priority: u8,
    reply: oneshot::Sender<Outcome>,
    image: Option<Arc<RgbImage>>,
    /// Per detector item (a frame, or a canvas of pyramid scales): its regions' network
    /// pixels to frame pixels.
    det_transforms: Vec<Vec<Transform>>,
    /// Detector items not decoded yet.
    det_left: usize,
    /// Objects of the detector items decoded so far (merged when the last one is).
    det_found: Vec<Found>,
    objects: Vec<ObjectState>,
    pending: usize,
    /// When the frame's first batch was dispatched (its queueing ends).
    first_start: Option<Instant>,
    /// Wall span of the detector: its first item's start and its last item's finish (the
    /// items of a pyramid may run side by side on several processors).
    detect_started: Option<Instant>,
    detect_done: Option<Instant>,
    /// Requests made for each model so far (index = `ModelId`).
    requests: Vec<u32>,
    /// Objects over `max_objects`, left out before any crop was cut.
    objects_dropped: u32,
    /// Real-time dropping's limit for this frame, ms (`None`: off).
    behind_limit_ms: Option<f64>,
}

struct Actor {
    start: Instant,
    /// Per-frame work estimates admission reads; learns from detected frames.
    work: Arc<WorkEstimate>,
    /// Heartbeat and known problems, for readiness.
    health: Arc<PipelineHealth>,
    /// Pairs out of service (failed load, engine panic) and their retries.
    retries: LoadRetries,
    /// Per processor: its worker thread has ended (found at a heartbeat).
    dead: Vec<bool>,
    system: System,
    models: Vec<ModelRuntime>,
    sources: Vec<ModelSource>,
    workers: Vec<WorkerHandle>,
    /// When each processor's last batch finished (worker clock).
    last_finish: Vec<Option<Instant>>,
    cluster: Cluster,
    batcher: SyncBatcher,
    scheduler: Box<dyn Scheduler + Send>,
    loaded: Vec<bool>,
    frames: HashMap<u64, FrameState>,
    queues: HashMap<(u64, ModelId), VecDeque<Item>>,
    /// Requests the batcher released, waiting for a host (late binding at
    /// `dispatch_ahead_ms`), and the placing of them.
    placer: Placer,
    /// The per-frame object cap.
    max_objects: usize,
    batches: HashMap<u64, BatchMeta>,
    next_frame: u64,
    next_batch: u64,
    /// When the global step runs and with what (the epoch timer, frames
    /// offered, the latest scene), and adaptation with its triggers.
    stepper: Stepper,
    /// Estimates the requests of models whose parents have not run yet.
    scene: SceneEstimator,
    adapt_profile_out: Option<std::path::PathBuf>,
    /// Deadline admission, when on.
    deadline_admission: Option<camdnn_policy::admission::Admission>,
    /// Real-time dropping's limit, when on.
    drop_behind: Option<DropBehind>,
    /// Each stream's frame period, for `DropBehind::Periods`.
    frame_periods: FramePeriods,
    tx: mpsc::Sender<Event>,
    prep: PrepPool,
    /// Computes the global steps this thread starts.
    step_thread: StepThread,
    in_flight: Arc<AtomicUsize>,
    /// Shared with [`Pipeline`]: an [`Event::Dropped`] is queued.
    drop_queued: Arc<AtomicBool>,
}

impl Actor {
    fn now_ms(&self) -> f64 {
        self.start.elapsed().as_secs_f64() * 1e3
    }

    /// A frame was dropped (here or at the server): the pipeline fell
    /// behind, and the global step may come early (the loop runs it at its
    /// end).
    fn frame_dropped(&mut self) {
        let now = self.now_ms();
        self.stepper.frame_dropped(now);
    }

    fn run(&mut self, rx: mpsc::Receiver<Event>) {
        loop {
            self.health.beat();
            let now = self.now_ms();
            let wake = self
                .batcher
                .next_deadline()
                .unwrap_or(f64::INFINITY)
                .min(self.stepper.due_ms())
                .min(self.placer.wake_ms(&self.system, &self.cluster, now))
                .min(self.retries.next_due().unwrap_or(f64::INFINITY));
            let timeout = if wake.is_finite() {
                Duration::from_secs_f64(((wake - now).max(0.0)) / 1e3).min(HEARTBEAT)
            } else {
                HEARTBEAT
            };
            match rx.recv_timeout(timeout) {
                Ok(Event::Shutdown) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Ok(ev) => self.handle(ev),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let now = self.now_ms();
            let mut due = Vec::new();
            self.batcher.expire(now, &mut due);
            for f in due {
                self.flush(f);
            }
            self.global_step(now);
            self.recover(now);
            if !self.placer.is_empty() {
                self.release_held();
            }
        }
        for (_, f) in self.frames.drain() {
            let _ = f.reply.send(Outcome::Dropped(DropReason::ShuttingDown));
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
        }
        for w in &self.workers {
            let _ = w.send(camdnn_engine::Command::Shutdown);
        }
        if let (Some(path), Some(_)) = (&self.adapt_profile_out, self.stepper.adapt()) {
            match std::fs::write(path, self.system.to_spec().to_toml()) {
                Ok(()) => {
                    tracing::info!(path = %path.display(), "live estimates written as a profile")
                }
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "writing the live estimates")
                }
            }
        }
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::Submit {
                frame,
                received,
                reply,
            } => self.submit(frame, received, reply),
            Event::Prepared(p) => self.prepared(p),
            Event::BatchDone { batch, result } => self.batch_done(batch, result),
            Event::LoadDone {
                model,
                proc,
                result,
            } => self.load_done(model, proc, result),
            Event::Dropped => {
                self.drop_queued.store(false, Ordering::Release);
                self.frame_dropped();
            }
            Event::StepComputed(step) => {
                let now = self.now_ms();
                self.apply_step(now, step);
            }
            Event::Shutdown => {}
        }
    }

    fn submit(&mut self, frame: Frame, received: Instant, reply: oneshot::Sender<Outcome>) {
        let id = self.next_frame;
        self.next_frame += 1;
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.stepper.frame_offered();
        metrics::counter!("camdnn_pipeline_frames_total").increment(1);
        let deadline = frame.deadline.map(|d| match d {
            Deadline::RelativeUs(us) => received + Duration::from_micros(us),
            Deadline::AbsoluteUs(us) => {
                let now_us = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_micros() as u64);
                if us <= now_us {
                    received
                } else {
                    Instant::now() + Duration::from_micros(us - now_us)
                }
            }
        });
        let mut state = FrameState {
            stream_id: frame.stream_id,
            seq: frame.seq,
            received,
            deadline,
            priority: frame.priority.unwrap_or(0),
            reply,
            image: None,
            det_transforms: Vec::new(),
            det_left: 0,
            det_found: Vec::new(),
            objects: Vec::new(),
            pending: 1,
            first_start: None,
            detect_started: None,
            detect_done: None,
            requests: vec![0; self.system.num_models()],
            objects_dropped: 0,
            behind_limit_ms: self.behind_limit(&frame, received),
        };
        // A frame that brings its detections skips the first stage: its
        // objects face the second at once.
        let detector_behind = frame.detections.is_none()
            && state.behind_limit_ms.is_some_and(|limit| {
                camdnn_policy::admission::detector_behind(
                    &self.system,
                    &self.cluster,
                    &self.placer,
                    self.now_ms(),
                    limit,
                )
            });
        if detector_behind {
            self.frames.insert(id, state);
            metrics::counter!("camdnn_behind_drops_total").increment(1);
            self.finish(id, Some(Outcome::Dropped(DropReason::Overloaded)));
            self.frame_dropped();
            return;
        }
        let root = self
            .system
            .roots()
            .next()
            .expect("a validated system has a detector");
        match &frame.detections {
            Some(dets) => {
                let scores: Vec<f32> = dets.iter().map(|d| d.score).collect();
                let kept = keep_best(&scores, self.max_objects);
                state.objects_dropped = (dets.len() - kept.len()) as u32;
                let labels = self.models[root.0].decoder.labels();
                let mut crops = Vec::new();
                for (n, d) in kept.into_iter().map(|i| &dets[i]).enumerate() {
                    // A class id is the detector's label index (protocol.md): route by its name.
                    let (name, class) = match &d.class {
                        ClassRef::Name(s) => (Some(s.as_str()), ClassRef::Name(s.clone())),
                        ClassRef::Id(i) => match labels.get(*i as usize) {
                            Some(l) => (Some(l.as_str()), ClassRef::Name(l.clone())),
                            None => (None, ClassRef::Id(*i)),
                        },
                    };
                    let bbox = BBox::new(d.bbox.x0, d.bbox.y0, d.bbox.x1, d.bbox.y1);
                    if let Some(m) = name.and_then(|c| self.system.route(c)) {
                        crops.push(CropSpec {
                            object: n,
                            model: m,
                            bbox,
                            rotate: false,
                        });
                    }
                    state.objects.push(ObjectState {
                        bbox,
                        class,
                        score: d.score,
                        outputs: Vec::new(),
                        rejected: false,
                    });
                }
                self.frames.insert(id, state);
                if !self.passes_behind(id, &crops) || !self.admissible(id, &crops) {
                    return;
                }
                let counts = self.expect_crops(id, &crops);
                self.note_scene(id, &counts);
                self.prep.send(Job::DecodeAndCrop {
                    frame: id,
                    raw: frame,
                    crops,
                });
            }
            None if self.models[root.0].decoder.is_upstream() => {
                self.frames.insert(id, state);
                let name = &self.system.models[root.0].name;
                let msg = format!(
                    "this pipeline's detector {name:?} runs upstream: frames must carry their detections (boxes and classes)"
                );
                self.finish(id, Some(Outcome::Rejected(RejectReason::BadDetection, msg)));
            }
            None => {
                self.frames.insert(id, state);
                self.prep.send(Job::Detect {
                    frame: id,
                    raw: frame,
                    model: root,
                });
            }
        }
    }

    /// Real-time dropping's limit for `frame` (`pipeline.drop_behind_ms` or
    /// `drop_behind_periods`; `None`: off, or its stream's period not known
    /// yet). Every frame's stream period is learnt here.
    fn behind_limit(&mut self, frame: &Frame, received: Instant) -> Option<f64> {
        match self.drop_behind {
            None => None,
            Some(DropBehind::Ms(ms)) => Some(ms),
            Some(DropBehind::Periods(n)) => {
                // The camera's clock when it sends one, else arrival here.
                let t_ms = if frame.capture_ts_us > 0 {
                    frame.capture_ts_us as f64 / 1e3
                } else {
                    received.saturating_duration_since(self.start).as_secs_f64() * 1e3
                };
                self.frame_periods
                    .observe(u64::from(frame.stream_id), frame.seq, t_ms)
                    .map(|p| n * p)
            }
        }
    }

    /// Real-time dropping's second stage, before `frame`'s level-1 `crops`
    /// start (`policy::admission::behind_at_fan_out`, as the simulator
    /// decides it): false when the frame was answered `Overloaded` because
    /// the pipeline is further behind than what its age leaves of the limit.
    /// A frame with no objects always passes.
    fn passes_behind(&mut self, frame: u64, crops: &[CropSpec]) -> bool {
        let Some(f) = self.frames.get(&frame) else {
            return false;
        };
        let Some(limit) = f.behind_limit_ms.filter(|_| !crops.is_empty()) else {
            return true;
        };
        let waited_ms = f.received.elapsed().as_secs_f64() * 1e3;
        let behind = camdnn_policy::admission::behind_at_fan_out(
            &self.system,
            &self.cluster,
            &self.placer,
            self.now_ms(),
            waited_ms,
            limit,
        );
        if behind {
            metrics::counter!("camdnn_behind_drops_total").increment(1);
            self.finish(frame, Some(Outcome::Dropped(DropReason::Overloaded)));
            self.frame_dropped();
        }
        !behind
    }

    /// How many requests of each model `crops` bring (index = `ModelId`).
    fn crop_counts(&self, crops: &[CropSpec]) -> Vec<u32> {
        let mut counts = vec![0u32; self.system.num_models()];
        for c in crops {
            counts[c.model.0] += 1;
        }
        counts
    }

    /// Tells the batcher how many requests of each model `crops` bring and
    /// counts them in the frame; those counts (index = `ModelId`).
    fn expect_crops(&mut self, frame: u64, crops: &[CropSpec]) -> Vec<u32> {
        let counts = self.crop_counts(crops);
        for m in self.system.model_ids() {
            self.batcher.expect(frame, m, counts[m.0]);
            if let Some(f) = self.frames.get_mut(&frame) {
                f.requests[m.0] += counts[m.0];
            }
        }
        counts
    }

    /// Deadline admission of a frame about to start its level-1 `crops`
    /// (`policy::admission`): false when it was answered `Dropped` because
    /// it cannot be answered by its deadline.
    fn admissible(&mut self, frame: u64, crops: &[CropSpec]) -> bool {
        let deadline = match (
            &self.deadline_admission,
            self.frames.get(&frame).and_then(|f| f.deadline),
        ) {
            (Some(_), Some(d)) => d,
            _ => return true,
        };
        // The detector has run (or runs upstream): only what follows it.
        let scene = self.scene.scene(&self.system, &self.crop_counts(crops), 0);
        let left_ms = deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64()
            * 1e3;
        let now = self.now_ms();
        let estimates = self.stepper.adapt().map(|a| a.estimates());
        let ok = self.deadline_admission.as_mut().is_none_or(|admission| {
            admission.admits(&self.system, estimates, &self.cluster, &scene, now, left_ms)
        });
        if !ok {
            metrics::counter!("camdnn_deadline_admission_drops_total").increment(1);
            self.finish(frame, Some(Outcome::Dropped(DropReason::DeadlinePassed)));
        }
        ok
    }

    /// Records the scene r of a frame whose level-1 requests per model are
    /// `level1` (the detector counts its items, e.g. pyramid canvases; deeper
    /// models are estimated, [`SceneEstimator`]) and tells the scheduler.
    fn note_scene(&mut self, frame: u64, level1: &[u32]) {
        let root_items = self
            .frames
            .get(&frame)
            .map_or(1, |f| f.det_transforms.len().max(1) as u32);
        let scene = self.scene.scene(&self.system, level1, root_items);
        let now = self.now_ms();
        let trigger = self.stepper.observe_scene(
            &mut *self.scheduler,
            &self.system,
            &self.cluster,
            now,
            scene,
        );
        if trigger.is_some() {
            // The step is due now: the scheduler loop runs it.
            metrics::counter!("camdnn_adapt_triggers_total").increment(1);
        }
    }

    fn prepared(&mut self, p: Prepared) {
        match p {
            Prepared::Invalid {
                frame,
                reason,
                message,
            } => {
                self.finish(frame, Some(Outcome::Rejected(reason, message)));
            }
            Prepared::DetectorInput {
                frame,
                image,
                items,
            } => {
                let Some(f) = self.frames.get_mut(&frame) else {
                    return;
                };
                f.image = Some(image);
                let n = items.len();
                if n == 0 {
                    // Too small for any pyramid scale: nothing to detect.
                    f.pending -= 1;
                    self.maybe_complete(frame);
                    return;
                }
                // The preparation's pending unit becomes the detector items'.
                f.pending += n - 1;
                f.det_left = n;
                let root = self.system.roots().next().expect("a detector");
                let queue = self.queues.entry((frame, root)).or_default();
                let count = items.len();
                for (object, (tensor, transform)) in items.into_iter().enumerate() {
                    f.det_transforms.push(transform);
                    // For detector items, `object` is the item (pyramid canvas) index.
                    queue.push_back(Item {
                        frame,
                        object,
                        tensor,
                    });
                }
                self.dispatch(frame, root, count);
            }
            Prepared::Crops {
                frame,
                image,
                items,
            } => {
                let Some(f) = self.frames.get_mut(&frame) else {
                    return;
                };
                f.image.get_or_insert(image);
                f.pending -= 1;
                let now = self.now_ms();
                for (spec, tensor) in items {
                    match tensor {
                        Ok(tensor) => {
                            if let Some(f) = self.frames.get_mut(&frame) {
                                f.pending += 1;
                            }
                            self.queues
                                .entry((frame, spec.model))
                                .or_default()
                                .push_back(Item {
                                    frame,
                                    object: spec.object,
                                    tensor,
                                });
                            let target = self.scheduler.batch_target(
                                &self.system,
                                &self.cluster,
                                spec.model,
                            );
                            if let Some(fl) = self.batcher.arrive(now, frame, spec.model, target) {
                                self.flush(fl);
                            }
                        }
                        Err(e) => {
                            tracing::debug!(frame, object = spec.object, error = %e, "crop failed; object left unclassified");
                            metrics::counter!("camdnn_crop_failures_total").increment(1);
                            // The batcher still counts this request: release what waits.
                            if let Some(fl) = self.batcher.arrive(now, frame, spec.model, 0) {
                                self.flush(fl);
                            }
                        }
                    }
                }
                self.maybe_complete(frame);
            }
        }
    }

    fn flush(&mut self, fl: Flush) {
        let reason = match fl.reason {
            FlushReason::Full => "full",
            FlushReason::Complete => "complete",
            FlushReason::Timer => "timer",
        };
        metrics::counter!("camdnn_batch_flushes_total", "reason" => reason).increment(1);
        self.dispatch(fl.frame, fl.model, fl.count);
    }

    /// Queues `count` released requests of (frame, model) for placement
    /// behind older held ones, then places what the hosts can take now. A
    /// request the batcher counted whose crop failed has no item: only
    /// items queued and not yet held are held.
    fn dispatch(&mut self, frame: u64, model: ModelId, count: usize) {
        let queued = self.queues.get(&(frame, model)).map_or(0, VecDeque::len);
        let unheld = queued.saturating_sub(self.placer.held_count(frame, model));
        self.placer.hold(frame, model, count.min(unheld));
        self.release_held();
    }

    /// A placing round of the policy's [`Placer`] (oldest frame first, batch
    /// by batch, late binding as configured): every batch it places becomes
    /// a `Run` command. Frames whose deadline passed while held are
    /// answered `Dropped` first.
    fn release_held(&mut self) {
        let now_i = Instant::now();
        let expired: Vec<u64> = self
            .placer
            .held_frames()
            .filter(|f| {
                self.frames
                    .get(f)
                    .is_some_and(|s| s.deadline.is_some_and(|d| now_i > d))
            })
            .collect();
        for frame in expired {
            self.finish(frame, Some(Outcome::Dropped(DropReason::DeadlinePassed)));
        }
        self.placer.start_round(&self.system);
        loop {
            let now = self.now_ms();
            let t0 = Instant::now();
            let Some(next) = self.placer.next_batch(
                &self.system,
                &mut self.cluster,
                self.scheduler.as_mut(),
                now,
            ) else {
                break;
            };
            let (batch, placement) = match next {
                Ok(placed) => placed,
                Err(e) => {
                    tracing::error!(model = %self.system.models[e.model.0].name, "no processor can host the model");
                    self.finish(
                        e.frame,
                        Some(Outcome::Dropped(DropReason::ProcessingFailed)),
                    );
                    continue;
                }
            };
            metrics::histogram!("camdnn_dispatch_decision_seconds")
                .record(t0.elapsed().as_secs_f64());
            self.sync_residency(batch.proc);
            let Some(queue) = self.queues.get_mut(&(batch.frame, batch.model)) else {
                continue;
            };
            let items: Vec<Item> = queue.drain(..batch.size.min(queue.len())).collect();
            if queue.is_empty() {
                self.queues.remove(&(batch.frame, batch.model));
            }
            self.send_batch(batch.model, batch.proc, items, placement.finish_ms);
        }
    }

    fn send_batch(&mut self, model: ModelId, proc: ProcId, items: Vec<Item>, expected_finish: f64) {
        let id = self.next_batch;
        self.next_batch += 1;
        let keys: Vec<(u64, usize)> = items.iter().map(|i| (i.frame, i.object)).collect();
        let tensors: Vec<Tensor> = items.into_iter().map(|i| i.tensor).collect();
        let now = Instant::now();
        let mut priority = 0;
        for (f, _) in &keys {
            if let Some(fs) = self.frames.get_mut(f) {
                fs.first_start.get_or_insert(now);
                priority = priority.max(fs.priority);
            }
        }
        let name = self.system.models[model.0].name.clone();
        let pname = self.system.processors[proc.0].name.clone();
        metrics::histogram!("camdnn_batch_size", "model" => name.clone(), "processor" => pname)
            .record(keys.len() as f64);
        let batch = match Tensor::into_batch(tensors) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(model = %name, error = %e, "cannot form a batch");
                for (f, _) in keys {
                    self.finish(f, Some(Outcome::Dropped(DropReason::ProcessingFailed)));
                }
                return;
            }
        };
        let tx = self.tx.clone();
        let reply = Reply::new(move |result| {
            let _ = tx.send(Event::BatchDone { batch: id, result });
        });
        self.batches.insert(
            id,
            BatchMeta {
                model,
                proc,
                items: keys,
                finish: self.cluster.finish_mark(proc, expected_finish),
                dispatched: now,
            },
        );
        if let Err(e) = self.workers[proc.0].run_with_priority(name, vec![batch], priority, reply) {
            tracing::error!(error = %e, "worker is gone");
            let _ = self.tx.send(Event::BatchDone {
                batch: id,
                result: Err(e),
            });
        }
    }

    /// Makes the workers' resident models follow the cluster's residency on `j`.
    fn sync_residency(&mut self, j: ProcId) {
        let np = self.system.num_processors();
        for i in self.system.model_ids() {
            if self.models[i.0].decoder.is_upstream() {
                continue; // never loaded: the scheduler's residency is all it has
            }
            let want = self.cluster.is_resident(i, j);
            let idx = i.0 * np + j.0;
            if want == self.loaded[idx] {
                continue;
            }
            self.loaded[idx] = want;
            let worker = &self.workers[j.0];
            let model = self.system.models[i.0].name.clone();
            let proc = self.system.processors[j.0].name.clone();
            if want {
                metrics::counter!("camdnn_model_loads_total", "model" => model.clone(), "processor" => proc.clone()).increment(1);
                let (m2, p2) = (model.clone(), proc.clone());
                let tx = self.tx.clone();
                let reply = Reply::new(move |r: Result<camdnn_engine::LoadReport, EngineError>| {
                    if let Ok(rep) = &r {
                        metrics::histogram!("camdnn_model_load_seconds", "model" => m2, "processor" => p2)
                            .record(rep.finished.duration_since(rep.started).as_secs_f64());
                    }
                    let result = r.map(|_| ()).map_err(|e| e.to_string());
                    let _ = tx.send(Event::LoadDone {
                        model: i,
                        proc: j,
                        result,
                    });
                });
                if let Err(e) = worker.load(self.sources[i.0].clone(), reply) {
                    let _ = self.tx.send(Event::LoadDone {
                        model: i,
                        proc: j,
                        result: Err(e.to_string()),
                    });
                }
            } else {
                let _ = worker.unload(model, Reply::new(|_| {}));
            }
            metrics::gauge!("camdnn_resident_models", "processor" => proc)
                .set(self.cluster.resident_count(j) as f64);
        }
    }

    /// A load finished: a failure takes the pair out of service until its
    /// backed-off retry (`policy::retry`).
    fn load_done(&mut self, i: ModelId, j: ProcId, result: Result<(), String>) {
        let (model, proc) = (
            self.system.models[i.0].name.clone(),
            self.system.processors[j.0].name.clone(),
        );
        match result {
            Ok(()) => {
                self.retries.succeeded(i, j);
                metrics::gauge!(names::MODEL_UNAVAILABLE, "model" => model, "processor" => proc)
                    .set(0.0);
            }
            Err(e) => {
                let now = self.now_ms();
                self.loaded[i.0 * self.system.num_processors() + j.0] = false;
                let o = self
                    .retries
                    .failed(&self.system, &mut self.cluster, i, j, now);
                tracing::error!(model = %model, processor = %proc, error = %e, failures = o.failures, retry_in_ms = o.retry_at_ms - now, "model load failed; retrying later");
                metrics::counter!(names::MODEL_LOAD_FAILURES, "model" => model.clone(), "processor" => proc.clone()).increment(1);
                metrics::gauge!(names::MODEL_UNAVAILABLE, "model" => model, "processor" => proc)
                    .set(1.0);
            }
        }
        self.publish_health();
    }

    /// A batch failed with `e`: when the worker no longer holds the model
    /// (an engine panic restarted it empty, or it says NotLoaded), the
    /// scheduler stops believing it resident and the loads start again.
    fn model_lost(&mut self, i: ModelId, j: ProcId, e: &EngineError) {
        let np = self.system.num_processors();
        match e {
            EngineError::Panicked {
                restarted: true, ..
            } => {
                let proc = self.system.processors[j.0].name.clone();
                metrics::counter!(names::ENGINE_PANICS, "processor" => proc).increment(1);
                for m in self.system.model_ids() {
                    self.loaded[m.0 * np + j.0] = false;
                }
                // The model that panicked backs off; the others reload now.
                let now = self.now_ms();
                let o = self
                    .retries
                    .failed(&self.system, &mut self.cluster, i, j, now);
                tracing::warn!(processor = %self.system.processors[j.0].name, failures = o.failures, "engine panicked: worker restarted; reloading its models");
                metrics::gauge!(names::MODEL_UNAVAILABLE, "model" => self.system.models[i.0].name.clone(), "processor" => self.system.processors[j.0].name.clone()).set(1.0);
            }
            EngineError::NotLoaded { .. } => self.loaded[i.0 * np + j.0] = false,
            _ => return,
        }
        self.sync_residency(j);
        self.publish_health();
    }

    /// Retries the loads that are due and notices worker threads that ended
    /// (their batches are answered, their pairs leave service for good).
    fn recover(&mut self, now: f64) {
        let mut changed = false;
        let due = self.retries.due(&self.system, &mut self.cluster, now);
        for &(i, j) in &due {
            metrics::gauge!(names::MODEL_UNAVAILABLE, "model" => self.system.models[i.0].name.clone(), "processor" => self.system.processors[j.0].name.clone()).set(0.0);
            self.sync_residency(j);
            changed = true;
        }
        for j in self.system.proc_ids().collect::<Vec<_>>() {
            if self.dead[j.0] || self.workers[j.0].is_alive() {
                continue;
            }
            self.dead[j.0] = true;
            changed = true;
            tracing::error!(processor = %self.system.processors[j.0].name, "worker thread ended; its batches are answered as failed");
            for i in self.system.model_ids().collect::<Vec<_>>() {
                self.cluster.set_unavailable(&self.system, i, j);
            }
            let lost: Vec<u64> = self
                .batches
                .iter()
                .filter(|(_, b)| b.proc == j)
                .map(|(id, _)| *id)
                .collect();
            for id in lost {
                let gone = EngineError::WorkerGone {
                    processor: self.system.processors[j.0].name.clone(),
                };
                self.batch_done(id, Err(gone));
            }
        }
        if changed {
            self.publish_health();
        }
    }

    /// Tells readiness what is wrong now (nothing: ready).
    fn publish_health(&self) {
        let now = self.now_ms();
        let mut problems: Vec<String> = self
            .retries
            .outages()
            .map(|((i, j), o)| {
                format!(
                    "model {} on {}: out of service after {} failure(s), next load in {:.0} ms",
                    self.system.models[i.0].name,
                    self.system.processors[j.0].name,
                    o.failures,
                    (o.retry_at_ms - now).max(0.0)
                )
            })
            .collect();
        for j in self.system.proc_ids() {
            if self.dead[j.0] {
                problems.push(format!(
                    "processor {}: worker thread ended",
                    self.system.processors[j.0].name
                ));
            }
        }
        self.health.set_problems(problems);
    }

    fn batch_done(&mut self, batch: u64, result: Result<RunReport, EngineError>) {
        let Some(meta) = self.batches.remove(&batch) else {
            return;
        };
        let now = self.now_ms();
        // The worker's own clock: the actor may see the report a little later.
        let finished = result.as_ref().map_or(now, |r| {
            r.finished
                .saturating_duration_since(self.start)
                .as_secs_f64()
                * 1e3
        });
        self.cluster.correct_finish(meta.finish, finished);
        let pname = &self.system.processors[meta.proc.0].name;
        metrics::gauge!(crate::server::metrics::PROCESSOR_REMAINING, "processor" => pname.clone())
            .set(self.cluster.rem_ms(meta.proc, now) / 1e3);
        let report = match result {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(model = %self.system.models[meta.model.0].name, processor = %pname, error = %e, "batch failed");
                for (f, _) in meta.items {
                    self.finish(f, Some(Outcome::Dropped(DropReason::ProcessingFailed)));
                }
                self.model_lost(meta.model, meta.proc, &e);
                return;
            }
        };
        metrics::histogram!("camdnn_processor_busy_seconds", "processor" => pname.clone())
            .record(report.exec_time().as_secs_f64());
        metrics::histogram!("camdnn_batch_queue_seconds")
            .record(report.started.duration_since(meta.dispatched).as_secs_f64());
        // Time a batch costs beyond its run: from dispatch (or the worker's
        // previous batch) to its start, and from its end to this thread
        // reading the report (channel hops, waking threads).
        let ready =
            self.last_finish[meta.proc.0].map_or(meta.dispatched, |f| f.max(meta.dispatched));
        let overhead = report.started.saturating_duration_since(ready)
            + Instant::now().saturating_duration_since(report.finished);
        metrics::histogram!("camdnn_batch_overhead_seconds").record(overhead.as_secs_f64());
        self.last_finish[meta.proc.0] = Some(report.finished);
        // How far the profile the scheduler plans with is from this run.
        let planned_ms = self.system.exec_ms(meta.model, meta.proc, meta.items.len());
        if planned_ms.is_finite() && planned_ms > 0.0 {
            metrics::histogram!("camdnn_batch_exec_vs_profile_ratio", "model" => self.system.models[meta.model.0].name.clone(), "processor" => pname.clone())
                .record(report.exec_time().as_secs_f64() * 1e3 / planned_ms);
        }
        self.adapt_to(meta.model, meta.proc, meta.items.len(), &report, now);
        let mut frames_touched = Vec::new();
        let is_root = self.system.models[meta.model.0].parent.is_none();
        for (n, (frame, object)) in meta.items.into_iter().enumerate() {
            let Some(f) = self.frames.get(&frame) else {
                continue; // answered already (deadline, failure)
            };
            let outputs: Result<Vec<Tensor>, EngineError> =
                report.outputs.iter().map(|t| t.slice_batch(n, 1)).collect();
            let (w, h) = f.image.as_ref().map_or((1, 1), |i| (i.width(), i.height()));
            let identity = [Transform::identity(w, h)];
            let ctx = if is_root {
                ItemContext {
                    regions: &f.det_transforms[object],
                    bbox: None,
                }
            } else {
                ItemContext {
                    regions: &identity,
                    bbox: Some(f.objects[object].bbox),
                }
            };
            let decoded = outputs
                .map_err(anyhow::Error::from)
                .and_then(|o| self.models[meta.model.0].decoder.decode(&o, &ctx));
            match decoded {
                Err(e) => {
                    tracing::warn!(frame, model = %self.system.models[meta.model.0].name, error = %format!("{e:#}"), "cannot read outputs");
                    self.finish(frame, Some(Outcome::Dropped(DropReason::ProcessingFailed)));
                    continue;
                }
                Ok(Decoded::Objects(found)) => {
                    let f = self.frames.get_mut(&frame).expect("checked above");
                    f.detect_started = Some(
                        f.detect_started
                            .map_or(report.started, |s| s.min(report.started)),
                    );
                    f.detect_done = Some(
                        f.detect_done
                            .map_or(report.finished, |d| d.max(report.finished)),
                    );
                    f.det_found.extend(found);
                    f.det_left -= 1;
                    if f.det_left > 0 {
                        f.pending -= 1;
                        continue; // more of this frame's detector items to come
                    }
                    let found = self.models[meta.model.0]
                        .decoder
                        .merge(std::mem::take(&mut f.det_found));
                    let scores: Vec<f32> = found.iter().map(|o| o.detection.score).collect();
                    let kept = keep_best(&scores, self.max_objects);
                    f.objects_dropped = (found.len() - kept.len()) as u32;
                    let mut found: Vec<Option<Found>> = found.into_iter().map(Some).collect();
                    let kept = kept.into_iter().filter_map(|i| found[i].take());
                    let mut crops = Vec::new();
                    for (k, o) in kept.enumerate() {
                        let b = o.detection.bbox;
                        if let Some(m) = self.system.route(&o.class) {
                            if self.system.models[m.0].parent == Some(meta.model) {
                                crops.push(CropSpec {
                                    object: k,
                                    model: m,
                                    bbox: b,
                                    rotate: false,
                                });
                            }
                        }
                        f.objects.push(ObjectState {
                            bbox: b,
                            class: ClassRef::Name(o.class),
                            score: o.detection.score,
                            outputs: Vec::new(),
                            rejected: false,
                        });
                    }
                    self.start_crops(frame, crops);
                }
                Ok(Decoded::Output {
                    value,
                    rotate,
                    verdict,
                }) => {
                    let f = self.frames.get_mut(&frame).expect("checked above");
                    let model = &self.system.models[meta.model.0];
                    let obj = &mut f.objects[object];
                    obj.outputs.push(Output {
                        model: model.name.clone(),
                        value,
                        age: 0,
                    });
                    match verdict {
                        Verdict::Keep | Verdict::Part(_) => {}
                        Verdict::Refine { bbox, score } => {
                            obj.bbox = bbox;
                            obj.score = score;
                        }
                        Verdict::Reject => {
                            obj.rejected = true;
                            metrics::counter!("camdnn_objects_rejected_total", "model" => model.name.clone()).increment(1);
                        }
                    }
                    let crops: Vec<CropSpec> = match verdict.child_crop(obj.bbox) {
                        None => Vec::new(),
                        Some(bbox) => model
                            .children
                            .iter()
                            .map(|&c| CropSpec {
                                object,
                                model: c,
                                bbox,
                                rotate,
                            })
                            .collect(),
                    };
                    // Each answer's children start at once, not when the model's last request
                    // of the frame is answered: the levels overlap (docs/architecture.md).
                    self.start_crops(frame, crops);
                }
            }
            if let Some(f) = self.frames.get_mut(&frame) {
                f.pending -= 1;
            }
            frames_touched.push(frame);
        }
        for f in frames_touched {
            self.maybe_complete(f);
        }
    }

    fn start_crops(&mut self, frame: u64, crops: Vec<CropSpec>) {
        if crops.is_empty() {
            return;
        }
        let Some(f) = self.frames.get_mut(&frame) else {
            return;
        };
        let Some(image) = f.image.clone() else { return };
        if self.system.models[crops[0].model.0].level == 1
            && (!self.passes_behind(frame, &crops) || !self.admissible(frame, &crops))
        {
            return;
        }
        let Some(f) = self.frames.get_mut(&frame) else {
            return;
        };
        f.pending += 1;
        let counts = self.expect_crops(frame, &crops);
        if self.system.models[crops[0].model.0].level == 1 {
            self.note_scene(frame, &counts);
        }
        self.prep.send(Job::Crop {
            frame,
            image,
            crops,
        });
    }

    fn maybe_complete(&mut self, frame: u64) {
        if self.frames.get(&frame).is_some_and(|f| f.pending == 0) {
            self.finish(frame, None);
        }
    }

    /// Frame-wide suppression (MTCNN's last step) over the objects each such model
    /// refined; the losers are marked rejected.
    fn suppress(&self, objects: &mut [ObjectState]) {
        for (i, m) in self.models.iter().enumerate() {
            let Some(overlap) = m.decoder.final_suppression() else {
                continue;
            };
            let name = &self.system.models[i].name;
            let candidates: Vec<(usize, BBox, f32)> = objects
                .iter()
                .enumerate()
                .filter(|(_, o)| !o.rejected && o.outputs.iter().any(|x| &x.model == name))
                .map(|(n, o)| (n, o.bbox, o.score))
                .collect();
            for n in camdnn_vision::mtcnn::nested_losers(&candidates, overlap) {
                objects[n].rejected = true;
            }
        }
    }

    /// Answers a frame: with `outcome`, or with its result when `None`.
    fn finish(&mut self, frame: u64, outcome: Option<Outcome>) {
        let Some(mut f) = self.frames.remove(&frame) else {
            return;
        };
        // What the scheduler's last choice delivered (a drop or a failure
        // is not delivered), as the simulator tells it.
        let delay_ms = outcome
            .is_none()
            .then(|| f.received.elapsed().as_secs_f64() * 1e3);
        let now = self.now_ms();
        self.scheduler.frame_done(now, delay_ms);
        if matches!(outcome, Some(Outcome::Dropped(DropReason::DeadlinePassed))) {
            self.frame_dropped();
        }
        if outcome.is_none() {
            // Answered: past its deadline after on-time ones, the pipeline
            // has begun to fall behind (the loop runs the step at its end).
            let late = f.deadline.is_some_and(|d| Instant::now() > d);
            self.stepper.frame_answered(now, late);
        }
        if f.objects_dropped > 0 {
            metrics::counter!(crate::server::metrics::OBJECTS_DROPPED)
                .increment(u64::from(f.objects_dropped));
        }
        if outcome.is_none() {
            self.suppress(&mut f.objects);
            self.scene.learn(&self.system, &f.requests);
            if !f.det_transforms.is_empty() {
                self.work.learn(f.det_transforms.len(), &f.requests);
            }
        }
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.batcher.forget_frame(frame);
        self.placer.forget_frame(frame);
        self.queues.retain(|(fr, _), _| *fr != frame);
        let outcome = outcome.unwrap_or_else(|| {
            let done = Instant::now();
            let total = done.duration_since(f.received);
            let queue = f
                .first_start
                .map_or(Duration::ZERO, |s| s.duration_since(f.received));
            let classify = f.detect_done.map_or(total.saturating_sub(queue), |d| {
                done.saturating_duration_since(d)
            });
            metrics::histogram!("camdnn_pipeline_seconds", "stage" => "total")
                .record(total.as_secs_f64());
            metrics::histogram!("camdnn_pipeline_seconds", "stage" => "classify")
                .record(classify.as_secs_f64());
            Outcome::Done(FrameResult {
                stream_id: f.stream_id,
                seq: f.seq,
                timing: Timing {
                    queue_us: us(queue),
                    detect_us: match (f.detect_started, f.detect_done) {
                        (Some(s), Some(d)) => us(d.saturating_duration_since(s)),
                        _ => 0,
                    },
                    classify_us: us(classify),
                    total_us: us(total),
                },
                objects: f
                    .objects
                    .into_iter()
                    .filter(|o| !o.rejected)
                    .map(|o| ObjectResult {
                        bbox: WireBox {
                            x0: o.bbox.x0,
                            y0: o.bbox.y0,
                            x1: o.bbox.x1,
                            y1: o.bbox.y1,
                        },
                        class: o.class,
                        score: o.score,
                        track_id: 0,
                        box_age: 0,
                        outputs: o.outputs,
                    })
                    .collect(),
                objects_dropped: f.objects_dropped,
            })
        });
        let _ = f.reply.send(outcome);
    }

    /// Feeds a finished batch to the live estimates; a detected speed
    /// change makes the global step due now (the scheduler loop runs it).
    fn adapt_to(&mut self, i: ModelId, j: ProcId, k: usize, report: &RunReport, now: f64) {
        if self.stepper.adapt().is_none() {
            return;
        }
        let exec_ms = report.exec_time().as_secs_f64() * 1e3;
        if self
            .stepper
            .observe_batch(&mut self.system, now, i, j, k, exec_ms, None)
            .is_some()
        {
            metrics::counter!("camdnn_adapt_triggers_total").increment(1);
        }
        metrics::gauge!("camdnn_estimate_exec_seconds", "model" => self.system.models[i.0].name.clone(), "processor" => self.system.processors[j.0].name.clone())
            .set(self.system.exec_ms(i, j, 1) / 1e3);
    }

    /// Starts the global step if the stepper says one is due at `now`
    /// (camdnn: re-plan residency and batching for the latest scene,
    /// adopted only when it pays for its loads) and hands it to the step
    /// thread; frames keep being placed until it comes back
    /// ([`Event::StepComputed`]).
    fn global_step(&mut self, now: f64) {
        let Some(step) =
            self.stepper
                .start_if_due(&mut *self.scheduler, &mut self.system, &self.cluster, now)
        else {
            return;
        };
        for j in &step.reprobed {
            tracing::info!(processor = %self.system.processors[j.0].name, "re-probing a processor estimated slow that ran nothing lately");
        }
        let step = match step.job {
            Some(_) => match self.step_thread.send(step) {
                Ok(()) => return,
                Err(step) => step,
            },
            None => step,
        };
        self.apply_step(now, step);
    }

    /// Applies a global step at `now`, then the workers follow the new
    /// residency. Its time from start to applied is
    /// `camdnn_global_step_seconds`: what the simulator's step cost models.
    fn apply_step(&mut self, now: f64, started: StartedStep) {
        let computed = started.job.is_some();
        let step = self.stepper.finish(
            &mut *self.scheduler,
            &self.system,
            &mut self.cluster,
            now,
            started,
        );
        for j in self.system.proc_ids() {
            self.sync_residency(j);
        }
        metrics::counter!("camdnn_global_step_reallocations_total")
            .increment(u64::from(step.outcome.loads));
        match step.cause {
            Cause::Trigger(t) => {
                tracing::debug!(trigger = ?t, frames = step.frames, "global step brought forward");
            }
            Cause::Drops => {
                metrics::counter!("camdnn_drop_steps_total").increment(1);
                tracing::debug!(
                    frames = step.frames,
                    "global step brought forward by a dropped or late frame"
                );
            }
            Cause::Timer => {}
        }
        if computed {
            let took_ms = self.now_ms() - step.at_ms;
            metrics::histogram!("camdnn_global_step_seconds").record((took_ms / 1e3).max(0.0));
        }
    }
}

fn us(d: Duration) -> u32 {
    d.as_micros().min(u32::MAX as u128) as u32
}
