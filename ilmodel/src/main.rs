//! `ilmodel`: the offline tools of camdnn's global step.
//!
//! - `ilmodel solve`: one ILP solve, printed as JSON;
//! - `ilmodel time-solve`: repeated solves of one instance, median time;
//! - `ilmodel demos`: the optimal demonstration dataset (see README.md);
//! - `ilmodel train` / `export` / `eval`: the policy MLP, its ONNX file and
//!   its fidelity against the ILP.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use camdnn_ilmodel::demos::{generate, generate_shard, merge_run, DemoConfig, Shard};
use camdnn_ilmodel::mlp_cli::read_system;
use camdnn_ilmodel::oracle::first_root;
use camdnn_ilmodel::{solve, OracleOptions};
use camdnn_policy::{Detector, PlanInput, System};
use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ilmodel",
    version,
    about = "camdnn offline tools: ILP oracle and demonstrations"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Solve one scene with the ILP and print the plan as JSON.
    Solve(Instance),
    /// Solve one scene repeatedly and print the median solve time.
    TimeSolve {
        #[command(flatten)]
        instance: Instance,
        /// Number of timed solves (after one warm-up solve).
        #[arg(long, default_value_t = 31)]
        runs: usize,
    },
    /// Generate (or resume) an optimal demonstration dataset.
    Demos(DemosArgs),
    /// Train the policy MLP on demonstrations (model.json, loss.csv, loss.svg).
    Train(camdnn_ilmodel::mlp_cli::TrainArgs),
    /// Export a trained model as ONNX plus its JSON sidecar.
    Export(camdnn_ilmodel::mlp_cli::ExportArgs),
    /// IL fidelity of an exported policy vs the ILP on held-out demonstrations.
    Eval(camdnn_ilmodel::mlp_cli::EvalArgs),
    /// Choose the decoding's share floor on the training split of the
    /// demonstrations and write it into the policy's sidecar.
    Calibrate(camdnn_ilmodel::mlp_cli::CalibrateArgs),
    /// IL fidelity on the states the policy itself visits: camdnn with the
    /// policy runs the suite's scene shapes, every global step's input is
    /// solved by the ILP and planned by the MLP alone and with its search.
    Visited(VisitedArgs),
    /// DAgger's aggregation: a demonstration folder holding a base folder's
    /// demonstrations plus the states camdnn with the policy visits (as
    /// `visited` finds them), each labelled by the ILP; train on it next.
    Dagger(DaggerArgs),
    /// Re-run every experiment of the paper and write docs/results.md.
    Reproduce(camdnn_ilmodel::reproduce::cli::ReproduceArgs),
    /// The scheduler suite with camdnn's step driven by the stream oracle
    /// (`camdnn-stream-oracle`) and by learned policies, beside every
    /// baseline.
    Suite(camdnn_ilmodel::stream::cli::SuiteArgs),
    /// Distil a stream policy from the stream oracle for each board given
    /// (the oracle's runs, copies, DAgger rounds, a held-out check).
    Learn(camdnn_ilmodel::stream::cli::LearnArgs),
}

/// One scene of a system.
#[derive(Args)]
struct Instance {
    /// System TOML file (processors, models, profile).
    #[arg(long)]
    system: PathBuf,
    /// r_i of each classifier, in system order, comma separated (e.g. 3,0,2).
    #[arg(long, value_delimiter = ',')]
    scene: Vec<u32>,
    /// rem_j of each processor in ms, comma separated; default all 0.
    #[arg(long, value_delimiter = ',')]
    rem: Vec<f64>,
    /// Models resident before the step, as MODEL@PROC, comma separated; the
    /// detector is always taken as resident on its processor.
    #[arg(long, value_delimiter = ',')]
    resident: Vec<String>,
    /// F: frames per epoch over which a load is amortised.
    #[arg(long, default_value_t = 70.0)]
    frames_per_epoch: f64,
    /// HiGHS time limit per stage, seconds.
    #[arg(long, default_value_t = 10.0)]
    time_limit_s: f64,
    /// Skip the tie-breaking second stage (T is the same, the plan may
    /// keep idle residents or waste work off the critical processor).
    #[arg(long)]
    no_tie_break: bool,
    /// Start HiGHS from scratch instead of from the greedy planner's plan
    /// (T is the same; only the solve time differs).
    #[arg(long)]
    no_warm_start: bool,
}

