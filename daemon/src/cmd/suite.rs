//! `camdnnd suite`: every scheduler over generated boards x scene shapes
//! (and any shipped profile), wins and losses of the full scheduler on the
//! on-time share, and the geometric mean of the median delay over all
//! offered frames.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use camdnn_policy::admission::FrameAdmission;
use camdnn_policy::gen::{self, Shape};
use camdnn_policy::scheduler::Scheduler;
use camdnn_policy::schedulers::{self, Camdnn, GreedyPlanner, Tuning, BASELINES};
use camdnn_policy::sim::SimConfig;
use camdnn_policy::suite::ablation::ablation_text;
use camdnn_policy::suite::report::{
    case_line, run_suite, summary, SuiteBoard, CAMDNN, CAMDNN_GREEDY, TIE,
};
use camdnn_policy::System;

/// Options of `camdnnd suite`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Generated boards: seeds FIRST_SEED .. FIRST_SEED + BOARDS (board
    /// `gen-SEED`).
    #[arg(long, default_value_t = 30)]
    pub boards: u64,
    /// Seed of the first generated board.
    #[arg(long, default_value_t = 1)]
    pub first_seed: u64,
    /// Comma-separated trace shapes (default: all of paper, bursts,
    /// dominance, absent, empty, walk).
    #[arg(long, value_delimiter = ',')]
    pub shapes: Vec<String>,
    /// A shipped profile to run beside the generated boards (repeatable),
    /// e.g. config/profiles/rb5.toml; its learned policy is taken from the
    /// policies folder beside it when there is one.
    #[arg(long)]
    pub system: Vec<PathBuf>,
    /// Folder of learned policies for generated boards (`gen-SEED.onnx` and
    /// its `.policy.json`; train one with `scripts/train_policy.sh` on the
    /// board file `--write-boards` writes). A board without one runs without
    /// the `camdnn` (MLP) scheduler, and the report says so.
    #[arg(long)]
    pub policies: Option<PathBuf>,
    /// Write every generated board's profile as DIR/gen-SEED.toml and its
    /// traces as DIR/gen-SEED-SHAPE.txt (for `camdnnd simulate --trace`), and
    /// exit.
    #[arg(long, value_name = "DIR")]
    pub write_boards: Option<PathBuf>,
    /// Comma-separated schedulers (default: `camdnn` where a policy is at
    /// hand, and every baseline).
    #[arg(long, value_delimiter = ',')]
    pub schedulers: Vec<String>,
    /// Camera frames per second (the deadline is two frame periods).
    #[arg(long, default_value_t = 14.0)]
    pub fps: f64,
    /// Global step interval, ms.
    #[arg(long, default_value_t = 5000.0)]
    pub epoch_ms: f64,
    /// A dropped frame brings the global step forward when none has run yet
    /// or the last one ran at least this long ago, ms (0: the epoch timer
    /// alone; `policy::stepper`).
    #[arg(long, default_value_t = camdnn_policy::stepper::DROP_STEP_GAP_MS)]
    pub drop_step_gap_ms: f64,
    /// Admit frames as the daemon does with `pipeline.max_in_flight` = N and
    /// no `pipeline.drop_behind_ms`: at most N frames in the pipeline, a
    /// frame arriving while it is full waits, and a newer frame supersedes it
    /// (the older one is dropped); the global step replays its choices under
    /// the same admission. Default: real-time dropping at one frame period
    /// (the daemon's `pipeline.drop_behind_ms`): a frame whose detector
    /// could not start within it is dropped at its arrival, and one with
    /// objects after its detector when the pipeline is further behind than
    /// what its age leaves of it.
    #[arg(long)]
    pub max_in_flight: Option<usize>,
    /// Time each global step takes to compute, ms (the daemon reports it as
    /// `camdnn_global_step_seconds`): it decides on the state at its start
    /// and applies this much later, while the dispatcher goes on as it was
    /// (0: applied at once).
    #[arg(long, default_value_t = 0.0)]
    pub step_cost_ms: f64,
    /// Late binding (the daemon's `pipeline.dispatch_ahead_ms`): hold batches
    /// whose host has more queued work than this, ms (default: place at once).
    #[arg(long)]
    pub dispatch_ahead_ms: Option<f64>,
    /// Sync-timer WaitTime, ms.
    #[arg(long, default_value_t = 5.0)]
    pub wait_ms: f64,
    /// Print every case's on-time share / median delay (ms, `miss` when half
    /// the frames were dropped) per scheduler and its median bound, not only
    /// the tallies.
    #[arg(long)]
    pub cases: bool,
    /// Cases run at once, one thread each (default: the host's cores). The
    /// figures do not depend on it: each case is a deterministic simulation
    /// of its own, and the cases print in board-then-shape order.
    #[arg(long)]
    pub jobs: Option<std::num::NonZeroUsize>,
    /// Run the global step's ablation instead of the schedulers: the full
    /// step with the greedy planner (`camdnn-greedy`) and, beside it, the
    /// same step without each choice and each threshold in turn
    /// (`policy::schedulers::Tuning::ablations`), and print what removing
    /// each costs in mean on-time share.
    #[arg(long, conflicts_with_all = ["schedulers", "policies"])]
    pub ablate: bool,
    /// With `--ablate`: instead of one rule at a time, the full step beside
    /// the same step with every rule named here switched off at once
    /// (comma-separated names of the ablation's rows without the leading
    /// `-`, e.g. `paper-home,settle-guard`): what pruning them together
    /// costs.
    #[arg(long, value_delimiter = ',', requires = "ablate")]
    pub ablate_together: Vec<String>,
}

