//! `ilmodel suite`: `camdnnd suite`'s run with the schedulers only the
//! offline tools can build: camdnn with the stream ILP solved at every
//! global step (`camdnn-stream-oracle`), beside camdnn with a learned
//! policy and every baseline.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use camdnn_policy::gen::{self, Shape};
use camdnn_policy::mlp::learned::Learned;
use camdnn_policy::scheduler::Scheduler;
use camdnn_policy::schedulers::{self, Camdnn, Tuning, BASELINES};
use camdnn_policy::sim::SimConfig;
use camdnn_policy::suite::report::{case_line, run_suite, summary, SuiteBoard, CAMDNN};
use camdnn_policy::System;
use clap::Args;

use super::{StreamOptions, StreamPolicy};

/// Report name of camdnn with the stream ILP solved at every global step.
pub const STREAM_ORACLE: &str = "camdnn-stream-oracle";

/// Options of `ilmodel suite`.
#[derive(Args, Debug)]
pub struct SuiteArgs {
    /// Generated boards: seeds FIRST_SEED .. FIRST_SEED + BOARDS.
    #[arg(long, default_value_t = 30)]
    pub boards: u64,
    /// Seed of the first generated board.
    #[arg(long, default_value_t = 1)]
    pub first_seed: u64,
    /// A profile to run beside the generated boards (repeatable); its
    /// learned policy is taken from the policies folder beside it, or from
    /// --policies.
    #[arg(long)]
    pub system: Vec<PathBuf>,
    /// Folder of learned policies (NAME.onnx and NAME.policy.json); a board
    /// without one runs without the `camdnn` column.
    #[arg(long)]
    pub policies: Option<PathBuf>,
    /// Comma-separated schedulers (default: camdnn where a policy is at
    /// hand, and every baseline; with --oracle, camdnn-stream-oracle too).
    #[arg(long, value_delimiter = ',')]
    pub schedulers: Vec<String>,
    /// Also run camdnn with the stream ILP solved at every global step
    /// (`camdnn-stream-oracle`; an ILP solve per step).
    #[arg(long)]
    pub oracle: bool,
    /// First train, into --policies, the stream policy of every board that
    /// has none there (`ilmodel learn`'s small variant).
    #[arg(long, requires = "policies")]
    pub train: bool,
    /// Comma-separated trace shapes (default: all).
    #[arg(long, value_delimiter = ',')]
    pub shapes: Vec<String>,
    /// HiGHS time limit of one stream solve, seconds.
    #[arg(long, default_value_t = 2.0)]
    pub time_limit_s: f64,
    /// Comma-separated rules of the global step to switch off in `camdnn`
    /// and `camdnn-stream-oracle` (the names `camdnnd suite --ablate`
    /// prints, e.g. `plan`): the ablation of the step with the learned or
    /// exact plan rather than the greedy one.
    #[arg(long, value_delimiter = ',')]
    pub without: Vec<String>,
    /// Print every case's line.
    #[arg(long)]
    pub cases: bool,
    /// Cases run at once (default: the host's cores).
    #[arg(long)]
    pub jobs: Option<std::num::NonZeroUsize>,
}

/// The boards of a suite run: the given profiles, then the generated ones,
/// each with its learned policy's path when there is one.
pub fn suite_boards(
    systems: &[PathBuf],
    first_seed: u64,
    boards: u64,
    policies: Option<&Path>,
) -> Result<Vec<(SuiteBoard, Option<PathBuf>)>> {
    let mut out = Vec::new();
    let policy_in = |dir: &Path, name: &str| {
        let p = dir.join(format!("{name}.onnx"));
        p.exists().then_some(p)
    };
    for path in systems {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading system file {}", path.display()))?;
        let system = System::from_toml(&text)
            .with_context(|| format!("in system file {}", path.display()))?;
        let beside = path
            .parent()
            .unwrap_or(Path::new("."))
            .join("..")
            .join("policies");
        let policy = policies
            .and_then(|d| policy_in(d, &system.name))
            .or_else(|| policy_in(&beside, &system.name));
        let trace_seed = out.len() as u64;
        out.push((SuiteBoard { system, trace_seed }, policy));
    }
    for seed in first_seed..first_seed.saturating_add(boards) {
        let system = System::from_spec(&gen::board(seed))
            .with_context(|| format!("generated board {seed} does not validate"))?;
        let policy = policies.and_then(|d| policy_in(d, &system.name));
        out.push((
            SuiteBoard {
                system,
                trace_seed: seed,
            },
            policy,
        ));
    }
    Ok(out)
}

