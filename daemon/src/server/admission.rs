//! Admission control: which received frame goes to the frame processor next.
//!
//! Pure bookkeeping (no I/O, time passed in), so every rule is unit-tested:
//! each stream has at most one *pending* frame (a newer one supersedes it, so
//! the newest frame wins when a stream falls behind); pending frames are
//! bounded over all connections, and when the table is full a new frame
//! displaces the newest frame of the connection holding the most (never one
//! of a connection holding fewer); a frame is submitted only while fewer than
//! the processor's limit are in flight overall and fewer than
//! `stream_max_in_flight` of its own stream; a frame whose deadline has
//! passed is never submitted.
//!
//! **Fair service.** Each frame is offered with its expected work in
//! milliseconds (the pipeline's estimate from the profile, not a frame
//! count). The table keeps, per connection and per stream, the work admitted
//! so far (its *service*); the next frame comes from the eligible connection
//! with the least service, and within it from the highest priority, then the
//! stream with the least service, then the oldest frame. A connection (or
//! stream) that becomes active starts at the least service of those already
//! waiting, so idle time is not saved up as credit. This is start-time fair
//! queuing on work: while connection L's frame of cost `c_L` waits, another
//! connection X with frames of cost `c_X` gets at most `c_L + c_X` ms of work
//! admitted ahead of it once L's service is at the floor (its earlier frames
//! having been admitted), that is at most `1 + ceil(c_L / c_X)` frames.
//! Priority orders frames within a connection only: a client cannot buy
//! itself a larger share by raising it.

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
    /// The table was full: the offered frame waits and this pending frame of
    /// a connection holding more was displaced (answer it `Overloaded`).
    Displaced(Waiting<R>),
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
    /// Expected work of the frame, ms.
    cost_ms: f64,
}

/// Work admitted so far to one connection or stream (its service), ms, and
/// how many of its frames are pending or in flight (it is forgotten at 0).
#[derive(Debug, Default, Clone, Copy)]
struct Share {
    served_ms: f64,
    holding: usize,
}

/// The admission table.
pub struct Admission<R> {
    pending: HashMap<StreamKey, Entry<R>>,
    stream_in_flight: HashMap<StreamKey, usize>,
    conns: HashMap<u64, Share>,
    streams: HashMap<StreamKey, Share>,
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
            conns: HashMap::new(),
            streams: HashMap::new(),
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

    /// Offers a newly received frame of stream `key` whose expected work is
    /// `cost_ms` (anything not finite and positive counts as 1 ms).
    pub fn offer(&mut self, key: StreamKey, waiting: Waiting<R>, cost_ms: f64) -> Offer<R> {
        if self.draining {
            return Offer::ShuttingDown(waiting);
        }
        let cost_ms = if cost_ms.is_finite() && cost_ms > 0.0 {
            cost_ms
        } else {
            1.0
        };
        let order = self.next_order;
        self.next_order += 1;
        let entry = Entry {
            waiting,
            order,
            cost_ms,
        };
        if let Some(old) = self.pending.insert(key, entry) {
            return Offer::Superseded(old.waiting);
        }
        self.hold(key);
        if self.pending.len() > self.max_pending {
            // Full: the connection holding the most pending frames gives up
            // its newest one; the offered frame itself when that is its own.
            let mut per_conn: HashMap<u64, usize> = HashMap::new();
            for k in self.pending.keys() {
                *per_conn.entry(k.0).or_default() += 1;
            }
            let mine = per_conn.get(&key.0).copied().unwrap_or(0);
            let victim = self
                .pending
                .iter()
                .filter(|(k, _)| per_conn[&k.0] > mine || k.0 == key.0)
                .max_by_key(|(k, e)| (per_conn[&k.0], e.order))
                .map(|(k, _)| *k)
                .unwrap_or(key);
            let refused = self.pending.remove(&victim).map(|e| e.waiting);
            self.release(victim);
            return match refused {
                Some(w) if victim == key => Offer::Overloaded(w),
                Some(w) => Offer::Displaced(w),
                None => Offer::Queued,
            };
        }
        Offer::Queued
    }

