//! A frame's life in the flow: entry, its detector's requests, fan-out of
//! its objects, their children, and its answer or drop.

use super::{Behind, DropCause, Effect, FrameFlow, FrameId, FrameIn, FrameState, Request};
use super::{Decision, SchedulerSlot};
use crate::admission::{behind_at_fan_out, detector_behind};
use crate::ModelId;

impl<S: SchedulerSlot> FrameFlow<S> {
    /// A frame enters: an upstream frame fans out at once; any other is
    /// dropped when its detector could not start in time (real-time
    /// dropping's first stage), else its detector input is prepared.
    pub(super) fn frame_in(&mut self, now: f64, f: FrameIn) {
        self.stepper.frame_offered();
        let behind_ms = match self.cfg.behind {
            None => None,
            Some(Behind::Ms(ms)) => Some(ms),
            Some(Behind::Periods(n)) => {
                let t = f.capture_ms.unwrap_or(f.arrival_ms);
                self.periods.observe(f.stream, f.seq, t).map(|p| n * p)
            }
        };
        let levels = self.view.model_ids().map(|m| self.view.models[m.0].level);
        let levels = levels.max().unwrap_or(0) + 1;
        self.frames.insert(
            f.frame,
            FrameState {
                arrival_ms: f.arrival_ms,
                deadline_ms: f.deadline_ms,
                behind_ms,
                priority: f.priority,
                pending: 0,
                roots_left: 0,
                root_items: 0,
                level1: Vec::new(),
                fanned_out: false,
                requests: vec![0; self.view.num_models()],
                announced: vec![0; levels],
                arrived: vec![0; levels],
                open: vec![0; levels],
            },
        );
        match f.upstream {
            Some(requests) if !requests.is_empty() => self.fan_out(now, f.frame, requests),
            Some(_) => {
                if f.tracked {
                    // Every request was answered from its track: the step plans
                    // for the empty scene, as for a detector that found nothing.
                    let none = vec![0; self.view.num_models()];
                    let scene = self.scene.scene(&self.view, &none, 0);
                    let sched = self.sched.get();
                    self.stepper
                        .observe_scene(sched, &self.view, &self.cluster, now, scene);
                }
                // Nothing to classify: the frame is still read, to answer it.
                self.add_pending(f.frame, 1);
                self.effects.push(Effect::Prepare {
                    frame: f.frame,
                    requests: Vec::new(),
                });
            }
            None => {
                let behind = behind_ms.is_some_and(|limit| {
                    detector_behind(
                        &self.view,
                        &self.cluster,
                        self.placer.held_work_ms(&self.view),
                        now,
                        limit,
                    )
                });
                if behind {
                    self.drop_frame(now, f.frame, DropCause::BehindAtEntry);
                    return;
                }
                self.add_pending(f.frame, 1);
                self.effects.push(Effect::PrepareRoot(f.frame));
            }
        }
    }

    /// A frame was dropped before it entered: it was offered, and the
    /// pipeline is behind.
    pub(super) fn dropped_before_entry(&mut self, now: f64) {
        self.stepper.frame_offered();
        self.sched.get().frame_done(now, None);
        self.stepper.frame_dropped(now);
    }

    /// The frame's detector input is ready: its detector requests are
    /// placed at once (no batcher: one frame's detector items go together).
    pub(super) fn root_ready(&mut self, now: f64, frame: FrameId, requests: Vec<Request>) {
        let Some(f) = self.frames.get_mut(&frame) else {
            return;
        };
        f.pending -= 1;
        f.roots_left += requests.len() as u32;
        f.root_items += requests.len() as u32;
        f.pending += requests.len() as u32;
        for r in &requests {
            f.requests[r.model.0] += 1;
        }
        let mut models: Vec<ModelId> = Vec::new();
        for r in requests {
            self.ready
                .entry((frame, r.model))
                .or_default()
                .push_back(r.object);
            if !models.contains(&r.model) {
                models.push(r.model);
            }
        }
        for m in models {
            let n = self.ready.get(&(frame, m)).map_or(0, |q| q.len());
            self.dispatch(now, frame, m, n);
        }
        self.maybe_complete(now, frame);
    }

