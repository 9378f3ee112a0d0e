//! The suite run over many boards and its printed report: the same loop and
//! the same text for `camdnnd suite` and for `ilmodel reproduce`
//! (docs/results.md), so the figures there are the command's own.

use std::collections::BTreeMap;
use std::fmt::{Debug, Display, Write as _};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use super::{
    against_every_baseline, hindsight_speedup, hindsight_speedup_at,
    hindsight_speedup_at_every_baseline, median_speedup_by_rank, run_case, tally, Case, Headline,
    FLOOR_RATIO,
};
use crate::gen::{heavy_count, Shape};
use crate::scheduler::Scheduler;
use crate::sim::{fmt_delay, SimConfig, SimError, Trace};
use crate::System;

/// Report name of the full scheduler with its learned policy.
pub const CAMDNN: &str = "camdnn";
/// Report name of the full scheduler with the greedy planner (generated
/// boards have no learned policy unless one is trained for them).
pub const CAMDNN_GREEDY: &str = "camdnn-greedy";
/// The schedulers the suite reports on; neither is the other's baseline.
pub const REFERENCES: [&str; 2] = [CAMDNN, CAMDNN_GREEDY];
/// The on-time share difference counted as a tie.
pub const TIE: f64 = 0.001;
/// The scheduler the median target is measured against.
const BASE: &str = "camdnn-local";

/// One board of a suite run: the system and the seed of its traces.
#[derive(Clone, Debug)]
pub struct SuiteBoard {
    /// The board.
    pub system: System,
    /// Seed of its scene traces (a generated board's own seed).
    pub trace_seed: u64,
}

/// Why a suite run stopped.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError<E: Debug + Display> {
    /// The schedulers of a board could not be built.
    #[error("board {board}: {error}")]
    Build {
        /// The board's name.
        board: String,
        /// What the builder said.
        error: E,
    },
    /// A simulation failed.
    #[error("board {board} shape {shape}: {source}")]
    Sim {
        /// The board's name.
        board: String,
        /// The trace shape.
        shape: String,
        /// What the simulator said.
        #[source]
        source: SimError,
    },
}

/// The trace of `shape` on `board` at `fps`, and the heavy count it is sized
/// by ([`heavy_count`]). The paper's shape on `rb5` is the paper's own Fig.
/// 11 trace.
pub fn trace_for(board: &SuiteBoard, shape: Shape, fps: f64) -> (Trace, u32) {
    let heavy = heavy_count(&board.system, fps);
    let trace = if shape == Shape::Paper && board.system.name == "rb5" {
        Trace::paper_fig11()
    } else {
        shape.trace(&board.system, board.trace_seed, heavy)
    };
    (trace, heavy)
}

