//! `camdnnd bench --capacity FPS[,FPS] --video CLIP`: how many cameras this host serves.
//!
//! Every camera plays the clip at FPS frames per second (each from its own point in it,
//! evenly out of phase: `cameras.rs`), and a trial of N cameras passes when at least
//! `--target` of all their frames are answered within the deadline (a dropped frame is a
//! miss). Per contender and rate, the largest N that passes (`search.rs`), in `--rounds`
//! interleaved rounds, each round's search starting from the last round's answer. The
//! contenders do the same work on the same cores: camdnn's pipeline with tracking and result
//! reuse (the config's `[pipeline.track]` and `reuse`, defaults where absent), the same
//! pipeline inferring every object of every frame, N single-thread ONNX Runtime workers
//! sharing one queue across cameras (how Frigate runs its detector processes), and N Python
//! processes taking the frames round robin (`scripts/bench_python_graph.py` on each frame's
//! own pixels). Before the search, every contender runs the same frames of two cameras in a
//! closed loop, and a contender whose work differs from camdnn inferring every object
//! (detector runs, crops per model, answers) is named. Beside the counts:
//! the cameras the detector alone allows on this profile (no schedule serves more without a
//! detector interval) and each pipeline's bound for the work it did per frame.

mod cameras;
mod search;

use anyhow::{bail, Context};
use camdnn_policy::bound::sustainable_fps;
use camdnn_policy::sim::{default_deadline_ms, Accounting};
use camdnn_policy::System;

use super::contenders::{Contender, Ctx, Kind};
use super::lineup::{all_ort, ort_template};
use super::python;
use super::sequential::Pool;
use super::stream::BenchFrame;
use super::work;
use super::Figures;
use crate::config::DaemonConfig;
use crate::pipeline;
use cameras::Clip;

/// Options of `camdnnd bench --capacity`.
#[derive(clap::Args, Debug)]
pub struct CapacityArgs {
    /// The capacity search instead of the contenders: the most cameras, each
    /// at one of these rates (frames/s, comma separated, e.g. 5,10), whose
    /// frames are answered within the deadline (`--deadline-ms`, default two
    /// frame periods) at `--target` or more; needs `--video`.
    #[arg(long, requires = "video", value_name = "FPS[,FPS]")]
    pub capacity: Option<String>,
    /// The clip every camera of `--capacity` plays (decoded by ffmpeg at
    /// --width x --height), e.g. testdata/vtest.avi (scripts/fetch_test_video.sh).
    #[arg(long)]
    pub video: Option<std::path::PathBuf>,
    /// Frames of --video decoded (the cameras loop over them).
    #[arg(long, default_value_t = 300)]
    pub clip_frames: usize,
    /// The rate --video was recorded at: a camera at half of it shows every
    /// other frame.
    #[arg(long, default_value_t = 10.0)]
    pub clip_fps: f64,
    /// Seconds of frames every camera sends in one capacity trial.
    #[arg(long, default_value_t = 15.0)]
    pub trial_seconds: f64,
    /// Seconds at the start of each capacity trial whose frames are sent and
    /// not counted (the cameras' start: tracks not yet confirmed).
    #[arg(long, default_value_t = 3.0)]
    pub trial_warmup_seconds: f64,
    /// The most cameras a capacity trial tries.
    #[arg(long, default_value_t = 48)]
    pub max_cameras: usize,
    /// A capacity trial passes when at least this share of its frames is on time.
    #[arg(long, default_value_t = 0.99)]
    pub target: f64,
}

/// One contender's answers at one rate, one per round.
struct Answers {
    cameras: Vec<usize>,
    /// The requests each model ran per offered frame in the last passing trial (pipelines).
    work: Option<Vec<f64>>,
}

