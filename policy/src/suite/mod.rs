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
mod tests {
    use super::*;
    use crate::bound::frame_bound;
    use crate::sim::FrameOutcome;

    fn report(delays: &[Option<f64>]) -> SimReport {
        SimReport {
            scheduler: "x".into(),
            frames: delays
                .iter()
                .map(|&d| FrameOutcome {
                    arrival_ms: 0.0,
                    delay_ms: d,
                    loads: 0,
                    busy_ms: Vec::new(),
                    rem_at_arrival_ms: Vec::new(),
                    bound_ms: f64::NAN,
                })
                .collect(),
            busy_ms: Vec::new(),
            loads: 0,
            load_ms: 0.0,
            evictions: 0,
            decisions: 0,
            served: Vec::new(),
            flushes: [0; 3],
            epochs: 0,
            triggered_epochs: 0,
            drop_epochs: 0,
            admission_drops: 0,
            adapt: None,
            epoch_loads: 0,
            duration_ms: 0.0,
        }
    }

    /// A headline with nothing dropped whose delays around the median are
    /// the median itself.
    fn headline_at(on_time: f64, median_ms: f64) -> Headline {
        Headline {
            on_time,
            median_ms,
            dropped: 0.0,
            band_ms: [median_ms; 2],
        }
    }

