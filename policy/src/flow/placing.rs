//! From prepared requests to placed batches: the batching the scheduler
//! asks for, the placer's rounds (late binding), and the processors told
//! what to load and unload.

use super::{BatchState, Decision, Effect, FrameFlow, FrameId, Request, Run, SchedulerSlot};
use crate::batcher::{Flush, FlushReason};
use crate::late_binding::Batch;
use crate::scheduler::Batching;
use crate::{ModelId, Placement, ProcId};

impl<S: SchedulerSlot> FrameFlow<S> {
    /// A preparation finished: its ready requests go to the batching, the
    /// failed ones are withdrawn (their objects stay unanswered).
    pub(super) fn prepared(
        &mut self,
        now: f64,
        frame: FrameId,
        ready: Vec<Request>,
        failed: Vec<Request>,
    ) {
        let Some(f) = self.frames.get_mut(&frame) else {
            return;
        };
        // Each request counts from its release to its end; a preparation of
        // nothing (a frame read only to be answered) counted one.
        f.pending -= if ready.is_empty() && failed.is_empty() {
            1
        } else {
            failed.len() as u32
        };
        for r in ready.iter().chain(&failed) {
            f.arrived[self.view.models[r.model.0].level] += 1;
        }
        for r in &failed {
            f.open[self.view.models[r.model.0].level] -= 1;
        }
        for r in ready {
            self.ready
                .entry((frame, r.model))
                .or_default()
                .push_back(r.object);
            self.arrive(now, frame, r.model);
        }
        for r in failed {
            if let Some(fl) = self.batcher.withdraw(frame.0, r.model) {
                self.flush(now, fl);
            }
        }
        if self.batching == Batching::WholeFrame {
            self.place_whole_levels(now, frame);
        }
        self.maybe_complete(now, frame);
    }

    /// One request of (frame, model) is ready: placed alone, or to the
    /// sync batcher (a whole-frame scheduler waits for its level).
    fn arrive(&mut self, now: f64, frame: FrameId, m: ModelId) {
        match self.batching {
            Batching::PerRequest => self.dispatch(now, frame, m, 1),
            Batching::SyncTimer { .. } => {
                let target = self.sched.get().batch_target(&self.view, &self.cluster, m);
                if let Some(fl) = self.batcher.arrive(now, frame.0, m, target) {
                    self.flush(now, fl);
                }
            }
            Batching::WholeFrame => {}
        }
    }

    /// A whole-frame scheduler's levels: a level whose requests have all
    /// arrived, with nothing left of the levels above it, is placed model
    /// by model in the scheduler's order.
    pub(super) fn place_whole_levels(&mut self, now: f64, frame: FrameId) {
        let Some(f) = self.frames.get(&frame) else {
            return;
        };
        let mut complete = Vec::new();
        let mut above_open = f.roots_left > 0 || !f.fanned_out;
        for level in 1..f.open.len() {
            if !above_open && f.arrived[level] == f.announced[level] && f.open[level] > 0 {
                complete.push(level);
            }
            above_open |= f.open[level] > 0;
        }
        for level in complete {
            let mut models: Vec<ModelId> = self
                .view
                .model_ids()
                .filter(|m| self.view.models[m.0].level == level)
                .filter(|m| self.ready.get(&(frame, *m)).is_some_and(|q| !q.is_empty()))
                .collect();
            self.sched.get().frame_order(&self.view, &mut models);
            for m in models {
                let n = self.ready.get(&(frame, m)).map_or(0, |q| q.len());
                self.dispatch(now, frame, m, n);
            }
        }
    }

    /// The batcher released a group.
    pub(super) fn flush(&mut self, now: f64, fl: Flush) {
        let slot = match fl.reason {
            FlushReason::Full => 0,
            FlushReason::Complete => 1,
            FlushReason::Timer => 2,
        };
        self.stats.flushes[slot] += 1;
        self.dispatch(now, FrameId(fl.frame), fl.model, fl.count);
    }

