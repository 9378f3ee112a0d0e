//! The scheduler suite: every scheduler over many boards x scene shapes, on
//! a headline measure that dropping frames cannot improve, with wins and
//! losses of one reference scheduler against each other one.

pub mod ablation;
pub mod ceiling;
pub mod report;

use crate::bound::frame_bound_within_slots;
use crate::scheduler::Scheduler;
use crate::sim::{
    default_deadline_ms, frame_scene, simulate, Accounting, SimConfig, SimError, SimReport, Trace,
};
use crate::stats::percentile;
use crate::System;

/// The suite's headline measure of one run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Headline {
    /// Frames answered within the deadline / frames offered (a dropped
    /// frame is a miss).
    pub on_time: f64,
    /// Median delay over ALL offered frames, a dropped frame counting as an
    /// infinite delay, ms (infinite when half the frames or more were dropped).
    pub median_ms: f64,
    /// Frames dropped / frames offered.
    pub dropped: f64,
    /// The delays at the 45th and 55th percentiles (nearest rank, over all
    /// offered frames as the median): how far the median rests on a step
    /// between frames of different kinds. On a trace half empty, the
    /// median is the slowest empty frame and the next rank a heavy one.
    pub band_ms: [f64; 2],
}

/// The headline measure of a simulation with deadline `deadline_ms`
/// (the suite uses two frame periods), from the simulator's accounting.
pub fn headline(report: &SimReport, deadline_ms: f64) -> Headline {
    let a = Accounting::of(&report.frames, deadline_ms);
    let mut all: Vec<f64> = report
        .frames
        .iter()
        .map(|f| f.delay_ms.unwrap_or(f64::INFINITY))
        .collect();
    all.sort_by(f64::total_cmp);
    Headline {
        on_time: a.goodput(),
        median_ms: a.delay.p50,
        dropped: a.dropped as f64 / a.offered.max(1) as f64,
        band_ms: [percentile(&all, 0.45), percentile(&all, 0.55)],
    }
}

/// One board x shape and every scheduler's headline on it.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// The board's name.
    pub board: String,
    /// The trace shape's name.
    pub shape: String,
    /// (scheduler, headline), in the order the schedulers were given.
    pub results: Vec<(String, Headline)>,
    /// [`median_bound_ms`] of the trace: no scheduler's median delay over
    /// the offered frames can be lower.
    pub median_bound_ms: f64,
    /// [`ceiling::on_time_ceiling`] of the trace: no scheduler's on-time
    /// share can be higher.
    pub on_time_ceiling: f64,
    /// Schedulers that ran on a board of their own: their
    /// [`Scheduler::system_override`] raised some unit's N_j beyond the
    /// board's (a single-unit baseline holding every model on its unit).
    pub own_board: Vec<String>,
}

impl Case {
    /// The headline of scheduler `name`, if it ran on this case.
    pub fn of(&self, name: &str) -> Option<Headline> {
        self.results.iter().find(|(n, _)| n == name).map(|r| r.1)
    }

    /// The headline of `name` if it ran on this case's board as given: what
    /// wins, losses and the hindsight oracle compare.
    pub fn comparable(&self, name: &str) -> Option<Headline> {
        self.of(name)
            .filter(|_| !self.own_board.iter().any(|n| n == name))
    }
}

/// Runs every scheduler over `trace` on `system` and measures each with
/// [`headline`] at a deadline of two frame periods.
pub fn run_case(
    system: &System,
    board: &str,
    shape: &str,
    trace: &Trace,
    schedulers: &mut [Box<dyn Scheduler + Send>],
    cfg: &SimConfig,
) -> Result<Case, SimError> {
    let deadline = default_deadline_ms(cfg.fps);
    let mut results = Vec::with_capacity(schedulers.len());
    let mut own_board = Vec::new();
    for s in schedulers.iter_mut() {
        let raised = s.system_override(system).is_some_and(|o| {
            o.processors
                .iter()
                .zip(&system.processors)
                .any(|(a, b)| a.max_resident > b.max_resident)
        });
        let report = simulate(system, s.as_mut(), trace, cfg)?;
        if raised {
            own_board.push(report.scheduler.clone());
        }
        results.push((report.scheduler.clone(), headline(&report, deadline)));
    }
    Ok(Case {
        board: board.into(),
        shape: shape.into(),
        results,
        median_bound_ms: median_bound_ms(system, trace, cfg.root_items),
        on_time_ceiling: ceiling::on_time_ceiling(system, trace, cfg.fps, deadline, cfg.root_items),
        own_board,
    })
}

