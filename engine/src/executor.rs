//! The thread that serves a worker's commands (one "executor" at a time per
//! worker; `supervise.rs` replaces it when it is stuck past a limit): picks
//! the next command (highest-priority run before the next barrier), calls
//! the engine under the command's limit and answers.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::command::{Command, LoadReport, Reply, RunReport};
use crate::supervise::Shared;
use crate::{EngineError, LoadedModel, ModelName, ProcessorConfig};

/// Starts the thread serving `shared`'s commands as executor `generation`.
pub(crate) fn spawn_executor(
    shared: Arc<Shared>,
    generation: u64,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("camdnn-{}", shared.proc.name))
        .spawn(move || {
            // Tells the worker this thread ended, by return or by unwinding.
            struct Exit(Arc<Shared>, u64);
            impl Drop for Exit {
                fn drop(&mut self) {
                    self.0.exit(self.1);
                }
            }
            let _exit = Exit(Arc::clone(&shared), generation);
            if let Some(core) = shared.proc.core {
                // The core was found at spawn; setting the affinity is best effort.
                if let Ok(id) = core_id(&shared.proc.name, core) {
                    core_affinity::set_for_current(id);
                }
            }
            serve(&shared, generation);
        })
}

/// The usable core `core`, or why it is not one.
pub(crate) fn core_id(processor: &str, core: usize) -> Result<core_affinity::CoreId, EngineError> {
    let err = |reason: String| EngineError::Processor {
        processor: processor.to_string(),
        reason,
    };
    let ids = core_affinity::get_core_ids()
        .ok_or_else(|| err("cannot list CPU cores to pin the worker".into()))?;
    ids.into_iter()
        .find(|c| c.id == core)
        .ok_or_else(|| err(format!("core {core} does not exist or is not usable")))
}

fn panicked(proc: &ProcessorConfig, model: &ModelName, stage: &'static str) -> EngineError {
    EngineError::Panicked {
        processor: proc.name.clone(),
        model: model.clone(),
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

/// The next command for executor `generation`, waiting for one; `None`
/// once every sender is gone.
fn next_command(shared: &Shared) -> Option<Command> {
    let mut guard = shared.inbox.lock().unwrap_or_else(PoisonError::into_inner);
    let inbox = guard.as_mut()?;
    if inbox.queue.is_empty() {
        let cmd = inbox.rx.recv().ok()?;
        inbox.queue.push_back(cmd);
    }
    inbox.queue.extend(inbox.rx.try_iter());
    take_next(&mut inbox.queue)
}

/// Runs `call` as executor `generation` under `limit`, answering `reply` with
/// its result; false when the limit expired first (the watchdog answered
/// `TimedOut`): this thread was abandoned and must end.
fn answer_within<T: Send + 'static>(
    shared: &Shared,
    generation: u64,
    (model, stage): (&ModelName, &'static str),
    limit: Option<Duration>,
    reply: Reply<Result<T, EngineError>>,
    call: impl FnOnce() -> Result<T, EngineError>,
) -> bool {
    let slot = Arc::new(Mutex::new(Some(reply)));
    let for_timeout = Arc::clone(&slot);
    let time_out = Box::new(move |e: EngineError| {
        let taken = for_timeout
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(reply) = taken {
            reply.send(Err(e));
        }
    });
    shared.begin(generation, model, stage, limit, time_out);
    let result = call();
    if !shared.end(generation) {
        return false;
    }
    let taken = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(reply) = taken {
        reply.send(result);
    }
    true
}

/// Serves commands as executor `generation` until `Shutdown`, until every
/// sender is gone, or until this thread is abandoned in a stuck call.
fn serve(shared: &Shared, generation: u64) {
    let (proc, engine) = (&shared.proc, shared.engine.as_ref());
    let mut models: HashMap<ModelName, Box<dyn LoadedModel>> = HashMap::new();
    while let Some(cmd) = next_command(shared) {
        match cmd {
            Command::Load {
                model,
                limit,
                reply,
            } => {
                let started = Instant::now();
                if let Some(m) = models.get(&model.name) {
                    reply.send(Ok(LoadReport {
                        info: m.info().clone(),
                        already_resident: true,
                        started,
                        finished: Instant::now(),
                    }));
                    continue;
                }
                let load = || {
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
                let what = (&model.name, "loading");
                if !answer_within(shared, generation, what, limit, reply, load) {
                    return;
                }
            }
            Command::Unload { model, reply } => {
                reply.send(Ok(models.remove(&model).is_some()));
            }
            Command::Run {
                model,
                inputs,
                submitted,
                limit,
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
                let batch = inputs.first().and_then(|t| t.batch()).unwrap_or(0);
                let limit = limit.map(|l| {
                    if m.prepared_for(batch) {
                        l.warm
                    } else {
                        l.cold
                    }
                });
                let mut ran = Duration::ZERO;
                let mut panicked_now = false;
                let run = || {
                    let started = Instant::now();
                    let outcome = catch_unwind(AssertUnwindSafe(|| m.run(&inputs)));
                    let finished = Instant::now();
                    ran = finished - started;
                    match outcome {
                        Ok(r) => r.map(|outputs| RunReport {
                            batch,
                            mode: m.info().batch,
                            model: model.clone(),
                            outputs,
                            submitted,
                            started,
                            finished,
                        }),
                        Err(_) => {
                            panicked_now = true;
                            Err(panicked(proc, &model, "running"))
                        }
                    }
                };
                let what = (&model, "running");
                if !answer_within(shared, generation, what, limit, reply, run) {
                    return;
                }
                if panicked_now {
                    // Restart: nothing the engine holds is trusted any more.
                    models.clear();
                }
                // The cap's rest, after the answer: the owner learns the
                // batch's own time, and plans the rest as the policy does.
                std::thread::sleep(proc.rest_after(ran));
            }
            Command::Shutdown => {
                shared.shut_down(generation);
                break;
            }
        }
    }
}