    #[test]
    fn a_dropped_frame_is_a_miss_and_an_infinite_delay() {
        // Serving the heavy frames late still beats dropping them.
        let served = headline(&report(&[Some(10.0), Some(150.0), Some(20.0)]), 100.0);
        let dropped = headline(&report(&[Some(10.0), None, Some(20.0)]), 100.0);
        assert_eq!(served.on_time, dropped.on_time);
        assert_eq!((served.median_ms, dropped.median_ms), (20.0, 20.0));
        let mostly_dropped = headline(&report(&[Some(10.0), None, None]), 100.0);
        assert!(mostly_dropped.on_time < served.on_time);
        assert!(mostly_dropped.median_ms.is_infinite());
        assert!((mostly_dropped.dropped - 2.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn the_band_around_the_median_shows_a_half_empty_traces_step() {
        // Ten frames, five fast (empty) and five slow (heavy), one heavy
        // frame dropped: the nearest-rank median (5th) is the slowest empty
        // frame, the 45th percentile (5th of 10, ceil 4.5) the same, the
        // 55th (6th) the fastest heavy one.
        let delays = [
            Some(4.0),
            Some(5.0),
            Some(5.0),
            Some(6.0),
            Some(9.0),
            Some(40.0),
            Some(60.0),
            Some(80.0),
            Some(90.0),
            None,
        ];
        let h = headline(&report(&delays), 100.0);
        assert_eq!((h.band_ms[0], h.median_ms, h.band_ms[1]), (9.0, 9.0, 40.0));
        // The same frames with the heavy ones all dropped: the median and
        // the 45th percentile do not see it, the 55th is a miss.
        let shed = headline(
            &report(&[
                Some(4.0),
                Some(5.0),
                Some(5.0),
                Some(6.0),
                Some(6.0),
                None,
                None,
                None,
                None,
                None,
            ]),
            100.0,
        );
        assert_eq!((shed.band_ms[0], shed.median_ms), (6.0, 6.0));
        assert!(shed.band_ms[1].is_infinite());
        // By rank over two cases: the reference serves both traces' heavy
        // frames (median 9, p55 40); the base sheds them on the first (6,
        // miss) and serves them slower on the second (12, 80). p45 and the
        // median: sqrt(6/9 * 12/9); p55: 80/40 over the one finite pair.
        let case = |shape: &str, r: Headline, b: Headline| Case {
            board: "b".into(),
            shape: shape.into(),
            results: vec![("ref".into(), r), ("base".into(), b)],
            median_bound_ms: 1.0,
            on_time_ceiling: 1.0,
            own_board: vec![],
        };
        let band = |p45, p50, p55| Headline {
            on_time: 0.9,
            median_ms: p50,
            dropped: 0.0,
            band_ms: [p45, p55],
        };
        let cases = [
            case("bursts", h, shed),
            case("walk", h, band(12.0, 12.0, 80.0)),
        ];
        let [p45, p50, p55] = median_speedup_by_rank(&cases, "ref", "base");
        let both = ((6.0_f64 / 9.0) * (12.0 / 9.0)).sqrt();
        assert!((p45.0 - both).abs() < 1e-12 && p45.1 == 2, "{p45:?}");
        assert!((p50.0 - both).abs() < 1e-12 && p50.1 == 2, "{p50:?}");
        assert!((p55.0 - 2.0).abs() < 1e-12 && p55.1 == 1, "{p55:?}");
    }

    #[test]
    fn tally_counts_wins_losses_and_the_worst_case() {
        let h = headline_at;
        let case = |shape: &str, r: Headline, o: Headline| Case {
            board: "b".into(),
            shape: shape.into(),
            results: vec![("ref".into(), r), ("other".into(), o)],
            median_bound_ms: 20.0,
            on_time_ceiling: 1.0,
            own_board: Vec::new(),
        };
        let cases = [
            case("a", h(0.9, 50.0), h(0.8, 100.0)),
            case("b", h(0.5, 50.0), h(1.0, 25.0)),
            case("c", h(0.7, 40.0), h(0.7, 40.0)),
        ];
        let t = &tally(&cases, "ref", 0.001)[0];
        assert_eq!(
            (t.other.as_str(), t.cases, t.wins, t.losses),
            ("other", 3, 1, 1)
        );
        assert_eq!((t.worst_ratio, t.worst_case.as_str()), (0.5, "b/b"));
        assert_eq!(t.under_floor, 1);
        // (2 * 0.5 * 1) ^ (1/3) = 1.
        assert!((t.median_speedup - 1.0).abs() < 1e-12);
        // The other's medians over the bound: (5 * 1.25 * 2) ^ (1/3).
        assert!((t.median_ceiling - 12.5f64.powf(1.0 / 3.0)).abs() < 1e-12);
        // Over "other", the oracle takes "ref" only where it is as often on
        // time (a, c): 100/50 and 40/40; on b "other" stays (25/25).
        let oracle = hindsight_speedup(&cases, "other", &["ref"], 0.001);
        assert!((oracle - 2f64.powf(1.0 / 3.0)).abs() < 1e-12, "{oracle}");
        // Over "ref", "other" is as often on time only on b and c: 50/25.
        let oracle = hindsight_speedup(&cases, "ref", &["other"], 0.001);
        assert!((oracle - 2f64.powf(1.0 / 3.0)).abs() < 1e-12, "{oracle}");
        // Over "other" at ref's on-time share: a: only ref qualifies, 100/50;
        // b: both do, other's own 25/25; c: 40/40.
        let at = hindsight_speedup_at(&cases, "other", "ref", &[], 0.001);
        assert!((at - 2f64.powf(1.0 / 3.0)).abs() < 1e-12, "{at}");
        // Over "ref" at other's share: a: ref itself, 50/50; b: only other
        // qualifies, 50/25; c: 40/40.
        let at = hindsight_speedup_at(&cases, "ref", "other", &[], 0.001);
        assert!((at - 2f64.powf(1.0 / 3.0)).abs() < 1e-12, "{at}");
    }

    #[test]
    fn hindsight_at_a_floor_never_trades_the_floors_on_time_share() {
        let h = headline_at;
        // "fast" has the lowest median but is less often on time than
        // "ours"; "same" is as often on time as "ours" and a little faster.
        let case = Case {
            board: "b".into(),
            shape: "bursts".into(),
            results: vec![
                ("base".into(), h(0.5, 10.0)),
                ("ours".into(), h(0.9, 40.0)),
                ("fast".into(), h(0.6, 5.0)),
                ("same".into(), h(0.9, 20.0)),
            ],
            median_bound_ms: 5.0,
            on_time_ceiling: 1.0,
            own_board: Vec::new(),
        };
        let pool = ["ours", "fast", "same"];
        // At base's own floor the oracle takes "fast": 10/5.
        assert!(
            (hindsight_speedup(std::slice::from_ref(&case), "base", &pool, 0.001) - 2.0).abs()
                < 1e-12
        );
        // At ours' floor only "ours" and "same" qualify: 10/20.
        let at = hindsight_speedup_at(std::slice::from_ref(&case), "base", "ours", &pool, 0.001);
        assert!((at - 0.5).abs() < 1e-12, "{at}");
        // Without "same" in the pool, "ours" itself: 10/40.
        let at = hindsight_speedup_at(
            std::slice::from_ref(&case),
            "base",
            "ours",
            &["fast"],
            0.001,
        );
        assert!((at - 0.25).abs() < 1e-12, "{at}");
        // A case where every scheduler as often on time as "ours" has an
        // infinite median (more than half dropped) is left out, not a 0x:
        // only the second case counts, "ours" at 40 there: 10/40.
        let mut dropped = case;
        dropped.results[1].1.median_ms = f64::INFINITY;
        dropped.results[3].1.median_ms = f64::INFINITY;
        let mut two = [dropped.clone(), dropped];
        two[1].results[1].1.median_ms = 40.0;
        let at = hindsight_speedup_at(&two, "base", "ours", &["same"], 0.001);
        assert!((at - 0.25).abs() < 1e-12, "{at}");
    }

    #[test]
    fn hindsight_at_every_baseline_keeps_up_with_the_best_of_them() {
        let h = headline_at;
        // The best baseline ("eft", 0.8) sets the floor, not "base" (0.5)
        // nor "ours" (0.9); "ours" and its variant are not baselines.
        let case = |own_board: Vec<String>| Case {
            board: "b".into(),
            shape: "bursts".into(),
            results: vec![
                ("base".into(), h(0.5, 10.0)),
                ("ours".into(), h(0.9, 40.0)),
                ("variant".into(), h(0.95, 8.0)),
                ("eft".into(), h(0.8, 25.0)),
                ("fast".into(), h(0.6, 5.0)),
            ],
            median_bound_ms: 5.0,
            on_time_ceiling: 1.0,
            own_board,
        };
        let pool = ["ours", "variant", "eft", "fast"];
        let at = |cases: &[Case], not_baselines: &[&str]| {
            hindsight_speedup_at_every_baseline(cases, "base", "ours", not_baselines, &pool, 0.001)
        };
        // "fast" is under the floor; of those that keep up, "variant" is
        // fastest: 10/8.
        let one = [case(Vec::new())];
        assert!((at(&one, &["variant"]) - 1.25).abs() < 1e-12);
        // With "variant" a baseline, it sets the floor at 0.95: still 10/8.
        assert!((at(&one, &[]) - 1.25).abs() < 1e-12);
        // "eft" on a board of its own is no baseline: the floor is "fast"'s
        // 0.6 and "fast" qualifies: 10/5.
        let own = [case(vec!["eft".into()])];
        assert!((at(&own, &["variant"]) - 2.0).abs() < 1e-12);
        // A case "ours" did not run on as given is left out.
        let mut not_ours = case(vec!["ours".into()]);
        not_ours.results[2].1.median_ms = 1.0;
        assert!((at(&[not_ours, case(Vec::new())], &["variant"]) - 1.25).abs() < 1e-12);
    }

    #[test]
    fn against_every_baseline_counts_a_case_lost_to_any_of_them_once() {
        let h = |on_time| headline_at(on_time, 50.0);
        let case = |shape: &str, scores: [f64; 4], own: &[&str]| Case {
            board: "b".into(),
            shape: shape.into(),
            results: ["ref", "variant", "one", "two"]
                .iter()
                .zip(scores)
                .map(|(n, s)| (n.to_string(), h(s)))
                .collect(),
            median_bound_ms: 20.0,
            on_time_ceiling: 1.0,
            own_board: own.iter().map(|n| n.to_string()).collect(),
        };
        let cases = [
            // "one" beats ref by a little, "two" by more: one loss, under
            // the floor against "two" only.
            case("a", [0.90, 1.0, 0.91, 0.95], &[]),
            // ref ahead of both; the variant is not a baseline.
            case("b", [0.90, 1.0, 0.80, 0.85], &[]),
            // "two" ahead, but on a board of its own: not compared.
            case("c", [0.50, 0.5, 0.50, 1.00], &["two"]),
            // Within the tie.
            case("d", [0.70, 0.7, 0.7005, 0.70], &[]),
        ];
        let v = against_every_baseline(&cases, "ref", &["variant"], 0.001);
        assert_eq!((v.cases, v.losses, v.under_floor), (4, 1, 1));
        assert!((v.worst_ratio - 0.90 / 0.95).abs() < 1e-12);
        assert_eq!(
            (v.worst_case.as_str(), v.worst_other.as_str()),
            ("b/a", "two")
        );
        // Each tally row sees one loss of its own; at once it is one case.
        let t = tally(&cases, "ref", 0.001);
        let losses = |n: &str| t.iter().find(|t| t.other == n).unwrap().losses;
        assert_eq!((losses("one"), losses("two")), (1, 1));
        // Counting the variant as a baseline adds its wins.
        let v = against_every_baseline(&cases, "ref", &[], 0.001);
        assert_eq!((v.losses, v.under_floor), (2, 2));
    }

    #[test]
    fn a_baseline_on_a_board_of_its_own_is_left_out_of_the_tally() {
        let h = headline_at;
        let case = |own: bool| Case {
            board: "b".into(),
            shape: "s".into(),
            results: vec![
                ("ref".into(), h(0.5, 50.0)),
                ("gpu-only".into(), h(1.0, 25.0)),
            ],
            median_bound_ms: 20.0,
            on_time_ceiling: 1.0,
            own_board: if own {
                vec!["gpu-only".into()]
            } else {
                Vec::new()
            },
        };
        let cases = [case(true), case(false)];
        let t = &tally(&cases, "ref", 0.001)[0];
        assert_eq!((t.cases, t.losses, t.own_board), (1, 1, 1));
        assert_eq!(cases[0].of("gpu-only"), Some(h(1.0, 25.0)));
        assert_eq!(cases[0].comparable("gpu-only"), None);
        // The hindsight oracle cannot pick it there either: 50/25 on one case.
        let oracle = hindsight_speedup(&cases, "ref", &["gpu-only"], 0.001);
        assert!((oracle - 2f64.sqrt()).abs() < 1e-12, "{oracle}");
    }

    #[test]
    fn single_unit_baselines_are_marked_only_where_they_raise_n_j() {
        // rb5's CPU holds 3 of its 4 models: cpu-only raises its N_j.
        let rb5 = System::from_toml(include_str!("../../../config/profiles/rb5.toml")).unwrap();
        let trace = Trace {
            segments: Trace::paper_fig11().segments[..2].to_vec(),
        };
        let mut scheds: Vec<Box<dyn Scheduler + Send>> = ["camdnn-local", "cpu-only"]
            .iter()
            .map(|n| crate::schedulers::by_name(&rb5, n, 5.0).unwrap())
            .collect();
        let case = run_case(
            &rb5,
            "rb5",
            "paper",
            &trace,
            &mut scheds,
            &SimConfig::default(),
        )
        .unwrap();
        assert_eq!(case.own_board, vec!["cpu-only".to_string()]);
        // A board whose CPU holds every model: cpu-only runs on it as given.
        let roomy = rb5
            .clone()
            .with_max_resident(rb5.proc_by_name("cpu").unwrap(), 4);
        let case = run_case(
            &roomy,
            "roomy",
            "paper",
            &trace,
            &mut scheds,
            &SimConfig::default(),
        )
        .unwrap();
        assert!(case.own_board.is_empty(), "{:?}", case.own_board);
    }

    #[test]
    fn the_median_bound_weighs_each_scene_by_its_frames() {
        let system = crate::estimate::tests::board();
        let trace = |empty: usize, busy: usize| Trace {
            segments: vec![
                crate::sim::Segment {
                    frames: empty,
                    scene: vec![0],
                },
                crate::sim::Segment {
                    frames: busy,
                    scene: vec![4],
                },
            ],
        };
        // An empty frame is the detector alone: 20 ms on the CPU.
        assert_eq!(median_bound_ms(&system, &trace(3, 1), 1), 20.0);
        let busy = frame_bound(&system, &[1, 4], |i, j| system.supports(i, j)).bound_ms();
        assert!(busy > 20.0, "{busy}");
        assert_eq!(median_bound_ms(&system, &trace(1, 3), 1), busy);
        // Two detector runs per frame (a pyramid) cost more.
        assert!(median_bound_ms(&system, &trace(3, 1), 2) > 20.0);
    }
}
