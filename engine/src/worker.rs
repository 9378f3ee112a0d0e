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
//! loading drops only that load. [`WorkerHandle::is_alive`] turns false once the
//! thread has ended, however it ended.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{
    BatchMode, Engine, EngineError, LoadedModel, ModelInfo, ModelSource, ProcessorConfig, Tensor,
};

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

    fn send(self, v: T) {
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
    pub model: String,
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
        /// Where to answer.
        reply: Reply<Result<LoadReport, EngineError>>,
    },
    /// Drop a resident model (frees its memory).
    Unload {
        /// Model name.
        model: String,
        /// Where to answer; `Ok(true)` if it was resident.
        reply: Reply<Result<bool, EngineError>>,
    },
    /// Run one batch of a resident model.
    Run {
        /// Model name.
        model: String,
        /// Inputs, leading dim = batch.
        inputs: Vec<Tensor>,
        /// Scheduling priority (0 lowest): among queued runs, higher goes first.
        priority: u8,
        /// When the command was created (for queue time).
        submitted: Instant,
        /// Where to answer.
        reply: Reply<Result<RunReport, EngineError>>,
    },
    /// Finish the commands before this one, drop every model and end the thread.
    Shutdown,
}

/// A cloneable sender of commands to one worker.
#[derive(Debug, Clone)]
pub struct WorkerHandle {
    processor: String,
    tx: mpsc::Sender<Command>,
    alive: Arc<AtomicBool>,
}

impl WorkerHandle {
    /// Processor name.
    pub fn processor(&self) -> &str {
        &self.processor
    }

