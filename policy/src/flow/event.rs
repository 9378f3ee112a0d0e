//! What the frame flow takes in ([`Event`]) and hands out ([`Effect`]).

use crate::stepper::{Cause, StartedStep};
use crate::{ModelId, ProcId};

/// A frame in the flow: the driver's id (the simulator's frame index, the
/// daemon's submission counter).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameId(pub u64);

/// A batch the flow placed, until its [`Event::BatchDone`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BatchId(pub u64);

/// One request: an object of a frame (or a detector item: one per frame,
/// or one per canvas of an image pyramid) for one model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Request {
    /// The model.
    pub model: ModelId,
    /// The object (or detector item) index in its frame.
    pub object: u32,
}

/// A frame entering the pipeline.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameIn {
    /// Its id.
    pub frame: FrameId,
    /// Its stream (for its stream's period under [`crate::flow::Behind::Periods`]).
    pub stream: u64,
    /// Its sequence number in the stream.
    pub seq: u64,
    /// When the camera captured it, ms on the camera's clock, if it says.
    pub capture_ms: Option<f64>,
    /// When it arrived (was received), ms: its delay counts from here.
    pub arrival_ms: f64,
    /// Its deadline, ms, if it has one.
    pub deadline_ms: Option<f64>,
    /// Its priority: each batch of its requests carries it.
    pub priority: u8,
    /// The level-1 requests it brings when its detections come with it
    /// (the detector runs upstream, or a tracker carried its boxes); `None`:
    /// the detector runs here.
    pub upstream: Option<Vec<Request>>,
    /// Its requests were decided by result reuse (a tracked stream): those
    /// answered from their tracks are left out of `upstream`, and a frame
    /// left with none still shows the planners its empty scene.
    pub tracked: bool,
}

/// What a batch delivered.
#[derive(Clone, Debug, PartialEq)]
pub enum BatchOutcome {
    /// It ran. Per item, in the order of its [`Effect::Run`]: the requests
    /// its result releases (a detector item's: the frame's level-1
    /// requests, given with any one of the frame's detector items; a
    /// classifier's: its children's), or `Err` when its output could not be
    /// read (the frame fails).
    Done {
        /// Its execution time, ms (live estimates learn from it).
        exec_ms: f64,
        /// Per item.
        items: Vec<Result<Vec<Request>, ItemFailed>>,
    },
    /// It failed; its frames fail.
    Failed(Lost),
}

/// An item's output could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemFailed;

/// What a failed batch cost its processor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lost {
    /// Nothing: the model is still resident.
    Nothing,
    /// The engine no longer holds the model.
    Model,
    /// The engine restarted empty (a panic): every model on the processor
    /// is gone, and the failing model backs off before its next load.
    Unit,
    /// The run passed its deadline: the processor's worker was replaced and
    /// its models are gone, and the model backs off before its next load.
    Stalled,
}

/// What happens to the flow.
#[derive(Debug)]
pub enum Event {
    /// Time passed (a wake-up the flow asked for, [`crate::flow::FrameFlow::next_wake_ms`]).
    Tick,
    /// A frame enters the pipeline.
    FrameIn(FrameIn),
    /// A frame was dropped before entering (superseded by a newer one,
    /// overloaded, or its deadline passed while it waited): it counts as
    /// offered, and the pipeline is behind.
    DroppedBeforeEntry,
    /// A frame's detector input is ready: its detector requests (none: the
    /// frame is too small for any detector item, nothing to detect).
    RootReady {
        /// The frame.
        frame: FrameId,
        /// Its detector requests.
        requests: Vec<Request>,
    },
    /// A preparation ([`Effect::Prepare`]) finished.
    Prepared {
        /// The frame.
        frame: FrameId,
        /// The requests ready to run.
        ready: Vec<Request>,
        /// The requests whose input could not be made (left unanswered).
        failed: Vec<Request>,
    },
    /// The frame could not be read at all: the driver answers it (rejected).
    Invalid(FrameId),
    /// A batch finished.
    BatchDone {
        /// The batch.
        batch: BatchId,
        /// When its processor finished it, ms.
        finished_ms: f64,
        /// What it delivered.
        outcome: BatchOutcome,
    },
    /// A load finished.
    LoadDone {
        /// The model.
        model: ModelId,
        /// The processor.
        proc: ProcId,
        /// It succeeded; on success, how long it took when known, ms.
        ok: Result<Option<f64>, ()>,
    },
    /// A global step the flow started ([`Effect::StartStep`]) was computed.
    StepComputed(StartedStep),
    /// A processor's worker is gone for good.
    ProcessorGone(ProcId),
}