/// Runs `ilmodel suite`.
pub fn run(args: &SuiteArgs) -> Result<()> {
    let shapes: Vec<Shape> = if args.shapes.is_empty() {
        Shape::ALL.to_vec()
    } else {
        args.shapes
            .iter()
            .map(|s| Shape::by_name(s).with_context(|| format!("unknown shape {s:?}")))
            .collect::<Result<_>>()?
    };
    if !(args.time_limit_s.is_finite() && args.time_limit_s > 0.0) {
        bail!(
            "--time-limit-s {} must be a positive number",
            args.time_limit_s
        );
    }
    let boards = suite_boards(
        &args.system,
        args.first_seed,
        args.boards,
        args.policies.as_deref(),
    )?;
    let jobs = args
        .jobs
        .or_else(|| std::thread::available_parallelism().ok())
        .map_or(1, |n| n.get());
    let boards = if let (true, Some(dir)) = (args.train, &args.policies) {
        let missing: Vec<SuiteBoard> = boards
            .iter()
            .filter(|(_, p)| p.is_none())
            .map(|(b, _)| b.clone())
            .collect();
        learn_boards(&missing, dir, &super::learn::LearnConfig::small(), jobs)?;
        suite_boards(&args.system, args.first_seed, args.boards, Some(dir))?
    } else {
        boards
    };
    let (suite, policies): (Vec<SuiteBoard>, Vec<Option<PathBuf>>) = boards.into_iter().unzip();
    let options = StreamOptions {
        time_limit_s: args.time_limit_s,
    };
    let tuning = Tuning::without_rules(&args.without)?;
    let cfg = SimConfig::default();
    let cases = run_suite(
        &suite,
        &shapes,
        &cfg,
        jobs,
        |at, board| {
            let names = scheduler_names(&args.schedulers, policies[at].is_some(), args.oracle);
            build(
                &board.system,
                policies[at].as_deref(),
                &names,
                &options,
                &tuning,
            )
        },
        |case, heavy| {
            if args.cases {
                println!("{}", case_line(case, heavy));
            }
        },
    )?;
    println!(
        "{} boards x {} shapes = {} cases; headline: on-time share (two frame periods at {} fps)",
        suite.len(),
        shapes.len(),
        cases.len(),
        cfg.fps
    );
    print!("{}", summary(&cases));
    Ok(())
}

/// The schedulers of one case: the named ones, or by default `camdnn`
/// where the board has a policy, the stream oracle with `--oracle`, and
/// every baseline.
fn scheduler_names(named: &[String], has_policy: bool, oracle: bool) -> Vec<String> {
    if !named.is_empty() {
        return named.to_vec();
    }
    let learned = has_policy.then_some(CAMDNN);
    let stream = oracle.then_some(STREAM_ORACLE);
    learned
        .into_iter()
        .chain(stream)
        .chain(BASELINES.iter().copied())
        .map(str::to_string)
        .collect()
}

/// The schedulers of one case.
fn build(
    system: &System,
    policy: Option<&Path>,
    names: &[String],
    options: &StreamOptions,
    tuning: &Tuning,
) -> Result<Vec<Box<dyn Scheduler + Send>>> {
    const WAIT_MS: f64 = 5.0;
    let mut out: Vec<Box<dyn Scheduler + Send>> = Vec::new();
    for name in names {
        match name.as_str() {
            STREAM_ORACLE => {
                let oracle = StreamPolicy::new(options.clone());
                out.push(Box::new(
                    Camdnn::with_tuning(oracle, WAIT_MS, tuning.clone()).named(STREAM_ORACLE),
                ));
            }
            CAMDNN => {
                if let Some(path) = policy {
                    let learned = load_learned(system, path)?;
                    out.push(Box::new(
                        Camdnn::with_tuning(learned, WAIT_MS, tuning.clone()).named(CAMDNN),
                    ));
                }
            }
            other => match schedulers::by_name(system, other, WAIT_MS) {
                Some(s) => out.push(s),
                None => bail!(
                    "unknown scheduler {other:?}; known: {STREAM_ORACLE}, {CAMDNN}, {}",
                    BASELINES.join(", ")
                ),
            },
        }
    }
    Ok(out)
}

/// The learned policy at `path` (ONNX) with its sidecar beside it
/// (`X.onnx` -> `X.policy.json`), of either kind.
pub fn load_learned(system: &System, path: &Path) -> Result<Learned> {
    let onnx = std::fs::read(path).with_context(|| format!("reading policy {}", path.display()))?;
    let side_path = crate::export::sidecar_path(path);
    let side = std::fs::read_to_string(&side_path)
        .with_context(|| format!("reading policy sidecar {}", side_path.display()))?;
    Learned::new(system, &onnx, &side)
        .with_context(|| format!("loading policy {} for {}", path.display(), system.name))
}

/// Options of `ilmodel learn`.
#[derive(Args, Debug)]
pub struct LearnArgs {
    /// Generated boards to train a policy for: seeds FIRST_SEED ..
    /// FIRST_SEED + BOARDS (0: none).
    #[arg(long, default_value_t = 0)]
    pub boards: u64,
    /// Seed of the first generated board.
    #[arg(long, default_value_t = 1)]
    pub first_seed: u64,
    /// A profile to train a policy for (repeatable).
    #[arg(long)]
    pub system: Vec<PathBuf>,
    /// Folder the policies go to (NAME.onnx and NAME.policy.json).
    #[arg(long)]
    pub out: PathBuf,
    /// The full variant (more runs, copies and DAgger rounds, wider
    /// layers) instead of the small one the suite trains.
    #[arg(long)]
    pub full: bool,
    /// Boards trained at once, one thread each (default: the host's cores).
    #[arg(long)]
    pub jobs: Option<std::num::NonZeroUsize>,
}