#[derive(Args)]
struct DemosArgs {
    /// System TOML file.
    #[arg(long)]
    system: PathBuf,
    /// Output folder (created; an existing run there is resumed).
    #[arg(long)]
    out: PathBuf,
    /// Seed of all random draws.
    #[arg(long)]
    seed: u64,
    /// Largest number of objects per classifier (the paper: 14).
    #[arg(long, default_value_t = 14)]
    max_objects: u32,
    /// Number of demonstrations (the paper: 12000).
    #[arg(long, default_value_t = 12_000)]
    samples: u64,
    /// rem_j is 0 with probability 1/4, else uniform in [0, rem_max_ms).
    #[arg(long, default_value_t = 100.0)]
    rem_max_ms: f64,
    /// F: frames per epoch (the paper: 5 s at 14 fps).
    #[arg(long, default_value_t = 70.0)]
    frames_per_epoch: f64,
    /// Demonstrations per chunk file (the unit of resumption).
    #[arg(long, default_value_t = 64)]
    chunk_size: u64,
    /// Worker threads; default: every core.
    #[arg(long)]
    jobs: Option<usize>,
    /// HiGHS time limit per solve stage, seconds.
    #[arg(long, default_value_t = 10.0)]
    time_limit_s: f64,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Solve only shard I of N (chunks c with c mod N = I) into --out,
    /// without merging. I is a number, or JOB_COMPLETION_INDEX (Kubernetes
    /// Indexed Job) or SLURM_ARRAY_TASK_ID (Slurm array) to read it from
    /// the environment: `--shard JOB_COMPLETION_INDEX/8`.
    #[arg(long, value_name = "I/N", conflicts_with = "merge")]
    shard: Option<String>,
    /// Merge the chunks every shard wrote into demos.jsonl (solves
    /// nothing; fails naming unfinished chunks).
    #[arg(long)]
    merge: bool,
}

#[derive(Args)]
struct VisitedArgs {
    /// System TOML file.
    #[arg(long)]
    system: PathBuf,
    /// Learned policy (ONNX); its sidecar is the same path with
    /// `.policy.json`. Default: config/policies/NAME.onnx.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Trace seeds FIRST_SEED..FIRST_SEED+SEEDS of every shape (800 frames
    /// each).
    #[arg(long, default_value_t = 5)]
    seeds: u64,
    /// The first trace seed (keep DAgger's and the evaluation's apart).
    #[arg(long, default_value_t = 1)]
    first_seed: u64,
}

#[derive(Args)]
struct DaggerArgs {
    #[command(flatten)]
    visited: VisitedArgs,
    /// The demonstration folder the policy was trained on.
    #[arg(long)]
    demos: PathBuf,
    /// The new demonstration folder (must not exist).
    #[arg(long)]
    out: PathBuf,
}

fn run_dagger(args: &DaggerArgs) -> Result<()> {
    let (text, system) = read_system(&args.visited.system)?;
    if args.out.exists() {
        bail!(
            "{} exists; DAgger writes a new demonstration folder",
            args.out.display()
        );
    }
    let base = camdnn_ilmodel::train::load_demos(&args.demos, &text)?;
    let (onnx_path, onnx, side) = read_policy(&args.visited, &system)?;
    let states = visited_states(&args.visited, &system, &onnx, &side)?;
    let det = Detector::fastest(&system);
    let options = OracleOptions::default();
    let mut lines = std::fs::read_to_string(args.demos.join("demos.jsonl"))
        .with_context(|| format!("reading {}", args.demos.join("demos.jsonl").display()))?;
    let first = base.demos.len() as u64;
    for (n, s) in states.iter().enumerate() {
        let demo =
            camdnn_ilmodel::demos::label(&system, first + n as u64, &s.input(), det, &options)?;
        lines.push_str(&serde_json::to_string(&demo)?);
        lines.push('\n');
    }
    let mut manifest = base.manifest.clone();
    manifest.samples = first + states.len() as u64;
    manifest.scene_mode = format!(
        "{} + {} states visited by camdnn with {} ({} shapes x trace seeds {:?})",
        manifest.scene_mode,
        states.len(),
        onnx_path.display(),
        camdnn_policy::gen::Shape::ALL.len(),
        args.visited.seed_range()
    );
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    std::fs::write(
        args.out.join("manifest.json"),
        serde_json::to_string_pretty(&manifest)? + "\n",
    )?;
    std::fs::write(args.out.join("demos.jsonl"), lines)?;
    println!(
        "wrote {}: {} demonstrations of {} and {} visited states labelled by the ILP",
        args.out.display(),
        first,
        args.demos.display(),
        states.len()
    );
    Ok(())
}

impl VisitedArgs {
    /// The trace seeds: FIRST_SEED..=FIRST_SEED+SEEDS-1.
    fn seed_range(&self) -> std::ops::RangeInclusive<u64> {
        self.first_seed..=self.first_seed + self.seeds.saturating_sub(1)
    }
}

