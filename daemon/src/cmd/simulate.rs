//! `camdnnd simulate`: compare schedulers on a profile and a trace.

use std::path::PathBuf;

use anyhow::{bail, Context};
use camdnn_policy::adapt::AdaptConfig;
use camdnn_policy::admission::FrameAdmission;
use camdnn_policy::gen::{heavy_count, Shape};
use camdnn_policy::mlp::learned::Learned;
use camdnn_policy::scheduler::Scheduler;
use camdnn_policy::schedulers::{self, Camdnn, BASELINES};
use camdnn_policy::sim::{
    fmt_delay, rate_bound, simulate, Accounting, RateBound, SimConfig, SimReport, Trace, OVERLOAD,
};
use camdnn_policy::System;

/// Options of `camdnnd simulate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// System file: processors, models and profile (e.g. config/profiles/rb5.toml).
    #[arg(long)]
    pub system: PathBuf,
    /// Scene trace file (`FRAMES R1 R2 ...` per line); default: the paper's
    /// Fig. 11 shape (16 scenes of 50 frames; for other than three request
    /// models, its mixes column by column sized to the board), or --random.
    #[arg(long, conflicts_with = "random")]
    pub trace: Option<PathBuf>,
    /// A seeded random trace instead: SEGMENTS scenes of --frames-per-scene frames.
    #[arg(long, value_name = "SEGMENTS")]
    pub random: Option<usize>,
    /// Seed for --random and for the sized default trace.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Frames per scene for --random.
    #[arg(long, default_value_t = 50)]
    pub frames_per_scene: usize,
    /// Most objects per model in --random scenes.
    #[arg(long, default_value_t = 14)]
    pub max_objects: u32,
    /// Comma-separated schedulers (default: all; `camdnn` is the full
    /// scheduler with the learned policy, listed when a policy is at hand).
    #[arg(long, value_delimiter = ',')]
    pub schedulers: Vec<String>,
    /// The learned global policy (ONNX) of the `camdnn` scheduler; its
    /// sidecar is the same path with `.policy.json` for `.onnx`. Default:
    /// `<system file's folder>/../policies/<system name>.onnx` when it exists
    /// (config/policies/rb5.onnx for the shipped RB5 profile).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// The scheduler the ratios are relative to (default: `camdnn` when a
    /// policy is at hand, else `camdnn-local`).
    #[arg(long)]
    pub reference: Option<String>,
    /// Camera frames per second.
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
    /// Sync-timer WaitTime, ms.
    #[arg(long, default_value_t = 5.0)]
    pub wait_ms: f64,
    /// Time to prepare one crop, ms.
    #[arg(long, default_value_t = 0.5)]
    pub crop_ms: f64,
    /// Crops prepared in parallel.
    #[arg(long, default_value_t = 4)]
    pub crop_threads: usize,
    /// Late binding (the daemon's `pipeline.dispatch_ahead_ms`): hold batches
    /// whose host has more queued work than this, ms (default: place at once).
    #[arg(long)]
    pub dispatch_ahead_ms: Option<f64>,
    /// Requests the detector runs per frame (MTCNN: one per canvas its pyramid is packed on).
    #[arg(long, default_value_t = 1)]
    pub root_items: u32,
    /// Time to decode a frame and prepare the detector's input before its
    /// requests are released, ms.
    #[arg(long, default_value_t = 0.0)]
    pub frame_prep_ms: f64,
    /// Time each batch costs its processor beyond t_e (handing it over and
    /// its results back), ms.
    #[arg(long, default_value_t = 0.0)]
    pub batch_overhead_ms: f64,
    /// Time each global step takes to compute, ms (the daemon reports it as
    /// `camdnn_global_step_seconds`): it decides on the state at its start
    /// and applies this much later, while the dispatcher goes on as it was
    /// (0: applied at once).
    #[arg(long, default_value_t = 0.0)]
    pub step_cost_ms: f64,
    /// A frame is on time when answered within this many ms of its
    /// arrival (default: two frame periods).
    #[arg(long)]
    pub deadline_ms: Option<f64>,
    /// Admit frames as the daemon does with `pipeline.max_in_flight` = N and
    /// no `pipeline.drop_behind_ms`: at most N frames in the pipeline, a
    /// frame arriving while it is full waits, and a newer frame supersedes it
    /// (the older one is dropped); the global step replays its choices under
    /// the same admission. Default: real-time dropping at one frame period
    /// (the daemon's `pipeline.drop_behind_ms`): a frame whose detector
    /// could not start within it is dropped at its arrival, and one with
    /// objects after its detector when the pipeline is further behind than
    /// what its age leaves of it.
    #[arg(long, conflicts_with = "no_drop")]
    pub max_in_flight: Option<usize>,
    /// Queue every frame however far behind the pipeline is (the paper's
    /// no-drop mode) instead of real-time dropping.
    #[arg(long)]
    pub no_drop: bool,
    /// Print one JSON object per scheduler instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write every frame of every scheduler to this file, one JSON
    /// object per line (scheduler, frame, arrival, scene, outcome, delay,
    /// loads, each unit's queue at arrival, the frame's bound): where a
    /// summary figure comes from, frame by frame.
    #[arg(long, value_name = "PATH")]
    pub frames_out: Option<PathBuf>,
    /// Slow a processor, as DVFS or thermal throttling does, without telling
    /// the scheduler: PROC:FACTOR:FROM_S[:UNTIL_S] (e.g. gpu:2:20:40; no
    /// UNTIL_S: for good, so gpu:2:0 is a profile 2x off). Repeatable.
    #[arg(long, value_name = "PROC:FACTOR:FROM_S[:UNTIL_S]")]
    pub throttle: Vec<String>,
    /// Adapt while running: live estimates from every batch, and a global
    /// step as soon as a processor's speed or the scene mix changes lastingly
    /// (policy::adapt), for every scheduler run.
    #[arg(long)]
    pub adapt: bool,
    /// Least time between two global steps a detector triggers, ms (with
    /// --adapt or --recovery).
    #[arg(long, default_value_t = 1000.0)]
    pub adapt_min_gap_ms: f64,
    /// Only processor speed changes trigger a global step, not scene changes.
    #[arg(long)]
    pub adapt_no_scene: bool,
    /// Never give a processor estimated slow its profile's speed back after
    /// it idled (policy::adapt re-probing, on by default after 3 s).
    #[arg(long)]
    pub adapt_no_reprobe: bool,
    /// Deadline admission (policy::admission): drop at arrival a frame that
    /// cannot be answered within the deadline (--deadline-ms, default two
    /// frame periods) even with every t_e at the live estimates' mean + Z
    /// standard deviations (Z matters with --adapt; 0: the mean).
    #[arg(long, value_name = "Z")]
    pub deadline_admission: Option<f64>,
    /// The recovery figure instead of the comparison: camdnn adapting,
    /// camdnn on the epoch timer only and HEFT under --throttle, each
    /// window's on-time share against the best fixed schedule for the
    /// throttled board, and how long each takes to return within 10% of it.
    #[arg(long, requires = "throttle")]
    pub recovery: bool,
    /// The full scheduler of the recovery figure (default: camdnn with the
    /// learned policy when one is at hand, else camdnn-greedy).
    #[arg(long)]
    pub recovery_scheduler: Option<String>,
    /// Window of the recovery figure's on-time shares, s.
    #[arg(long, default_value_t = 1.0)]
    pub window_s: f64,
}