/// Runs `ilmodel learn`: one stream policy per board, boards in parallel.
pub fn run_learn(args: &LearnArgs) -> Result<()> {
    use super::learn::LearnConfig;
    let boards = suite_boards(&args.system, args.first_seed, args.boards, None)?;
    if boards.is_empty() {
        bail!("no board to train for: give --system FILE or --boards N");
    }
    let config = if args.full {
        LearnConfig::full()
    } else {
        LearnConfig::small()
    };
    let jobs = args
        .jobs
        .or_else(|| std::thread::available_parallelism().ok())
        .map_or(1, |n| n.get());
    let boards: Vec<SuiteBoard> = boards.into_iter().map(|(b, _)| b).collect();
    let start = std::time::Instant::now();
    learn_boards(&boards, &args.out, &config, jobs)?;
    println!(
        "{} policies ({} variant) in {:.0} s with {jobs} jobs",
        boards.len(),
        if args.full { "full" } else { "small" },
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Learns the stream policy of each of `boards` into `out` (NAME.onnx and
/// NAME.policy.json), `jobs` boards at once, printing one line per board.
pub fn learn_boards(
    boards: &[SuiteBoard],
    out: &Path,
    config: &super::learn::LearnConfig,
    jobs: usize,
) -> Result<()> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| -> Result<()> {
        let workers: Vec<_> = (0..jobs.clamp(1, boards.len().max(1)))
            .map(|_| {
                scope.spawn(|| -> Result<()> {
                    while let Some(board) = boards.get(next.fetch_add(1, Ordering::Relaxed)) {
                        learn_one(board, out, config)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join().expect("a learning thread panicked")?;
        }
        Ok(())
    })
}

/// Learns and writes one board's policy; prints its line.
fn learn_one(board: &SuiteBoard, out: &Path, config: &super::learn::LearnConfig) -> Result<()> {
    let name = &board.system.name;
    let learned = super::learn::learn(&board.system, board.trace_seed, config, |stage| {
        eprintln!("{name}: {stage}");
    })
    .with_context(|| format!("learning the policy of {name}"))?;
    let onnx = out.join(format!("{name}.onnx"));
    std::fs::write(&onnx, &learned.onnx).with_context(|| format!("writing {}", onnx.display()))?;
    let side = out.join(format!("{name}.policy.json"));
    let json = serde_json::to_string_pretty(&learned.sidecar)? + "\n";
    std::fs::write(&side, json).with_context(|| format!("writing {}", side.display()))?;
    let t = &learned.sidecar.training;
    let pct = |v: Option<f64>| v.unwrap_or(f64::NAN) * 100.0;
    println!(
        "{name}: {:.0} s, {} solves, {} states trained on; held out {} states: J over the oracle's mean {:+.2} %, p50 {:+.2} %, max {:+.2} %, same residency {:.0} %, {} unserved; {} states without a label skipped",
        learned.wall_s,
        learned.solves,
        t.train_states,
        t.heldout_states,
        pct(t.heldout_gap_mean),
        pct(t.heldout_gap_p50),
        pct(t.heldout_gap_max),
        pct(t.heldout_exact),
        learned.unserved,
        learned.unlabelled,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_named_schedulers_the_suite_runs_camdnn_where_a_policy_is_and_every_baseline() {
        let with = scheduler_names(&[], true, false);
        assert_eq!(with[0], CAMDNN);
        assert!(BASELINES.iter().all(|b| with.iter().any(|n| n == b)));
        let without = scheduler_names(&[], false, true);
        assert!(!without.iter().any(|n| n == CAMDNN), "{without:?}");
        assert!(without.iter().any(|n| n == STREAM_ORACLE), "{without:?}");
        let named = scheduler_names(&["heft".to_string()], true, true);
        assert_eq!(named, ["heft"]);
    }

    #[test]
    fn an_unknown_rule_to_switch_off_is_an_error_that_names_it_before_any_case_runs() {
        let args = SuiteArgs {
            boards: 1,
            first_seed: 1,
            system: Vec::new(),
            policies: None,
            schedulers: vec![STREAM_ORACLE.to_string()],
            oracle: true,
            train: false,
            shapes: vec!["empty".to_string()],
            time_limit_s: 2.0,
            without: vec!["lookahead".to_string(), "no-such-rule".to_string()],
            cases: false,
            jobs: None,
        };
        let err = run(&args).unwrap_err().to_string();
        assert!(err.contains("no-such-rule"), "{err}");
        assert!(
            err.contains("stream-split"),
            "the known rules are listed: {err}"
        );
    }
}
