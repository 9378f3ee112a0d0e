//! Admission control: which received frame goes to the frame processor next.
//!
//! Pure bookkeeping (no I/O, time passed in), so every rule is unit-tested:
//! each stream has at most one *pending* frame (a newer one supersedes it, so
//! the newest frame wins when a stream falls behind); pending frames are
//! bounded over all connections; a frame is submitted only while fewer than
//! the processor's limit are in flight overall and fewer than
//! `stream_max_in_flight` of its own stream; the highest priority goes first,
//! then the oldest; a frame whose deadline has passed is never submitted.

use std::collections::HashMap;
use std::time::Instant;

use camdnn_protocol::Frame;

/// Identifies a stream across connections: (connection id, stream id).
pub type StreamKey = (u64, u32);

/// A frame waiting for admission, with whatever the caller needs to answer it.
#[derive(Debug)]
pub struct Waiting<R> {
    /// The frame (its priority already filled in).
    pub frame: Frame,
    /// When the server finished reading it.
    pub received: Instant,
    /// After this it is dropped instead of processed.
    pub deadline: Option<Instant>,
    /// The connection's reply handle.
    pub reply: R,
}

/// What became of an offered frame.
#[derive(Debug)]
pub enum Offer<R> {
    /// It waits; nothing to answer yet.
    Queued,
    /// It waits and replaced this older frame of its stream (answer it `Superseded`).
    Superseded(Waiting<R>),
    /// The pending table is full: the offered frame itself is refused (answer `Overloaded`).
    Overloaded(Waiting<R>),
    /// The server is draining: the offered frame is refused (answer `ShuttingDown`).
    ShuttingDown(Waiting<R>),
}

/// The next thing to do with a pending frame.
#[derive(Debug)]
pub enum Next<R> {
    /// Hand it to the processor (it now counts as in flight until [`Admission::finished`]).
    Submit(StreamKey, Waiting<R>),
    /// Its deadline passed while it waited (answer `DeadlinePassed`).
    Expired(Waiting<R>),
}

struct Entry<R> {
    waiting: Waiting<R>,
    order: u64,
}

/// The admission table.
pub struct Admission<R> {
    pending: HashMap<StreamKey, Entry<R>>,
    stream_in_flight: HashMap<StreamKey, usize>,
    in_flight: usize,
    max_pending: usize,
    stream_max_in_flight: usize,
    next_order: u64,
    draining: bool,
}

impl<R> Admission<R> {
    /// An empty table holding at most `max_pending` waiting frames and letting
    /// at most `stream_max_in_flight` frames of one stream into the processor.
    pub fn new(max_pending: usize, stream_max_in_flight: usize) -> Self {
        Self {
            pending: HashMap::new(),
            stream_in_flight: HashMap::new(),
            in_flight: 0,
            max_pending: max_pending.max(1),
            stream_max_in_flight: stream_max_in_flight.max(1),
            next_order: 0,
            draining: false,
        }
    }

    /// Changes the limits (config reload); frames already held stay.
    pub fn set_limits(&mut self, max_pending: usize, stream_max_in_flight: usize) {
        self.max_pending = max_pending.max(1);
        self.stream_max_in_flight = stream_max_in_flight.max(1);
    }

    /// Offers a newly received frame of stream `key`.
    pub fn offer(&mut self, key: StreamKey, waiting: Waiting<R>) -> Offer<R> {
        if self.draining {
            return Offer::ShuttingDown(waiting);
        }
        let order = self.next_order;
        self.next_order += 1;
        let entry = Entry { waiting, order };
        if let Some(old) = self.pending.insert(key, entry) {
            return Offer::Superseded(old.waiting);
        }
        if self.pending.len() > self.max_pending {
            let refused = self.pending.remove(&key).map(|e| e.waiting);
            return refused.map_or(Offer::Queued, Offer::Overloaded);
        }
        Offer::Queued
    }

    /// The next frame to submit or expire, given the processor's current
    /// in-flight limit; `None` when nothing can move now.
    pub fn next(&mut self, now: Instant, max_in_flight: usize) -> Option<Next<R>> {
        let expired = self
            .pending
            .iter()
            .find(|(_, e)| e.waiting.deadline.is_some_and(|d| d <= now))
            .map(|(k, _)| *k);
        if let Some(k) = expired {
            return self.pending.remove(&k).map(|e| Next::Expired(e.waiting));
        }
        if self.in_flight >= max_in_flight.max(1) {
            return None;
        }
        let key = self
            .pending
            .iter()
            .filter(|(k, _)| {
                self.stream_in_flight.get(*k).copied().unwrap_or(0) < self.stream_max_in_flight
            })
            .max_by_key(|(_, e)| {
                (
                    e.waiting.frame.priority.unwrap_or(0),
                    std::cmp::Reverse(e.order),
                )
            })
            .map(|(k, _)| *k)?;
        let entry = self.pending.remove(&key)?;
        self.in_flight += 1;
        *self.stream_in_flight.entry(key).or_insert(0) += 1;
        Some(Next::Submit(key, entry.waiting))
    }

