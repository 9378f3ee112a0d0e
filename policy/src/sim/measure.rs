//! Measures that dropping cannot game: every offered frame is on time,
//! late or dropped, and the headline figures are taken over *all* offered
//! frames.
//!
//! Definitions (docs/results.md and `camdnnd simulate` use them):
//! - a frame is **on time** when its result came within the deadline
//!   (delay <= deadline), **late** when it came after it, **dropped** when
//!   it never got a result (the pipeline was too far behind when it
//!   arrived, a newer frame superseded it while it waited for a place, or
//!   deadline admission refused it);
//! - **goodput** = on time / offered;
//! - **delay percentiles** are nearest-rank percentiles over every offered
//!   frame, a dropped frame's delay being `+inf` (a miss worse than any
//!   answer). Turning an answered frame into a dropped one can therefore
//!   never lower a percentile, and it lowers goodput unless the frame was
//!   late already;
//! - the **mean** delay is defined only when no frame was dropped (an
//!   infinite sample has no finite mean): `None` otherwise.
//!
//! Schedulers are ranked by [`Accounting::rank_cmp`]: goodput first, then
//! p50, p90 and p99 over all offered frames.

use std::cmp::Ordering;

use super::FrameOutcome;
use crate::stats::percentile;

/// The default deadline: two frame periods at `fps` frames per second, ms.
pub fn default_deadline_ms(fps: f64) -> f64 {
    2.0 * 1000.0 / fps
}

/// Accounting of a run's offered frames against a deadline.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Accounting {
    /// The deadline the frames were judged against, ms.
    pub deadline_ms: f64,
    /// Frames the camera offered.
    pub offered: usize,
    /// Answered within the deadline.
    pub on_time: usize,
    /// Answered after the deadline.
    pub late: usize,
    /// Never answered (dropped).
    pub dropped: usize,
    /// Delay percentiles and mean over every offered frame (a drop is `+inf`).
    pub delay: OfferedDelay,
}

/// Delay over every offered frame, a dropped frame counting as `+inf`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OfferedDelay {
    /// Median (nearest rank), ms; `+inf` when more than half were dropped.
    pub p50: f64,
    /// 90th percentile (nearest rank), ms.
    pub p90: f64,
    /// 99th percentile (nearest rank), ms.
    pub p99: f64,
    /// Mean, ms; `None` when a frame was dropped (or none was offered).
    pub mean: Option<f64>,
}

impl Accounting {
    /// Accounts `frames` against `deadline_ms`.
    pub fn of(frames: &[FrameOutcome], deadline_ms: f64) -> Accounting {
        let delays: Vec<Option<f64>> = frames.iter().map(|f| f.delay_ms).collect();
        Accounting::of_delays(&delays, deadline_ms)
    }

    /// Accounts a delay per offered frame (`None`: dropped) against
    /// `deadline_ms`; for callers with their own frame records (the bench).
    pub fn of_delays(delays: &[Option<f64>], deadline_ms: f64) -> Accounting {
        let mut all: Vec<f64> = delays.iter().map(|d| d.unwrap_or(f64::INFINITY)).collect();
        all.sort_by(f64::total_cmp);
        let answered = delays.iter().flatten();
        let on_time = answered.clone().filter(|&&d| d <= deadline_ms).count();
        let late = answered.count() - on_time;
        let offered = delays.len();
        let dropped = offered - on_time - late;
        let mean = (offered > 0 && dropped == 0).then(|| all.iter().sum::<f64>() / offered as f64);
        let pct = |q| {
            if all.is_empty() {
                0.0
            } else {
                percentile(&all, q)
            }
        };
        Accounting {
            deadline_ms,
            offered,
            on_time,
            late,
            dropped,
            delay: OfferedDelay {
                p50: pct(0.50),
                p90: pct(0.90),
                p99: pct(0.99),
                mean,
            },
        }
    }

    /// On-time share of offered frames (1 when none was offered).
    pub fn goodput(&self) -> f64 {
        if self.offered == 0 {
            1.0
        } else {
            self.on_time as f64 / self.offered as f64
        }
    }

