//! The processors' side of the flow: finished and failed batches, loads
//! and their retries, a processor gone, and the global step.

use super::{BatchId, BatchOutcome, Decision, DropCause, Effect, FrameFlow, FrameId, Lost};
use super::{Request, SchedulerSlot};
use crate::stepper::{Cause, StartedStep};
use crate::{ModelId, ProcId};

impl<S: SchedulerSlot> FrameFlow<S> {
    /// A batch finished at `finished_ms`: rem_j is corrected, the live
    /// estimates learn, and each item's children are released (a frame's
    /// level-1 requests once its detector items are all done).
    pub(super) fn batch_done(
        &mut self,
        now: f64,
        id: BatchId,
        finished_ms: f64,
        outcome: BatchOutcome,
    ) {
        let Some(b) = self.batches.remove(&id) else {
            return;
        };
        self.cluster.correct_finish(b.mark, finished_ms);
        let items = match outcome {
            BatchOutcome::Failed(lost) => {
                self.drop_frame(now, b.frame, DropCause::Failed);
                self.model_lost(now, b.model, b.proc, lost);
                return;
            }
            BatchOutcome::Done { exec_ms, items } => {
                let k = b.objects.len().max(1);
                let view = &mut self.view;
                self.stepper
                    .observe_batch(view, now, b.model, b.proc, k, exec_ms, None);
                items
            }
        };
        if !self.frames.contains_key(&b.frame) {
            return; // answered already (its deadline, a failure)
        }
        let is_root = self.view.models[b.model.0].parent.is_none();
        let level = self.view.models[b.model.0].level;
        let mut items = items.into_iter();
        for _ in &b.objects {
            let children = match items.next() {
                Some(Ok(children)) => children,
                Some(Err(_)) | None => {
                    self.drop_frame(now, b.frame, DropCause::Failed);
                    return;
                }
            };
            if is_root {
                self.root_item_done(now, b.frame, children);
            } else {
                if !children.is_empty() {
                    self.release(b.frame, children);
                }
                if let Some(f) = self.frames.get_mut(&b.frame) {
                    f.pending -= 1;
                    f.open[level] -= 1;
                }
            }
            if !self.frames.contains_key(&b.frame) {
                return; // dropped at fan-out
            }
        }
        if self.batching == crate::scheduler::Batching::WholeFrame {
            self.place_whole_levels(now, b.frame);
        }
        self.maybe_complete(now, b.frame);
    }

    /// One detector item of `frame` is done; the last one fans out the
    /// level-1 requests the items brought.
    fn root_item_done(&mut self, now: f64, frame: FrameId, children: Vec<Request>) {
        let Some(f) = self.frames.get_mut(&frame) else {
            return;
        };
        f.roots_left -= 1;
        f.pending -= 1;
        f.level1.extend(children);
        if f.roots_left == 0 {
            let level1 = std::mem::take(&mut f.level1);
            self.fan_out(now, frame, level1);
        }
    }

    /// A failed batch cost its processor `lost`: the processors are told
    /// to load again what the cluster still counts resident; a panic or a
    /// stall takes the failing pair out of service until its retry.
    fn model_lost(&mut self, now: f64, i: ModelId, j: ProcId, lost: Lost) {
        let np = self.view.num_processors();
        match lost {
            Lost::Nothing => return,
            Lost::Model => self.commanded[i.0 * np + j.0] = false,
            Lost::Unit | Lost::Stalled => {
                for m in self.view.model_ids() {
                    self.commanded[m.0 * np + j.0] = false;
                }
                self.retries
                    .failed(&self.view, &mut self.cluster, i, j, now);
            }
        }
        self.sync_residency(now, j);
    }

    /// A load finished: a failure takes the pair out of service until its
    /// backed-off retry ([`crate::retry`]).
    pub(super) fn load_done(
        &mut self,
        now: f64,
        i: ModelId,
        j: ProcId,
        ok: Result<Option<f64>, ()>,
    ) {
        match ok {
            Ok(_) => self.retries.succeeded(i, j),
            Err(()) => {
                let np = self.view.num_processors();
                self.commanded[i.0 * np + j.0] = false;
                self.retries
                    .failed(&self.view, &mut self.cluster, i, j, now);
                self.stats.load_failures += 1;
            }
        }
    }

    /// Pairs whose retry is due are loaded again.
    pub(super) fn retry_loads(&mut self, now: f64) {
        let due = self.retries.due(&self.view, &mut self.cluster, now);
        for (_, j) in due {
            self.sync_residency(now, j);
        }
    }

    /// Processor j is gone for good: no model is placed there again, and
    /// the frames of its batches fail.
    pub(super) fn processor_gone(&mut self, now: f64, j: ProcId) {
        let np = self.view.num_processors();
        for i in self.view.model_ids().collect::<Vec<_>>() {
            self.cluster.set_unavailable(&self.view, i, j);
            self.commanded[i.0 * np + j.0] = false;
        }
        let lost: Vec<BatchId> = self
            .batches
            .iter()
            .filter(|(_, b)| b.proc == j)
            .map(|(id, _)| *id)
            .collect();
        for id in lost {
            if let Some(b) = self.batches.remove(&id) {
                self.drop_frame(now, b.frame, DropCause::Failed);
            }
        }
    }

    /// Starts the global step when the stepper says one is due: its job
    /// goes to the driver ([`Effect::StartStep`]); a scheduler without one
    /// applies at once.
    pub(super) fn start_step_if_due(&mut self, now: f64) {
        if now >= self.steps_until_ms {
            return;
        }
        let Some(started) =
            self.stepper
                .start_if_due(self.sched.get(), &mut self.view, &self.cluster, now)
        else {
            return;
        };
        self.record(Decision::Step {
            at_ms: now,
            cause: started.cause,
        });
        if started.job.is_some() {
            self.effects.push(Effect::StartStep(started));
        } else {
            self.apply_step(now, started);
        }
    }

    /// Applies a computed step: the processors follow its residency.
    pub(super) fn apply_step(&mut self, now: f64, started: StartedStep) {
        let step = self.stepper.finish(
            self.sched.get(),
            &self.view,
            &mut self.cluster,
            now,
            started,
        );
        self.stats.steps += 1;
        self.stats.step_loads += step.outcome.loads;
        match step.cause {
            Cause::Trigger(_) => self.stats.triggered_steps += 1,
            Cause::Drops => self.stats.drop_steps += 1,
            Cause::Timer => {}
        }
        self.sync_all(now);
    }
}