/// The global step's inputs while camdnn with the policy (`onnx`, `side`)
/// runs every shape for `args`' trace seeds ([`camdnn_ilmodel::visited::visit`]).
fn visited_states(
    args: &VisitedArgs,
    system: &System,
    onnx: &[u8],
    side: &str,
) -> Result<Vec<camdnn_ilmodel::visited::Visited>> {
    let load = || camdnn_policy::mlp::MlpPolicy::new(system, onnx, side);
    load()?;
    let cfg = camdnn_policy::sim::SimConfig::default();
    Ok(camdnn_ilmodel::visited::visit(
        system,
        || load().expect("loaded above"),
        args.seed_range(),
        &cfg,
        5.0,
    )?)
}

/// The policy of `args` (default config/policies/NAME.onnx): its path, ONNX
/// bytes and sidecar text.
fn read_policy(args: &VisitedArgs, system: &System) -> Result<(PathBuf, Vec<u8>, String)> {
    let onnx_path = args
        .policy
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("config/policies/{}.onnx", system.name)));
    let onnx = std::fs::read(&onnx_path).with_context(|| {
        format!(
            "reading {} (train one with scripts/train_policy.sh)",
            onnx_path.display()
        )
    })?;
    let side_path = camdnn_ilmodel::export::sidecar_path(&onnx_path);
    let side = std::fs::read_to_string(&side_path)
        .with_context(|| format!("reading {}", side_path.display()))?;
    Ok((onnx_path, onnx, side))
}

fn run_visited(args: &VisitedArgs) -> Result<()> {
    let (_, system) = read_system(&args.system)?;
    let (onnx_path, onnx, side) = read_policy(args, &system)?;
    let states = visited_states(args, &system, &onnx, &side)?;
    let load = || camdnn_policy::mlp::MlpPolicy::new(&system, &onnx, &side);
    let mut alone = load()?;
    alone.set_local_search(false);
    let mut searched = load()?;
    searched.set_local_search(true);
    let mut policies = [alone, searched];
    let s = camdnn_ilmodel::visited::fidelity_on(&system, &mut policies, &states)?;
    println!(
        "{} global steps of camdnn ({}) over {} shapes x trace seeds {:?} on {}; extra makespan over the ILP on those states:",
        states.len(),
        onnx_path.display(),
        camdnn_policy::gen::Shape::ALL.len(),
        args.seed_range(),
        system.name
    );
    for (label, f) in [
        ("MLP alone (repaired, no search)", s[0]),
        ("MLP + local search", s[1]),
    ] {
        println!(
            "  {label}: mean {:+.3}%, p50 {:+.3}%, p99 {:+.3}%, max {:+.3}%",
            f.mean * 100.0,
            f.p50 * 100.0,
            f.p99 * 100.0,
            f.max * 100.0
        );
    }
    Ok(())
}

fn main() -> Result<()> {
    // The reports are often piped into `head`: stop when the reader goes
    // away (SIGPIPE's default action) instead of panicking in `println!`.
    // ilmodel writes to no socket.
    // SAFETY: `signal` with a valid signal number and SIG_DFL only resets
    // the disposition; no thread has started yet.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    match Cli::parse().command {
        Command::Solve(inst) => run_solve(&inst),
        Command::TimeSolve { instance, runs } => run_time_solve(&instance, runs),
        Command::Demos(args) => run_demos(args),
        Command::Train(args) => camdnn_ilmodel::mlp_cli::run_train(&args),
        Command::Export(args) => camdnn_ilmodel::mlp_cli::run_export(&args),
        Command::Eval(args) => camdnn_ilmodel::mlp_cli::run_eval(&args),
        Command::Calibrate(args) => camdnn_ilmodel::mlp_cli::run_calibrate(&args),
        Command::Visited(args) => run_visited(&args),
        Command::Dagger(args) => run_dagger(&args),
        Command::Reproduce(args) => camdnn_ilmodel::reproduce::cli::run(&args),
        Command::Suite(args) => camdnn_ilmodel::stream::cli::run(&args),
        Command::Learn(args) => camdnn_ilmodel::stream::cli::run_learn(&args),
    }
}

/// The scene, rem and a_old vectors of an [`Instance`].
fn vectors(inst: &Instance, system: &System) -> Result<(Vec<u32>, Vec<f64>, Vec<bool>)> {
    let (nm, np) = (system.num_models(), system.num_processors());
    let classifiers: Vec<_> = system.request_models().collect();
    if inst.scene.len() != classifiers.len() {
        let names: Vec<_> = classifiers
            .iter()
            .map(|m| system.models[m.0].name.as_str())
            .collect();
        bail!(
            "--scene has {} values but the system has {} classifiers ({})",
            inst.scene.len(),
            classifiers.len(),
            names.join(", ")
        );
    }
    let mut scene = vec![0; nm];
    for (m, &r) in classifiers.iter().zip(&inst.scene) {
        scene[m.0] = r;
    }
    let rem = if inst.rem.is_empty() {
        vec![0.0; np]
    } else if inst.rem.len() == np {
        inst.rem.clone()
    } else {
        bail!(
            "--rem has {} values but the system has {np} processors",
            inst.rem.len()
        );
    };
    let mut a_old = vec![false; nm * np];
    a_old[first_root(system).0 * np + Detector::fastest(system).proc.0] = true;
    for pair in &inst.resident {
        let (m, p) = pair
            .split_once('@')
            .with_context(|| format!("--resident {pair:?}: expected MODEL@PROC"))?;
        let i = system
            .model_by_name(m)
            .with_context(|| format!("--resident {pair:?}: no model named {m:?}"))?;
        let j = system
            .proc_by_name(p)
            .with_context(|| format!("--resident {pair:?}: no processor named {p:?}"))?;
        a_old[i.0 * np + j.0] = true;
    }
    Ok((scene, rem, a_old))
}