    /// Holds up to `count` ready requests of (frame, model) not yet held
    /// for placement, then places what the hosts can take now.
    pub(super) fn dispatch(&mut self, now: f64, frame: FrameId, m: ModelId, count: usize) {
        let queued = self.ready.get(&(frame, m)).map_or(0, |q| q.len());
        let unheld = queued.saturating_sub(self.placer.held_count(frame.0, m));
        self.placer.hold(frame.0, m, count.min(unheld));
        self.release_held(now);
    }

    /// A placing round of the [`crate::late_binding::Placer`]: every batch
    /// it places becomes a [`Run`].
    pub(super) fn release_held(&mut self, now: f64) {
        self.placer.start_round(&self.view);
        loop {
            let next = self
                .placer
                .next_batch(&self.view, &mut self.cluster, self.sched.get(), now);
            match next {
                None => break,
                Some(Ok((batch, placement))) => self.placed(now, batch, placement),
                Some(Err(e)) => {
                    self.stats.no_host = Some(e.model);
                    self.drop_frame(now, FrameId(e.frame), super::DropCause::NoHost);
                }
            }
        }
    }

    /// A batch the placer ran on the cluster becomes a [`Run`], after the
    /// loads and evictions it needs.
    fn placed(&mut self, now: f64, b: Batch, p: Placement) {
        let frame = FrameId(b.frame);
        let objects: Vec<u32> = match self.ready.get_mut(&(frame, b.model)) {
            Some(q) => {
                let n = b.size.min(q.len());
                let taken = q.drain(..n).collect();
                if q.is_empty() {
                    self.ready.remove(&(frame, b.model));
                }
                taken
            }
            None => Vec::new(),
        };
        self.sync_residency(now, b.proc);
        let priority = self.frames.get(&frame).map_or(0, |f| f.priority);
        let id = super::BatchId(self.next_batch);
        self.next_batch += 1;
        self.batches.insert(
            id,
            BatchState {
                frame,
                model: b.model,
                proc: b.proc,
                objects: objects.clone(),
                mark: self.cluster.finish_mark(b.proc, p.finish_ms),
                planned_finish_ms: p.finish_ms,
                run_ms: self.view.exec_ms(b.model, b.proc, b.size),
            },
        );
        let loads = p.load_ms > 0.0;
        self.stats.placed(b.model, b.size, loads, p.evictions);
        self.record(Decision::Place {
            at_ms: now,
            frame,
            model: b.model,
            proc: b.proc,
            size: b.size,
            start_ms: p.start_ms,
        });
        self.effects.push(Effect::Run(Run {
            batch: id,
            frame,
            model: b.model,
            proc: b.proc,
            objects,
            priority,
            start_ms: p.start_ms,
            finish_ms: p.finish_ms,
            loads,
            evictions: p.evictions,
        }));
    }

    /// Tells processor j to follow the cluster's residency: unloads first,
    /// then loads.
    pub(super) fn sync_residency(&mut self, now: f64, j: ProcId) {
        let np = self.view.num_processors();
        for unload in [true, false] {
            for i in self.view.model_ids() {
                let idx = i.0 * np + j.0;
                let want = self.cluster.is_resident(i, j);
                if want == self.commanded[idx] || want == unload {
                    continue;
                }
                self.commanded[idx] = want;
                if want {
                    self.record(Decision::Load {
                        at_ms: now,
                        model: i,
                        proc: j,
                    });
                    self.effects.push(Effect::Load { model: i, proc: j });
                } else {
                    self.record(Decision::Evict {
                        at_ms: now,
                        model: i,
                        proc: j,
                    });
                    self.effects.push(Effect::Unload { model: i, proc: j });
                }
            }
        }
    }

    /// Every processor follows the cluster's residency.
    pub(super) fn sync_all(&mut self, now: f64) {
        for j in self.view.proc_ids().collect::<Vec<_>>() {
            self.sync_residency(now, j);
        }
    }
}
