//! The contenders of `camdnnd bench` and how they are measured: every
//! contender once per round, rounds interleaved (A B C ... A B C), the
//! closed loop's frames/s and p50/p99 per round, then the open loop at
//! offered rates; medians with a percentile-bootstrap interval over rounds.

use std::collections::BTreeMap;

use camdnn_policy::sim::{default_deadline_ms, fmt_delay, Accounting};
use camdnn_policy::stats::{bootstrap_median, MedianCi};
use camdnn_policy::System;

use super::internals::internals;
use super::sequential::{Pool, Run};
use super::stream::{drive, BenchFrame, Pace};
use super::work::{self, Answers, Work};
use super::{python, Args, Figures};
use crate::config::DaemonConfig;
use crate::pipeline::stats::StatsSnapshot;
use crate::pipeline::{self, FrameProcessor};

/// Bootstrap resamples per interval.
const RESAMPLES: usize = 2000;
/// The intervals' confidence level.
const LEVEL: f64 = 0.95;
/// The generator's seed (the intervals are reproducible).
const SEED: u64 = 0x0bad_5eed;

/// What a pipeline run leaves for the report beyond its figures.
pub(super) struct PipelineRun {
    /// What the pipeline did during the timed frames.
    pub stats: StatsSnapshot,
    /// Each frame's delay in frame order (`None`: not processed).
    pub by_frame: Vec<Option<f64>>,
}

/// How a contender runs.
pub(super) enum Kind<'a> {
    /// camdnn's pipeline, `window` frames in flight in the closed loop.
    Pipeline {
        built: pipeline::Built,
        window: usize,
        system: &'a System,
        /// The last run's counters and delays.
        last: Option<Box<PipelineRun>>,
    },
    /// Rust walkers sharing one queue.
    Pool(Pool<'a>),
    /// User Python on upstream boxes: processes round robin.
    PythonUpstream { workers: usize, threads: usize },
    /// User Python on an image graph (a registry package): processes
    /// round robin; counts compared, answers not.
    PythonGraph {
        kind: &'static str,
        images: python::Images,
        workers: usize,
        threads: usize,
    },
}

/// One contender and its figures per round.
pub(super) struct Contender<'a> {
    /// Name in the tables.
    pub name: String,
    /// How it runs.
    pub kind: Kind<'a>,
    /// Whether it runs in the open loop.
    pub open: bool,
    /// Closed-loop figures, one per round.
    pub closed: Vec<Figures>,
    /// The first round's work; later rounds are compared with it.
    pub work: Option<Work>,
    /// Rounds whose work differed from the first's.
    pub unsteady: Vec<String>,
    /// Open-loop delays per offered rate (index into the rates), one
    /// accounting per round.
    pub open_runs: BTreeMap<usize, Vec<Accounting>>,
    /// The pipeline's internals line of its last closed run.
    pub internals: Option<String>,
}

/// What every run needs.
pub(super) struct Ctx<'c> {
    pub cfg: &'c DaemonConfig,
    pub system: &'c System,
    pub args: &'c Args,
    pub warm: &'c [BenchFrame],
    pub rt: &'c tokio::runtime::Runtime,
}

impl<'a> Contender<'a> {
    /// camdnn's pipeline started from `cfg` (planning with `system`), named by `name` given
    /// the frames it keeps in flight; it runs open.
    pub fn pipeline(
        cfg: &DaemonConfig,
        system: &'a System,
        name: impl FnOnce(usize) -> String,
    ) -> anyhow::Result<Self> {
        let built = pipeline::start(&cfg.pipeline)?;
        let window = built.pipeline.max_in_flight().max(1);
        Ok(Contender::new(
            name(window),
            Kind::Pipeline {
                built,
                window,
                system,
                last: None,
            },
            true,
        ))
    }

    /// A contender with no figures yet.
    pub fn new(name: String, kind: Kind<'a>, open: bool) -> Self {
        Contender {
            name,
            kind,
            open,
            closed: Vec::new(),
            work: None,
            unsteady: Vec::new(),
            open_runs: BTreeMap::new(),
            internals: None,
        }
    }