/// Runs the comparison and prints it.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.system)
        .with_context(|| format!("reading system file {}", args.system.display()))?;
    let system = System::from_toml(&text)
        .with_context(|| format!("in system file {}", args.system.display()))?;
    let n_req = system.request_models().count();
    let trace = match (&args.trace, args.random) {
        (Some(path), _) => {
            let t = std::fs::read_to_string(path)
                .with_context(|| format!("reading trace {}", path.display()))?;
            Trace::parse(&t, n_req).with_context(|| format!("in trace {}", path.display()))?
        }
        (None, Some(segments)) => Trace::random(
            args.seed,
            n_req,
            segments,
            args.frames_per_scene,
            args.max_objects,
        ),
        (None, None) if n_req == 3 => Trace::paper_fig11(),
        (None, None) => {
            // The paper's mixes taken column by column, sized to this board's capacity.
            let heavy = heavy_count(&system, args.fps);
            eprintln!(
                "{} has {n_req} request models, not the paper's 3: the default trace is the \
                 paper's shape sized to this board (heavy count {heavy}, seed {})",
                args.system.display(),
                args.seed
            );
            Shape::Paper.trace(&system, args.seed, heavy)
        }
    };
    let cfg = SimConfig {
        fps: args.fps,
        epoch_ms: args.epoch_ms,
        drop_step_gap_ms: args.drop_step_gap_ms,
        crop_ms: args.crop_ms,
        crop_threads: args.crop_threads,
        admission: match (args.no_drop, args.max_in_flight) {
            (true, _) => FrameAdmission::QueueAll,
            (false, Some(n)) => FrameAdmission::InFlight(n),
            (false, None) => FrameAdmission::Behind(None),
        },
        dispatch_ahead_ms: args.dispatch_ahead_ms,
        root_items: args.root_items,
        frame_prep_ms: args.frame_prep_ms,
        batch_overhead_ms: args.batch_overhead_ms,
        step_cost_ms: args.step_cost_ms,
        throttles: args
            .throttle
            .iter()
            .map(|t| super::recovery::parse_throttle(&system, t))
            .collect::<anyhow::Result<_>>()?,
        adapt: (args.adapt || args.recovery).then(|| AdaptConfig {
            min_gap_ms: args.adapt_min_gap_ms,
            scene: (!args.adapt_no_scene).then(Default::default),
            reprobe_ms: if args.adapt_no_reprobe {
                None
            } else {
                AdaptConfig::default().reprobe_ms
            },
            ..AdaptConfig::default()
        }),
        deadline_admission: args.deadline_admission.map(|tail_z| {
            camdnn_policy::admission::DeadlineAdmission {
                tail_z,
                deadline_ms: args.deadline_ms,
            }
        }),
    };
    if let Some(z) = args.deadline_admission {
        if !(z.is_finite() && z >= 0.0) {
            bail!("--deadline-admission {z}: must be a finite number of standard deviations >= 0");
        }
    }
    let deadline_ms = args.deadline_ms.unwrap_or(cfg.default_deadline_ms());
    if !(deadline_ms.is_finite() && deadline_ms > 0.0) {
        bail!("--deadline-ms {deadline_ms}: must be a positive number of ms");
    }
    let policy_path = match &args.policy {
        Some(p) => Some(p.clone()),
        None => {
            let default = args
                .system
                .parent()
                .unwrap_or(std::path::Path::new("."))
                .join("..")
                .join("policies")
                .join(format!("{}.onnx", system.name));
            default.exists().then_some(default)
        }
    };
    let names: Vec<String> = if args.schedulers.is_empty() {
        policy_path
            .iter()
            .map(|_| CAMDNN.to_string())
            .chain(BASELINES.iter().map(|s| s.to_string()))
            .collect()
    } else {
        args.schedulers.clone()
    };
    let make = |name: &str| -> anyhow::Result<Box<dyn Scheduler>> {
        if name == CAMDNN {
            let Some(path) = &policy_path else {
                bail!(
                    "scheduler camdnn needs a learned policy: pass --policy FILE.onnx (no {}.onnx in the policies folder beside {})",
                    system.name,
                    args.system.display()
                );
            };
            Ok(Box::new(
                Camdnn::new(load_policy(&system, path)?, args.wait_ms).named(CAMDNN),
            ))
        } else {
            match schedulers::by_name(&system, name, args.wait_ms) {
                Some(s) => Ok(s),
                None => bail!(
                    "unknown scheduler {name:?}; known: {CAMDNN}, {}",
                    BASELINES.join(", ")
                ),
            }
        }
    };
    if args.recovery {
        let camdnn = match &args.recovery_scheduler {
            Some(name) => name.as_str(),
            None if policy_path.is_some() => CAMDNN,
            None => "camdnn-greedy",
        };
        return super::recovery::run(
            &system,
            &trace,
            &cfg,
            &super::recovery::Options {
                camdnn,
                deadline_ms,
                window_ms: args.window_s * 1000.0,
            },
            &make,
        );
    }
    let mut reports = Vec::new();
    for name in &names {
        let report = simulate(&system, make(name)?.as_mut(), &trace, &cfg)?;
        // A fresh scheduler for the overload run (schedulers keep state).
        let rate = rate_bound(&system, make(name)?.as_mut(), &trace, &cfg)?;
        reports.push((report, rate));
    }
    let reference = args.reference.clone().unwrap_or_else(|| {
        if names.iter().any(|n| n == CAMDNN) {
            CAMDNN.into()
        } else {
            "camdnn-local".into()
        }
    });
    if let Some(path) = &args.frames_out {
        write_frames(path, &system, &trace, &reports, deadline_ms)
            .with_context(|| format!("writing --frames-out {}", path.display()))?;
    }
    if args.json {
        for (r, rate) in &reports {
            println!("{}", report_json(&system, r, rate, deadline_ms));
        }
    } else {
        print_table(&system, &trace, &reports, &reference, deadline_ms);
    }
    Ok(())
}

