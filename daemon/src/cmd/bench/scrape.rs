//! What the pipeline did between two points of a run, read from its own metrics: loads, busy
//! shares, batch sizes, measured against profiled batch times, host costs and the work done per
//! frame.

use std::collections::BTreeMap;

use camdnn_policy::sim::Trace;
use camdnn_policy::{ModelId, System};

/// Every sample the metrics recorder holds, `name{labels}` -> value.
pub(super) fn scrape(prom: &crate::telemetry::Exporter) -> BTreeMap<String, f64> {
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
pub(super) fn delta(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
    key: &str,
) -> f64 {
    after.get(key).copied().unwrap_or(0.0) - before.get(key).copied().unwrap_or(0.0)
}

/// The mean of the histogram `name` (seconds) between two scrapes, in ms;
/// `None` when nothing was recorded.
pub(super) fn mean_ms(
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
pub(super) fn internals(
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

/// Mean measured / profiled batch time between two scrapes, over every
/// model and processor (`None` when no batch ran).
pub(super) fn exec_vs_profile(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> Option<f64> {
    let (sum, n) = exec_vs_profile_series(before, after)
        .fold((0.0, 0.0), |(s, c), (_, sum, n)| (s + sum, c + n));
    (n > 0.0).then(|| sum / n)
}

/// Per (model, processor) labels: how much the sum and the count of
/// `camdnn_batch_exec_vs_profile_ratio` grew between two scrapes.
pub(super) fn exec_vs_profile_series<'a>(
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
pub(super) const DRIFT_OK: (f64, f64) = (0.85, 1.18);

/// The requests each model ran per frame between two scrapes of the
/// pipeline's metrics, as a one-scene trace of `frames` frames, and the
/// root's requests per frame (`None` if no frame ran).
pub(super) fn work_per_frame(
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
