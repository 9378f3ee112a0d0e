//! A processor slowed by a factor over a time window, as DVFS or thermal
//! throttling does, and the on-time share per time window that shows how a
//! scheduler recovers from it.

use super::{FrameOutcome, SimError};
use crate::{ProcId, System};

/// p_j runs `factor` times slower than its profile for batches starting in
/// [from_ms, until_ms).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Throttle {
    /// The processor.
    pub proc: ProcId,
    /// Slow-down, > 0 (2: twice as slow; 0.5: twice as fast).
    pub factor: f64,
    /// Start of the window, ms.
    pub from_ms: f64,
    /// End of the window, ms (`f64::INFINITY`: for good).
    pub until_ms: f64,
}

impl Throttle {
    /// The product of the factors of the throttles on p_j at `t_ms`.
    pub fn factor(throttles: &[Throttle], j: ProcId, t_ms: f64) -> f64 {
        throttles
            .iter()
            .filter(|t| t.proc == j && t.from_ms <= t_ms && t_ms < t.until_ms)
            .map(|t| t.factor)
            .product()
    }

    pub(super) fn validate(&self, system: &System) -> Result<(), SimError> {
        let bad = |field, value, reason| {
            Err(SimError::Config {
                field,
                value,
                reason,
            })
        };
        if self.proc.0 >= system.num_processors() {
            return bad("throttle.proc", self.proc.0 as f64, "no such processor");
        }
        if !(self.factor.is_finite() && self.factor > 0.0) {
            return bad("throttle.factor", self.factor, "must be a positive number");
        }
        if !(self.from_ms >= 0.0 && self.from_ms.is_finite() && self.until_ms > self.from_ms) {
            return bad(
                "throttle.from_ms",
                self.from_ms,
                "needs 0 <= from_ms < until_ms",
            );
        }
        Ok(())
    }
}

/// On-time share of the frames offered in each window of `window_ms`
/// (by arrival), against `deadline_ms`: (window start ms, share).
pub fn windowed_goodput(
    frames: &[FrameOutcome],
    deadline_ms: f64,
    window_ms: f64,
) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, u32, u32)> = Vec::new();
    for f in frames {
        let w = (f.arrival_ms / window_ms).floor();
        let start = w * window_ms;
        if out.last().is_none_or(|l| l.0 != start) {
            out.push((start, 0, 0));
        }
        let last = out.last_mut().expect("pushed above");
        last.2 += 1;
        if f.delay_ms.is_some_and(|d| d <= deadline_ms) {
            last.1 += 1;
        }
    }
    out.into_iter()
        .map(|(s, on, all)| (s, f64::from(on) / f64::from(all.max(1))))
        .collect()
}

/// The board as it runs while every throttle in `throttles` is on: each
/// throttled processor's t_e and t_l multiplied by its factors (the profile
/// a fresh `camdnnd profile` would measure then).
pub fn throttled_board(system: &System, throttles: &[Throttle]) -> System {
    let mut out = system.clone();
    for j in system.proc_ids() {
        let factor: f64 = throttles
            .iter()
            .filter(|t| t.proc == j)
            .map(|t| t.factor)
            .product();
        if factor == 1.0 {
            continue;
        }
        for i in system.model_ids() {
            let exec: Vec<f64> = (1..=system.max_batch_on(i, j))
                .map(|k| system.exec_ms(i, j, k) * factor)
                .collect();
            out.set_pair_timings(i, j, &exec, system.load_ms(i, j) * factor);
        }
    }
    out
}
