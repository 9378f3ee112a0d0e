//! Placing released requests on processors, with optional late binding
//! (the daemon's `pipeline.dispatch_ahead_ms`): the one implementation both
//! the simulator and the daemon's scheduler thread drive, so the simulator
//! predicts the scheduler that runs.
//!
//! Requests the batcher released are [`Placer::hold`]ed per (frame, model);
//! a round ([`Placer::start_round`], then [`Placer::next_batch`] until it
//! returns `None`) places them oldest first, batch by batch, as the
//! scheduler chooses. With a horizon, a batch whose chosen host has more
//! than that much queued work stays held unless a nearly idle host finishes
//! it sooner ([`crate::idle_taker`], counting the held work ahead of it on
//! the chosen host); without one, every batch is placed at once. Each
//! placed batch is run on the [`Cluster`] (loads, eviction, rem_j) before
//! the next decision, and handed to the caller, which turns it into a
//! command (the daemon) or an event (the simulator).

use std::collections::VecDeque;

use crate::scheduler::Scheduler;
use crate::{idle_taker, Cluster, ModelId, Placement, ProcId, System};

/// Requests of one model for one frame waiting to be placed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Held {
    /// The frame (the caller's id).
    pub frame: u64,
    /// The model.
    pub model: ModelId,
    /// Requests still to place.
    pub count: usize,
}

/// One placed batch: run `size` requests of `model` for `frame` on `proc`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Batch {
    /// The frame.
    pub frame: u64,
    /// The model.
    pub model: ModelId,
    /// The processor.
    pub proc: ProcId,
    /// Requests in the batch (1..=held, at most the largest profiled batch).
    pub size: usize,
}

/// The scheduler found no processor able to host a model; the frame's held
/// requests of that model are given up.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
#[error("no processor can host model {} (frame {frame})", model.0)]
pub struct NoHost {
    /// The frame.
    pub frame: u64,
    /// The model.
    pub model: ModelId,
}

/// Held requests and the state of the current placing round.
#[derive(Clone, Debug, Default)]
pub struct Placer {
    /// Late-binding horizon, ms (infinity: place at once).
    horizon_ms: f64,
    /// Held for a later round, oldest first.
    held: VecDeque<Held>,
    /// This round's entries still to look at.
    round: VecDeque<Held>,
    /// Per processor, held work this round already left for it, ms.
    ahead_ms: Vec<f64>,
}

impl Placer {
    /// A placer with late binding at `dispatch_ahead_ms` (`None`: every
    /// batch placed at once).
    pub fn new(dispatch_ahead_ms: Option<f64>) -> Self {
        Placer {
            horizon_ms: dispatch_ahead_ms.unwrap_or(f64::INFINITY),
            ..Placer::default()
        }
    }

    /// Queues `count` more requests of `model` for `frame`, behind older
    /// held ones (joining the frame's entry for that model if it has one).
    pub fn hold(&mut self, frame: u64, model: ModelId, count: usize) {
        if count == 0 {
            return;
        }
        match self
            .held
            .iter_mut()
            .chain(self.round.iter_mut())
            .find(|h| h.frame == frame && h.model == model)
        {
            Some(h) => h.count += count,
            None => self.held.push_back(Held {
                frame,
                model,
                count,
            }),
        }
    }

    /// Drops every held request of `frame` (answered or given up).
    pub fn forget_frame(&mut self, frame: u64) {
        self.held.retain(|h| h.frame != frame);
        self.round.retain(|h| h.frame != frame);
    }

    /// Requests of `model` for `frame` held now.
    pub fn held_count(&self, frame: u64, model: ModelId) -> usize {
        self.held
            .iter()
            .chain(self.round.iter())
            .filter(|h| h.frame == frame && h.model == model)
            .map(|h| h.count)
            .sum()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty() && self.round.is_empty()
    }