/// Report name of camdnn with the learned policy.
const CAMDNN: &str = "camdnn";

/// Loads the ONNX policy at `path` and its sidecar (`X.onnx` -> `X.policy.json`).
pub(crate) fn load_policy(system: &System, path: &std::path::Path) -> anyhow::Result<Learned> {
    let onnx = std::fs::read(path).with_context(|| format!("reading policy {}", path.display()))?;
    let side_path = path.with_extension("").with_extension("policy.json");
    let side = std::fs::read_to_string(&side_path)
        .with_context(|| format!("reading policy sidecar {}", side_path.display()))?;
    Learned::new(system, &onnx, &side).with_context(|| {
        format!(
            "loading policy {} for system {:?}",
            path.display(),
            system.name
        )
    })
}

fn print_table(
    system: &System,
    trace: &Trace,
    reports: &[(SimReport, RateBound)],
    reference: &str,
    deadline_ms: f64,
) {
    println!(
        "system {:?}: {} frames in {} scenes; deadline {deadline_ms:.1} ms",
        system.name,
        trace.frames(),
        trace.segments.len()
    );
    println!(
        "delays are over all offered frames, a dropped frame counting as a miss (printed `miss`)"
    );
    let procs: Vec<&str> = system.processors.iter().map(|p| p.name.as_str()).collect();
    println!(
        "{:<18} {:>8} {:>7} {:>6} {:>7} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6}  util({})",
        "scheduler",
        "on-time",
        "on time",
        "late",
        "dropped",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "mean ms",
        "loads",
        "evict",
        procs.join("/")
    );
    let mut ranked: Vec<(&SimReport, Accounting, &RateBound)> = reports
        .iter()
        .map(|(r, rate)| (r, r.accounting(deadline_ms), rate))
        .collect();
    ranked.sort_by(|a, b| a.1.rank_cmp(&b.1));
    for (r, a, _) in &ranked {
        let util: Vec<String> = r
            .utilisation()
            .iter()
            .map(|u| format!("{:.0}%", u * 100.0))
            .collect();
        println!(
            "{:<18} {:>7.1}% {:>7} {:>6} {:>7} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6}  {}",
            r.scheduler,
            a.goodput() * 100.0,
            a.on_time,
            a.late,
            a.dropped,
            fmt_delay(a.delay.p50),
            fmt_delay(a.delay.p90),
            fmt_delay(a.delay.p99),
            a.delay.mean.map_or("-".into(), fmt_delay),
            r.loads,
            r.evictions,
            util.join("/")
        );
    }
    if let Some((_, base, _)) = ranked.iter().find(|(r, _, _)| r.scheduler == reference) {
        println!(
            "\nranked best first by on-time share, then p50/p90/p99 over all offered frames;\nrelative to {reference} (= 1.00x; p50 speed-up = its p50 / the scheduler's):"
        );
        for (r, a, _) in ranked.iter().filter(|(r, _, _)| r.scheduler != reference) {
            let speedup = if a.delay.p50.is_finite() && base.delay.p50.is_finite() {
                format!("{:.2}x", base.delay.p50 / a.delay.p50)
            } else {
                "- (a p50 is a miss)".into()
            };
            println!(
                "  {:<18} on-time {:.2}x  p50 speed-up {speedup}",
                r.scheduler,
                a.goodput() / base.goodput().max(1e-12),
            );
        }
    }
    println!(
        "\ndistance to the bound: each frame's delay / its makespan lower bound (a drop is a miss);\nachieved rate = frames/s answered when offered {OVERLOAD}x the sustainable rate, no drops"
    );
    println!(
        "{:<18} {:>10} {:>10} {:>12} {:>15} {:>9}",
        "scheduler", "p50 ratio", "p90 ratio", "achieved fps", "sustainable fps", "achieved"
    );
    for (r, _, rate) in &ranked {
        let b = r.bound_ratio();
        println!(
            "{:<18} {:>10} {:>10} {:>12.1} {:>15.1} {:>8.0}%",
            r.scheduler,
            fmt_ratio(b.p50),
            fmt_ratio(b.p90),
            rate.achieved_fps,
            rate.sustainable_fps,
            rate.ratio() * 100.0
        );
    }
}