/// Runs every board x shape on `jobs` worker threads (at least one):
/// `build` gives the schedulers of the board at that index (fresh for each
/// case), `each` sees every case in board-then-shape order as soon as it and
/// every case before it are done, with the board's heavy count. Each case
/// is a deterministic simulation of its own, so the cases are the same
/// whatever `jobs` is; the first error in that order stops the run.
pub fn run_suite<E: Debug + Display + Send>(
    boards: &[SuiteBoard],
    shapes: &[Shape],
    cfg: &SimConfig,
    jobs: usize,
    build: impl Fn(usize, &SuiteBoard) -> Result<Vec<Box<dyn Scheduler + Send>>, E> + Sync,
    mut each: impl FnMut(&Case, u32),
) -> Result<Vec<Case>, SuiteError<E>> {
    let work: Vec<(usize, Shape)> = (0..boards.len())
        .flat_map(|at| shapes.iter().map(move |&shape| (at, shape)))
        .collect();
    let work = work.as_slice();
    let run = |k: usize| -> Result<(Case, u32), SuiteError<E>> {
        let (at, shape) = work[k];
        let board = &boards[at];
        let name = &board.system.name;
        let mut schedulers = build(at, board).map_err(|error| SuiteError::Build {
            board: name.clone(),
            error,
        })?;
        let (trace, heavy) = trace_for(board, shape, cfg.fps);
        let case = run_case(
            &board.system,
            name,
            shape.name(),
            &trace,
            &mut schedulers,
            cfg,
        )
        .map_err(|source| SuiteError::Sim {
            board: name.clone(),
            shape: shape.name().to_string(),
            source,
        })?;
        Ok((case, heavy))
    };
    // Workers take the cases in order; after an error none takes a new
    // one, and every case before it was taken already, so the first error
    // in order is always among the results.
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel();
        for _ in 0..jobs.clamp(1, work.len().max(1)) {
            let (tx, next, failed, run) = (tx.clone(), &next, &failed, &run);
            scope.spawn(move || {
                while !failed.load(Ordering::Relaxed) {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= work.len() {
                        break;
                    }
                    let result = run(k);
                    if result.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    if tx.send((k, result)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut done = BTreeMap::new();
        let mut cases = Vec::with_capacity(work.len());
        for (k, result) in rx {
            done.insert(k, result);
            while let Some(result) = done.remove(&cases.len()) {
                let (case, heavy) = result?;
                each(&case, heavy);
                cases.push(case);
            }
        }
        Ok(cases)
    })
}

/// One case on one line: every scheduler's on-time share / median delay
/// (`*`: it ran on a board of its own), the case's median bound and its
/// on-time ceiling.
pub fn case_line(case: &Case, heavy: u32) -> String {
    let cells: Vec<String> = case
        .results
        .iter()
        .map(|(n, h)| {
            let own = if case.comparable(n).is_none() {
                "*"
            } else {
                ""
            };
            format!("{n}{own} {:.3}/{}", h.on_time, fmt_delay(h.median_ms))
        })
        .collect();
    format!(
        "{:<8} {:<10} heavy {:>2} median bound {:.1} on-time ceiling {:.3}: {}",
        case.board,
        case.shape,
        heavy,
        case.median_bound_ms,
        case.on_time_ceiling,
        cells.join("  ")
    )
}

/// The report after the cases: each reference's tally against every other
/// scheduler and against every baseline at once, the hindsight oracles and
/// the median target by rank.
pub fn summary(cases: &[Case]) -> String {
    let mut out = String::new();
    means_text(&mut out, cases);
    for reference in REFERENCES {
        if cases.iter().any(|c| c.of(reference).is_some()) {
            tally_text(&mut out, cases, reference);
        }
    }
    hindsight_text(&mut out, cases);
    rank_text(&mut out, cases);
    out
}

/// Every scheduler's mean on-time share beside the mean ceiling of the same
/// cases, and its median delay (geometric mean over the cases where it is
/// finite) beside the mean median bound of those cases: the distance to the
/// best any schedule could do.
fn means_text(out: &mut String, cases: &[Case]) {
    let mut names: Vec<&str> = Vec::new();
    for case in cases {
        for (name, _) in &case.results {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
    }
    let _ = writeln!(
        out,
        "\neach scheduler over the cases it ran on the board as given: mean on-time share beside the mean ceiling no schedule can beat (suite::ceiling), and the geometric mean of its median delay beside that of the cases' median bounds, over the cases where its median is finite"
    );
    let _ = writeln!(
        out,
        "{:<20} {:>5} {:>8} {:>8} {:>6} {:>10} {:>10}",
        "scheduler", "cases", "on time", "ceiling", "finite", "median ms", "bound ms"
    );
    for name in names {
        let runs: Vec<(Headline, &Case)> = cases
            .iter()
            .filter_map(|c| Some((c.comparable(name)?, c)))
            .collect();
        if runs.is_empty() {
            continue;
        }
        let n = runs.len() as f64;
        let on_time = runs.iter().map(|(h, _)| h.on_time).sum::<f64>() / n;
        let ceiling = runs.iter().map(|(_, c)| c.on_time_ceiling).sum::<f64>() / n;
        let finite: Vec<(f64, f64)> = runs
            .iter()
            .filter(|(h, _)| h.median_ms.is_finite())
            .map(|(h, c)| (h.median_ms, c.median_bound_ms))
            .collect();
        let geo = |pick: fn(&(f64, f64)) -> f64| {
            let m = finite.len().max(1) as f64;
            (finite.iter().map(|p| pick(p).ln()).sum::<f64>() / m).exp()
        };
        let _ = writeln!(
            out,
            "{:<20} {:>5} {:>8.4} {:>8.4} {:>6} {:>10.1} {:>10.1}",
            name,
            runs.len(),
            on_time,
            ceiling,
            finite.len(),
            geo(|p| p.0),
            geo(|p| p.1)
        );
    }
}

fn tally_text(out: &mut String, cases: &[Case], reference: &str) {
    let n = cases.iter().filter(|c| c.of(reference).is_some()).count();
    let _ = writeln!(
        out,
        "\n{reference} against each scheduler over the {n} cases it ran (on-time share; ties within {TIE}):"
    );
    let _ = writeln!(
        out,
        "(median speedup: geometric mean of other's median delay / {reference}'s; ceiling: of other's median / the case's median bound, the most any schedule could gain on other)"
    );
    let _ = writeln!(
        out,
        "{:<18} {:>5} {:>5} {:>6} {:>11}  {:<22} {:>11} {:>14} {:>9}",
        "other",
        "wins",
        "ties",
        "losses",
        "worst ratio",
        "worst case",
        format!("under {FLOOR_RATIO}x"),
        "median speedup",
        "ceiling"
    );
    let tallies = tally(cases, reference, TIE);
    for t in &tallies {
        let _ = writeln!(
            out,
            "{:<18} {:>5} {:>5} {:>6} {:>10.3}x  {:<22} {:>11} {:>13.3}x {:>8.3}x{}",
            t.other,
            t.wins,
            t.cases - t.wins - t.losses,
            t.losses,
            t.worst_ratio,
            t.worst_case,
            t.under_floor,
            t.median_speedup,
            t.median_ceiling,
            if t.finite_medians < t.cases {
                format!(
                    " (over {} finite medians; {} infinite only for {reference})",
                    t.finite_medians, t.reference_only_infinite
                )
            } else {
                String::new()
            }
        );
    }
    for t in tallies.iter().filter(|t| t.own_board > 0) {
        let _ = writeln!(
            out,
            "{}: {} cases left out, where it ran with a unit's N_j raised beyond the board's to hold every model (marked * with --cases)",
            t.other, t.own_board
        );
    }
    let v = against_every_baseline(cases, reference, &REFERENCES, TIE);
    if v.cases > 0 {
        let _ = writeln!(
            out,
            "against every baseline at once: {reference} loses to some baseline on {} of {} cases, is under {FLOOR_RATIO}x of some baseline on {}{}",
            v.losses,
            v.cases,
            v.under_floor,
            if v.worst_case.is_empty() {
                String::new()
            } else {
                format!(
                    " (worst {:.3}x, {} against {})",
                    v.worst_ratio, v.worst_case, v.worst_other
                )
            }
        );
    }
}

/// The headroom of the median target over `camdnn-local`: what a hindsight
/// choice of the best other strategy per case would gain, among those that
/// ran on the case's board as given ([`Case::comparable`]).
fn hindsight_text(out: &mut String, cases: &[Case]) {
    let mut pool: Vec<&str> = Vec::new();
    for case in cases {
        for (name, _) in &case.results {
            if name != BASE && !pool.contains(&name.as_str()) {
                pool.push(name);
            }
        }
    }
    if pool.is_empty() || cases.iter().all(|c| c.of(BASE).is_none()) {
        return;
    }
    let _ = writeln!(
        out,
        "\nhindsight: the best of {} per case (as often on time as {BASE}, lowest median) would be {:.3}x {BASE}'s median (geometric mean)",
        pool.join(", "),
        hindsight_speedup(cases, BASE, &pool, TIE)
    );
    for floor in REFERENCES {
        let n = cases
            .iter()
            .filter(|c| c.comparable(floor).is_some())
            .count();
        if n > 0 {
            let _ = writeln!(
                out,
                "hindsight at {floor}'s on-time share: the best per case as often on time as {floor} would be {:.3}x {BASE}'s median over its {n} cases (the most the median target can gain without giving up on-time share)",
                hindsight_speedup_at(cases, BASE, floor, &pool, TIE)
            );
            let _ = writeln!(
                out,
                "hindsight at every baseline's on-time share: the best per case as often on time as every baseline of {floor} would be {:.3}x {BASE}'s median over its {n} cases (the most the median target can gain while {floor} keeps up with every baseline)",
                hindsight_speedup_at_every_baseline(cases, BASE, floor, &REFERENCES, &pool, TIE)
            );
        }
    }
}

/// The median target at the neighbouring ranks ([`median_speedup_by_rank`]):
/// whether the headline's median rests on a step between kinds of frames.
fn rank_text(out: &mut String, cases: &[Case]) {
    for reference in REFERENCES {
        let ran = cases
            .iter()
            .any(|c| c.comparable(reference).is_some() && c.comparable(BASE).is_some());
        if !ran {
            continue;
        }
        let cells: Vec<String> = ["p45", "p50 (the headline)", "p55"]
            .iter()
            .zip(median_speedup_by_rank(cases, reference, BASE))
            .map(|(rank, (x, n))| format!("{rank} {x:.3}x over {n}"))
            .collect();
        let _ = writeln!(
            out,
            "{BASE}'s delay / {reference}'s by rank (geometric mean over the cases finite for both): {}",
            cells.join(", ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen;
    use crate::schedulers::by_name;

    type Built = Result<Vec<Box<dyn Scheduler + Send>>, String>;

    fn boards() -> Vec<SuiteBoard> {
        [1, 2]
            .into_iter()
            .map(|seed| SuiteBoard {
                system: System::from_spec(&gen::board(seed)).unwrap(),
                trace_seed: seed,
            })
            .collect()
    }

    fn two_schedulers(board: &SuiteBoard) -> Built {
        ["camdnn-local", "heft"]
            .into_iter()
            .map(|n| by_name(&board.system, n, 5.0).ok_or_else(|| n.to_string()))
            .collect()
    }

    /// Runs the suite on `jobs` workers: its outcome and the cases `each`
    /// saw, in the order it saw them.
    fn run(
        jobs: usize,
        build: impl Fn(usize, &SuiteBoard) -> Built + Sync,
    ) -> (Result<Vec<Case>, SuiteError<String>>, Vec<String>) {
        let mut seen = Vec::new();
        let shapes = [Shape::Bursts, Shape::RandomWalk];
        let out = run_suite(
            &boards(),
            &shapes,
            &SimConfig::default(),
            jobs,
            build,
            |c, _| seen.push(format!("{}/{}", c.board, c.shape)),
        );
        (out, seen)
    }

    #[test]
    fn cases_come_in_order_and_the_same_whatever_the_workers() {
        let order = ["gen-1/bursts", "gen-1/walk", "gen-2/bursts", "gen-2/walk"];
        let (one, seen_one) = run(1, |_, b| two_schedulers(b));
        let (three, seen_three) = run(3, |_, b| two_schedulers(b));
        let (one, three) = (one.unwrap(), three.unwrap());
        assert_eq!(one, three);
        assert_eq!(one.len(), 4);
        assert_eq!(seen_one, order);
        assert_eq!(seen_three, order);
    }

    #[test]
    fn the_first_failing_case_in_order_stops_the_run() {
        let failing = |at: usize, b: &SuiteBoard| {
            if at == 1 {
                Err("no schedulers for this one".to_string())
            } else {
                two_schedulers(b)
            }
        };
        for jobs in [1, 3] {
            let (out, seen) = run(jobs, failing);
            let err = out.unwrap_err().to_string();
            assert_eq!(
                err, "board gen-2: no schedulers for this one",
                "{jobs} jobs"
            );
            assert_eq!(seen, ["gen-1/bursts", "gen-1/walk"], "{jobs} jobs");
        }
    }
}