    /// The frames with held requests (with repeats), oldest first.
    pub fn held_frames(&self) -> impl Iterator<Item = u64> + '_ {
        self.round.iter().chain(self.held.iter()).map(|h| h.frame)
    }

    /// Starts a placing round over everything held.
    pub fn start_round(&mut self, system: &System) {
        let mut round = std::mem::take(&mut self.held);
        round.append(&mut self.round);
        self.round = round;
        self.ahead_ms.clear();
        self.ahead_ms.resize(system.num_processors(), 0.0);
    }

    /// The round's next batch, already run on `cluster` at `now` (its
    /// placement tells where and when); `None` when the round is over (what
    /// stays held waits for [`Placer::wake_ms`]). A model no processor can
    /// host gives [`NoHost`] and the entry is dropped; the round goes on at
    /// the next call.
    pub fn next_batch(
        &mut self,
        system: &System,
        cluster: &mut Cluster,
        scheduler: &mut dyn Scheduler,
        now: f64,
    ) -> Option<Result<(Batch, Placement), NoHost>> {
        loop {
            let h = *self.round.front()?;
            if h.count == 0 {
                self.round.pop_front();
                continue;
            }
            let Some((chosen, k)) = scheduler
                .place(system, cluster, now, h.model, h.count)
                .filter(|&(j, _)| cluster.can_host(system, h.model, j))
            else {
                self.round.pop_front();
                return Some(Err(NoHost {
                    frame: h.frame,
                    model: h.model,
                }));
            };
            let k = batch_size(system, h.model, chosen, k, h.count);
            let target = if cluster.rem_ms(chosen, now) <= self.horizon_ms {
                Some((chosen, k))
            } else {
                idle_taker(
                    system,
                    cluster,
                    now,
                    h.model,
                    h.count,
                    chosen,
                    self.ahead_ms[chosen.0],
                    self.horizon_ms,
                )
                .map(|d| {
                    (
                        d.proc,
                        batch_size(system, h.model, d.proc, d.batch, h.count),
                    )
                })
            };
            let Some((proc, size)) = target else {
                self.ahead_ms[chosen.0] +=
                    h.count as f64 * system.exec_ms(h.model, chosen, k) / k as f64;
                self.round.pop_front();
                self.held.push_back(h);
                continue;
            };
            if let Some(front) = self.round.front_mut() {
                front.count -= size;
            }
            let placement = cluster.run(system, now, h.model, proc, size);
            let batch = Batch {
                frame: h.frame,
                model: h.model,
                proc,
                size,
            };
            return Some(Ok((batch, placement)));
        }
    }

    /// When the first host with held work behind it will be within the
    /// horizon of idle, ms (infinity when nothing is held or no host will).
    pub fn wake_ms(&self, system: &System, cluster: &Cluster, now: f64) -> f64 {
        if self.is_empty() || !self.horizon_ms.is_finite() {
            return f64::INFINITY;
        }
        system
            .proc_ids()
            .map(|j| cluster.busy_until(j) - self.horizon_ms)
            .filter(|&t| t > now)
            .fold(f64::INFINITY, f64::min)
    }

    /// Held work spread over the processors, ms (each request at its
    /// fastest host): how far behind the pipeline is beyond rem_j.
    pub fn held_work_ms(&self, system: &System) -> f64 {
        let total: f64 = self
            .held
            .iter()
            .chain(self.round.iter())
            .map(|h| {
                let best = system
                    .proc_ids()
                    .map(|j| system.exec_ms(h.model, j, 1))
                    .fold(f64::INFINITY, f64::min);
                if best.is_finite() {
                    h.count as f64 * best
                } else {
                    0.0
                }
            })
            .sum();
        total / system.num_processors().max(1) as f64
    }
}