/// Runs the capacity search and prints its table.
pub(super) fn run(
    args: &super::Args,
    cfg: &DaemonConfig,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<()> {
    let rates = parse_fps(args.cameras.capacity.as_deref().unwrap_or_default())?;
    let Some(video) = &args.cameras.video else {
        bail!("--capacity needs --video CLIP (scripts/fetch_test_video.sh fetches testdata/vtest.avi)");
    };
    if !(args.cameras.target > 0.0 && args.cameras.target <= 1.0) {
        bail!(
            "--target {}: must be a share in (0, 1]",
            args.cameras.target
        );
    }
    if !(args.cameras.trial_seconds.is_finite()
        && args.cameras.trial_warmup_seconds >= 0.0
        && args.cameras.trial_warmup_seconds < args.cameras.trial_seconds)
    {
        bail!(
            "--trial-seconds {} and --trial-warmup-seconds {}: the warm-up must be shorter than the trial",
            args.cameras.trial_seconds,
            args.cameras.trial_warmup_seconds
        );
    }
    let clip = Clip::decode(
        video,
        (args.width, args.height),
        args.cameras.clip_frames,
        args.cameras.clip_fps,
    )?;
    // camdnn on ONNX Runtime everywhere when the config mixes engines: the workers it is
    // compared with run ONNX Runtime on every core.
    let base = all_ort(cfg, args)?.unwrap_or_else(|| cfg.clone());
    let (with, without) = (reuse_variant(&base, true), reuse_variant(&base, false));
    let sys_with = pipeline::check(&with.pipeline).context("camdnn with reuse")?;
    let sys_without = pipeline::check(&without.pipeline).context("camdnn without reuse")?;
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let workers = args.workers.unwrap_or(cores).max(1);

    println!(
        "camdnnd bench --capacity: config {}, clip {} ({} frames, {}x{}, {} fps), {} s per trial (the first {} s not counted), a trial passes with {:.1}% of frames on time; host: {} online cores; {}",
        args.config.display(),
        video.display(),
        clip.frames.len(),
        clip.width,
        clip.height,
        clip.fps,
        args.cameras.trial_seconds,
        args.cameras.trial_warmup_seconds,
        args.cameras.target * 100.0,
        super::super::profile::online_cores(),
        super::super::profile::utc_now(),
    );
    let mut contenders = vec![
        pipeline_contender("camdnn, tracking and reuse", &with, &sys_with)?,
        pipeline_contender("camdnn, every object inferred", &without, &sys_without)?,
    ];
    let mut one = ort_template(cfg);
    one.intra_threads = 1;
    let name = format!("Rust ORT, {workers} single-thread workers, one queue");
    contenders.push(Contender::new(
        name.clone(),
        Kind::Pool(Pool::load(cfg, &sys_without, &one, None, workers, name)?),
        true,
    ));
    let root = &cfg.pipeline.models[sys_without.roots().next().map_or(0, |r| r.0)];
    if let Some(kind) = python::graph_kind(root).filter(|_| !args.no_python) {
        contenders.push(Contender::new(
            format!("Python {kind}, {workers} single-thread processes round robin"),
            Kind::PythonGraph {
                kind,
                images: python::Images::EachFrame,
                workers,
                threads: 1,
            },
            true,
        ));
    }
    let warm: Vec<_> = (0..args.warmup_frames)
        .map(|k| clip.frame(u32::MAX, k as u64, k % clip.frames.len()))
        .collect();
    let ctx = Ctx {
        cfg,
        system: &sys_without,
        args,
        warm: &warm,
        rt,
    };
    let mut answers: Vec<Vec<Answers>> = contenders
        .iter()
        .map(|_| {
            rates
                .iter()
                .map(|_| Answers {
                    cameras: Vec::new(),
                    work: None,
                })
                .collect()
        })
        .collect();
    let same = clip.cameras(2, rates[0], 10, 0);
    print_work(&mut contenders, &ctx, &same)?;
    let mut stream_base = 2u32;
    for round in 0..args.rounds {
        for (k, &fps) in rates.iter().enumerate() {
            let deadline = args.deadline_ms.unwrap_or(default_deadline_ms(fps));
            let per_camera = ((args.cameras.trial_seconds * fps).ceil() as usize).max(1);
            // Each camera's first frames are sent and not counted: a camera is judged
            // running, not starting (every contender pays its backlog all the same).
            let warm_k =
                ((args.cameras.trial_warmup_seconds * fps).ceil() as usize).min(per_camera - 1);
            for (c, contender) in contenders.iter_mut().enumerate() {
                let a = &mut answers[c][k];
                let hint = a.cameras.last().copied();
                let mut work = None;
                let n = search::largest_passing(args.cameras.max_cameras, hint, |n| {
                    let frames = clip.cameras(n, fps, per_camera, stream_base);
                    stream_base = stream_base.wrapping_add(n as u32);
                    let (run, _) = contender.run(&ctx, &frames, Some(n as f64 * fps))?;
                    let delays = delays_in_order(contender, &run.figures);
                    let acc =
                        Accounting::of_delays(&delays[(warm_k * n).min(delays.len())..], deadline);
                    let pass = acc.goodput() >= args.cameras.target;
                    eprintln!(
                        "round {}/{}, {fps} fps: {} with {n} cameras: {:.1}% on time (p99 {:.0} ms){}",
                        round + 1,
                        args.rounds,
                        contender.name,
                        acc.goodput() * 100.0,
                        acc.delay.p99,
                        if pass { "" } else { ": fails" }
                    );
                    if pass {
                        work = per_frame_work(contender, frames.len());
                    }
                    anyhow::Ok(pass)
                })?;
                a.cameras.push(n);
                if work.is_some() {
                    a.work = work;
                }
            }
        }
    }
    print_table(args, &rates, &contenders, &answers, &sys_with);
    Ok(())
}

/// Runs every contender once, closed loop, on `frames` and prints what each did; names a
/// contender whose work differs from camdnn inferring every object (the second; the first,
/// with reuse, does less by design).
fn print_work(
    contenders: &mut [Contender],
    ctx: &Ctx,
    frames: &[BenchFrame],
) -> anyhow::Result<()> {
    println!(
        "\nwork on the same {} frames of 2 cameras, closed loop:",
        frames.len()
    );
    let mut works = Vec::new();
    for c in contenders.iter_mut() {
        let (run, _) = c.run(ctx, frames, None)?;
        println!("  {:<62} {}", c.name, run.work.describe());
        works.push((c.name.clone(), run.work));
    }
    let Some(((ref_name, ref_work), rest)) = works.get(1).zip(works.get(2..)) else {
        return Ok(());
    };
    let others: Vec<(&str, &work::Work)> = rest.iter().map(|(n, w)| (n.as_str(), w)).collect();
    let differ = work::check((ref_name, ref_work), &others);
    for (name, _) in &others {
        match differ.iter().find(|(n, _)| n == name) {
            Some((_, why)) => println!(
                "  warning: {name} does other work than {ref_name}: {}",
                why.join("; ")
            ),
            None => println!("  {name}: the same work as {ref_name}"),
        }
    }
    Ok(())
}

/// `base` with tracking and reuse on (the config's knobs, defaults where absent, on every
/// per-object model) or off.
fn reuse_variant(base: &DaemonConfig, on: bool) -> DaemonConfig {
    let mut c = base.clone();
    let p = &mut c.pipeline;
    p.track = on.then(|| p.track.unwrap_or_default());
    for m in &mut p.models {
        let kept = m.reuse.take().unwrap_or_default();
        m.reuse = (on && m.parent.is_some()).then_some(kept);
    }
    c
}

/// camdnn's pipeline from `cfg`, named `what` and its engines.
fn pipeline_contender<'a>(
    what: &str,
    cfg: &DaemonConfig,
    system: &'a System,
) -> anyhow::Result<Contender<'a>> {
    eprintln!("starting {what} ...");
    let engines: Vec<&str> = cfg
        .pipeline
        .processors
        .iter()
        .map(|q| q.engine.as_str())
        .collect();
    Contender::pipeline(cfg, system, |_| format!("{what} ({})", engines.join(" + ")))
        .with_context(|| format!("starting {what}"))
}

