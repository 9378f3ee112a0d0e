//! The frame flow's effects, carried out: preparations to the pool, loads,
//! unloads and batches to the processors, steps to the step thread, and
//! answers to the server.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use camdnn_engine::{Command, EngineError, Reply, Tensor};
use camdnn_policy::flow::{DropCause, Effect, Event as FlowEvent, FrameId, Request, Run};
use camdnn_policy::{ModelId, ProcId};
use camdnn_protocol::DropReason;

use super::actor::{Actor, BatchMeta, Event};
use super::prep::{CropSpec, Job};
use super::Outcome;
use crate::telemetry as names;

impl Actor {
    /// Carries out one of the flow's effects.
    pub(super) fn carry_out(&mut self, e: Effect) {
        match e {
            Effect::PrepareRoot(frame) => {
                let root = self.flow.view().roots().next().expect("a detector");
                if let Some(raw) = self.frames.get_mut(&frame).and_then(|f| f.raw.take()) {
                    self.prepare(Job::Detect {
                        frame: frame.0,
                        raw,
                        model: root,
                    });
                }
            }
            Effect::Prepare { frame, requests } => self.prepare_requests(frame, requests),
            Effect::Unload { model, proc } => self.unload(model, proc),
            Effect::Load { model, proc } => self.load(model, proc),
            Effect::Run(run) => self.run(run),
            Effect::StartStep(step) => {
                self.step_started = Some(Instant::now());
                let ticket = self.ticket();
                if let Err((ticket, step)) = self.step_thread.send(ticket, step) {
                    // No step thread: computed here.
                    let _ = self.tx.send(Event::StepComputed(ticket, step));
                }
            }
            Effect::Answer { frame, requests } => {
                if let Some(f) = self.frames.get(&frame) {
                    if !f.det_transforms.is_empty() {
                        self.work.learn(f.det_transforms.len(), &requests);
                    }
                }
                self.finish(frame, None);
            }
            Effect::Drop { frame, cause } => {
                let reason = match cause {
                    DropCause::BehindAtEntry | DropCause::BehindAtFanOut => {
                        metrics::counter!("camdnn_behind_drops_total").increment(1);
                        DropReason::Overloaded
                    }
                    DropCause::CannotMeetDeadline => {
                        metrics::counter!("camdnn_deadline_admission_drops_total").increment(1);
                        DropReason::DeadlinePassed
                    }
                    DropCause::DeadlinePassed => DropReason::DeadlinePassed,
                    DropCause::Failed | DropCause::NoHost => DropReason::ProcessingFailed,
                };
                if cause == DropCause::NoHost {
                    let m = self.flow.stats().no_host.map_or(0, |m| m.0);
                    tracing::error!(model = %self.flow.view().models[m].name, "no processor can host the model");
                }
                self.finish(frame, Some(Outcome::Dropped(reason)));
            }
        }
    }

    fn ticket(&mut self) -> u64 {
        self.next_ticket += 1;
        self.next_ticket - 1
    }

    fn prepare(&mut self, job: Job) {
        let ticket = self.ticket();
        self.prep.send(ticket, job);
    }

    /// Cuts the inputs of `requests` (an upstream frame is decoded first).
    fn prepare_requests(&mut self, frame: FrameId, requests: Vec<Request>) {
        let Some(f) = self.frames.get_mut(&frame) else {
            return;
        };
        let crops: Vec<CropSpec> = requests.iter().filter_map(|r| f.crops.remove(r)).collect();
        if f.track.is_some_and(|t| t.frame.is_some()) {
            for c in &crops {
                let r = Request {
                    model: c.model,
                    object: c.object as u32,
                };
                f.ran_on.insert(r, c.bbox);
            }
        }
        let job = match (f.raw.take(), &f.image) {
            (Some(raw), _) => Job::DecodeAndCrop {
                frame: frame.0,
                raw,
                crops,
            },
            (None, Some(image)) => Job::Crop {
                frame: frame.0,
                image: Arc::clone(image),
                crops,
            },
            (None, None) => return,
        };
        self.prepare(job);
    }

