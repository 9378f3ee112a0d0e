//! What the processors and the preparation pool report, handed to the
//! frame flow: inputs prepared, batches finished or failed, loads done.

use std::time::Instant;

use camdnn_engine::{EngineError, RunReport};
use camdnn_policy::flow::{
    BatchId, BatchOutcome, Event as FlowEvent, FrameId, ItemFailed, Lost, Request, Run,
};
use camdnn_policy::{ModelId, ProcId};

use super::actor::Actor;
use super::outputs::Reader;
use super::prep::Prepared;
use crate::telemetry as names;

impl Actor {
    pub(super) fn prepared(&mut self, now: f64, p: Prepared) {
        match p {
            Prepared::Invalid {
                frame,
                reason,
                message,
            } => {
                let id = FrameId(frame);
                if let Some(f) = self.frames.get_mut(&id) {
                    f.invalid = Some((reason, message));
                }
                self.step(now, FlowEvent::Invalid(id));
                self.finish(id, None);
            }
            Prepared::DetectorInput {
                frame,
                image,
                items,
            } => {
                let id = FrameId(frame);
                let root = self.flow.view().roots().next().expect("a detector");
                let Some(f) = self.frames.get_mut(&id) else {
                    return;
                };
                f.image = Some(image);
                f.det_left = items.len();
                let mut requests = Vec::with_capacity(items.len());
                for (k, (tensor, transform)) in items.into_iter().enumerate() {
                    f.det_transforms.push(transform);
                    let r = Request {
                        model: root,
                        object: k as u32,
                    };
                    f.inputs.insert(r, tensor);
                    requests.push(r);
                }
                self.step(
                    now,
                    FlowEvent::RootReady {
                        frame: id,
                        requests,
                    },
                );
            }
            Prepared::Crops {
                frame,
                image,
                items,
            } => {
                let id = FrameId(frame);
                let Some(f) = self.frames.get_mut(&id) else {
                    return;
                };
                f.image.get_or_insert(image);
                let (mut ready, mut failed) = (Vec::new(), Vec::new());
                for (spec, tensor) in items {
                    let r = Request {
                        model: spec.model,
                        object: spec.object as u32,
                    };
                    match tensor {
                        Ok(t) => {
                            f.inputs.insert(r, t);
                            ready.push(r);
                        }
                        Err(e) => {
                            tracing::debug!(frame, object = spec.object, error = %e, "crop failed; object left unclassified");
                            metrics::counter!("camdnn_crop_failures_total").increment(1);
                            failed.push(r);
                        }
                    }
                }
                self.step(
                    now,
                    FlowEvent::Prepared {
                        frame: id,
                        ready,
                        failed,
                    },
                );
            }
        }
    }

    pub(super) fn batch_done(
        &mut self,
        now: f64,
        batch: BatchId,
        result: Result<RunReport, EngineError>,
    ) {
        self.health.progressed();
        let Some(meta) = self.batches.remove(&batch) else {
            return;
        };
        let run = meta.run;
        let (model, proc) = (run.model, run.proc);
        let finished_ms = result
            .as_ref()
            .map_or(now, |r| self.clock.ms_of(r.finished));
        let pname = self.flow.view().processors[proc.0].name.clone();
        let report = match result {
            Ok(r) => r,
            Err(e) => {
                let mname = &self.flow.view().models[model.0].name;
                tracing::error!(model = %mname, processor = %pname, error = %e, "batch failed");
                let lost = match &e {
                    EngineError::Panicked {
                        restarted: true, ..
                    } => {
                        metrics::counter!(names::ENGINE_PANICS, "processor" => pname.clone())
                            .increment(1);
                        tracing::warn!(processor = %pname, "engine panicked: worker restarted; reloading its models");
                        Lost::Unit
                    }
                    EngineError::TimedOut {
                        restarted: true, ..
                    } => {
                        tracing::warn!(processor = %pname, model = %mname, "a run outlived its limit: worker replaced; reloading its models");
                        Lost::Stalled
                    }
                    EngineError::NotLoaded { .. } => Lost::Model,
                    _ => Lost::Nothing,
                };
                let outcome = BatchOutcome::Failed(lost);
                self.step(
                    now,
                    FlowEvent::BatchDone {
                        batch,
                        finished_ms,
                        outcome,
                    },
                );
                self.publish_health();
                return;
            }
        };
        self.batch_metrics(&run, &report, meta.dispatched, &pname);
        let exec_ms = report.exec_time().as_secs_f64() * 1e3;
        let items = match self.frames.get_mut(&run.frame) {
            Some(f) => {
                let reader = Reader {
                    system: self.flow.view(),
                    models: &self.models,
                    max_objects: self.max_objects,
                };
                let items = reader.read(f, run.frame.0, model, &run.objects, &report);
                self.track_items(run.frame, model, items)
            }
            // Answered already (its deadline, a failure): nothing to read.
            None => Vec::new(),
        };
        let outcome = BatchOutcome::Done { exec_ms, items };
        self.step(
            now,
            FlowEvent::BatchDone {
                batch,
                finished_ms,
                outcome,
            },
        );
        if self.flow.stepper().adapt().is_some() {
            let v = self.flow.view();
            metrics::gauge!("camdnn_estimate_exec_seconds", "model" => v.models[model.0].name.clone(), "processor" => pname)
                .set(v.exec_ms(model, proc, 1) / 1e3);
        }
    }