    /// One run over `frames`: closed loop (`fps` `None`) or open at `fps`.
    pub fn run(
        &mut self,
        ctx: &Ctx,
        frames: &[BenchFrame],
        fps: Option<f64>,
    ) -> anyhow::Result<(Run, Option<String>)> {
        Ok(match &mut self.kind {
            Kind::Pipeline {
                built,
                window,
                system,
                last,
            } => {
                let pace = fps.map_or(Pace::Window(*window), Pace::Fps);
                ctx.rt.block_on(drive(built, ctx.warm, pace));
                let before = built.pipeline.stats();
                let (figures, by_frame, digests) = ctx.rt.block_on(drive(built, frames, pace));
                let stats = built.pipeline.stats().since(&before);
                let line = internals(&stats, figures.seconds);
                let work = pipeline_work(system, &stats, &digests);
                *last = Some(Box::new(PipelineRun { stats, by_frame }));
                (
                    Run {
                        figures: Figures {
                            name: self.name.clone(),
                            ..figures
                        },
                        work,
                    },
                    Some(line),
                )
            }
            Kind::Pool(pool) => (pool.run(ctx.warm, frames, fps)?, None),
            Kind::PythonUpstream { workers, threads } => (
                python::upstream(
                    ctx.cfg, ctx.system, ctx.args, ctx.warm, frames, *workers, *threads, fps,
                )?,
                None,
            ),
            Kind::PythonGraph {
                kind,
                images,
                workers,
                threads,
            } => (
                python::graph(
                    ctx.cfg,
                    ctx.system,
                    ctx.args,
                    kind,
                    *images,
                    ctx.warm.len(),
                    frames,
                    *workers,
                    *threads,
                    fps,
                )?,
                None,
            ),
        })
    }

    /// Records one closed-loop round.
    fn record_closed(&mut self, round: usize, run: Run, internals: Option<String>) {
        match &self.work {
            None => self.work = Some(run.work),
            Some(w) => {
                let d = w.differences("round 1", &run.work, &format!("round {}", round + 1));
                if !d.is_empty() {
                    self.unsteady.push(d.join("; "));
                }
            }
        }
        if internals.is_some() {
            self.internals = internals;
        }
        self.closed.push(run.figures);
    }

    /// Median frames/s over the closed rounds, with its interval.
    pub fn fps(&self) -> Option<MedianCi> {
        let v: Vec<f64> = self.closed.iter().map(Figures::fps).collect();
        bootstrap_median(&v, LEVEL, RESAMPLES, SEED)
    }

    /// Median of a per-round closed-loop percentile, with its interval.
    fn closed_percentile(&self, p99: bool) -> Option<MedianCi> {
        let v: Vec<f64> = self
            .closed
            .iter()
            .map(|f| {
                let a = f.accounting(f64::INFINITY).delay;
                if p99 {
                    a.p99
                } else {
                    a.p50
                }
            })
            .collect();
        bootstrap_median(&v, LEVEL, RESAMPLES, SEED)
    }
}

/// `rounds` closed-loop rounds over `frames`, every contender once per
/// round in order.
pub(super) fn closed_rounds(
    contenders: &mut [Contender],
    ctx: &Ctx,
    frames: &[BenchFrame],
    rounds: usize,
) -> anyhow::Result<()> {
    for r in 0..rounds {
        for c in contenders.iter_mut() {
            eprintln!("closed loop, round {}/{rounds}: {} ...", r + 1, c.name);
            let (run, line) = c.run(ctx, frames, None)?;
            c.record_closed(r, run, line);
        }
    }
    Ok(())
}

/// `rounds` open-loop rounds at each of `rates` (frames/s), every open
/// contender once per rate and round.
pub(super) fn open_rounds(
    contenders: &mut [Contender],
    ctx: &Ctx,
    frames: &[BenchFrame],
    rates: &[f64],
    rounds: usize,
) -> anyhow::Result<()> {
    for (k, &fps) in rates.iter().enumerate() {
        let deadline = ctx.args.deadline_ms.unwrap_or(default_deadline_ms(fps));
        for r in 0..rounds {
            for c in contenders.iter_mut().filter(|c| c.open) {
                eprintln!(
                    "open loop at {fps:.2} fps, round {}/{rounds}: {} ...",
                    r + 1,
                    c.name
                );
                let (run, _) = c.run(ctx, frames, Some(fps))?;
                c.open_runs
                    .entry(k)
                    .or_default()
                    .push(run.figures.accounting(deadline));
            }
        }
    }
    Ok(())
}

/// The work of a pipeline run from its counters and answers: items each
/// model ran (the root's are detector runs; an upstream root runs none).
fn pipeline_work(system: &System, stats: &StatsSnapshot, digests: &[u64]) -> Work {
    let mut w = Work::default();
    for (i, m) in system.models.iter().enumerate() {
        let n = stats.requests_of(&m.name);
        if system.roots().any(|r| r.0 == i) {
            w.detector_runs += n;
        } else if n > 0 {
            w.crops.insert(m.name.clone(), n);
        }
    }
    w.answers = Answers::Digest(work::run_digest(digests));
    w
}

fn ci(c: Option<MedianCi>, unit: &str) -> String {
    c.map_or_else(
        || "-".to_string(),
        |c| {
            format!(
                "{} [{}, {}]{unit}",
                fmt_delay(c.median),
                fmt_delay(c.lo),
                fmt_delay(c.hi)
            )
        },
    )
}

