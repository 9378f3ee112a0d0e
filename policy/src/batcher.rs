//! The sync-timer batcher of Algorithm 1: requests of one model from one frame
//! are held until the planned batch is complete or WaitTime has passed.
//!
//! How we read the paper's loop `while w_i != b_k(i,j) || |SyncTimer| < WaitTime
//! do wait()`: taken literally it waits until the batch is full *and* the
//! timer has expired, and forever when the batch can never fill. We read it as
//! the evident intent: wait while `w_i < k*` *and* `timer < WaitTime`, i.e. flush as soon as
//! the planned batch k* is complete or WaitTime has passed since the first
//! waiting request arrived. We add one rule the paper's setting allows: the
//! detector tells us r_i, so once every request of the frame for that model
//! has arrived nothing more can come and we flush at once.

use crate::ModelId;

/// Why a group of requests was released.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlushReason {
    /// The waiting requests fill the planned batch.
    Full,
    /// Every request of the frame for this model has arrived.
    Complete,
    /// WaitTime passed since the first waiting request.
    Timer,
}

/// Requests released for dispatch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Flush {
    /// Frame the requests come from.
    pub frame: u64,
    /// Model they are for.
    pub model: ModelId,
    /// How many.
    pub count: usize,
    /// Why now.
    pub reason: FlushReason,
}

#[derive(Clone, Copy, Debug)]
struct Group {
    frame: u64,
    model: ModelId,
    expected: u32,
    arrived: u32,
    released: u32,
    deadline: f64,
}

/// Per-(frame, model) sync timers.
#[derive(Clone, Debug)]
pub struct SyncBatcher {
    wait_ms: f64,
    groups: Vec<Group>,
}

impl SyncBatcher {
    /// A batcher that waits at most `wait_ms` for a batch to fill.
    pub fn new(wait_ms: f64) -> Self {
        SyncBatcher {
            wait_ms: wait_ms.max(0.0),
            groups: Vec::with_capacity(64),
        }
    }

    /// WaitTime, ms.
    pub fn wait_ms(&self) -> f64 {
        self.wait_ms
    }

    /// Announces that `frame` brings `expected` more requests of `model`
    /// (known once a parent item has run: each parent answer announces its
    /// own children). Zero is ignored.
    pub fn expect(&mut self, frame: u64, model: ModelId, expected: u32) {
        if expected == 0 {
            return;
        }
        if let Some(g) = self
            .groups
            .iter_mut()
            .find(|g| g.frame == frame && g.model == model)
        {
            g.expected += expected;
        } else {
            self.groups.push(Group {
                frame,
                model,
                expected,
                arrived: 0,
                released: 0,
                deadline: f64::INFINITY,
            });
        }
    }

    /// One announced request of (`frame`, `model`) will never arrive (its
    /// input could not be made): when the rest have all arrived, what waits
    /// is released at once.
    pub fn withdraw(&mut self, frame: u64, model: ModelId) -> Option<Flush> {
        let pos = self
            .groups
            .iter()
            .position(|g| g.frame == frame && g.model == model && g.expected > g.arrived)?;
        let g = &mut self.groups[pos];
        g.expected -= 1;
        (g.arrived == g.expected && g.arrived > g.released)
            .then(|| self.release(pos, FlushReason::Complete))
    }

    /// One request of (`frame`, `model`) arrived at `now`; `target` is the
    /// planned batch size k*. Returns the requests to dispatch now, if any.
    /// A request for a group that was never announced is released alone.
    pub fn arrive(&mut self, now: f64, frame: u64, model: ModelId, target: usize) -> Option<Flush> {
        let Some(pos) = self
            .groups
            .iter()
            .position(|g| g.frame == frame && g.model == model)
        else {
            return Some(Flush {
                frame,
                model,
                count: 1,
                reason: FlushReason::Complete,
            });
        };
        let wait = self.wait_ms;
        let g = &mut self.groups[pos];
        g.arrived += 1;
        if g.arrived - g.released == 1 {
            g.deadline = now + wait;
        }
        let waiting = (g.arrived - g.released) as usize;
        let reason = if g.arrived == g.expected {
            FlushReason::Complete
        } else if waiting >= target.max(1) {
            FlushReason::Full
        } else if now >= g.deadline {
            FlushReason::Timer
        } else {
            return None;
        };
        Some(self.release(pos, reason))
    }