    /// A submitted frame of `key` has been answered.
    pub fn finished(&mut self, key: StreamKey) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(n) = self.stream_in_flight.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.stream_in_flight.remove(&key);
            }
        }
    }

    /// Starts draining: refuses new frames from now on and returns every
    /// pending one (answer them `ShuttingDown`).
    pub fn drain(&mut self) -> Vec<Waiting<R>> {
        self.draining = true;
        let mut out: Vec<Entry<R>> = self.pending.drain().map(|(_, e)| e).collect();
        out.sort_by_key(|e| e.order);
        out.into_iter().map(|e| e.waiting).collect()
    }

    /// Frames in the processor now.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Frames waiting for admission now.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// True once [`Admission::drain`] has been called.
    pub fn is_draining(&self) -> bool {
        self.draining
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use camdnn_protocol::PixelFormat;
    use std::time::Duration;

    fn w(stream: u32, seq: u64, prio: u8, deadline: Option<Instant>) -> Waiting<u64> {
        Waiting {
            frame: Frame {
                stream_id: stream,
                seq,
                capture_ts_us: 0,
                width: 1,
                height: 1,
                pixel_format: PixelFormat::Rgb24,
                priority: Some(prio),
                deadline: None,
                detections: None,
                payload: Bytes::from_static(&[0, 0, 0]),
            },
            received: Instant::now(),
            deadline,
            reply: seq,
        }
    }

    fn submitted(n: Option<Next<u64>>) -> (StreamKey, u64) {
        match n {
            Some(Next::Submit(k, w)) => (k, w.reply),
            other => panic!("expected a submission, got {other:?}"),
        }
    }

    #[test]
    fn newest_frame_of_a_stream_supersedes_the_pending_one() {
        let mut a = Admission::new(8, 1);
        assert!(matches!(a.offer((0, 1), w(1, 1, 0, None)), Offer::Queued));
        match a.offer((0, 1), w(1, 2, 0, None)) {
            Offer::Superseded(old) => assert_eq!(old.reply, 1),
            other => panic!("{other:?}"),
        }
        assert_eq!(a.pending(), 1);
        assert_eq!(submitted(a.next(Instant::now(), 4)), ((0, 1), 2));
    }

    #[test]
    fn priority_first_then_oldest() {
        let mut a = Admission::new(8, 1);
        a.offer((0, 1), w(1, 10, 5, None));
        a.offer((0, 2), w(2, 20, 9, None));
        a.offer((0, 3), w(3, 30, 9, None));
        let now = Instant::now();
        assert_eq!(submitted(a.next(now, 8)).1, 20);
        assert_eq!(submitted(a.next(now, 8)).1, 30);
        assert_eq!(submitted(a.next(now, 8)).1, 10);
        assert!(a.next(now, 8).is_none());
    }

    #[test]
    fn processor_and_stream_limits_hold_frames_back() {
        let mut a = Admission::new(8, 1);
        let now = Instant::now();
        a.offer((0, 1), w(1, 1, 0, None));
        a.offer((0, 2), w(2, 1, 0, None));
        let (k, _) = submitted(a.next(now, 1));
        assert!(a.next(now, 1).is_none(), "processor limit of 1 reached");
        a.finished(k);
        let (k2, _) = submitted(a.next(now, 1));
        assert_ne!(k, k2);
        a.finished(k2);
        // Stream limit: a second frame of a stream waits while one is in the processor.
        a.offer((0, 1), w(1, 2, 0, None));
        submitted(a.next(now, 8));
        a.offer((0, 1), w(1, 3, 0, None));
        assert!(a.next(now, 8).is_none(), "stream limit of 1 reached");
        a.finished((0, 1));
        assert_eq!(submitted(a.next(now, 8)).1, 3);
        assert_eq!(a.in_flight(), 1);
    }

    #[test]
    fn expired_frames_are_never_submitted() {
        let mut a = Admission::new(8, 1);
        let now = Instant::now();
        a.offer((0, 1), w(1, 1, 0, Some(now)));
        a.offer((0, 2), w(2, 1, 0, Some(now + Duration::from_secs(60))));
        match a.next(now, 8) {
            Some(Next::Expired(x)) => assert_eq!(x.frame.stream_id, 1),
            other => panic!("{other:?}"),
        }
        assert_eq!(submitted(a.next(now, 8)).0, (0, 2));
    }

    #[test]
    fn full_table_refuses_new_streams_but_not_replacements() {
        let mut a = Admission::new(2, 1);
        a.offer((0, 1), w(1, 1, 0, None));
        a.offer((0, 2), w(2, 1, 0, None));
        match a.offer((0, 3), w(3, 1, 0, None)) {
            Offer::Overloaded(x) => assert_eq!(x.frame.stream_id, 3),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            a.offer((0, 2), w(2, 2, 0, None)),
            Offer::Superseded(_)
        ));
        assert_eq!(a.pending(), 2);
    }

    #[test]
    fn drain_returns_pending_and_refuses_new() {
        let mut a = Admission::new(8, 1);
        a.offer((0, 1), w(1, 1, 0, None));
        a.offer((1, 1), w(1, 7, 0, None));
        let d = a.drain();
        assert_eq!(d.iter().map(|x| x.reply).collect::<Vec<_>>(), vec![1, 7]);
        assert!(matches!(
            a.offer((0, 1), w(1, 2, 0, None)),
            Offer::ShuttingDown(_)
        ));
        assert!(a.next(Instant::now(), 8).is_none());
    }
}