/// The median over a trace's frames of each frame's makespan lower bound
/// whatever residency it is met with, within the units' N_j
/// ([`frame_bound_within_slots`]; no queueing): each frame's delay is at
/// least its bound, so the sorted delays dominate the sorted bounds rank by
/// rank and no schedule's median delay over the offered frames is below
/// this.
/// `root_items` is the detector's runs per frame, as in [`SimConfig`].
pub fn median_bound_ms(system: &System, trace: &Trace, root_items: u32) -> f64 {
    let mut bounds: Vec<f64> = Vec::with_capacity(trace.frames());
    // A trace comes back to the same scenes (bursts: two of them).
    let mut known: std::collections::HashMap<Vec<u32>, f64> = Default::default();
    for seg in &trace.segments {
        let scene = frame_scene(system, &seg.scene, root_items);
        let b = *known
            .entry(scene)
            .or_insert_with_key(|scene| frame_bound_within_slots(system, scene));
        bounds.extend(std::iter::repeat_n(b, seg.frames));
    }
    bounds.sort_by(f64::total_cmp);
    // Nearest rank, as the accounting's percentiles.
    percentile(&bounds, 0.5)
}

/// How a reference scheduler did against one other scheduler over the cases
/// where both ran.
#[derive(Clone, Debug, PartialEq)]
pub struct Tally {
    /// The other scheduler.
    pub other: String,
    /// Cases both ran.
    pub cases: usize,
    /// Cases where the reference's on-time share is higher by more than `tie`.
    pub wins: usize,
    /// Cases where it is lower by more than `tie`.
    pub losses: usize,
    /// The smallest on-time share ratio reference / other (1 when the other
    /// has none on time either), and the case where it happened.
    pub worst_ratio: f64,
    /// "board/shape" of the worst ratio.
    pub worst_case: String,
    /// Cases whose ratio is under [`FLOOR_RATIO`].
    pub under_floor: usize,
    /// Geometric mean over cases of other's median delay / the reference's
    /// (above 1: the reference is faster), over the cases where both
    /// medians are finite.
    pub median_speedup: f64,
    /// Cases where both medians are finite.
    pub finite_medians: usize,
    /// Cases where only the reference's median is infinite (it dropped half
    /// the frames or more, the other did not).
    pub reference_only_infinite: usize,
    /// The ceiling of `median_speedup`: geometric mean over the same cases
    /// of other's median / the case's [`Case::median_bound_ms`], the most
    /// any scheduler could gain on `other` there.
    pub median_ceiling: f64,
    /// Cases left out because one of the two ran on a board of its own
    /// ([`Case::own_board`]).
    pub own_board: usize,
}

/// The on-time share ratio reference / other that the floor asks the full
/// scheduler to keep against `camdnn-local` on every case.
pub const FLOOR_RATIO: f64 = 0.98;

/// The on-time share ratio reference / other that the floor is set on (1
/// when the other has no frame on time).
fn on_time_ratio(reference: Headline, other: Headline) -> f64 {
    if other.on_time > 0.0 {
        reference.on_time / other.on_time
    } else {
        1.0
    }
}

/// The reference's wins and losses on the on-time share against every other
/// scheduler, a difference of at most `tie` (absolute share) being a tie.
pub fn tally(cases: &[Case], reference: &str, tie: f64) -> Vec<Tally> {
    let mut others: Vec<String> = Vec::new();
    for case in cases {
        for (name, _) in &case.results {
            if name != reference && !others.contains(name) {
                others.push(name.clone());
            }
        }
    }
    others
        .into_iter()
        .map(|other| {
            let mut t = Tally {
                other: other.clone(),
                cases: 0,
                wins: 0,
                losses: 0,
                worst_ratio: f64::INFINITY,
                worst_case: String::new(),
                under_floor: 0,
                median_speedup: 1.0,
                finite_medians: 0,
                reference_only_infinite: 0,
                median_ceiling: 1.0,
                own_board: 0,
            };
            let mut log_sum = 0.0;
            let mut ceiling_log_sum = 0.0;
            for case in cases {
                let (Some(r), Some(o)) = (case.comparable(reference), case.comparable(&other))
                else {
                    if case.of(reference).is_some() && case.of(&other).is_some() {
                        t.own_board += 1;
                    }
                    continue;
                };
                t.cases += 1;
                if r.on_time > o.on_time + tie {
                    t.wins += 1;
                } else if r.on_time < o.on_time - tie {
                    t.losses += 1;
                }
                let ratio = on_time_ratio(r, o);
                if ratio < FLOOR_RATIO {
                    t.under_floor += 1;
                }
                if ratio < t.worst_ratio {
                    t.worst_ratio = ratio;
                    t.worst_case = format!("{}/{}", case.board, case.shape);
                }
                match (r.median_ms.is_finite(), o.median_ms.is_finite()) {
                    (true, true) => {
                        t.finite_medians += 1;
                        log_sum += (o.median_ms / r.median_ms).ln();
                        ceiling_log_sum += (o.median_ms / case.median_bound_ms).ln();
                    }
                    (false, true) => t.reference_only_infinite += 1,
                    _ => {}
                }
            }
            if t.finite_medians > 0 {
                t.median_speedup = (log_sum / t.finite_medians as f64).exp();
                t.median_ceiling = (ceiling_log_sum / t.finite_medians as f64).exp();
            }
            if t.cases == 0 {
                t.worst_ratio = 1.0;
            }
            t
        })
        .collect()
}