/// Runs the suite and prints its tallies.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let shapes: Vec<Shape> = if args.shapes.is_empty() {
        Shape::ALL.to_vec()
    } else {
        args.shapes
            .iter()
            .map(|s| {
                Shape::by_name(s).with_context(|| {
                    let known: Vec<&str> = Shape::ALL.iter().map(|s| s.name()).collect();
                    format!("unknown shape {s:?}; known: {}", known.join(", "))
                })
            })
            .collect::<anyhow::Result<_>>()?
    };
    if !(args.fps.is_finite() && args.fps > 0.0) {
        bail!("--fps {} must be a positive number", args.fps);
    }
    let seeds = args.first_seed..args.first_seed.saturating_add(args.boards);
    if let Some(dir) = &args.write_boards {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for seed in seeds {
            let spec = gen::board(seed);
            let path = dir.join(format!("{}.toml", spec.name));
            std::fs::write(&path, spec.to_toml())
                .with_context(|| format!("writing {}", path.display()))?;
            println!("wrote {}", path.display());
            let system = System::from_spec(&spec)
                .with_context(|| format!("generated board {seed} does not validate"))?;
            let heavy = gen::heavy_count(&system, args.fps);
            for &shape in &shapes {
                let path = dir.join(format!("{}-{}.txt", spec.name, shape.name()));
                std::fs::write(&path, shape.trace(&system, seed, heavy).to_text())
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
        return Ok(());
    }
    // Each board and its learned policy, if any.
    let mut boards: Vec<SuiteBoard> = Vec::new();
    let mut policies: Vec<Option<PathBuf>> = Vec::new();
    for path in &args.system {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading system file {}", path.display()))?;
        let system = System::from_toml(&text)
            .with_context(|| format!("in system file {}", path.display()))?;
        let policy = path
            .parent()
            .unwrap_or(Path::new("."))
            .join("..")
            .join("policies")
            .join(format!("{}.onnx", system.name));
        policies.push(policy.exists().then_some(policy));
        let trace_seed = boards.len() as u64;
        boards.push(SuiteBoard { system, trace_seed });
    }
    for seed in seeds {
        let system = System::from_spec(&gen::board(seed))
            .with_context(|| format!("generated board {seed} does not validate"))?;
        let policy = args
            .policies
            .as_ref()
            .map(|d| d.join(format!("{}.onnx", system.name)))
            .filter(|p| p.exists());
        policies.push(policy);
        boards.push(SuiteBoard {
            system,
            trace_seed: seed,
        });
    }
    let cfg = SimConfig {
        fps: args.fps,
        epoch_ms: args.epoch_ms,
        drop_step_gap_ms: args.drop_step_gap_ms,
        step_cost_ms: args.step_cost_ms,
        dispatch_ahead_ms: args.dispatch_ahead_ms,
        admission: args
            .max_in_flight
            .map_or(FrameAdmission::Behind(None), FrameAdmission::InFlight),
        ..SimConfig::default()
    };
    let without_policy: Vec<String> = boards
        .iter()
        .zip(&policies)
        .filter(|(_, p)| p.is_none())
        .map(|(b, _)| b.system.name.clone())
        .collect();
    let jobs = args
        .jobs
        .or_else(|| std::thread::available_parallelism().ok())
        .map_or(1, |n| n.get());
    let ablations = if args.ablate_together.is_empty() {
        Tuning::ablations()
    } else {
        let pruned = Tuning::without_rules(&args.ablate_together)?;
        vec![(format!("-{}-rules", args.ablate_together.len()), pruned)]
    };
    let cases = run_suite(
        &boards,
        &shapes,
        &cfg,
        jobs,
        |at, board| {
            if args.ablate {
                return Ok(ablation_schedulers(&ablations, args.wait_ms));
            }
            build(
                &board.system,
                policies[at].as_deref(),
                &args.schedulers,
                args.wait_ms,
            )
        },
        |case, heavy| {
            if args.cases {
                println!("{}", case_line(case, heavy));
            }
        },
    )?;
    println!(
        "{} boards x {} shapes = {} cases; headline: on-time share (answered within {:.0} ms = two frame periods at {} fps; a dropped frame is a miss)",
        boards.len(),
        shapes.len(),
        cases.len(),
        2000.0 / args.fps,
        args.fps
    );
    if args.ablate {
        let variants: Vec<String> = ablations.iter().map(|(n, _)| ablated(n)).collect();
        print!("{}", ablation_text(&cases, CAMDNN_GREEDY, &variants, TIE));
        return Ok(());
    }
    if !without_policy.is_empty() && args.schedulers.iter().all(|s| s != CAMDNN) {
        println!(
            "no learned policy (so no `{CAMDNN}` column) for {} of {} boards{}",
            without_policy.len(),
            boards.len(),
            if without_policy.len() <= 6 {
                format!(": {}", without_policy.join(", "))
            } else {
                String::new()
            }
        );
    }
    print!("{}", summary(&cases));
    Ok(())
}

/// The report name of the step without the rule `name` names.
fn ablated(name: &str) -> String {
    format!("{CAMDNN_GREEDY}{name}")
}

/// The full step with the greedy planner, then each of `ablations`.
fn ablation_schedulers(
    ablations: &[(String, Tuning)],
    wait_ms: f64,
) -> Vec<Box<dyn Scheduler + Send>> {
    let full = Camdnn::new(GreedyPlanner::default(), wait_ms).named(CAMDNN_GREEDY);
    let mut out: Vec<Box<dyn Scheduler + Send>> = vec![Box::new(full)];
    for (name, tuning) in ablations {
        let s = Camdnn::with_tuning(GreedyPlanner::default(), wait_ms, tuning.clone());
        out.push(Box::new(s.named(ablated(name))));
    }
    out
}

/// The schedulers of one case: `camdnn` with the board's policy when there
/// is one, then every baseline (or the named ones).
fn build(
    system: &System,
    policy: Option<&Path>,
    names: &[String],
    wait_ms: f64,
) -> anyhow::Result<Vec<Box<dyn Scheduler + Send>>> {
    let names: Vec<String> = if names.is_empty() {
        policy
            .iter()
            .map(|_| CAMDNN.to_string())
            .chain(BASELINES.iter().map(|s| s.to_string()))
            .collect()
    } else {
        names.to_vec()
    };
    let mut out: Vec<Box<dyn Scheduler + Send>> = Vec::new();
    for name in &names {
        if name == CAMDNN {
            if let Some(path) = policy {
                let mlp = super::simulate::load_policy(system, path)?;
                out.push(Box::new(Camdnn::new(mlp, wait_ms).named(CAMDNN)));
            }
            continue;
        }
        match schedulers::by_name(system, name, wait_ms) {
            Some(s) => out.push(s),
            None => bail!(
                "unknown scheduler {name:?}; known: {CAMDNN}, {}",
                BASELINES.join(", ")
            ),
        }
    }
    Ok(out)
}