    /// The earliest deadline of a waiting frame.
    pub fn earliest_deadline(&self) -> Option<Instant> {
        self.pending
            .values()
            .filter_map(|e| e.waiting.deadline)
            .min()
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
            let e = self.pending.remove(&k)?;
            self.release(k);
            return Some(Next::Expired(e.waiting));
        }
        if self.in_flight >= max_in_flight.max(1) {
            return None;
        }
        let conn_served = |c: u64| self.conns.get(&c).map_or(0.0, |s| s.served_ms);
        let stream_served = |k: &StreamKey| self.streams.get(k).map_or(0.0, |s| s.served_ms);
        let eligible: Vec<(StreamKey, &Entry<R>)> = self
            .pending
            .iter()
            .filter(|(k, _)| {
                self.stream_in_flight.get(*k).copied().unwrap_or(0) < self.stream_max_in_flight
            })
            .map(|(k, e)| (*k, e))
            .collect();
        // The connection with the least service (oldest frame on a tie) ...
        let conn = eligible
            .iter()
            .min_by(|(a, ea), (b, eb)| {
                conn_served(a.0)
                    .total_cmp(&conn_served(b.0))
                    .then(ea.order.cmp(&eb.order))
            })
            .map(|(k, _)| k.0)?;
        // ... and its frame of the highest priority, least-served stream, oldest.
        let prio = |e: &Entry<R>| e.waiting.frame.priority.unwrap_or(0);
        let key = eligible
            .iter()
            .filter(|(k, _)| k.0 == conn)
            .min_by(|(a, ea), (b, eb)| {
                prio(eb)
                    .cmp(&prio(ea))
                    .then(stream_served(a).total_cmp(&stream_served(b)))
                    .then(ea.order.cmp(&eb.order))
            })
            .map(|(k, _)| *k)?;
        let entry = self.pending.remove(&key)?;
        self.in_flight += 1;
        *self.stream_in_flight.entry(key).or_insert(0) += 1;
        if let Some(s) = self.conns.get_mut(&key.0) {
            s.served_ms += entry.cost_ms;
        }
        if let Some(s) = self.streams.get_mut(&key) {
            s.served_ms += entry.cost_ms;
        }
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
        self.release(key);
    }

    /// Starts draining: refuses new frames from now on and returns every
    /// pending one (answer them `ShuttingDown`).
    pub fn drain(&mut self) -> Vec<Waiting<R>> {
        self.draining = true;
        let mut out: Vec<(StreamKey, Entry<R>)> = self.pending.drain().collect();
        out.sort_by_key(|(_, e)| e.order);
        for (k, _) in &out {
            self.release(*k);
        }
        out.into_iter().map(|(_, e)| e.waiting).collect()
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

    /// Counts the new pending frame of `key`. A connection with no other
    /// frame waiting starts at least at the least service of the connections
    /// waiting (and a stream at that of its connection's waiting streams), so
    /// time spent idle or in flight is not saved up as credit.
    fn hold(&mut self, key: StreamKey) {
        fn least<K: std::hash::Hash + Eq>(
            shares: &HashMap<K, Share>,
            keys: impl Iterator<Item = K>,
        ) -> Option<f64> {
            keys.filter_map(|k| shares.get(&k).map(|s| s.served_ms))
                .reduce(f64::min)
        }
        let waiting = || self.pending.keys().filter(move |k| **k != key);
        let conn_idle = !waiting().any(|k| k.0 == key.0);
        let conn_floor = least(&self.conns, waiting().filter(|k| k.0 != key.0).map(|k| k.0));
        let stream_floor = least(&self.streams, waiting().filter(|k| k.0 == key.0).copied());
        let conn = self.conns.entry(key.0).or_default();
        if conn_idle {
            conn.served_ms = conn.served_ms.max(conn_floor.unwrap_or(0.0));
        }
        conn.holding += 1;
        let stream = self.streams.entry(key).or_default();
        stream.served_ms = stream.served_ms.max(stream_floor.unwrap_or(0.0));
        stream.holding += 1;
    }

    /// One frame of `key` is no longer pending or in flight.
    fn release(&mut self, key: StreamKey) {
        fn drop_one<K: std::hash::Hash + Eq>(m: &mut HashMap<K, Share>, k: K) {
            if let Some(s) = m.get_mut(&k) {
                s.holding = s.holding.saturating_sub(1);
                if s.holding == 0 {
                    m.remove(&k);
                }
            }
        }
        drop_one(&mut self.conns, key.0);
        drop_one(&mut self.streams, key);
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
        assert!(matches!(
            a.offer((0, 1), w(1, 1, 0, None), 1.0),
            Offer::Queued
        ));
        match a.offer((0, 1), w(1, 2, 0, None), 1.0) {
            Offer::Superseded(old) => assert_eq!(old.reply, 1),
            other => panic!("{other:?}"),
        }
        assert_eq!(a.pending(), 1);
        assert_eq!(submitted(a.next(Instant::now(), 4)), ((0, 1), 2));
    }

    #[test]
    fn priority_first_then_oldest() {
        let mut a = Admission::new(8, 1);
        a.offer((0, 1), w(1, 10, 5, None), 1.0);
        a.offer((0, 2), w(2, 20, 9, None), 1.0);
        a.offer((0, 3), w(3, 30, 9, None), 1.0);
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
        a.offer((0, 1), w(1, 1, 0, None), 1.0);
        a.offer((0, 2), w(2, 1, 0, None), 1.0);
        let (k, _) = submitted(a.next(now, 1));
        assert!(a.next(now, 1).is_none(), "processor limit of 1 reached");
        a.finished(k);
        let (k2, _) = submitted(a.next(now, 1));
        assert_ne!(k, k2);
        a.finished(k2);
        // Stream limit: a second frame of a stream waits while one is in the processor.
        a.offer((0, 1), w(1, 2, 0, None), 1.0);
        submitted(a.next(now, 8));
        a.offer((0, 1), w(1, 3, 0, None), 1.0);
        assert!(a.next(now, 8).is_none(), "stream limit of 1 reached");
        a.finished((0, 1));
        assert_eq!(submitted(a.next(now, 8)).1, 3);
        assert_eq!(a.in_flight(), 1);
    }

    #[test]
    fn expired_frames_are_never_submitted() {
        let mut a = Admission::new(8, 1);
        let now = Instant::now();
        a.offer((0, 1), w(1, 1, 0, Some(now)), 1.0);
        a.offer((0, 2), w(2, 1, 0, Some(now + Duration::from_secs(60))), 1.0);
        match a.next(now, 8) {
            Some(Next::Expired(x)) => assert_eq!(x.frame.stream_id, 1),
            other => panic!("{other:?}"),
        }
        assert_eq!(submitted(a.next(now, 8)).0, (0, 2));
    }

    #[test]
    fn full_table_refuses_new_streams_but_not_replacements() {
        let mut a = Admission::new(2, 1);
        a.offer((0, 1), w(1, 1, 0, None), 1.0);
        a.offer((0, 2), w(2, 1, 0, None), 1.0);
        match a.offer((0, 3), w(3, 1, 0, None), 1.0) {
            Offer::Overloaded(x) => assert_eq!(x.frame.stream_id, 3),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            a.offer((0, 2), w(2, 2, 0, None), 1.0),
            Offer::Superseded(_)
        ));
        assert_eq!(a.pending(), 2);
    }

    #[test]
    fn drain_returns_pending_and_refuses_new() {
        let mut a = Admission::new(8, 1);
        a.offer((0, 1), w(1, 1, 0, None), 1.0);
        a.offer((1, 1), w(1, 7, 0, None), 1.0);
        let d = a.drain();
        assert_eq!(d.iter().map(|x| x.reply).collect::<Vec<_>>(), vec![1, 7]);
        assert!(matches!(
            a.offer((0, 1), w(1, 2, 0, None), 1.0),
            Offer::ShuttingDown(_)
        ));
        assert!(a.next(Instant::now(), 8).is_none());
    }

    /// One admission of [`saturate`]: the stream, the frame's cost, and how
    /// many frames of other connections were admitted while this one waited
    /// (pending and free to enter: its stream had nothing in flight).
    struct Admitted {
        key: StreamKey,
        cost_ms: f64,
        others_ahead: usize,
    }

    /// Drives a table as the server does: `streams` lists (connection,
    /// stream, cost ms, priority); every stream offers its next frame as soon
    /// as the previous one is admitted (a saturating client), the processor
    /// takes `max_in_flight` frames and finishes the oldest first.
    fn saturate(
        streams: &[(u64, u32, f64, u8)],
        max_in_flight: usize,
        admissions: usize,
    ) -> Vec<Admitted> {
        let mut a = Admission::new(1024, 1);
        let now = Instant::now();
        let spec = |k: StreamKey| *streams.iter().find(|x| (x.0, x.1) == k).unwrap();
        let mut seq = 0;
        for &(c, s, ms, prio) in streams {
            seq += 1;
            a.offer((c, s), w(s, seq, prio, None), ms);
        }
        // Per stream: admissions of other connections since it was free to enter.
        let mut waited: HashMap<StreamKey, usize> =
            streams.iter().map(|x| ((x.0, x.1), 0)).collect();
        let mut inside = std::collections::VecDeque::new();
        let mut out = Vec::new();
        while out.len() < admissions {
            while let Some(n) = a.next(now, max_in_flight) {
                let (k, _) = submitted(Some(n));
                let (c, s, ms, prio) = spec(k);
                out.push(Admitted {
                    key: k,
                    cost_ms: ms,
                    others_ahead: waited[&k],
                });
                for (other, n) in waited.iter_mut() {
                    if other.0 != k.0 && !inside.contains(other) {
                        *n += 1;
                    }
                }
                waited.insert(k, 0);
                inside.push_back(k);
                seq += 1;
                a.offer((c, s), w(s, seq, prio, None), ms);
            }
            let done = inside.pop_front().expect("something is in flight");
            a.finished(done);
            waited.insert(done, 0);
        }
        out
    }

    /// One connection with 64 streams must not push a well-behaved
    /// client's latency from 14 ms to seconds. The bound (operations guide):
    /// while a frame of cost c_L waits, another connection with frames of
    /// cost c_X gets at most 1 + ceil(c_L / c_X) frames admitted ahead of it.
    #[test]
    fn sixty_four_streams_on_one_connection_do_not_starve_another_client() {
        let (c_heavy, c_light) = (10.0, 10.0);
        let mut streams: Vec<_> = (0..64).map(|s| (0, s, c_heavy, 0)).collect();
        streams.push((1, 0, c_light, 0));
        let order = saturate(&streams, 4, 2000);
        let bound = 1 + (c_light / c_heavy).ceil() as usize;
        let light: Vec<&Admitted> = order.iter().filter(|x| x.key.0 == 1).collect();
        assert!(light.len() >= 100, "only {} light admissions", light.len());
        for x in light {
            assert!(
                x.others_ahead <= bound,
                "{} frames of the 64-stream client went ahead of the light one (bound {bound})",
                x.others_ahead
            );
        }
    }

    /// Heavy frames at the highest priority do not buy a larger share: the
    /// work admitted to two saturating connections stays within one frame of
    /// each (c_A + c_B) at every point, whatever their frame costs.
    #[test]
    fn work_not_frames_is_shared_between_connections() {
        let (c_heavy, c_light) = (200.0, 5.0);
        let mut streams: Vec<_> = (0..8).map(|s| (0, s, c_heavy, 255)).collect();
        streams.extend((0..8).map(|s| (1, s, c_light, 0)));
        let mut work = [0.0, 0.0];
        for x in saturate(&streams, 1, 3000) {
            work[x.key.0 as usize] += x.cost_ms;
            assert!(
                (work[0] - work[1]).abs() <= c_heavy + c_light,
                "admitted work heavy {} ms vs light {} ms",
                work[0],
                work[1]
            );
        }
    }

    /// Within one connection the streams share its work the same way.
    #[test]
    fn streams_of_one_connection_share_its_work() {
        let streams = [(0, 1, 50.0, 0), (0, 2, 1.0, 0), (0, 3, 1.0, 0)];
        let mut work: HashMap<u32, f64> = HashMap::new();
        for x in saturate(&streams, 1, 600) {
            *work.entry(x.key.1).or_default() += x.cost_ms;
            let (lo, hi) = work
                .values()
                .fold((f64::INFINITY, 0.0f64), |(l, h), &v| (l.min(v), h.max(v)));
            if work.len() == 3 {
                assert!(hi - lo <= 51.0, "stream work spread {lo}..{hi} ms");
            }
        }
    }

    #[test]
    fn a_full_table_is_shared_by_connections() {
        let mut a = Admission::new(4, 1);
        for s in 0..4 {
            a.offer((0, s), w(s, 1, 0, None), 1.0);
        }
        match a.offer((1, 0), w(0, 1, 0, None), 1.0) {
            Offer::Displaced(x) => assert_eq!(x.frame.stream_id, 3, "the newest of connection 0"),
            other => panic!("{other:?}"),
        }
        match a.offer((0, 9), w(9, 1, 0, None), 1.0) {
            Offer::Overloaded(x) => assert_eq!(x.frame.stream_id, 9),
            other => panic!("{other:?}"),
        }
        assert_eq!(a.pending(), 4);
    }
}