/// How a reference scheduler did against a set of baselines all at once:
/// the target is the full scheduler "at least every baseline on every
/// case", which the per-baseline [`Tally`] rows do not show: their losses
/// add up to more than the cases lost when two baselines win the same case.
#[derive(Clone, Debug, PartialEq)]
pub struct Versus {
    /// Cases the reference ran with at least one baseline beside it.
    pub cases: usize,
    /// Cases where some baseline's on-time share is higher by more than the
    /// tie.
    pub losses: usize,
    /// Cases where the on-time share ratio reference / some baseline is
    /// under [`FLOOR_RATIO`].
    pub under_floor: usize,
    /// The smallest such ratio (1 when no baseline has any frame on time
    /// where the reference has none), its case ("board/shape") and the
    /// baseline.
    pub worst_ratio: f64,
    /// "board/shape" of the worst ratio.
    pub worst_case: String,
    /// The baseline of the worst ratio.
    pub worst_other: String,
}

/// The reference against every scheduler of its cases but those in
/// `not_baselines` (its own variants), at once, each on the case's board as
/// given ([`Case::comparable`]).
pub fn against_every_baseline(
    cases: &[Case],
    reference: &str,
    not_baselines: &[&str],
    tie: f64,
) -> Versus {
    let mut v = Versus {
        cases: 0,
        losses: 0,
        under_floor: 0,
        worst_ratio: 1.0,
        worst_case: String::new(),
        worst_other: String::new(),
    };
    for case in cases {
        let Some(r) = case.comparable(reference) else {
            continue;
        };
        let baselines: Vec<(&str, Headline)> = case
            .results
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|&n| n != reference && !not_baselines.contains(&n))
            .filter_map(|n| case.comparable(n).map(|h| (n, h)))
            .collect();
        let Some((worst_other, ratio)) = baselines
            .iter()
            .map(|(n, o)| (*n, on_time_ratio(r, *o)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
        else {
            continue;
        };
        v.cases += 1;
        if baselines.iter().any(|(_, o)| r.on_time < o.on_time - tie) {
            v.losses += 1;
        }
        if ratio < FLOOR_RATIO {
            v.under_floor += 1;
        }
        if ratio < v.worst_ratio {
            v.worst_ratio = ratio;
            v.worst_case = format!("{}/{}", case.board, case.shape);
            v.worst_other = worst_other.to_string();
        }
    }
    v
}

/// The median speedup over `base` of a hindsight oracle that picks, case by
/// case, the scheduler of `pool` with the lowest median delay among those at
/// least as often on time as `base` (within `tie`) on the case's own board
/// ([`Case::comparable`]); `base` itself when none
/// is faster. Geometric mean over the cases where `base`'s median is finite.
/// No online scheduler choosing among `pool`'s strategies can expect more
/// than this without a better strategy than the pool has.
pub fn hindsight_speedup(cases: &[Case], base: &str, pool: &[&str], tie: f64) -> f64 {
    hindsight_speedup_at(cases, base, base, pool, tie)
}

/// [`hindsight_speedup`] with the on-time floor set by `floor` instead of
/// `base`: per case, the lowest median among `floor`, `base` and `pool` at
/// least as often on time as `floor` (within `tie`), over `base`'s median.
/// With `floor` the scheduler under test, this is the most the median
/// target could gain over `base` by a per-case pick among the strategies at
/// hand *without giving up any of `floor`'s on-time share*: where it is
/// under the target, the target and the on-time share pull apart. Cases
/// where `floor` did not run on the board as given, or where no scheduler
/// as often on time as it has a finite median, are left out.
pub fn hindsight_speedup_at(
    cases: &[Case],
    base: &str,
    floor: &str,
    pool: &[&str],
    tie: f64,
) -> f64 {
    // The floor's own median is a candidate too.
    let pool: Vec<&str> = pool.iter().copied().chain([floor]).collect();
    hindsight_over_floor(cases, base, &pool, tie, |case, b| {
        if floor == base {
            Some(b.on_time)
        } else {
            case.comparable(floor).map(|f| f.on_time)
        }
    })
}

/// [`hindsight_speedup_at`] with the on-time floor of each case set by the
/// best of its baselines: every scheduler but `reference` and its own
/// variants (`not_baselines`), as [`against_every_baseline`] counts them.
/// Per case, the lowest median among `base` and `pool` at least as often on
/// time as every baseline (within `tie`), over `base`'s median: the most
/// the median target can gain by a per-case pick among the strategies at
/// hand while the reference also keeps up with every baseline, both of item
/// 4's targets at once. Cases where `reference` did not run on the board as
/// given are left out, as are those where no scheduler that keeps up has a
/// finite median.
pub fn hindsight_speedup_at_every_baseline(
    cases: &[Case],
    base: &str,
    reference: &str,
    not_baselines: &[&str],
    pool: &[&str],
    tie: f64,
) -> f64 {
    hindsight_over_floor(cases, base, pool, tie, |case, _| {
        case.comparable(reference)?;
        case.results
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|&n| n != reference && !not_baselines.contains(&n))
            .filter_map(|n| case.comparable(n))
            .map(|h| h.on_time)
            .reduce(f64::max)
    })
}