    /// The frame's detector items are all done and brought `requests`:
    /// real-time dropping's second stage and deadline admission decide,
    /// the scene is observed, and the requests are released.
    pub(super) fn fan_out(&mut self, now: f64, frame: FrameId, requests: Vec<Request>) {
        let Some(f) = self.frames.get_mut(&frame) else {
            return;
        };
        f.fanned_out = true;
        let (arrival, behind_ms, deadline) = (f.arrival_ms, f.behind_ms, f.deadline_ms);
        let root_items = f.root_items;
        if requests.is_empty() {
            // Nothing to drop or admit, but the step plans for what the
            // camera sees: an empty scene too.
            let scene = self
                .scene
                .scene(&self.view, &self.counts(&requests), root_items);
            let sched = self.sched.get();
            self.stepper
                .observe_scene(sched, &self.view, &self.cluster, now, scene);
            return;
        }
        if let Some(limit) = behind_ms {
            let waited = now - arrival;
            if behind_at_fan_out(
                &self.view,
                &self.cluster,
                self.placer.held_work_ms(&self.view),
                now,
                waited,
                limit,
            ) {
                self.drop_frame(now, frame, DropCause::BehindAtFanOut);
                return;
            }
        }
        let counts = self.counts(&requests);
        let admitted = match (&mut self.deadline_admission, deadline) {
            (Some(admission), Some(deadline)) => {
                // The detector has run: only what follows it counts.
                let scene = self.scene.scene(&self.view, &counts, 0);
                let estimates = self.stepper.adapt().map(|a| a.estimates());
                let (view, cluster) = (&self.view, &self.cluster);
                admission.admits(view, estimates, cluster, &scene, now, deadline - now)
            }
            _ => true,
        };
        if !admitted {
            self.drop_frame(now, frame, DropCause::CannotMeetDeadline);
            return;
        }
        let scene = self.scene.scene(&self.view, &counts, root_items);
        let sched = self.sched.get();
        self.stepper
            .observe_scene(sched, &self.view, &self.cluster, now, scene);
        self.release(frame, requests);
    }

    /// Requests per model (index = `ModelId`).
    fn counts(&self, requests: &[Request]) -> Vec<u32> {
        let mut counts = vec![0u32; self.view.num_models()];
        for r in requests {
            counts[r.model.0] += 1;
        }
        counts
    }

    /// Releases `requests` of `frame`: the batcher expects them, and their
    /// inputs are prepared.
    pub(super) fn release(&mut self, frame: FrameId, requests: Vec<Request>) {
        let counts = self.counts(&requests);
        let Some(f) = self.frames.get_mut(&frame) else {
            return;
        };
        for m in self.view.model_ids() {
            let n = counts[m.0];
            if n == 0 {
                continue;
            }
            f.requests[m.0] += n;
            let level = self.view.models[m.0].level;
            f.announced[level] += n;
            f.open[level] += n;
            if matches!(self.batching, crate::scheduler::Batching::SyncTimer { .. }) {
                self.batcher.expect(frame.0, m, n);
            }
        }
        f.pending += requests.len() as u32;
        self.effects.push(Effect::Prepare { frame, requests });
    }

    pub(super) fn add_pending(&mut self, frame: FrameId, n: u32) {
        if let Some(f) = self.frames.get_mut(&frame) {
            f.pending += n;
        }
    }

    /// Answers the frame if nothing of it is left.
    pub(super) fn maybe_complete(&mut self, now: f64, frame: FrameId) {
        if self.frames.get(&frame).is_some_and(|f| f.pending == 0) {
            self.answer(now, frame);
        }
    }

    fn answer(&mut self, now: f64, frame: FrameId) {
        let Some(f) = self.frames.remove(&frame) else {
            return;
        };
        self.forget(frame);
        self.scene.learn(&self.view, &f.requests);
        self.sched.get().frame_done(now, Some(now - f.arrival_ms));
        if self.cfg.late_steps {
            let late = f.deadline_ms.is_some_and(|d| now > d);
            self.stepper.frame_answered(now, late);
        }
        self.stats.answered += 1;
        self.record(Decision::Answer { at_ms: now, frame });
        self.effects.push(Effect::Answer {
            frame,
            requests: f.requests,
        });
    }

    /// Drops the frame (if still in the pipeline): its held and waiting
    /// requests are forgotten, a batch of it still running finishes for
    /// nothing. A drop for being behind brings the global step forward.
    pub(super) fn drop_frame(&mut self, now: f64, frame: FrameId, cause: DropCause) {
        if self.frames.remove(&frame).is_none() {
            return;
        }
        self.forget(frame);
        self.sched.get().frame_done(now, None);
        if !matches!(cause, DropCause::Failed | DropCause::NoHost) {
            self.stepper.frame_dropped(now);
        }
        self.stats.count_drop(cause);
        self.record(Decision::Drop {
            at_ms: now,
            frame,
            cause,
        });
        self.effects.push(Effect::Drop { frame, cause });
    }

    /// The frame could not be read: the driver answers it; the flow forgets it.
    pub(super) fn invalid(&mut self, now: f64, frame: FrameId) {
        if self.frames.remove(&frame).is_some() {
            self.forget(frame);
            self.sched.get().frame_done(now, None);
            self.stats.invalid += 1;
        }
    }

    fn forget(&mut self, frame: FrameId) {
        self.batcher.forget_frame(frame.0);
        self.placer.forget_frame(frame.0);
        let keys: Vec<(FrameId, ModelId)> = self
            .ready
            .range((frame, ModelId(0))..=(frame, ModelId(usize::MAX)))
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            self.ready.remove(&k);
        }
    }
}