/// A batch size the processor can run: the scheduler's `k`, at least 1, at
/// most the `waiting` requests and the largest batch profiled for (i, j).
pub fn batch_size(system: &System, i: ModelId, j: ProcId, k: usize, waiting: usize) -> usize {
    k.clamp(1, waiting.max(1))
        .min(system.max_batch_on(i, j))
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedulers;

    fn tiny() -> System {
        System::from_toml(include_str!("../tests/fixtures/tiny.toml")).unwrap()
    }

    fn drain(
        p: &mut Placer,
        system: &System,
        cluster: &mut Cluster,
        s: &mut dyn Scheduler,
        now: f64,
    ) -> Vec<Batch> {
        p.start_round(system);
        let mut out = Vec::new();
        while let Some(r) = p.next_batch(system, cluster, s, now) {
            out.push(r.unwrap().0);
        }
        out
    }

    #[test]
    fn without_a_horizon_every_request_is_placed_at_once() {
        let system = tiny();
        let mut cluster = Cluster::new(&system);
        let mut s = schedulers::by_name(&system, "camdnn-local", 5.0).unwrap();
        let mut p = Placer::new(None);
        let a = ModelId(1);
        p.hold(7, a, 5);
        let batches = drain(&mut p, &system, &mut cluster, s.as_mut(), 0.0);
        assert_eq!(batches.iter().map(|b| b.size).sum::<usize>(), 5);
        assert!(batches.iter().all(|b| b.frame == 7 && b.model == a));
        // tiny profiles a up to batch 3: no batch is larger.
        assert!(batches.iter().all(|b| (1..=3).contains(&b.size)));
        assert!(p.is_empty());
        assert_eq!(p.wake_ms(&system, &cluster, 0.0), f64::INFINITY);
    }

    #[test]
    fn a_busy_host_keeps_work_held_until_it_nears_idle() {
        let system = tiny();
        let mut cluster = Cluster::new(&system);
        let gpu = ProcId(1);
        let b = ModelId(2); // b runs on the gpu only
        cluster.run(&system, 0.0, b, gpu, 2); // gpu busy: load 10 + 9 = 19 ms
        let mut s = schedulers::by_name(&system, "camdnn-local", 5.0).unwrap();
        let mut p = Placer::new(Some(5.0));
        p.hold(1, b, 2);
        assert!(drain(&mut p, &system, &mut cluster, s.as_mut(), 0.0).is_empty());
        assert!(!p.is_empty());
        assert!(p.held_work_ms(&system) > 0.0);
        // The gpu is within 5 ms of idle at 14 ms.
        assert_eq!(p.wake_ms(&system, &cluster, 0.0), 14.0);
        let placed = drain(&mut p, &system, &mut cluster, s.as_mut(), 14.0);
        assert_eq!(placed.iter().map(|b| b.size).sum::<usize>(), 2);
        assert!(p.is_empty());
    }

    #[test]
    fn a_forgotten_frame_is_not_placed() {
        let system = tiny();
        let mut cluster = Cluster::new(&system);
        let mut s = schedulers::by_name(&system, "camdnn-local", 5.0).unwrap();
        let mut p = Placer::new(None);
        p.hold(1, ModelId(1), 2);
        p.hold(2, ModelId(1), 1);
        p.hold(1, ModelId(1), 1);
        p.forget_frame(1);
        let batches = drain(&mut p, &system, &mut cluster, s.as_mut(), 0.0);
        assert_eq!(batches.len(), 1);
        assert_eq!((batches[0].frame, batches[0].size), (2, 1));
    }

    #[test]
    fn batch_sizes_fit_the_profile_and_the_waiting_requests() {
        let system = tiny();
        let (a, b, gpu) = (ModelId(1), ModelId(2), ProcId(1));
        assert_eq!(batch_size(&system, a, gpu, 5, 4), 3);
        assert_eq!(batch_size(&system, a, gpu, 5, 2), 2);
        assert_eq!(batch_size(&system, a, gpu, 0, 2), 1);
        assert_eq!(batch_size(&system, b, gpu, 3, 3), 2);
    }
}