/// The geometric mean over `cases` of `base`'s median over the lowest
/// median among `base` and `pool` at least as often on time as the case's
/// floor (`floor_of`, given the case and `base`'s headline; `None` leaves
/// the case out), within `tie`.
fn hindsight_over_floor(
    cases: &[Case],
    base: &str,
    pool: &[&str],
    tie: f64,
    floor_of: impl Fn(&Case, Headline) -> Option<f64>,
) -> f64 {
    let mut log_sum = 0.0;
    let mut n = 0usize;
    for case in cases {
        let Some(b) = case.of(base) else { continue };
        let Some(floor) = floor_of(case, b) else {
            continue;
        };
        if !b.median_ms.is_finite() {
            continue;
        }
        let best = pool
            .iter()
            .filter_map(|name| case.comparable(name))
            .chain([b])
            .filter(|h| h.on_time >= floor - tie)
            .map(|h| h.median_ms)
            .fold(f64::INFINITY, f64::min);
        if !best.is_finite() {
            // No scheduler as often on time as the floor answered half the
            // frames: no median to compare, as in [`tally`].
            continue;
        }
        log_sum += (b.median_ms / best).ln();
        n += 1;
    }
    if n == 0 {
        1.0
    } else {
        (log_sum / n as f64).exp()
    }
}

/// The median target's sensitivity to the rank: the geometric mean of
/// `base`'s delay over `reference`'s at the 45th percentile, the median
/// and the 55th, over the cases where both are finite at that rank (with
/// how many). The headline is the median; the neighbours show whether it
/// rests on a step in the delay distribution (the bursts traces are half
/// empty frames, so there the median is the slowest empty frame).
pub fn median_speedup_by_rank(cases: &[Case], reference: &str, base: &str) -> [(f64, usize); 3] {
    let pick: [fn(&Headline) -> f64; 3] = [|h| h.band_ms[0], |h| h.median_ms, |h| h.band_ms[1]];
    pick.map(|at| {
        let (log_sum, n) = cases
            .iter()
            .filter_map(|c| Some((c.comparable(reference)?, c.comparable(base)?)))
            .map(|(r, b)| (at(&r), at(&b)))
            .filter(|(r, b)| r.is_finite() && b.is_finite())
            .fold((0.0, 0usize), |(s, n), (r, b)| (s + (b / r).ln(), n + 1));
        let speedup = if n > 0 {
            (log_sum / n as f64).exp()
        } else {
            1.0
        };
        (speedup, n)
    })
}

#[cfg(test)]
mod tests;