    /// With tracking on, a read batch's items before the flow sees them: the frame's objects
    /// are associated once its detector's last item is read, a classifier's results are
    /// stored for their tracks, and each item's requests are decided (the reused ones are
    /// answered from their tracks and left out).
    fn track_items(
        &mut self,
        frame: FrameId,
        model: ModelId,
        items: Vec<Result<Vec<Request>, ItemFailed>>,
    ) -> Vec<Result<Vec<Request>, ItemFailed>> {
        let (Some(reuse), Some(f)) = (self.reuse.as_mut(), self.frames.get_mut(&frame)) else {
            return items;
        };
        let Some(mut track) = f.track else {
            return items;
        };
        let view = self.flow.view();
        if view.models[model.0].parent.is_none() {
            if f.det_left > 0 {
                return items;
            }
            reuse.associate(&mut track, &mut f.objects);
            f.track = Some(track);
        } else {
            reuse.store(f);
        }
        items
            .into_iter()
            .map(|item| item.map(|requests| reuse.plan(view, f, requests)))
            .collect()
    }

    fn batch_metrics(&mut self, run: &Run, report: &RunReport, dispatched: Instant, pname: &str) {
        let view = self.flow.view();
        metrics::gauge!(names::PROCESSOR_REMAINING, "processor" => pname.to_string())
            .set(self.flow.cluster().rem_ms(run.proc, self.clock.now_ms()) / 1e3);
        metrics::histogram!("camdnn_processor_busy_seconds", "processor" => pname.to_string())
            .record(report.exec_time().as_secs_f64());
        metrics::histogram!("camdnn_batch_queue_seconds").record(
            report
                .started
                .saturating_duration_since(dispatched)
                .as_secs_f64(),
        );
        // Time a batch costs beyond its run: from dispatch (or the worker's
        // previous batch) to its start, and from its end to this thread
        // reading the report (channel hops, waking threads).
        let ready = self.last_finish[run.proc.0].map_or(dispatched, |f| f.max(dispatched));
        let overhead = report.started.saturating_duration_since(ready)
            + Instant::now().saturating_duration_since(report.finished);
        metrics::histogram!("camdnn_batch_overhead_seconds").record(overhead.as_secs_f64());
        self.last_finish[run.proc.0] = Some(report.finished);
        let model = &view.models[run.model.0].name;
        let planned_ms = view.exec_ms(run.model, run.proc, run.objects.len());
        let ratio = (planned_ms.is_finite() && planned_ms > 0.0)
            .then(|| report.exec_time().as_secs_f64() * 1e3 / planned_ms);
        if let Some(ratio) = ratio {
            metrics::histogram!("camdnn_batch_exec_vs_profile_ratio", "model" => model.clone(), "processor" => pname.to_string())
                .record(ratio);
        }
        self.stats.batch(
            (model, pname),
            run.objects.len(),
            report.exec_time(),
            ratio,
            overhead,
        );
    }

    pub(super) fn load_done(
        &mut self,
        now: f64,
        i: ModelId,
        j: ProcId,
        result: Result<f64, String>,
    ) {
        let v = self.flow.view();
        let (model, proc) = (v.models[i.0].name.clone(), v.processors[j.0].name.clone());
        let ok = match &result {
            Ok(ms) => Ok(Some(*ms)),
            Err(_) => Err(()),
        };
        self.step(
            now,
            FlowEvent::LoadDone {
                model: i,
                proc: j,
                ok,
            },
        );
        match result {
            Ok(_) => {
                metrics::gauge!(names::MODEL_UNAVAILABLE, "model" => model, "processor" => proc)
                    .set(0.0);
            }
            Err(e) => {
                let retry_in = self
                    .flow
                    .retries()
                    .outages()
                    .find(|(k, _)| *k == (i, j))
                    .map_or(0.0, |(_, o)| o.retry_at_ms - now);
                tracing::error!(model = %model, processor = %proc, error = %e, retry_in_ms = retry_in, "model load failed; retrying later");
                metrics::counter!(names::MODEL_LOAD_FAILURES, "model" => model.clone(), "processor" => proc.clone()).increment(1);
                metrics::gauge!(names::MODEL_UNAVAILABLE, "model" => model, "processor" => proc)
                    .set(1.0);
            }
        }
        self.publish_health();
    }
}
