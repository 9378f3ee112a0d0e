//! The pipeline as the server holds it: the scheduler thread's handle, and
//! what it starts with. The thread's loop waits for the next message or
//! the flow's next wake-up, whichever comes first, and beats the heartbeat
//! readiness reads.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use camdnn_engine::ModelSource;
use camdnn_policy::flow::{Event as FlowEvent, FlowConfig, FrameFlow};
use camdnn_policy::scheduler::Scheduler;
use camdnn_policy::{Cluster, System};
use camdnn_protocol::{DropReason, Frame};
use tokio::sync::oneshot;

use super::actor::Actor;
pub use super::actor::Event;
use super::clock::Clock;
use super::health::{PipelineHealth, HEARTBEAT};
use super::models::ModelRuntime;
use super::prep::PrepPool;
use super::reuse::{Reuse, DIRECT};
use super::stats::{Stats, StatsSnapshot};
use super::step_thread::StepThread;
use super::units::Unit;
use super::work::WorkEstimate;
use super::{FrameProcessor, Outcome};

/// The pipeline as the server holds it.
pub struct Pipeline {
    tx: mpsc::Sender<Event>,
    max_in_flight: usize,
    in_flight: Arc<AtomicUsize>,
    /// Frames stuck on a stalled processor: as many more may enter, up to
    /// `max_in_flight` more.
    stuck: Arc<AtomicUsize>,
    /// An [`Event::Dropped`] is queued and not yet handled.
    drop_queued: Arc<AtomicBool>,
    work: Arc<WorkEstimate>,
    health: Arc<PipelineHealth>,
    stats: Stats,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl FrameProcessor for Pipeline {
    fn submit(
        &self,
        frame: Frame,
        received: Instant,
        deadline: Option<Instant>,
        reply: oneshot::Sender<Outcome>,
    ) {
        self.submit_from(DIRECT, frame, received, deadline, reply);
    }

    fn submit_from(
        &self,
        conn: u64,
        frame: Frame,
        received: Instant,
        deadline: Option<Instant>,
        reply: oneshot::Sender<Outcome>,
    ) {
        let ev = Event::Submit {
            conn,
            frame,
            received,
            deadline,
            reply,
        };
        if let Err(mpsc::SendError(Event::Submit { reply, .. })) = self.tx.send(ev) {
            let _ = reply.send(Outcome::Dropped(DropReason::ShuttingDown));
        }
    }

    fn connection_closed(&self, conn: u64) {
        let _ = self.tx.send(Event::ConnectionClosed(conn));
    }

    fn max_in_flight(&self) -> usize {
        let stuck = self.stuck.load(Ordering::Acquire);
        self.max_in_flight + stuck.min(self.max_in_flight)
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
        self.health
            .ready(self.thread_ended(), self.in_flight())
            .err()
    }

    fn is_alive(&self) -> bool {
        self.liveness().is_ok()
    }

    fn liveness(&self) -> Result<(), String> {
        self.health.alive(self.thread_ended(), self.in_flight())
    }

    fn expected_work_ms(&self, frame: &Frame) -> f64 {
        self.work.frame_ms(frame)
    }
}

impl Pipeline {
    /// What the pipeline did since it started ([`StatsSnapshot::since`] gives what it did
    /// between two snapshots).
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

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
    /// Per processor: where its commands go.
    pub units: Vec<Box<dyn Unit>>,
    /// Residency after start-up (already loaded and warmed up).
    pub cluster: Cluster,
    /// The policy crate's scheduler that places every batch and runs the
    /// global step (the same object the simulator drives).
    pub scheduler: Box<dyn Scheduler + Send>,
    /// The frame flow's knobs (the simulator's are the same).
    pub flow: FlowConfig,
    /// Limits on engine calls and the progress timeout.
    pub stall: super::stall::StallConfig,
    /// The processors' workers, watched for threads stuck in the engine
    /// (none for units that are not workers).
    pub workers: Vec<camdnn_engine::WorkerHandle>,
    /// Where the live estimates are written as a profile when the pipeline stops.
    pub adapt_profile_out: Option<std::path::PathBuf>,
    /// Frames processed at once.
    pub max_in_flight: usize,
    /// Threads of the preparation pool.
    pub prep_threads: usize,
    /// Most objects per frame (upstream boxes or detector objects), highest scores kept.
    pub max_objects: usize,
    /// The thread's clock.
    pub clock: Clock,
    /// `[pipeline.track]` (`None`: no tracking, no reuse).
    pub track: Option<camdnn_vision::track::TrackerConfig>,
    /// Per model (by id): its `reuse` knobs.
    pub reuse: Vec<Option<camdnn_policy::reuse::ReuseConfig>>,
}

/// The actor for `parts`, sending to `tx`, and the pipeline's shared state.
pub(super) fn actor(parts: Parts, tx: mpsc::Sender<Event>) -> anyhow::Result<(Actor, Shared)> {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let stuck = Arc::new(AtomicUsize::new(0));
    let drop_queued = Arc::new(AtomicBool::new(false));
    let inputs = Arc::new(parts.models.iter().map(|m| m.input.clone()).collect());
    let prepared = tx.clone();
    let stats = Stats::default();
    let prep = PrepPool::start(
        parts.prep_threads,
        inputs,
        stats.clone(),
        move |ticket, out| prepared.send(Event::Prepared(ticket, out)).is_ok(),
    );
    let upstream: Vec<bool> = parts
        .models
        .iter()
        .map(|m| m.decoder.is_upstream())
        .collect();
    let work = Arc::new(WorkEstimate::new(&parts.system, &upstream));
    let health = Arc::new(PipelineHealth::new(
        parts.workers,
        parts.stall.progress_timeout(),
    ));
    let np = parts.system.num_processors();
    let names = parts.system.models.iter().map(|m| m.name.clone()).collect();
    let reuse = match parts.track {
        Some(t) => Some(Reuse::new(t, parts.reuse, names)?),
        None => None,
    };
    let now = parts.clock.now_ms();
    let scene = vec![0; parts.system.num_models()];
    let flow = FrameFlow::new(
        parts.system,
        parts.scheduler,
        parts.cluster,
        parts.flow,
        now,
        scene,
    )?;
    let actor = Actor {
        clock: parts.clock,
        flow,
        models: parts.models,
        sources: parts.sources,
        units: parts.units,
        max_objects: parts.max_objects,
        stall: parts.stall,
        frames: BTreeMap::new(),
        batches: HashMap::new(),
        next_frame: 0,
        last_finish: vec![None; np],
        dead: vec![false; np],
        step_started: None,
        work: Arc::clone(&work),
        health: Arc::clone(&health),
        adapt_profile_out: parts.adapt_profile_out,
        tx: tx.clone(),
        prep,
        step_thread: StepThread::start({
            let tx = tx.clone();
            move |ticket, step| tx.send(Event::StepComputed(ticket, step)).is_ok()
        }),
        in_flight: Arc::clone(&in_flight),
        stuck: Arc::clone(&stuck),
        drop_queued: Arc::clone(&drop_queued),
        next_ticket: 0,
        next_in_order: 0,
        parked: BTreeMap::new(),
        reuse,
        stats: stats.clone(),
    };
    let shared = Shared {
        in_flight,
        stuck,
        drop_queued,
        work,
        health,
        stats,
    };
    Ok((actor, shared))
}

/// What the pipeline handle shares with its actor.
pub(super) struct Shared {
    in_flight: Arc<AtomicUsize>,
    stuck: Arc<AtomicUsize>,
    drop_queued: Arc<AtomicBool>,
    work: Arc<WorkEstimate>,
    health: Arc<PipelineHealth>,
    stats: Stats,
}

/// Starts the scheduler thread and returns the pipeline handle.
pub fn start(parts: Parts) -> anyhow::Result<Pipeline> {
    // Unbounded, bounded by what feeds it: the server admits at most
    // `max_in_flight` frames, and each admitted frame brings a bounded number
    // of events (one Submit, its preparation results, one BatchDone per batch
    // of its requests and a LoadDone per load the scheduler starts); a
    // bounded channel would let a worker thread block on the scheduler.
    let (tx, rx) = mpsc::channel();
    let max_in_flight = parts.max_in_flight;
    let (mut actor, shared) = actor(parts, tx.clone())?;
    let Shared {
        in_flight,
        stuck,
        drop_queued,
        work,
        health,
        stats,
    } = shared;
    let thread = std::thread::Builder::new()
        .name("camdnn-scheduler".into())
        .spawn(move || run(&mut actor, rx))
        .expect("spawning the scheduler thread");
    Ok(Pipeline {
        tx,
        max_in_flight,
        in_flight,
        stuck,
        drop_queued,
        work,
        health,
        stats,
        thread: std::sync::Mutex::new(Some(thread)),
    })
}

/// The scheduler thread's loop: the next message, or the flow's wake-up.
fn run(actor: &mut Actor, rx: mpsc::Receiver<Event>) {
    loop {
        actor.health.beat();
        let now = actor.clock.now_ms();
        let wake = actor.flow.next_wake_ms();
        let timeout = if wake.is_finite() {
            Duration::from_secs_f64(((wake - now).max(0.0)) / 1e3).min(HEARTBEAT)
        } else {
            HEARTBEAT
        };
        match rx.recv_timeout(timeout) {
            Ok(ev) => {
                if !actor.handle(ev) {
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let now = actor.clock.now_ms();
                actor.step(now, FlowEvent::Tick);
            }
        }
        let now = actor.clock.now_ms();
        actor.recover(now);
        actor.publish_health();
    }
    actor.shut_down();
}
