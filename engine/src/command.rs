//! What a processor's worker is told and what it answers: the commands (load, unload, run,
//! shut down), their limits, and the reports and replies that carry the answers.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::{BatchMode, EngineError, ModelInfo, ModelName, ModelSource, Tensor};

/// How long one run may take before the worker gives up on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunLimit {
    /// A run of a batch size the model is prepared for.
    pub warm: Duration,
    /// A run that first prepares the model for its batch size
    /// ([`crate::LoadedModel::prepared_for`] is false: tract builds a plan,
    /// which costs about a load).
    pub cold: Duration,
}

/// Where a worker sends one answer: any `FnOnce` (e.g. completing an async oneshot),
/// or a std channel via [`Reply::channel`].
pub struct Reply<T>(Box<dyn FnOnce(T) + Send>);

impl<T: Send + 'static> Reply<T> {
    /// A reply that calls `f` with the answer (on the worker thread: keep it short).
    pub fn new(f: impl FnOnce(T) + Send + 'static) -> Reply<T> {
        Reply(Box::new(f))
    }

    /// A reply that sends the answer to the returned receiver.
    pub fn channel() -> (Reply<T>, mpsc::Receiver<T>) {
        let (tx, rx) = mpsc::sync_channel(1);
        (
            Reply::new(move |v| {
                // The asker may have stopped waiting; that is not the worker's problem.
                let _ = tx.send(v);
            }),
            rx,
        )
    }

    /// Answers with `v` (what a worker does when it finishes; also for a
    /// stand-in processor in tests).
    pub fn answer(self, v: T) {
        (self.0)(v)
    }

    pub(crate) fn send(self, v: T) {
        self.answer(v)
    }
}

impl<T> std::fmt::Debug for Reply<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reply")
    }
}

/// Answer to a load.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// The resident model's metadata; `info.load_time` is the measured load time.
    pub info: ModelInfo,
    /// True when the model was already resident (nothing was loaded; `info` is the old one).
    pub already_resident: bool,
    /// When the worker started the command.
    pub started: Instant,
    /// When it finished.
    pub finished: Instant,
}

/// Answer to a run.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Model that ran.
    pub model: ModelName,
    /// Named outputs, leading dim = batch.
    pub outputs: Vec<Tensor>,
    /// Batch size k.
    pub batch: usize,
    /// Whether k ran in one call or as a loop.
    pub mode: BatchMode,
    /// When the command was sent.
    pub submitted: Instant,
    /// When the worker started it.
    pub started: Instant,
    /// When it finished.
    pub finished: Instant,
}

impl RunReport {
    /// Compute time (finished - started): the measured t_e of this batch.
    pub fn exec_time(&self) -> Duration {
        self.finished.duration_since(self.started)
    }

    /// Time spent waiting in the worker's queue (started - submitted).
    pub fn queue_time(&self) -> Duration {
        self.started.duration_since(self.submitted)
    }
}

/// A command to a processor's worker.
#[derive(Debug)]
pub enum Command {
    /// Make `model` resident (no-op answer if it already is).
    Load {
        /// What to load.
        model: ModelSource,
        /// Longest the load may take (`None`: no limit); past it the load is
        /// answered [`EngineError::TimedOut`] and the thread replaced.
        limit: Option<Duration>,
        /// Where to answer.
        reply: Reply<Result<LoadReport, EngineError>>,
    },
    /// Drop a resident model (frees its memory).
    Unload {
        /// Model name.
        model: ModelName,
        /// Where to answer; `Ok(true)` if it was resident.
        reply: Reply<Result<bool, EngineError>>,
    },
    /// Run one batch of a resident model.
    Run {
        /// Model name.
        model: ModelName,
        /// Inputs, leading dim = batch.
        inputs: Vec<Tensor>,
        /// Scheduling priority (0 lowest): among queued runs, higher goes first.
        priority: u8,
        /// Longest the run may take (`None`: no limit); past it the run is
        /// answered [`EngineError::TimedOut`] and the thread replaced.
        limit: Option<RunLimit>,
        /// When the command was created (for queue time).
        submitted: Instant,
        /// Where to answer.
        reply: Reply<Result<RunReport, EngineError>>,
    },
    /// Finish the commands before this one, drop every model and end the thread.
    Shutdown,
}