    /// Orders runs best first by the headline measure: higher goodput, then
    /// lower p50, p90 and p99 over all offered frames.
    pub fn rank_cmp(&self, other: &Accounting) -> Ordering {
        other
            .goodput()
            .total_cmp(&self.goodput())
            .then(self.delay.p50.total_cmp(&other.delay.p50))
            .then(self.delay.p90.total_cmp(&other.delay.p90))
            .then(self.delay.p99.total_cmp(&other.delay.p99))
    }
}

/// Distance to the frame bound: each offered frame's delay over its
/// makespan lower bound ([`crate::bound::frame_bound`], recorded by the
/// simulator at the frame's arrival), a dropped frame counting as `+inf`.
/// The delay includes queueing behind earlier frames; the bound does not.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoundRatio {
    /// Median ratio (nearest rank); 1 would be every frame at its bound.
    pub p50: f64,
    /// 90th percentile ratio (nearest rank).
    pub p90: f64,
}

impl BoundRatio {
    /// The ratios of `frames` (0 when there are none).
    pub fn of(frames: &[FrameOutcome]) -> BoundRatio {
        let mut r: Vec<f64> = frames
            .iter()
            .map(|f| f.delay_ms.map_or(f64::INFINITY, |d| d / f.bound_ms))
            .collect();
        r.sort_by(f64::total_cmp);
        let pct = |q| if r.is_empty() { 0.0 } else { percentile(&r, q) };
        BoundRatio {
            p50: pct(0.50),
            p90: pct(0.90),
        }
    }
}

/// A delay for a table: `miss` for `+inf` (a dropped frame at that rank).
pub fn fmt_delay(ms: f64) -> String {
    if ms.is_finite() {
        format!("{ms:.1}")
    } else {
        "miss".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(delays: &[Option<f64>], deadline: f64) -> Accounting {
        Accounting::of_delays(delays, deadline)
    }

    #[test]
    fn every_offered_frame_is_on_time_late_or_dropped() {
        // Deadline 100: 50 and 100 are on time, 150 late, one drop.
        let a = acc(&[Some(50.0), Some(100.0), Some(150.0), None], 100.0);
        assert_eq!((a.offered, a.on_time, a.late, a.dropped), (4, 2, 1, 1));
        assert_eq!(a.goodput(), 0.5);
        // Sorted: 50, 100, 150, inf. Nearest rank: p50 = 2nd, p90 = 4th.
        assert_eq!(a.delay.p50, 100.0);
        assert_eq!(a.delay.p90, f64::INFINITY);
        assert_eq!(a.delay.mean, None);
    }

    #[test]
    fn mean_is_defined_without_drops() {
        let a = acc(&[Some(10.0), Some(30.0)], 100.0);
        assert_eq!(a.delay.mean, Some(20.0));
        assert_eq!(a.goodput(), 1.0);
        let empty = acc(&[], 100.0);
        assert_eq!((empty.offered, empty.delay.mean), (0, None));
    }

    #[test]
    fn dropping_a_frame_never_improves_the_measures() {
        let served = [Some(20.0), Some(300.0), Some(40.0), Some(90.0), Some(500.0)];
        let base = acc(&served, 143.0);
        for k in 0..served.len() {
            let mut d = served;
            d[k] = None;
            let worse = acc(&d, 143.0);
            assert!(worse.goodput() <= base.goodput());
            assert!(worse.delay.p50 >= base.delay.p50);
            assert!(worse.delay.p90 >= base.delay.p90);
            assert!(worse.delay.p99 >= base.delay.p99);
            assert_ne!(worse.rank_cmp(&base), Ordering::Less, "drop of frame {k}");
        }
    }

    #[test]
    fn ranking_puts_goodput_first_then_percentiles() {
        let good = acc(&[Some(90.0), Some(90.0)], 100.0);
        let fast_but_late = acc(&[Some(10.0), Some(200.0)], 100.0);
        assert_eq!(good.rank_cmp(&fast_but_late), Ordering::Less);
        let same_goodput_lower_p50 = acc(&[Some(80.0), Some(90.0)], 100.0);
        assert_eq!(same_goodput_lower_p50.rank_cmp(&good), Ordering::Less);
    }

    #[test]
    fn misses_print_as_miss() {
        assert_eq!(fmt_delay(f64::INFINITY), "miss");
        assert_eq!(fmt_delay(12.34), "12.3");
    }
}