/// Each frame's delay in frame order (`None`: not answered) of the run that left `figures`.
fn delays_in_order(c: &Contender, figures: &Figures) -> Vec<Option<f64>> {
    match &c.kind {
        Kind::Pipeline { last: Some(l), .. } => l.by_frame.clone(),
        // The workers answer every frame and keep their delays in frame order.
        _ => figures.delays_ms.iter().map(|&d| Some(d)).collect(),
    }
}

/// The requests each model ran per offered frame in a pipeline's last run.
fn per_frame_work(c: &Contender, frames: usize) -> Option<Vec<f64>> {
    let Kind::Pipeline {
        last: Some(l),
        system,
        ..
    } = &c.kind
    else {
        return None;
    };
    Some(
        system
            .models
            .iter()
            .map(|m| l.stats.requests_of(&m.name) as f64 / frames.max(1) as f64)
            .collect(),
    )
}

/// The answers, medians and ranges over rounds, and the bounds beside them.
fn print_table(
    args: &super::Args,
    rates: &[f64],
    contenders: &[Contender],
    answers: &[Vec<Answers>],
    system: &System,
) {
    println!(
        "\ncameras served with at least {:.1}% of frames on time: median [min, max] over {} rounds",
        args.cameras.target * 100.0,
        args.rounds
    );
    let head: Vec<String> = rates
        .iter()
        .map(|&f| {
            let d = args.deadline_ms.unwrap_or(default_deadline_ms(f));
            format!("{f} fps ({d:.0} ms)")
        })
        .collect();
    println!("{:<64} {}", "contender", head.join("  "));
    for (c, contender) in contenders.iter().enumerate() {
        let cells: Vec<String> = answers[c]
            .iter()
            .zip(&head)
            .map(|(a, h)| format!("{:>w$}", range(&a.cameras), w = h.len()))
            .collect();
        println!("{:<64} {}", contender.name, cells.join("  "));
    }
    let mut detector_only = vec![0.0; system.models.len()];
    for r in system.roots() {
        detector_only[r.0] = 1.0;
    }
    let detector_fps = sustainable_fps(system, &detector_only);
    let cells: Vec<String> = rates
        .iter()
        .map(|f| format!("{:.1}", detector_fps / f))
        .collect();
    println!(
        "{:<64} {}",
        "bound: the detector alone (profile)",
        cells.join("  ")
    );
    for (c, contender) in contenders.iter().enumerate() {
        for (k, &fps) in rates.iter().enumerate() {
            let Some(work) = &answers[c][k].work else {
                continue;
            };
            let per_model: Vec<String> = system
                .models
                .iter()
                .zip(work)
                .map(|(m, w)| format!("{} {w:.2}", m.name))
                .collect();
            let bound = sustainable_fps(system, work) / fps;
            let median = median(&answers[c][k].cameras);
            println!(
                "  {} at {fps} fps: requests per frame {}; bound for that work {bound:.1} cameras, served {median:.0} ({:.0}%)",
                contender.name,
                per_model.join(", "),
                100.0 * median / bound.max(1e-9)
            );
        }
    }
}