    fn load(&mut self, i: ModelId, j: ProcId) {
        if self.models[i.0].decoder.is_upstream() {
            return; // never loaded: the scheduler's residency is all it has
        }
        let v = self.flow.view();
        let (model, proc) = (v.models[i.0].name.clone(), v.processors[j.0].name.clone());
        // A model with a thread still stuck in it on this processor is not
        // tried there again until that call is back: its load fails at
        // once and the pair backs off further, so a model that hangs cannot
        // pile up stuck threads and retire the processor.
        if self.units[j.0].stuck_in(&model) {
            let why = format!("a thread of {proc} is still stuck in {model}");
            let _ = self.tx.send(Event::LoadDone {
                model: i,
                proc: j,
                result: Err(why),
            });
            return;
        }
        let limit = self.stall.load_limit(v, i, j);
        metrics::counter!("camdnn_model_loads_total", "model" => model.clone(), "processor" => proc.clone()).increment(1);
        self.stats.load(&model, &proc);
        let tx = self.tx.clone();
        let reply = Reply::new(move |r: Result<camdnn_engine::LoadReport, EngineError>| {
            let result = match r {
                Ok(rep) => {
                    let took = rep.finished.duration_since(rep.started);
                    metrics::histogram!("camdnn_model_load_seconds", "model" => model, "processor" => proc)
                        .record(took.as_secs_f64());
                    Ok(took.as_secs_f64() * 1e3)
                }
                Err(e) => Err(e.to_string()),
            };
            let _ = tx.send(Event::LoadDone {
                model: i,
                proc: j,
                result,
            });
        });
        let cmd = Command::Load {
            model: self.sources[i.0].clone(),
            limit: Some(limit),
            reply,
        };
        if let Err(e) = self.units[j.0].send(cmd) {
            let _ = self.tx.send(Event::LoadDone {
                model: i,
                proc: j,
                result: Err(e.to_string()),
            });
        }
        self.resident_gauge(j);
    }

    fn unload(&mut self, i: ModelId, j: ProcId) {
        if self.models[i.0].decoder.is_upstream() {
            return;
        }
        let model = self.sources[i.0].name.clone();
        let _ = self.units[j.0].send(Command::Unload {
            model,
            reply: Reply::new(|_| {}),
        });
        self.resident_gauge(j);
    }

    fn resident_gauge(&self, j: ProcId) {
        let proc = self.flow.view().processors[j.0].name.clone();
        metrics::gauge!("camdnn_resident_models", "processor" => proc)
            .set(self.flow.cluster().resident_count(j) as f64);
    }

