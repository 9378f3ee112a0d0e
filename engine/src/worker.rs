//! One OS thread per processor: it owns the processor's resident models and executes
//! load / unload / run commands, replying with outputs and measured times. Runs queued
//! between two loads / unloads go highest priority first (FIFO within a priority), so
//! a frame's priority reaches the processor; loads and unloads are barriers that keep
//! their place. The daemon's async runtime never runs inference; it sends commands.
//!
//! An engine that panics while running a batch restarts the worker: every resident
//! model is dropped (the engine's state is not trusted after a panic), the batch is
//! answered [`EngineError::Panicked`] and the worker serves on, empty; runs queued
//! behind it are answered `NotLoaded` until the owner loads again. A panic while
//! loading drops only that load. A run or load that outlives the limit its command
//! carries is answered [`EngineError::TimedOut`] and its thread replaced
//! (`supervise.rs`). [`WorkerHandle::is_alive`] turns false once no thread serves
//! the processor any more, however that came about.

use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::command::{Command, LoadReport, Reply, RunLimit, RunReport};
use crate::executor::{core_id, spawn_executor};
use crate::supervise::{Shared, WorkerStatus};
use crate::{Engine, EngineError, ModelName, ModelSource, ProcessorConfig, Supervision, Tensor};

/// A cloneable sender of commands to one worker.
#[derive(Clone)]
pub struct WorkerHandle {
    processor: String,
    tx: mpsc::Sender<Command>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for WorkerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerHandle")
            .field("processor", &self.processor)
            .finish_non_exhaustive()
    }
}

impl WorkerHandle {
    /// Processor name.
    pub fn processor(&self) -> &str {
        &self.processor
    }

    /// True while a thread serves the processor's commands (false once the
    /// worker shut down, retired or its thread ended).
    pub fn is_alive(&self) -> bool {
        self.shared.status().alive
    }

    /// Alive or not, threads replaced and threads stuck past their limits.
    pub fn status(&self) -> WorkerStatus {
        self.shared.status()
    }

    /// Queues a command; fails only when the worker thread has ended.
    pub fn send(&self, cmd: Command) -> Result<(), EngineError> {
        self.tx.send(cmd).map_err(|_| EngineError::WorkerGone {
            processor: self.processor.clone(),
        })
    }

    /// Queues a load.
    pub fn load(
        &self,
        model: ModelSource,
        reply: Reply<Result<LoadReport, EngineError>>,
    ) -> Result<(), EngineError> {
        self.load_within(model, None, reply)
    }

    /// Queues a load that may take at most `limit`.
    pub fn load_within(
        &self,
        model: ModelSource,
        limit: Option<Duration>,
        reply: Reply<Result<LoadReport, EngineError>>,
    ) -> Result<(), EngineError> {
        self.send(Command::Load {
            model,
            limit,
            reply,
        })
    }

    /// Queues an unload.
    pub fn unload(
        &self,
        model: impl Into<ModelName>,
        reply: Reply<Result<bool, EngineError>>,
    ) -> Result<(), EngineError> {
        self.send(Command::Unload {
            model: model.into(),
            reply,
        })
    }

    /// Queues a run at the lowest priority; the submit time is taken now.
    pub fn run(
        &self,
        model: impl Into<ModelName>,
        inputs: Vec<Tensor>,
        reply: Reply<Result<RunReport, EngineError>>,
    ) -> Result<(), EngineError> {
        self.run_with_priority(model, inputs, 0, reply)
    }

    /// Queues a run that goes before queued runs of lower `priority`.
    pub fn run_with_priority(
        &self,
        model: impl Into<ModelName>,
        inputs: Vec<Tensor>,
        priority: u8,
        reply: Reply<Result<RunReport, EngineError>>,
    ) -> Result<(), EngineError> {
        self.run_within(model, inputs, priority, None, reply)
    }

    /// Queues a run at `priority` that may take at most `limit` once started.
    pub fn run_within(
        &self,
        model: impl Into<ModelName>,
        inputs: Vec<Tensor>,
        priority: u8,
        limit: Option<RunLimit>,
        reply: Reply<Result<RunReport, EngineError>>,
    ) -> Result<(), EngineError> {
        self.send(Command::Run {
            model: model.into(),
            inputs,
            priority,
            limit,
            submitted: Instant::now(),
            reply,
        })
    }

