//! The pipeline open loop at a camera rate next to the simulator's prediction for the same
//! stream, knobs and host costs.

use anyhow::{bail, Context};
use camdnn_policy::admission::FrameAdmission;
use camdnn_policy::schedulers;
use camdnn_policy::sim::{
    default_deadline_ms, fmt_delay, simulate, Accounting, SimConfig, SimReport, Trace,
};
use camdnn_policy::stats::Summary;
use camdnn_policy::System;
use serde_json::json;

use super::stream::{drive, Pace, Stream};
use super::{Args, ClosedRun};
use crate::config::DaemonConfig;
use crate::pipeline;
use crate::pipeline::stats::StatsSnapshot;

/// One line of a run's accounting: on time / late / dropped of offered,
/// goodput and the percentiles over all offered frames.
pub(super) fn accounting_line(a: &Accounting) -> String {
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

/// Per scene: objects, measured and simulated mean delay.
pub(super) fn print_scenes(trace: &Trace, measured: &[Option<f64>], simulated: &[Option<f64>]) {
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
pub(super) fn scene_means(trace: &Trace, by_frame: &[Option<f64>]) -> Vec<f64> {
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
pub(super) const LOAD: f64 = 0.5;

/// What the simulator is told of the open loop and of the host beyond the
/// profile, as the pipeline measured it.
#[derive(Clone, Copy, Debug)]
pub(super) struct HostCosts {
    /// The camera rate.
    pub fps: f64,
    /// Preparing one crop, ms.
    pub crop_ms: f64,
    /// Decoding a frame and preparing the detector's input, ms.
    pub frame_prep_ms: f64,
    /// A batch's cost beyond its run (hand-over and results back), ms.
    pub batch_overhead_ms: f64,
    /// One global step from its start to its choice applied (computed on the
    /// step thread meanwhile), ms.
    pub step_cost_ms: f64,
    /// Detector requests per frame.
    pub root_items: u32,
}

impl HostCosts {
    /// The means the pipeline recorded in `d` (the difference of two snapshots; 0 for a
    /// cost it never paid, e.g. crops on a graph without any).
    pub(super) fn measured(d: &StatsSnapshot, fps: f64, root_items: u32) -> Self {
        HostCosts {
            fps,
            crop_ms: d.crop.mean_ms().unwrap_or(0.0),
            frame_prep_ms: d.frame_prep.mean_ms().unwrap_or(0.0),
            batch_overhead_ms: d.hand_over.mean_ms().unwrap_or(0.0),
            step_cost_ms: d.global_step.mean_ms().unwrap_or(0.0),
            root_items,
        }
    }
}

pub(super) fn simulate_frames(
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
        None => pipeline::scheduler(&cfg.pipeline, system)?,
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

/// What the open loop runs on.
pub(super) struct OpenRun<'a> {
    pub cfg: &'a DaemonConfig,
    pub system: &'a System,
    pub args: &'a Args,
    pub rt: &'a tokio::runtime::Runtime,
    pub stream: &'a Stream,
    /// The frames' scenes (measured from the closed loop for image graphs).
    pub trace: Option<&'a Trace>,
    /// Detector requests per frame.
    pub root_items: u32,
}

/// A fresh pipeline open loop at a camera rate ([`open_rate`]), printed
/// next to the simulator's prediction for the same stream, knobs and
/// measured host costs; its figures as JSON.
pub(super) fn open_loop_vs_sim(
    run: &OpenRun,
    closed: &ClosedRun,
) -> anyhow::Result<serde_json::Value> {
    let OpenRun {
        cfg,
        system,
        args,
        rt,
        stream,
        trace,
        root_items,
    } = *run;
    let fps = open_rate(run, closed)?;
    // A fresh pipeline, as the simulator starts from the start-up residency
    // with no plan: the closed loop's plans would otherwise carry over. Its
    // warm-up frames come at the same pace.
    eprintln!("pipeline: restarted, open loop at {fps:.2} fps ...");
    let built = pipeline::start(&cfg.pipeline)?;
    rt.block_on(drive(&built, &stream.warm, Pace::Fps(fps)));
    let before = built.pipeline.stats();
    let (open, by_frame, _) = rt.block_on(drive(&built, &stream.frames, Pace::Fps(fps)));
    // The host costs at this load: with both cores busy in the closed loop,
    // handing a batch over took longer than here.
    let stats = built.pipeline.stats().since(&before);
    let host = HostCosts::measured(&stats, fps, root_items);
    let open_drift = stats.exec_vs_profile();
    let measured = open.summary();
    let Some(trace) = trace else {
        println!(
            "\nopen loop at {fps:.2} fps: measured mean frame delay {:.1} ms (p99 {:.1}); \
             no frame was processed, so there is no scene to simulate",
            measured.mean, measured.p99
        );
        return Ok(serde_json::Value::Null);
    };
    let report = simulate_frames(system, trace, args, cfg, &host)?;
    let sim: Vec<Option<f64>> = report.frames.iter().map(|f| f.delay_ms).collect();
    let sim_name = report.scheduler;
    let predicted = Summary::of(&sim.iter().flatten().copied().collect::<Vec<_>>()).mean;
    print_scenes(trace, &by_frame, &sim);
    let deadline_ms = args.deadline_ms.unwrap_or(default_deadline_ms(fps));
    let sim_acc = Accounting::of_delays(&sim, deadline_ms);
    let open_acc = Accounting::of_delays(&by_frame, deadline_ms);
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
        cfg.resolve(&cfg.pipeline.profile).display(),
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
    Ok(json!({"fps": fps, "deadline_ms": deadline_ms,
        "measured_goodput": open_acc.goodput(), "simulated_goodput": sim_acc.goodput(),
        "measured_dropped": open_acc.dropped, "measured_mean_ms": measured.mean,
        "simulated_mean_ms": predicted, "ratio": measured.mean / predicted,
        "crop_ms": host.crop_ms, "frame_prep_ms": host.frame_prep_ms,
        "batch_overhead_ms": host.batch_overhead_ms,
        "step_cost_ms": host.step_cost_ms, "scheduler": sim_name,
        "open_loop_exec_vs_profile": open_drift}))
}

/// The open loop's camera rate: `--fps`, else half of what the pipeline
/// sustained on its heaviest scene in the closed loop (with `window` frames
/// inside, a frame is done every delay / window), so no scene overloads it
/// and queues do not compound small errors (this host's speed drifts by
/// 20-30% within minutes), and no more than the simulator's busiest
/// processor takes at half load: a rate the profile says is near
/// saturation would compare queues, not frame delays.
fn open_rate(run: &OpenRun, closed: &ClosedRun) -> anyhow::Result<f64> {
    let OpenRun {
        cfg,
        system,
        args,
        trace,
        root_items,
        ..
    } = *run;
    let window = closed.window as f64;
    let heaviest_ms = trace
        .map(|t| scene_means(t, &closed.by_frame))
        .unwrap_or_default()
        .into_iter()
        .filter(|d| d.is_finite())
        .fold(0.0, f64::max);
    let sustained = if heaviest_ms > 0.0 {
        window * 1e3 / heaviest_ms
    } else {
        let d: Vec<f64> = closed.by_frame.iter().flatten().copied().collect();
        if d.is_empty() {
            0.0
        } else {
            window * 1e3 / Summary::of(&d).mean
        }
    };
    let fps = match (args.fps, trace) {
        (Some(fps), _) => fps,
        (None, Some(t)) => {
            let mut host = HostCosts::measured(&closed.stats, 0.0, root_items);
            host.fps = LOAD * sustained;
            let busiest = simulate_frames(system, t, args, cfg, &host)?
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
    Ok(fps)
}