/// A ratio for a table: `miss` when a dropped frame sits at that rank.
fn fmt_ratio(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}x")
    } else {
        "miss".into()
    }
}

/// Writes every frame of every report to `path` as JSON lines
/// (`--frames-out`): the frame's scene (objects per request model), whether
/// it was on time, late or dropped against `deadline_ms`, its delay (null
/// when dropped), the loads its requests caused, each unit's queued work
/// when it arrived and its makespan bound.
fn write_frames(
    path: &std::path::Path,
    system: &System,
    trace: &Trace,
    reports: &[(SimReport, RateBound)],
    deadline_ms: f64,
) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    let scenes = trace
        .segments
        .iter()
        .flat_map(|s| std::iter::repeat_n(&s.scene, s.frames));
    let models: Vec<&str> = system
        .request_models()
        .map(|i| system.models[i.0].name.as_str())
        .collect();
    let per_unit = |v: &[f64]| -> serde_json::Map<String, serde_json::Value> {
        system
            .processors
            .iter()
            .zip(v)
            .map(|(p, x)| (p.name.clone(), serde_json::json!(x)))
            .collect()
    };
    for (r, _) in reports {
        for (n, (f, scene)) in r.frames.iter().zip(scenes.clone()).enumerate() {
            let outcome = match f.delay_ms {
                None => "dropped",
                Some(d) if d <= deadline_ms => "on_time",
                Some(_) => "late",
            };
            let scene: serde_json::Map<String, serde_json::Value> = models
                .iter()
                .zip(scene)
                .map(|(m, c)| (m.to_string(), serde_json::json!(c)))
                .collect();
            let line = serde_json::json!({
                "scheduler": r.scheduler,
                "frame": n,
                "arrival_ms": f.arrival_ms,
                "scene": scene,
                "outcome": outcome,
                "delay_ms": f.delay_ms,
                "loads": f.loads,
                "rem_at_arrival_ms": per_unit(&f.rem_at_arrival_ms),
                "bound_ms": f.bound_ms,
            });
            writeln!(out, "{line}")?;
        }
    }
    out.flush()?;
    Ok(())
}