    /// True while the worker thread runs (false once it ended, by shutdown or panic).
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
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
        self.send(Command::Load { model, reply })
    }

    /// Queues an unload.
    pub fn unload(
        &self,
        model: impl Into<String>,
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
        model: impl Into<String>,
        inputs: Vec<Tensor>,
        reply: Reply<Result<RunReport, EngineError>>,
    ) -> Result<(), EngineError> {
        self.run_with_priority(model, inputs, 0, reply)
    }

    /// Queues a run that goes before queued runs of lower `priority`.
    pub fn run_with_priority(
        &self,
        model: impl Into<String>,
        inputs: Vec<Tensor>,
        priority: u8,
        reply: Reply<Result<RunReport, EngineError>>,
    ) -> Result<(), EngineError> {
        self.send(Command::Run {
            model: model.into(),
            inputs,
            priority,
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
    pub fn unload_blocking(&self, model: &str) -> Result<bool, EngineError> {
        self.wait(|r| self.unload(model, r))
    }

    /// Runs and blocks until done.
    pub fn run_blocking(&self, model: &str, inputs: Vec<Tensor>) -> Result<RunReport, EngineError> {
        self.wait(|r| self.run(model, inputs, r))
    }
}

/// A running per-processor worker thread. Dropping it shuts the thread down after the
/// commands already queued.
#[derive(Debug)]
pub struct Worker {
    handle: WorkerHandle,
    join: Option<JoinHandle<()>>,
}

impl Worker {
    /// Checks the processor against the engine, starts the thread (named
    /// `camdnn-<processor>`), pins it to `proc.core` when set, and returns once it is
    /// ready. Fails if the engine cannot serve the processor or the core does not exist.
    pub fn spawn(proc: ProcessorConfig, engine: Arc<dyn Engine>) -> Result<Worker, EngineError> {
        engine.check_processor(&proc)?;
        if let Some(cap) = proc.utilisation_cap {
            if !(cap > 0.0 && cap <= 1.0) {
                return Err(EngineError::Processor {
                    processor: proc.name.clone(),
                    reason: format!("utilisation_cap must be in (0, 1], got {cap}"),
                });
            }
        }
        // Unbounded on purpose: the owner bounds what it queues (the daemon's
        // admission limit bounds frames, hence batches, in flight); a bounded
        // queue here would block the scheduler thread on a slow processor.
        let (tx, rx) = mpsc::channel::<Command>();
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), EngineError>>(1);
        let name = proc.name.clone();
        let alive = Arc::new(AtomicBool::new(true));
        let alive_in_thread = Arc::clone(&alive);
        let join = std::thread::Builder::new()
            .name(format!("camdnn-{name}"))
            .spawn(move || {
                // Cleared when the thread ends, by return or by unwinding.
                struct Alive(Arc<AtomicBool>);
                impl Drop for Alive {
                    fn drop(&mut self) {
                        self.0.store(false, Ordering::Release);
                    }
                }
                let _alive = Alive(alive_in_thread);
                if let Some(core) = proc.core {
                    if let Err(e) = pin(&proc.name, core) {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                }
                let _ = ready_tx.send(Ok(()));
                serve(&proc, engine.as_ref(), rx);
            })
            .map_err(|e| EngineError::Processor {
                processor: name.clone(),
                reason: format!("cannot start the worker thread: {e}"),
            })?;
        let ready = ready_rx.recv().unwrap_or_else(|_| {
            Err(EngineError::WorkerGone {
                processor: name.clone(),
            })
        });
        if let Err(e) = ready {
            let _ = join.join();
            return Err(e);
        }
        Ok(Worker {
            handle: WorkerHandle {
                processor: name,
                tx,
                alive,
            },
            join: Some(join),
        })
    }

    /// A sender for this worker's commands.
    pub fn handle(&self) -> WorkerHandle {
        self.handle.clone()
    }

    /// Finishes the queued commands, unloads every model and joins the thread.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let _ = self.handle.tx.send(Command::Shutdown);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop();
    }
}

fn pin(processor: &str, core: usize) -> Result<(), EngineError> {
    let err = |reason: String| EngineError::Processor {
        processor: processor.to_string(),
        reason,
    };
    let ids = core_affinity::get_core_ids()
        .ok_or_else(|| err("cannot list CPU cores to pin the worker".into()))?;
    let id = ids
        .into_iter()
        .find(|c| c.id == core)
        .ok_or_else(|| err(format!("core {core} does not exist or is not usable")))?;
    if core_affinity::set_for_current(id) {
        Ok(())
    } else {
        Err(err(format!("cannot pin the worker thread to core {core}")))
    }
}

fn panicked(proc: &ProcessorConfig, model: &str, stage: &'static str) -> EngineError {
    EngineError::Panicked {
        processor: proc.name.clone(),
        model: model.to_string(),
        engine: proc.engine.as_str(),
        stage,
        restarted: stage == "running",
    }
}

/// The next command to execute from `queue`: the highest-priority run before the
/// first load / unload / shutdown (the oldest among equals), or that barrier
/// itself when it is at the head.
fn take_next(queue: &mut VecDeque<Command>) -> Option<Command> {
    let mut best: Option<(usize, u8)> = None;
    for (n, cmd) in queue.iter().enumerate() {
        match cmd {
            Command::Run { priority, .. } => {
                if best.is_none_or(|(_, p)| *priority > p) {
                    best = Some((n, *priority));
                }
            }
            _ => break,
        }
    }
    match best {
        Some((n, _)) => queue.remove(n),
        None => queue.pop_front(),
    }
}

fn serve(proc: &ProcessorConfig, engine: &dyn Engine, rx: mpsc::Receiver<Command>) {
    let mut models: HashMap<String, Box<dyn LoadedModel>> = HashMap::new();
    let mut queue: VecDeque<Command> = VecDeque::new();
    loop {
        if queue.is_empty() {
            match rx.recv() {
                Ok(cmd) => queue.push_back(cmd),
                Err(_) => break,
            }
        }
        queue.extend(rx.try_iter());
        let Some(cmd) = take_next(&mut queue) else {
            break;
        };
        match cmd {
            Command::Load { model, reply } => {
                let started = Instant::now();
                let result = if let Some(m) = models.get(&model.name) {
                    Ok(LoadReport {
                        info: m.info().clone(),
                        already_resident: true,
                        started,
                        finished: Instant::now(),
                    })
                } else {
                    catch_unwind(AssertUnwindSafe(|| engine.load(&model, proc)))
                        .unwrap_or_else(|_| Err(panicked(proc, &model.name, "loading")))
                        .map(|m| {
                            let info = m.info().clone();
                            models.insert(model.name.clone(), m);
                            LoadReport {
                                info,
                                already_resident: false,
                                started,
                                finished: Instant::now(),
                            }
                        })
                };
                reply.send(result);
            }
            Command::Unload { model, reply } => {
                reply.send(Ok(models.remove(&model).is_some()));
            }
            Command::Run {
                model,
                inputs,
                submitted,
                reply,
                ..
            } => {
                let Some(m) = models.get_mut(&model) else {
                    reply.send(Err(EngineError::NotLoaded {
                        processor: proc.name.clone(),
                        model,
                    }));
                    continue;
                };
                let started = Instant::now();
                let outcome = catch_unwind(AssertUnwindSafe(|| m.run(&inputs)));
                let finished = Instant::now();
                let result = match outcome {
                    Ok(r) => r.map(|outputs| RunReport {
                        batch: inputs.first().and_then(|t| t.batch()).unwrap_or(0),
                        mode: m.info().batch,
                        model: model.clone(),
                        outputs,
                        submitted,
                        started,
                        finished,
                    }),
                    Err(_) => {
                        // Restart: nothing the engine holds is trusted any more.
                        models.clear();
                        Err(panicked(proc, &model, "running"))
                    }
                };
                reply.send(result);
                // The cap's rest, after the answer: the owner learns the
                // batch's own time, and plans the rest as the policy does.
                std::thread::sleep(proc.rest_after(finished - started));
            }
            Command::Shutdown => break,
        }
    }
}