/// The closed-loop table, the work check and the ratios to `reference`
/// (the first contender).
pub(super) fn print_closed(contenders: &[Contender], rounds: usize) {
    println!(
        "\nclosed loop, {rounds} interleaved rounds: median [95% bootstrap interval] over rounds"
    );
    println!(
        "{:<62} {:>24} {:>26} {:>26}",
        "contender", "frames/s", "p50 ms", "p99 ms"
    );
    for c in contenders {
        println!(
            "{:<62} {:>24} {:>26} {:>26}",
            c.name,
            ci(c.fps(), ""),
            ci(c.closed_percentile(false), ""),
            ci(c.closed_percentile(true), "")
        );
    }
    println!("\nwork (first round):");
    for c in contenders {
        let w = c
            .work
            .as_ref()
            .map_or_else(|| "-".to_string(), Work::describe);
        println!("  {:<60} {w}", c.name);
        for u in &c.unsteady {
            println!("    warning: its work changed between rounds: {u}");
        }
    }
    let Some((reference, rest)) = contenders.split_first() else {
        return;
    };
    let Some(ref_work) = &reference.work else {
        return;
    };
    let others: Vec<(&str, &Work)> = rest
        .iter()
        .filter_map(|c| Some((c.name.as_str(), c.work.as_ref()?)))
        .collect();
    let refused = work::check((&reference.name, ref_work), &others);
    println!();
    for c in rest {
        let Some((_, why)) = refused.iter().find(|(n, _)| *n == c.name) else {
            if let (Some(a), Some(b)) = (reference.fps(), c.fps()) {
                let counts_only = !c.work.as_ref().is_some_and(Work::digested);
                println!(
                    "{} / {}: {:.2}x frames/s (medians){}{}",
                    reference.name,
                    c.name,
                    a.median / b.median,
                    if a.disjoint(&b) {
                        ""
                    } else {
                        "; the intervals overlap: no difference shown"
                    },
                    if counts_only {
                        "; same items per model, answers not compared"
                    } else {
                        ""
                    }
                );
            }
            continue;
        };
        println!(
            "no ratio {} / {}: their work differs ({})",
            reference.name,
            c.name,
            why.join("; ")
        );
    }
}

/// The open-loop table: per offered rate, each contender's median p50 and
/// p99 over all offered frames and its on-time share.
pub(super) fn print_open(contenders: &[Contender], rates: &[f64], fractions: &[f64], ctx: &Ctx) {
    for (k, &fps) in rates.iter().enumerate() {
        let deadline = ctx.args.deadline_ms.unwrap_or(default_deadline_ms(fps));
        println!(
            "\nopen loop at {fps:.2} fps ({:.0}% of the slowest open contender's closed-loop capacity), deadline {deadline:.0} ms: median [95% interval] over rounds",
            fractions.get(k).copied().unwrap_or(0.0) * 100.0
        );
        println!(
            "{:<62} {:>26} {:>26} {:>10}",
            "contender", "p50 ms", "p99 ms", "on time"
        );
        for c in contenders.iter().filter(|c| c.open) {
            let Some(p) = c.open_ci(k) else {
                continue;
            };
            println!(
                "{:<62} {:>26} {:>26} {:>9.0}%",
                c.name,
                ci(p.p50, ""),
                ci(p.p99, ""),
                p.on_time.map_or(0.0, |c| c.median) * 100.0
            );
        }
        // Latency wins and losses of the reference, only where the intervals part.
        let Some((reference, rest)) = contenders.split_first() else {
            continue;
        };
        let Some(r) = reference.open_ci(k) else {
            continue;
        };
        for c in rest.iter().filter(|c| c.open) {
            let Some(o) = c.open_ci(k) else {
                continue;
            };
            let verdict = |what: &str, a: Option<MedianCi>, b: Option<MedianCi>| match (a, b) {
                (Some(a), Some(b)) if a.disjoint(&b) && a.median < b.median => {
                    format!("{what} lower")
                }
                (Some(a), Some(b)) if a.disjoint(&b) => format!("{what} higher"),
                _ => format!("{what}: intervals overlap"),
            };
            println!(
                "  {} vs {}: {}, {}",
                reference.name,
                c.name,
                verdict("p50", r.p50, o.p50),
                verdict("p99", r.p99, o.p99)
            );
        }
    }
}

/// A contender's open-loop medians at one rate, with intervals.
pub(super) struct OpenCi {
    pub p50: Option<MedianCi>,
    pub p99: Option<MedianCi>,
    pub on_time: Option<MedianCi>,
}

impl Contender<'_> {
    /// Medians over the open rounds at rate `k` (`None`: it did not run there).
    pub fn open_ci(&self, k: usize) -> Option<OpenCi> {
        let runs = self.open_runs.get(&k)?;
        let p = |f: fn(&Accounting) -> f64| {
            let v: Vec<f64> = runs.iter().map(f).collect();
            bootstrap_median(&v, LEVEL, RESAMPLES, SEED)
        };
        Some(OpenCi {
            p50: p(|a| a.delay.p50),
            p99: p(|a| a.delay.p99),
            on_time: p(Accounting::goodput),
        })
    }
}
