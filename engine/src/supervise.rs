//! Limits on a worker's engine calls. A run or a load that outlives the limit
//! its command carries is answered [`EngineError::TimedOut`]. An engine call
//! cannot be interrupted from outside its thread, so that thread is
//! abandoned: it ends whenever the engine returns, its answer discarded and
//! its models dropped. A fresh thread takes over the processor's queue,
//! empty (the owner reloads what it wants resident).
//!
//! At most [`Supervision::max_abandoned`] abandoned threads of one worker may
//! be stuck at once; the command that would make one more retires the worker
//! instead: no thread is started, the processor is not alive any more
//! ([`crate::WorkerHandle::is_alive`]) and every later command is answered
//! [`EngineError::WorkerGone`] (a new worker, e.g. a reloaded pipeline, is
//! the way back). So a worker costs at most `max_abandoned + 1` stuck
//! threads, each holding the models its engine had loaded.
//!
//! One watchdog thread per worker sleeps on a condition variable until the
//! deadline of the command under way; it polls nothing.

use std::collections::VecDeque;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::command::Command;
use crate::{Engine, EngineError, ModelName, ProcessorConfig};

/// Abandoned threads a worker allows by default ([`Supervision`]).
pub const DEFAULT_MAX_ABANDONED: usize = 2;

/// How a worker treats commands that outlive their limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Supervision {
    /// Most threads stuck in the engine past their limit at once; the next
    /// stuck command retires the worker (see the module docs).
    pub max_abandoned: usize,
}

impl Default for Supervision {
    fn default() -> Self {
        Self {
            max_abandoned: DEFAULT_MAX_ABANDONED,
        }
    }
}

/// A command whose thread was abandoned and is still inside the engine.
#[derive(Clone, Debug, PartialEq)]
pub struct StuckCommand {
    /// The model it loads or runs.
    pub model: ModelName,
    /// "loading" or "running".
    pub stage: &'static str,
    /// When the engine call started.
    pub since: Instant,
    /// The limit it outlived.
    pub limit: Duration,
}

/// What a worker says about itself ([`crate::WorkerHandle::status`]).
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerStatus {
    /// A thread serves the processor's commands.
    pub alive: bool,
    /// The worker retired after one stuck command too many.
    pub retired: bool,
    /// Threads replaced after a command outlived its limit, since the start.
    pub replaced: u64,
    /// Abandoned threads still inside the engine, oldest first.
    pub stuck: Vec<StuckCommand>,
}

/// A command under way with a limit: when it expires, `time_out` answers it.
struct Current {
    deadline: Option<Instant>,
    stuck: StuckCommand,
    time_out: Box<dyn FnOnce(EngineError) + Send>,
}

struct State {
    /// The executor thread serving now; bumped at every replacement.
    generation: u64,
    current: Option<Current>,
    /// Abandoned threads not returned yet, by generation.
    stuck: Vec<(u64, StuckCommand)>,
    replaced: u64,
    retired: bool,
    /// No executor serves any more (shut down, retired, or its thread ended).
    ended: bool,
    executor: Option<JoinHandle<()>>,
}

/// The commands sent to a worker and those taken out of the channel but not
/// executed yet. Whichever thread serves the processor holds it while it
/// picks its next command; a replacement takes it over. Dropped when the
/// worker has ended, so later sends fail (`WorkerGone`) instead of waiting
/// for an answer that never comes.
pub(crate) struct Inbox {
    pub(crate) rx: mpsc::Receiver<Command>,
    pub(crate) queue: VecDeque<Command>,
}

/// What a worker's threads share.
pub(crate) struct Shared {
    pub(crate) proc: ProcessorConfig,
    pub(crate) engine: Arc<dyn Engine>,
    max_abandoned: usize,
    state: Mutex<State>,
    changed: Condvar,
    pub(crate) inbox: Mutex<Option<Inbox>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Starts an executor thread for `generation` (see [`Shared::start`]).
pub(crate) type Spawn = fn(Arc<Shared>, u64) -> std::io::Result<JoinHandle<()>>;

impl Shared {
    pub(crate) fn new(
        proc: ProcessorConfig,
        engine: Arc<dyn Engine>,
        supervision: Supervision,
        rx: mpsc::Receiver<Command>,
    ) -> Arc<Self> {
        Arc::new(Self {
            proc,
            engine,
            max_abandoned: supervision.max_abandoned,
            state: Mutex::new(State {
                generation: 0,
                current: None,
                stuck: Vec::new(),
                replaced: 0,
                retired: false,
                ended: false,
                executor: None,
            }),
            changed: Condvar::new(),
            inbox: Mutex::new(Some(Inbox {
                rx,
                queue: VecDeque::new(),
            })),
        })
    }

    /// Records the first executor's thread.
    pub(crate) fn set_executor(&self, join: JoinHandle<()>) {
        lock(&self.state).executor = Some(join);
    }

