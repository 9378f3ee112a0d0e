//! What the pipeline did between two points of a run, from its typed counters
//! ([`crate::pipeline::stats`]): loads, busy shares, batch sizes, measured against profiled
//! batch times, host costs and the work done per frame.

use camdnn_policy::sim::Trace;
use camdnn_policy::{ModelId, System};

use crate::pipeline::stats::StatsSnapshot;

/// What the pipeline did in `d` (the difference of two snapshots), `seconds` long: model
/// loads, each processor's busy share (the rest is idle), mean measured / profiled batch
/// time and mean batch size per model and processor, and the mean host costs (frame
/// preparation, a crop, a batch's hand-over).
pub(super) fn internals(d: &StatsSnapshot, seconds: f64) -> String {
    let mut parts = vec![format!("{} model loads", d.total_loads())];
    for (proc, busy) in &d.busy_s {
        parts.push(format!(
            "busy {proc} {:.0}%",
            100.0 * busy / seconds.max(1e-9)
        ));
    }
    for ((model, proc), b) in &d.batches {
        if b.profiled > 0 {
            parts.push(format!(
                "exec/profile {model}@{proc} {:.2}",
                b.exec_vs_profile_sum / b.profiled as f64
            ));
        }
    }
    for ((model, proc), b) in &d.batches {
        if b.batches > 0 {
            parts.push(format!(
                "batch {model}@{proc} {} x {:.2}",
                b.batches,
                b.requests as f64 / b.batches as f64
            ));
        }
    }
    // Host work beside the engines: per frame, per crop, per batch handed over.
    for (what, costs) in [
        ("frame prep", &d.frame_prep),
        ("crop", &d.crop),
        ("hand-over per batch", &d.hand_over),
    ] {
        if let Some(ms) = costs.mean_ms() {
            parts.push(format!("{what} {ms:.2} ms"));
        }
    }
    parts.join(", ")
}

/// Mean exec/profile ratios inside this range count as the profile's host
/// speed: two hot runs of one model minutes apart differed by up to about
/// 15% on this host.
pub(super) const DRIFT_OK: (f64, f64) = (0.85, 1.18);

/// The requests each model ran per frame in `d`, as a one-scene trace of `frames` frames,
/// and the root's requests per frame (`None` if no frame ran).
pub(super) fn work_per_frame(
    system: &System,
    d: &StatsSnapshot,
    frames: usize,
) -> Option<(Trace, u32)> {
    if frames == 0 {
        return None;
    }
    let ran = |i: ModelId| -> u32 {
        let total = d.requests_of(&system.models[i.0].name);
        (total as f64 / frames as f64).round() as u32
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