fn report_json(system: &System, r: &SimReport, rate: &RateBound, deadline_ms: f64) -> String {
    let d = r.delay();
    let a = r.accounting(deadline_ms);
    let util: serde_json::Map<String, serde_json::Value> = system
        .processors
        .iter()
        .zip(r.utilisation())
        .map(|(p, u)| (p.name.clone(), serde_json::json!(u)))
        .collect();
    // A percentile that falls on a dropped frame is a miss: JSON null.
    let finite = |v: f64| v.is_finite().then_some(v);
    serde_json::json!({
        "scheduler": r.scheduler,
        "frames": r.frames.len(),
        "deadline_ms": deadline_ms,
        "offered": a.offered,
        "on_time": a.on_time,
        "late": a.late,
        "dropped": a.dropped,
        "goodput": a.goodput(),
        "offered_delay_ms": {
            "p50": finite(a.delay.p50),
            "p90": finite(a.delay.p90),
            "p99": finite(a.delay.p99),
            "mean": a.delay.mean,
        },
        "bound_ratio": {"p50": finite(r.bound_ratio().p50), "p90": finite(r.bound_ratio().p90)},
        "achieved_fps": rate.achieved_fps,
        "sustainable_fps": rate.sustainable_fps,
        "served_delay_ms": {"mean": d.mean, "p50": d.p50, "p99": d.p99, "std": d.std, "max": d.max},
        "utilisation": util,
        "loads": r.loads,
        "load_ms": r.load_ms,
        "evictions": r.evictions,
        "decisions": r.decisions,
        "flushes": {"full": r.flushes[0], "complete": r.flushes[1], "timer": r.flushes[2]},
    })
    .to_string()
}