fn median(v: &[usize]) -> f64 {
    let mut s: Vec<f64> = v.iter().map(|&x| x as f64).collect();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

fn range(v: &[usize]) -> String {
    let (lo, hi) = (v.iter().min(), v.iter().max());
    match (lo, hi) {
        (Some(lo), Some(hi)) => format!("{} [{lo}, {hi}]", median(v)),
        _ => "-".to_string(),
    }
}

/// `--capacity`: comma separated camera rates, frames/s.
fn parse_fps(s: &str) -> anyhow::Result<Vec<f64>> {
    let rates: Vec<f64> = s
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            let f: f64 = t
                .parse()
                .with_context(|| format!("--capacity: {t:?} is not a frame rate"))?;
            if !(f.is_finite() && f > 0.0 && f <= 120.0) {
                bail!("--capacity: {f} is not a camera rate in (0, 120] frames/s");
            }
            Ok(f)
        })
        .collect::<anyhow::Result<_>>()?;
    if rates.is_empty() {
        bail!("--capacity: give at least one camera rate, e.g. 5,10");
    }
    Ok(rates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camera_rates_are_checked() {
        assert_eq!(parse_fps("5, 10").unwrap(), vec![5.0, 10.0]);
        for bad in ["", "0", "five", "5,-1", "inf"] {
            assert!(parse_fps(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_reuse_variants_keep_the_configs_knobs_on_per_object_models_only() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/camdnnd.toml");
        let mut cfg = DaemonConfig::load(&path).unwrap();
        let knobs = camdnn_policy::reuse::ReuseConfig {
            reinfer_interval: 4,
            ..Default::default()
        };
        cfg.pipeline.models[1].reuse = Some(knobs);
        let on = reuse_variant(&cfg, true);
        assert!(on.pipeline.track.is_some());
        let reuse: Vec<Option<u32>> = on
            .pipeline
            .models
            .iter()
            .map(|m| m.reuse.as_ref().map(|r| r.reinfer_interval))
            .collect();
        // The detector never reuses; movenet keeps its 4; faceres gets the default 10.
        assert_eq!(reuse, vec![None, Some(4), Some(10)]);
        pipeline::check(&on.pipeline).unwrap();
        let off = reuse_variant(&on, false);
        assert!(off.pipeline.track.is_none());
        assert!(off.pipeline.models.iter().all(|m| m.reuse.is_none()));
    }

    #[test]
    fn a_median_of_camera_counts() {
        assert_eq!(median(&[3, 1, 2]), 2.0);
        assert_eq!(median(&[4, 2]), 3.0);
        assert_eq!(range(&[]), "-");
        assert_eq!(range(&[5, 7, 6]), "6 [5, 7]");
    }
}