    /// Executor `generation` starts an engine call on `model` under `limit`;
    /// `time_out` answers it if the limit expires first.
    pub(crate) fn begin(
        &self,
        generation: u64,
        model: &ModelName,
        stage: &'static str,
        limit: Option<Duration>,
        time_out: Box<dyn FnOnce(EngineError) + Send>,
    ) {
        let since = Instant::now();
        let mut st = lock(&self.state);
        if st.generation != generation {
            return;
        }
        st.current = Some(Current {
            deadline: limit.map(|l| since + l),
            stuck: StuckCommand {
                model: model.clone(),
                stage,
                since,
                limit: limit.unwrap_or(Duration::MAX),
            },
            time_out,
        });
        drop(st);
        self.changed.notify_all();
    }

    /// Executor `generation` is back from its engine call: true when it may
    /// answer it and serve on, false when it was abandoned meanwhile (the
    /// command was answered `TimedOut`; the thread must end).
    pub(crate) fn end(&self, generation: u64) -> bool {
        let mut st = lock(&self.state);
        if st.generation != generation {
            return false;
        }
        st.current = None;
        true
    }

    /// Executor `generation` took `Shutdown`: the worker has ended.
    pub(crate) fn shut_down(&self, generation: u64) {
        let mut st = lock(&self.state);
        if st.generation == generation {
            st.ended = true;
        }
        drop(st);
        self.changed.notify_all();
    }

    /// Executor `generation`'s thread is ending, however it ends: an
    /// abandoned thread leaves the stuck list; the serving one ends the
    /// worker.
    pub(crate) fn exit(&self, generation: u64) {
        let mut st = lock(&self.state);
        let serving = st.generation == generation;
        if serving {
            st.ended = true;
        } else {
            st.stuck.retain(|(g, _)| *g != generation);
        }
        drop(st);
        if serving {
            lock(&self.inbox).take();
        }
        self.changed.notify_all();
    }

    pub(crate) fn status(&self) -> WorkerStatus {
        let st = lock(&self.state);
        WorkerStatus {
            alive: !st.ended,
            retired: st.retired,
            replaced: st.replaced,
            stuck: st.stuck.iter().map(|(_, s)| s.clone()).collect(),
        }
    }

    /// Waits until no executor serves any more; the last one's thread to
    /// join (`None` once retired: stuck threads are never joined).
    pub(crate) fn wait_ended(&self) -> Option<JoinHandle<()>> {
        let mut st = lock(&self.state);
        while !st.ended {
            st = self
                .changed
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
        }
        st.executor.take()
    }

    /// The watchdog's loop: sleeps until the deadline of the command under
    /// way, and past it abandons the thread and starts another with `spawn`
    /// (or retires the worker). Returns once the worker has ended.
    pub(crate) fn watch(self: &Arc<Self>, spawn: Spawn) {
        let mut st = lock(&self.state);
        loop {
            if st.ended {
                return;
            }
            let Some(deadline) = st.current.as_ref().and_then(|c| c.deadline) else {
                st = self
                    .changed
                    .wait(st)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            };
            let now = Instant::now();
            if now < deadline {
                st = self
                    .changed
                    .wait_timeout(st, deadline - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                continue;
            }
            let current = st.current.take().expect("a deadline was read");
            let abandoned = st.generation;
            st.generation += 1;
            st.stuck.push((abandoned, current.stuck.clone()));
            // Never joined: it may never return.
            st.executor = None;
            let mut restarted = st.stuck.len() <= self.max_abandoned;
            if restarted {
                // Spawned under the lock, so the handle is recorded before
                // the new thread could end.
                match spawn(Arc::clone(self), st.generation) {
                    Ok(join) => {
                        st.executor = Some(join);
                        st.replaced += 1;
                    }
                    Err(_) => restarted = false,
                }
            }
            if !restarted {
                st.retired = true;
                st.ended = true;
            }
            drop(st);
            self.changed.notify_all();
            let stuck = current.stuck;
            (current.time_out)(EngineError::TimedOut {
                processor: self.proc.name.clone(),
                model: stuck.model,
                engine: self.proc.engine.as_str(),
                stage: stuck.stage,
                limit_ms: u64::try_from(stuck.limit.as_millis()).unwrap_or(u64::MAX),
                restarted,
            });
            if !restarted {
                self.refuse_all();
                return;
            }
            st = lock(&self.state);
        }
    }

    /// After retirement: answers every queued and later command
    /// `WorkerGone` until `Shutdown` or until every sender is gone (the
    /// receiver is kept, so no command's answer is dropped unsent).
    fn refuse_all(&self) {
        let mut guard = lock(&self.inbox);
        let Some(inbox) = guard.as_mut() else {
            return;
        };
        let gone = || EngineError::WorkerGone {
            processor: self.proc.name.clone(),
        };
        let mut shut = false;
        while let Some(cmd) = inbox.queue.pop_front() {
            shut |= refuse(cmd, gone());
        }
        while !shut {
            match inbox.rx.recv() {
                Ok(cmd) => shut = refuse(cmd, gone()),
                Err(_) => break,
            }
        }
        guard.take();
    }
}

/// Answers `cmd` with `e`; true for `Shutdown`.
fn refuse(cmd: Command, e: EngineError) -> bool {
    match cmd {
        Command::Load { reply, .. } => reply.send(Err(e)),
        Command::Unload { reply, .. } => reply.send(Err(e)),
        Command::Run { reply, .. } => reply.send(Err(e)),
        Command::Shutdown => return true,
    }
    false
}