    /// Releases every group whose timer expired by `now`, in deadline order.
    pub fn expire(&mut self, now: f64, out: &mut Vec<Flush>) {
        while let Some(pos) = self
            .groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.arrived > g.released && g.deadline <= now)
            .min_by(|a, b| a.1.deadline.total_cmp(&b.1.deadline))
            .map(|(p, _)| p)
        {
            out.push(self.release(pos, FlushReason::Timer));
        }
    }

    /// Whether (frame, model) holds exactly one waiting request: after an
    /// [`SyncBatcher::arrive`] that released nothing, that request started
    /// the group's timer, and a driver that wakes per deadline schedules
    /// one then (later requests of the group share it).
    pub fn timer_started(&self, frame: u64, model: ModelId) -> bool {
        self.groups
            .iter()
            .any(|g| g.frame == frame && g.model == model && g.arrived - g.released == 1)
    }

    /// The earliest running timer's deadline.
    pub fn next_deadline(&self) -> Option<f64> {
        self.groups
            .iter()
            .filter(|g| g.arrived > g.released)
            .map(|g| g.deadline)
            .min_by(f64::total_cmp)
    }

    /// Requests announced but not yet released, across all groups.
    pub fn pending(&self) -> usize {
        self.groups
            .iter()
            .map(|g| (g.expected - g.released) as usize)
            .sum()
    }

    /// Forgets every group of a frame (it was dropped); returns how many
    /// requests were still pending.
    pub fn forget_frame(&mut self, frame: u64) -> usize {
        let mut n = 0;
        self.groups.retain(|g| {
            if g.frame == frame {
                n += (g.expected - g.released) as usize;
                false
            } else {
                true
            }
        });
        n
    }

    fn release(&mut self, pos: usize, reason: FlushReason) -> Flush {
        let g = &mut self.groups[pos];
        let count = (g.arrived - g.released) as usize;
        g.released = g.arrived;
        g.deadline = f64::INFINITY;
        let flush = Flush {
            frame: g.frame,
            model: g.model,
            count,
            reason,
        };
        if g.released == g.expected {
            self.groups.swap_remove(pos);
        }
        flush
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: ModelId = ModelId(1);

    #[test]
    fn flushes_when_the_planned_batch_fills() {
        let mut b = SyncBatcher::new(5.0);
        b.expect(7, M, 10);
        assert_eq!(b.arrive(0.0, 7, M, 3), None);
        assert_eq!(b.arrive(0.1, 7, M, 3), None);
        let f = b.arrive(0.2, 7, M, 3).unwrap();
        assert_eq!((f.count, f.reason), (3, FlushReason::Full));
        assert_eq!(b.pending(), 7);
    }

    #[test]
    fn timer_releases_a_partial_batch_after_wait_time() {
        let mut b = SyncBatcher::new(5.0);
        b.expect(1, M, 10);
        assert_eq!(b.arrive(10.0, 1, M, 4), None);
        assert!(b.timer_started(1, M), "the first waiting request starts it");
        assert_eq!(b.arrive(12.0, 1, M, 4), None);
        assert!(!b.timer_started(1, M), "the second shares it");
        assert_eq!(b.next_deadline(), Some(15.0));
        let mut out = Vec::new();
        b.expire(14.9, &mut out);
        assert!(out.is_empty());
        b.expire(15.0, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].count, out[0].reason), (2, FlushReason::Timer));
        // The timer restarts with the next request.
        assert_eq!(b.arrive(20.0, 1, M, 4), None);
        assert!(b.timer_started(1, M));
        assert_eq!(b.next_deadline(), Some(25.0));
    }

    #[test]
    fn last_request_of_the_frame_flushes_at_once() {
        let mut b = SyncBatcher::new(5.0);
        b.expect(3, M, 2);
        assert_eq!(b.arrive(0.0, 3, M, 5), None);
        let f = b.arrive(0.5, 3, M, 5).unwrap();
        assert_eq!((f.count, f.reason), (2, FlushReason::Complete));
        assert_eq!(b.pending(), 0);
        assert_eq!(b.next_deadline(), None);
    }

    #[test]
    fn groups_of_different_frames_and_models_are_separate() {
        let mut b = SyncBatcher::new(5.0);
        b.expect(1, M, 2);
        b.expect(2, M, 2);
        b.expect(1, ModelId(2), 2);
        assert_eq!(b.arrive(0.0, 1, M, 2), None);
        assert_eq!(b.arrive(0.0, 2, M, 2), None);
        assert_eq!(b.arrive(0.0, 1, ModelId(2), 2), None);
        assert_eq!(b.arrive(0.1, 2, M, 2).unwrap().frame, 2);
        assert_eq!(b.forget_frame(1), 4);
        assert_eq!(b.pending(), 0);
    }

    #[test]
    fn unannounced_requests_are_not_held() {
        let mut b = SyncBatcher::new(5.0);
        let f = b.arrive(0.0, 9, M, 4).unwrap();
        assert_eq!(f.count, 1);
    }
}
