//! Each camera's frame period, estimated from the frames it sends, so
//! real-time dropping (both stages of [`crate::admission`]) can hold a
//! frame to its own camera's period without the operator configuring it.
//!
//! A stream's period is the median of its last [`SAMPLES`] intervals, each
//! the time between two frames divided by how far their sequence numbers
//! are apart: frames the camera sent but that never arrived (dropped
//! upstream, or superseded at admission) do not stretch it, jitter and a
//! stray late frame do not move it, and a pause longer than [`MAX_PERIOD_MS`]
//! (a camera that stopped and started again) is not a sample. Times come
//! from the caller (the camera's capture clock when it has one), ms. At most
//! [`MAX_STREAMS`] streams are tracked; a new one past that replaces the one
//! seen longest ago, so no input grows it without bound. Pure: no clock.

use std::collections::HashMap;

/// Intervals the median is taken over, per stream.
pub const SAMPLES: usize = 8;

/// The longest interval taken as a frame period, ms: a longer gap is a
/// pause, not a rate.
pub const MAX_PERIOD_MS: f64 = 2000.0;

/// Streams tracked at once.
pub const MAX_STREAMS: usize = 1024;

/// One stream's latest frame and its recent intervals.
#[derive(Clone, Debug)]
struct Stream {
    seq: u64,
    t_ms: f64,
    samples: [f64; SAMPLES],
    len: usize,
    next: usize,
}

impl Stream {
    fn period_ms(&self) -> Option<f64> {
        if self.len == 0 {
            return None;
        }
        let mut s = self.samples;
        let s = &mut s[..self.len];
        s.sort_by(f64::total_cmp);
        Some(if self.len % 2 == 1 {
            s[self.len / 2]
        } else {
            (s[self.len / 2 - 1] + s[self.len / 2]) / 2.0
        })
    }
}

/// Every stream's frame period (see the module's doc).
#[derive(Clone, Debug, Default)]
pub struct FramePeriods {
    streams: HashMap<u64, Stream>,
}

impl FramePeriods {
    /// An estimator that has seen no frame.
    pub fn new() -> Self {
        Self::default()
    }

    /// Frame `seq` of `stream` at `t_ms`: its interval from the stream's
    /// last frame is a sample when both moved forward and it is not a
    /// pause. Returns the stream's period estimate, ms (`None` until a
    /// first interval).
    pub fn observe(&mut self, stream: u64, seq: u64, t_ms: f64) -> Option<f64> {
        if !t_ms.is_finite() {
            return self.streams.get(&stream).and_then(Stream::period_ms);
        }
        if !self.streams.contains_key(&stream) && self.streams.len() >= MAX_STREAMS {
            let oldest = self
                .streams
                .iter()
                .min_by(|a, b| a.1.t_ms.total_cmp(&b.1.t_ms))
                .map(|(k, _)| *k);
            if let Some(k) = oldest {
                self.streams.remove(&k);
            }
        }
        let s = self.streams.entry(stream).or_insert(Stream {
            seq,
            t_ms,
            samples: [0.0; SAMPLES],
            len: 0,
            next: 0,
        });
        if seq > s.seq && t_ms > s.t_ms {
            let interval = (t_ms - s.t_ms) / (seq - s.seq) as f64;
            if interval <= MAX_PERIOD_MS {
                s.samples[s.next] = interval;
                s.next = (s.next + 1) % SAMPLES;
                s.len = (s.len + 1).min(SAMPLES);
            }
        }
        if seq >= s.seq {
            s.seq = seq;
            s.t_ms = t_ms;
        }
        s.period_ms()
    }

    /// The period of `stream`, ms, if known.
    pub fn period_ms(&self, stream: u64) -> Option<f64> {
        self.streams.get(&stream).and_then(Stream::period_ms)
    }

    /// Streams tracked now.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// Whether no stream is tracked.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: f64 = 1000.0 / 14.0;

    #[test]
    fn a_steady_camera_has_its_period_from_the_second_frame() {
        let mut fp = FramePeriods::new();
        assert_eq!(fp.observe(7, 0, 0.0), None);
        for n in 1..20u64 {
            let p = fp.observe(7, n, n as f64 * P).expect("an estimate");
            assert!((p - P).abs() < 1e-9, "{p}");
        }
        assert_eq!(fp.period_ms(8), None, "another stream is unknown");
    }

    #[test]
    fn frames_that_never_arrived_do_not_stretch_the_period() {
        let mut fp = FramePeriods::new();
        // Every third frame arrives: seq 0, 3, 6, ... at 3 periods apart.
        for n in 0..10u64 {
            fp.observe(1, 3 * n, 3.0 * n as f64 * P);
        }
        assert!((fp.period_ms(1).unwrap() - P).abs() < 1e-9);
    }

    #[test]
    fn jitter_a_late_frame_and_a_pause_do_not_move_it() {
        let mut fp = FramePeriods::new();
        let mut t = 0.0;
        for n in 0..40u64 {
            // +-5 ms of jitter, one frame 300 ms late at 20, a 10 s pause at 30.
            t += P + if n % 2 == 0 { 5.0 } else { -5.0 };
            let at = if n == 20 { t + 300.0 } else { t };
            if n == 30 {
                t += 10_000.0;
            }
            fp.observe(1, n, at);
        }
        let p = fp.period_ms(1).unwrap();
        assert!((p - P).abs() <= 5.0, "{p}");
    }

    #[test]
    fn time_or_seq_going_backwards_is_not_a_sample() {
        let mut fp = FramePeriods::new();
        const P: f64 = 70.0;
        fp.observe(1, 10, 1000.0);
        fp.observe(1, 11, 1000.0 + P);
        assert_eq!(fp.observe(1, 12, 500.0), Some(P), "time went back");
        assert_eq!(fp.observe(1, 5, 5000.0), Some(P), "seq went back");
        assert_eq!(fp.observe(1, 13, f64::NAN), Some(P));
        assert_eq!(fp.observe(1, 13, f64::INFINITY), Some(P));
    }

    #[test]
    fn the_streams_tracked_are_bounded_and_the_oldest_goes_first() {
        let mut fp = FramePeriods::new();
        for s in 0..(MAX_STREAMS as u64 + 10) {
            fp.observe(s, 0, s as f64);
            fp.observe(s, 1, s as f64 + P);
        }
        assert_eq!(fp.len(), MAX_STREAMS);
        assert_eq!(fp.period_ms(0), None, "the oldest stream went");
        assert!(fp.period_ms(MAX_STREAMS as u64 + 9).is_some());
    }
}
