//! What happens next, in time order: the simulator's event queue, also
//! used by tests that drive the daemon's pipeline on a virtual clock, so
//! both break ties between events at the same time alike.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Timed<T> {
    t: f64,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Timed<T> {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl<T> Eq for Timed<T> {}
impl<T> PartialOrd for Timed<T> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Timed<T> {
    /// Reversed so that `BinaryHeap` pops the earliest first.
    fn cmp(&self, o: &Self) -> Ordering {
        o.t.total_cmp(&self.t).then(o.seq.cmp(&self.seq))
    }
}

/// Items due at times, popped earliest first; items due at the same time in
/// the order of their sequence numbers. Frame f of a camera is numbered
/// f + 1 ([`Agenda::push_frame`]) and everything else after the last frame
/// in the order it was pushed, so a frame comes before anything else due
/// at its arrival.
pub struct Agenda<T> {
    heap: BinaryHeap<Timed<T>>,
    seq: u64,
    /// The latest wake-up pushed, ms.
    wake_at: f64,
}

impl<T> Agenda<T> {
    /// An empty agenda for a camera of `frames` frames.
    pub fn new(frames: usize) -> Self {
        Agenda {
            heap: BinaryHeap::with_capacity(1024),
            seq: frames as u64,
            wake_at: f64::NEG_INFINITY,
        }
    }

    /// `item` at `t`, after everything pushed before at `t`.
    pub fn push(&mut self, t: f64, item: T) {
        self.seq += 1;
        self.heap.push(Timed {
            t,
            seq: self.seq,
            item,
        });
    }

    /// Camera frame f's arrival at `t`.
    pub fn push_frame(&mut self, f: usize, t: f64, item: T) {
        self.heap.push(Timed {
            t,
            seq: f as u64 + 1,
            item,
        });
    }

    /// A wake-up at `wake` (no earlier than `now`), unless one is already
    /// due by then: `make` builds it.
    pub fn wake(&mut self, now: f64, wake: f64, make: impl FnOnce() -> T) {
        let w = wake.max(now);
        if w.is_finite() && (w < self.wake_at || self.wake_at <= now) {
            self.wake_at = w;
            self.push(w, make());
        }
    }

    /// The earliest item and its time.
    pub fn pop(&mut self) -> Option<(f64, T)> {
        self.heap.pop().map(|e| (e.t, e.item))
    }

    /// When the earliest item is due.
    pub fn next_time(&self) -> Option<f64> {
        self.heap.peek().map(|e| e.t)
    }
}