fn run_solve(inst: &Instance) -> Result<()> {
    let (_, system) = read_system(&inst.system)?;
    let (scene, rem, a_old) = vectors(inst, &system)?;
    let input = PlanInput {
        scene: &scene,
        rem_ms: &rem,
        residency: &a_old,
        frames_per_epoch: inst.frames_per_epoch,
    };
    let options = OracleOptions {
        time_limit_s: inst.time_limit_s,
        tie_break: !inst.no_tie_break,
        warm_start: !inst.no_warm_start,
    };
    let s = solve(&system, &input, Detector::fastest(&system), &options)?;
    let mut resident = Vec::new();
    let mut batches = Vec::new();
    for i in system.model_ids() {
        for j in system.proc_ids() {
            let (m, p) = (&system.models[i.0].name, &system.processors[j.0].name);
            if s.plan.resident(i, j) {
                resident.push(serde_json::json!({"model": m, "proc": p}));
            }
            for k in 1..=system.max_batch {
                let n = s.plan.batches(i, j, k);
                if n > 0 {
                    batches.push(serde_json::json!({"model": m, "proc": p, "k": k, "count": n}));
                }
            }
        }
    }
    let out = serde_json::json!({
        "t_ms": s.makespan_ms,
        "objective_ms": s.objective_ms,
        "status": s.status,
        "solve_ms": s.solve_time.as_secs_f64() * 1000.0,
        "resident": resident,
        "batches": batches,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

fn run_time_solve(inst: &Instance, runs: usize) -> Result<()> {
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let (_, system) = read_system(&inst.system)?;
    let (scene, rem, a_old) = vectors(inst, &system)?;
    let input = PlanInput {
        scene: &scene,
        rem_ms: &rem,
        residency: &a_old,
        frames_per_epoch: inst.frames_per_epoch,
    };
    let options = OracleOptions {
        time_limit_s: inst.time_limit_s,
        tie_break: !inst.no_tie_break,
        warm_start: !inst.no_warm_start,
    };
    let det = Detector::fastest(&system);
    let first = solve(&system, &input, det, &options)?;
    let mut times: Vec<Duration> = Vec::with_capacity(runs);
    for _ in 0..runs {
        times.push(solve(&system, &input, det, &options)?.solve_time);
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "system {} scene {:?}: T = {:.4} ms ({:?}); solve time over {runs} runs: median {:.3} ms, min {:.3} ms, max {:.3} ms",
        system.name,
        inst.scene,
        first.makespan_ms,
        first.status,
        ms(times[runs / 2]),
        ms(times[0]),
        ms(times[runs - 1]),
    );
    Ok(())
}

fn run_demos(args: DemosArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.system)
        .with_context(|| format!("reading {}", args.system.display()))?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let config = DemoConfig {
        system_toml: text,
        out: args.out,
        seed: args.seed,
        max_objects: args.max_objects,
        samples: args.samples,
        rem_max_ms: args.rem_max_ms,
        frames_per_epoch: args.frames_per_epoch,
        chunk_size: args.chunk_size,
        jobs,
        time_limit_s: args.time_limit_s,
        progress: !args.quiet,
    };
    if let Some(spec) = &args.shard {
        let shard = Shard::parse(spec, |v| std::env::var(v).ok())?;
        let s = generate_shard(&config, shard)?;
        println!(
            "shard {}: {} of {} chunks ({} reused, {} solved now) in {}; merge with --merge once every shard is done",
            s.shard,
            s.owned,
            s.chunks,
            s.chunks_reused,
            s.chunks_solved,
            config.out.display()
        );
        return Ok(());
    }
    let s = if args.merge {
        merge_run(&config)?
    } else {
        generate(&config)?
    };
    println!(
        "{} demonstrations in {} ({} chunks: {} reused, {} solved now; {} infeasible, {} time-limited); solve times in {}",
        s.samples,
        s.demos_path.display(),
        s.chunks,
        s.chunks_reused,
        s.chunks_solved,
        s.infeasible,
        s.time_limited,
        s.times_path.display()
    );
    Ok(())
}
