//! `camdnnd simulate`: compare schedulers on a profile and a trace.

use std::path::PathBuf;

use anyhow::{bail, Context};
use camdnn_policy::mlp::MlpPolicy;
use camdnn_policy::schedulers::{self, Camdnn, Scheduler, BASELINES};
use camdnn_policy::sim::{simulate, SimConfig, SimReport, Trace};
use camdnn_policy::System;

/// Options of `camdnnd simulate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// System file: processors, models and profile (e.g. config/profiles/rb5.toml).
    #[arg(long)]
    pub system: PathBuf,
    /// Scene trace file (`FRAMES R1 R2 ...` per line); default: the paper's
    /// Fig. 11 shape (16 scenes of 50 frames), or --random.
    #[arg(long, conflicts_with = "random")]
    pub trace: Option<PathBuf>,
    /// A seeded random trace instead: SEGMENTS scenes of --frames-per-scene frames.
    #[arg(long, value_name = "SEGMENTS")]
    pub random: Option<usize>,
    /// Seed for --random.
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
    /// Requests the detector runs per frame (one per pyramid scale).
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
    /// Print one JSON object per scheduler instead of the table.
    #[arg(long)]
    pub json: bool,
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
        (None, Some(segments)) => {
            Trace::random(args.seed, n_req, segments, args.frames_per_scene, args.max_objects)
        }
        (None, None) if n_req == 3 => Trace::paper_fig11(),
        (None, None) => bail!(
            "the default trace is for 3 classifier models and {} has {n_req}: pass --trace or --random",
            args.system.display()
        ),
    };
    let cfg = SimConfig {
        fps: args.fps,
        epoch_ms: args.epoch_ms,
        crop_ms: args.crop_ms,
        crop_threads: args.crop_threads,
        drop_behind_ms: None,
        dispatch_ahead_ms: args.dispatch_ahead_ms,
        root_items: args.root_items,
        frame_prep_ms: args.frame_prep_ms,
        batch_overhead_ms: args.batch_overhead_ms,
    };
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
    let mut reports = Vec::new();
    for name in &names {
        let mut s: Box<dyn Scheduler> = if name == CAMDNN {
            let Some(path) = &policy_path else {
                bail!(
                    "scheduler camdnn needs a learned policy: pass --policy FILE.onnx (no {}.onnx in the policies folder beside {})",
                    system.name,
                    args.system.display()
                );
            };
            Box::new(Camdnn::new(load_policy(&system, path)?, args.wait_ms).named(CAMDNN))
        } else {
            match schedulers::by_name(&system, name, args.wait_ms) {
                Some(s) => s,
                None => bail!(
                    "unknown scheduler {name:?}; known: {CAMDNN}, {}",
                    BASELINES.join(", ")
                ),
            }
        };
        reports.push(simulate(&system, s.as_mut(), &trace, &cfg)?);
    }
    let reference = args.reference.clone().unwrap_or_else(|| {
        if names.iter().any(|n| n == CAMDNN) {
            CAMDNN.into()
        } else {
            "camdnn-local".into()
        }
    });
    if args.json {
        for r in &reports {
            println!("{}", report_json(&system, r));
        }
    } else {
        print_table(&system, &trace, &reports, &reference);
    }
    Ok(())
}

/// Report name of camdnn with the learned policy.
const CAMDNN: &str = "camdnn";

/// Loads the ONNX policy at `path` and its sidecar (`X.onnx` -> `X.policy.json`).
pub(crate) fn load_policy(system: &System, path: &std::path::Path) -> anyhow::Result<MlpPolicy> {
    let onnx = std::fs::read(path).with_context(|| format!("reading policy {}", path.display()))?;
    let side_path = path.with_extension("").with_extension("policy.json");
    let side = std::fs::read_to_string(&side_path)
        .with_context(|| format!("reading policy sidecar {}", side_path.display()))?;
    MlpPolicy::new(system, &onnx, &side).with_context(|| {
        format!(
            "loading policy {} for system {:?}",
            path.display(),
            system.name
        )
    })
}

fn print_table(system: &System, trace: &Trace, reports: &[SimReport], reference: &str) {
    println!(
        "system {:?}: {} frames in {} scenes",
        system.name,
        trace.frames(),
        trace.segments.len()
    );
    let procs: Vec<&str> = system.processors.iter().map(|p| p.name.as_str()).collect();
    println!(
        "{:<18} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6}  util({})",
        "scheduler",
        "mean ms",
        "p50 ms",
        "p99 ms",
        "std ms",
        "dropped",
        "loads",
        "evict",
        procs.join("/")
    );
    for r in reports {
        let d = r.delay();
        let util: Vec<String> = r
            .utilisation()
            .iter()
            .map(|u| format!("{:.0}%", u * 100.0))
            .collect();
        println!(
            "{:<18} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8} {:>6} {:>6}  {}",
            r.scheduler,
            d.mean,
            d.p50,
            d.p99,
            d.std,
            r.dropped(),
            r.loads,
            r.evictions,
            util.join("/")
        );
    }
    if let Some(base) = reports.iter().find(|r| r.scheduler == reference) {
        let b = base.delay().mean;
        println!("\nmean frame delay relative to {reference} (= 1.00x):");
        for r in reports.iter().filter(|r| r.scheduler != reference) {
            println!("  {:<18} {:.2}x", r.scheduler, r.delay().mean / b);
        }
    }
}

fn report_json(system: &System, r: &SimReport) -> String {
    let d = r.delay();
    let util: serde_json::Map<String, serde_json::Value> = system
        .processors
        .iter()
        .zip(r.utilisation())
        .map(|(p, u)| (p.name.clone(), serde_json::json!(u)))
        .collect();
    serde_json::json!({
        "scheduler": r.scheduler,
        "frames": r.frames.len(),
        "dropped": r.dropped(),
        "delay_ms": {"mean": d.mean, "p50": d.p50, "p99": d.p99, "std": d.std, "max": d.max},
        "utilisation": util,
        "loads": r.loads,
        "load_ms": r.load_ms,
        "evictions": r.evictions,
        "decisions": r.decisions,
        "flushes": {"full": r.flushes[0], "complete": r.flushes[1], "timer": r.flushes[2]},
    })
    .to_string()
}