/// Why the flow drops a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropCause {
    /// Real-time dropping, at its entry: its detector could not start in time.
    BehindAtEntry,
    /// Real-time dropping, at fan-out: the pipeline is too far behind for its objects.
    BehindAtFanOut,
    /// Deadline admission: it could not be answered by its deadline.
    CannotMeetDeadline,
    /// Its deadline passed while it was in the pipeline.
    DeadlinePassed,
    /// A batch of it failed, or an output could not be read.
    Failed,
    /// No processor can host one of its models.
    NoHost,
}

/// What the driver does for the flow.
#[derive(Debug)]
pub enum Effect {
    /// Decode the frame and prepare its detector input; answer with
    /// [`Event::RootReady`] (or [`Event::Invalid`]).
    PrepareRoot(FrameId),
    /// Prepare these requests' inputs (crops); answer with
    /// [`Event::Prepared`].
    Prepare {
        /// The frame.
        frame: FrameId,
        /// The requests.
        requests: Vec<Request>,
    },
    /// Unload the model from the processor (before any load the flow asks
    /// for next on it).
    Unload {
        /// The model.
        model: ModelId,
        /// The processor.
        proc: ProcId,
    },
    /// Load the model on the processor; answer with [`Event::LoadDone`].
    Load {
        /// The model.
        model: ModelId,
        /// The processor.
        proc: ProcId,
    },
    /// Run a batch on a processor after what is queued there; answer with
    /// [`Event::BatchDone`].
    Run(Run),
    /// Compute this global step (its job, on another thread or at once) and
    /// hand it back as [`Event::StepComputed`].
    StartStep(StartedStep),
    /// The frame is done: answer it with its results.
    Answer {
        /// The frame.
        frame: FrameId,
        /// Requests it made per model (index = `ModelId`).
        requests: Vec<u32>,
    },
    /// The frame leaves unanswered: answer it dropped.
    Drop {
        /// The frame.
        frame: FrameId,
        /// Why.
        cause: DropCause,
    },
}

/// A placed batch.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// Its id.
    pub batch: BatchId,
    /// The frame its requests come from.
    pub frame: FrameId,
    /// The model.
    pub model: ModelId,
    /// The processor.
    pub proc: ProcId,
    /// The objects (or detector items), in order.
    pub objects: Vec<u32>,
    /// The frame's priority.
    pub priority: u8,
    /// When the scheduler expects it to start and finish, ms.
    pub start_ms: f64,
    /// Its expected finish, ms.
    pub finish_ms: f64,
    /// The model is loaded first (an [`Effect::Load`] before it).
    pub loads: bool,
    /// Models evicted to make room (the [`Effect::Unload`]s before it).
    pub evictions: u32,
}

/// One decision, for the log that shows two drivers of the flow decided
/// alike ([`crate::flow::FlowConfig::log`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// A batch placed.
    Place {
        /// When, ms.
        at_ms: f64,
        /// The frame.
        frame: FrameId,
        /// The model.
        model: ModelId,
        /// The processor.
        proc: ProcId,
        /// Its size.
        size: usize,
        /// Its expected start, ms.
        start_ms: f64,
    },
    /// A load started.
    Load {
        /// When, ms.
        at_ms: f64,
        /// The model.
        model: ModelId,
        /// The processor.
        proc: ProcId,
    },
    /// A model evicted.
    Evict {
        /// When, ms.
        at_ms: f64,
        /// The model.
        model: ModelId,
        /// The processor.
        proc: ProcId,
    },
    /// A frame dropped.
    Drop {
        /// When, ms.
        at_ms: f64,
        /// The frame.
        frame: FrameId,
        /// Why.
        cause: DropCause,
    },
    /// A frame answered.
    Answer {
        /// When, ms.
        at_ms: f64,
        /// The frame.
        frame: FrameId,
    },
    /// A global step started.
    Step {
        /// When, ms.
        at_ms: f64,
        /// Why.
        cause: Cause,
    },
}