    /// Sends a placed batch to its processor.
    fn run(&mut self, run: Run) {
        let now = Instant::now();
        let batch = run.batch;
        let v = self.flow.view();
        let name = v.models[run.model.0].name.clone();
        let pname = v.processors[run.proc.0].name.clone();
        let Some(f) = self.frames.get_mut(&run.frame) else {
            return;
        };
        f.first_start.get_or_insert(now);
        let tensors: Vec<Tensor> = run
            .objects
            .iter()
            .filter_map(|&object| {
                f.inputs.remove(&Request {
                    model: run.model,
                    object,
                })
            })
            .collect();
        metrics::histogram!("camdnn_batch_size", "model" => name.clone(), "processor" => pname)
            .record(run.objects.len() as f64);
        let inputs = match Tensor::into_batch(tensors) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(model = %name, error = %e, "cannot form a batch");
                let _ = self.tx.send(Event::BatchDone {
                    batch,
                    result: Err(e),
                });
                self.batches.insert(
                    batch,
                    BatchMeta {
                        run,
                        dispatched: now,
                    },
                );
                return;
            }
        };
        let tx = self.tx.clone();
        let reply = Reply::new(move |result| {
            let _ = tx.send(Event::BatchDone { batch, result });
        });
        let limit = self
            .stall
            .run_limit(self.flow.view(), run.model, run.proc, run.objects.len());
        let cmd = Command::Run {
            model: self.sources[run.model.0].name.clone(),
            inputs: vec![inputs],
            priority: run.priority,
            limit: Some(limit),
            submitted: now,
            reply,
        };
        let proc = run.proc;
        self.batches.insert(
            batch,
            BatchMeta {
                run,
                dispatched: now,
            },
        );
        if let Err(e) = self.units[proc.0].send(cmd) {
            tracing::error!(error = %e, "worker is gone");
            let _ = self.tx.send(Event::BatchDone {
                batch,
                result: Err(e),
            });
        }
    }

    /// Answers a frame: with `outcome`, with its rejection when it could
    /// not be read, or with its result when `None`.
    pub(super) fn finish(&mut self, frame: FrameId, outcome: Option<Outcome>) {
        self.health.progressed();
        let Some(f) = self.frames.remove(&frame) else {
            return;
        };
        if let (Some(reuse), Some(track)) = (&mut self.reuse, &f.track) {
            reuse.frame_gone(track);
        }
        if f.objects_dropped > 0 {
            metrics::counter!(names::OBJECTS_DROPPED).increment(u64::from(f.objects_dropped));
        }
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        let outcome = match (outcome, f.invalid.clone()) {
            (Some(o), _) => o,
            (None, Some((reason, message))) => Outcome::Rejected(reason, message),
            (None, None) => {
                let names: Vec<String> = self
                    .flow
                    .view()
                    .models
                    .iter()
                    .map(|m| m.name.clone())
                    .collect();
                let (reply, result) = f.into_result(&self.models, &names);
                let _ = reply.send(Outcome::Done(result));
                return;
            }
        };
        let _ = f.reply.send(outcome);
    }

    /// Notices worker threads that ended: their pairs leave service for good
    /// and their batches' frames fail.
    pub fn recover(&mut self, now: f64) {
        self.health.record_worker_metrics();
        let mut changed = false;
        for j in 0..self.units.len() {
            if self.dead[j] || self.units[j].is_alive() {
                continue;
            }
            self.dead[j] = true;
            changed = true;
            tracing::error!(processor = %self.flow.view().processors[j].name, "worker thread ended; its batches are answered as failed");
            self.batches.retain(|_, b| b.run.proc.0 != j);
            self.step(now, FlowEvent::ProcessorGone(ProcId(j)));
        }
        if changed {
            self.publish_health();
        }
    }

    /// Tells readiness what is wrong now (nothing: ready).
    pub fn publish_health(&self) {
        let now = self.now();
        let v = self.flow.view();
        let mut problems: Vec<String> = self
            .flow
            .retries()
            .outages()
            .map(|((i, j), o)| {
                format!(
                    "model {} on {}: out of service after {} failure(s), next load in {:.0} ms",
                    v.models[i.0].name,
                    v.processors[j.0].name,
                    o.failures,
                    (o.retry_at_ms - now).max(0.0)
                )
            })
            .collect();
        for (j, dead) in self.dead.iter().enumerate() {
            if *dead {
                problems.push(format!(
                    "processor {}: worker thread ended",
                    v.processors[j].name
                ));
            }
        }
        self.health.set_problems(problems);
    }

    /// Answers every frame still in flight with a drop notice, stops the
    /// processors and writes the live estimates when asked to.
    pub fn shut_down(&mut self) {
        for (_, f) in std::mem::take(&mut self.frames) {
            let _ = f.reply.send(Outcome::Dropped(DropReason::ShuttingDown));
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
        }
        for u in &self.units {
            let _ = u.send(Command::Shutdown);
        }
        if let (Some(path), Some(_)) = (&self.adapt_profile_out, self.flow.stepper().adapt()) {
            match std::fs::write(path, self.flow.view().to_spec().to_toml()) {
                Ok(()) => {
                    tracing::info!(path = %path.display(), "live estimates written as a profile")
                }
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "writing the live estimates")
                }
            }
        }
    }
}