    fn wait<T: Send + 'static>(
        &self,
        queue: impl FnOnce(Reply<Result<T, EngineError>>) -> Result<(), EngineError>,
    ) -> Result<T, EngineError> {
        let (reply, rx) = Reply::channel();
        queue(reply)?;
        rx.recv().map_err(|_| EngineError::WorkerGone {
            processor: self.processor.clone(),
        })?
    }

    /// Loads and blocks until done (for start-up, profiling and tests; not for async code).
    pub fn load_blocking(&self, model: ModelSource) -> Result<LoadReport, EngineError> {
        self.wait(|r| self.load(model, r))
    }

    /// Unloads and blocks until done.
    pub fn unload_blocking(&self, model: impl Into<ModelName>) -> Result<bool, EngineError> {
        self.wait(|r| self.unload(model, r))
    }

    /// Runs and blocks until done.
    pub fn run_blocking(
        &self,
        model: impl Into<ModelName>,
        inputs: Vec<Tensor>,
    ) -> Result<RunReport, EngineError> {
        self.wait(|r| self.run(model, inputs, r))
    }
}

/// A running per-processor worker: the thread serving its commands and a
/// watchdog that replaces that thread when a command outlives its limit.
/// Dropping it shuts the worker down after the commands already queued.
#[derive(Debug)]
pub struct Worker {
    handle: WorkerHandle,
    watchdog: Option<JoinHandle<()>>,
}

impl Worker {
    /// [`Worker::spawn_supervised`] with the default [`Supervision`].
    pub fn spawn(proc: ProcessorConfig, engine: Arc<dyn Engine>) -> Result<Worker, EngineError> {
        Self::spawn_supervised(proc, engine, Supervision::default())
    }

    /// Checks the processor against the engine, starts the thread (named
    /// `camdnn-<processor>`), pins it to `proc.core` when set, starts its
    /// watchdog and returns once it is ready. Fails if the engine cannot
    /// serve the processor or the core does not exist.
    pub fn spawn_supervised(
        proc: ProcessorConfig,
        engine: Arc<dyn Engine>,
        supervision: Supervision,
    ) -> Result<Worker, EngineError> {
        engine.check_processor(&proc)?;
        if let Some(cap) = proc.utilisation_cap {
            if !(cap > 0.0 && cap <= 1.0) {
                return Err(EngineError::Processor {
                    processor: proc.name.clone(),
                    reason: format!("utilisation_cap must be in (0, 1], got {cap}"),
                });
            }
        }
        if let Some(core) = proc.core {
            // Checked here, so a replacement thread's pinning cannot fail
            // for want of the core.
            core_id(&proc.name, core)?;
        }
        // Unbounded on purpose: the owner bounds what it queues (the daemon's
        // admission limit bounds frames, hence batches, in flight); a bounded
        // queue here would block the scheduler thread on a slow processor.
        let (tx, rx) = mpsc::channel::<Command>();
        let name = proc.name.clone();
        let cannot = |what: &str, e: std::io::Error| EngineError::Processor {
            processor: name.clone(),
            reason: format!("cannot start the {what} thread: {e}"),
        };
        let shared = Shared::new(proc, engine, supervision, rx);
        let executor = spawn_executor(Arc::clone(&shared), 0).map_err(|e| cannot("worker", e))?;
        shared.set_executor(executor);
        let handle = WorkerHandle {
            processor: name.clone(),
            tx,
            shared: Arc::clone(&shared),
        };
        let watched = Arc::clone(&shared);
        let watchdog = std::thread::Builder::new()
            .name(format!("camdnn-{name}-wd"))
            .spawn(move || watched.watch(spawn_executor));
        let watchdog = match watchdog {
            Ok(w) => w,
            Err(e) => {
                let mut worker = Worker {
                    handle,
                    watchdog: None,
                };
                worker.stop();
                return Err(cannot("watchdog", e));
            }
        };
        Ok(Worker {
            handle,
            watchdog: Some(watchdog),
        })
    }

    /// A sender for this worker's commands.
    pub fn handle(&self) -> WorkerHandle {
        self.handle.clone()
    }

    /// Finishes the queued commands, unloads every model and joins the
    /// threads (not one stuck past its limit: that one is never joined).
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let _ = self.handle.tx.send(Command::Shutdown);
        if let Some(j) = self.handle.shared.wait_ended() {
            let _ = j.join();
        }
        if let Some(w) = self.watchdog.take() {
            let _ = w.join();
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop();
    }
}
