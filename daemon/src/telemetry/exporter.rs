//! The Prometheus exporter: the recorder with its buckets, every family
//! described at zero from start-up, and the recording helpers of the shell.

use std::time::Duration;

use camdnn_protocol::{DropReason, ErrorCode, RejectReason};
use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use super::families::Kind::{Counter, Gauge, Histogram};
use super::families::Series::{
    Each, Own, PerModel, PerModelEach, PerModelProcessor, PerProcessor, Single,
};
use super::families::*;
use super::MetricsConfig;

/// Latency buckets, seconds: 0.5 ms to 10 s.
const SECONDS_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.033, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0,
    2.0, 5.0, 10.0,
];
/// Buckets for counts such as batch sizes: whole numbers, one per bucket up
/// to 8, so a quantile's bucket (k-1, k] names the count k (the dashboard
/// rounds the interpolated quantile up).
pub const COUNT_BUCKETS: &[f64] = &[
    1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 12.0, 16.0, 24.0, 32.0, 64.0,
];
/// Buckets for ratios such as measured / profiled time (1 = as profiled).
const RATIO_BUCKETS: &[f64] = &[
    0.25, 0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0,
];

/// The installed exporter: renders the recorder's families after refreshing
/// the `process_*` ones (resident memory, CPU seconds, open fds, start time).
#[derive(Clone)]
pub struct Exporter {
    handle: PrometheusHandle,
    process: metrics_process::Collector,
}

impl Exporter {
    /// The Prometheus text exposition of every family, process metrics fresh.
    pub fn render(&self) -> String {
        self.process.collect();
        self.handle.render()
    }

    /// Drains histogram samples into their buckets (call every few seconds).
    pub fn run_upkeep(&self) {
        self.handle.run_upkeep();
    }
}

/// Installs the Prometheus recorder as the process's global `metrics`
/// recorder (fixed buckets: `*_seconds` in seconds, `*_size` counts,
/// `*_ratio` ratios), with `[metrics] labels` as constant labels on every
/// series, and describes every family of [`FAMILIES`] at zero;
/// `camdnn_build_info` carries `config` (the config file's stem).
pub fn install(cfg: &MetricsConfig, config: &str) -> anyhow::Result<Exporter> {
    let mut builder = builder()?;
    for (k, v) in &cfg.labels {
        builder = builder.add_global_label(k, v);
    }
    let handle = builder.install_recorder()?;
    let process = metrics_process::Collector::default();
    process.describe();
    process.collect();
    describe(config);
    Ok(Exporter { handle, process })
}

/// The exporter's builder with the buckets of every histogram.
fn builder() -> anyhow::Result<PrometheusBuilder> {
    Ok(PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)?
        .set_buckets_for_metric(Matcher::Suffix("_size".into()), COUNT_BUCKETS)?
        .set_buckets_for_metric(Matcher::Suffix("_ratio".into()), RATIO_BUCKETS)?)
}

/// Describes every family of [`FAMILIES`] and registers its fixed-label
/// series at zero (per-model and per-processor ones:
/// [`register_pipeline`]); `camdnn_ready` starts at 0.
pub fn describe(config: &str) {
    for f in FAMILIES {
        match f.kind {
            Counter => describe_counter!(f.name, f.help),
            Gauge => describe_gauge!(f.name, f.help),
            Histogram => describe_histogram!(f.name, f.help),
        }
        match f.series {
            Single => register(f, Vec::new()),
            Each(label, values) => {
                for v in values() {
                    register(f, vec![(label, v.to_owned())]);
                }
            }
            PerModel | PerProcessor | PerModelProcessor | PerModelEach(..) | Own => {}
        }
    }
    gauge!(READY).set(0.0);
    gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION"), "config" => config.to_owned())
        .set(1.0);
}

/// Registers the per-model and per-processor series of the pipeline's
/// families at zero (values already recorded are kept), so they exist
/// before first use. Call with the config's names at start and reload.
pub fn register_pipeline<'a>(
    models: impl IntoIterator<Item = &'a str> + Clone,
    processors: impl IntoIterator<Item = &'a str> + Clone,
) {
    let m = |name: &str| ("model", name.to_owned());
    let p = |name: &str| ("processor", name.to_owned());
    for f in FAMILIES {
        match f.series {
            PerModel => models
                .clone()
                .into_iter()
                .for_each(|x| register(f, vec![m(x)])),
            PerProcessor => processors
                .clone()
                .into_iter()
                .for_each(|x| register(f, vec![p(x)])),
            PerModelProcessor => {
                for x in models.clone() {
                    for y in processors.clone() {
                        register(f, vec![m(x), p(y)]);
                    }
                }
            }
            PerModelEach(label, values) => {
                for x in models.clone() {
                    for v in values() {
                        register(f, vec![m(x), (label, v.to_owned())]);
                    }
                }
            }
            Single | Each(..) | Own => {}
        }
    }
}

/// Makes one series of `f` exist without changing its value.
fn register(f: &Family, labels: Vec<(&'static str, String)>) {
    let labels: Vec<metrics::Label> = labels
        .into_iter()
        .map(|(k, v)| metrics::Label::new(k, v))
        .collect();
    match f.kind {
        Counter => counter!(f.name, labels).increment(0),
        Gauge => gauge!(f.name, labels).increment(0.0),
        Histogram => drop(histogram!(f.name, labels)),
    }
}

/// Counts a frame read from a client.
pub fn frame_received() {
    counter!(FRAMES_RECEIVED).increment(1);
}

/// Counts a frame answered `Dropped`.
pub fn frame_dropped(r: DropReason) {
    counter!(FRAMES, "outcome" => "dropped").increment(1);
    counter!(FRAMES_DROPPED, "reason" => drop_label(r)).increment(1);
}

/// Counts a frame answered `Rejected`.
pub fn frame_rejected(r: RejectReason) {
    counter!(FRAMES, "outcome" => "rejected").increment(1);
    counter!(FRAMES_REJECTED, "reason" => reject_label(r)).increment(1);
}

/// Counts a completed frame and records its latencies.
pub fn frame_completed(total: Duration, admission: Duration, timing: &camdnn_protocol::Timing) {
    counter!(FRAMES, "outcome" => "completed").increment(1);
    histogram!(FRAME_LATENCY).record(total.as_secs_f64());
    histogram!(FRAME_STAGE, "stage" => "admission").record(admission.as_secs_f64());
    for (stage, us) in [
        ("queue", timing.queue_us),
        ("detect", timing.detect_us),
        ("classify", timing.classify_us),
    ] {
        histogram!(FRAME_STAGE, "stage" => stage).record(f64::from(us) / 1e6);
    }
}

/// Counts a connection ended by a protocol error.
pub fn protocol_error(c: ErrorCode) {
    counter!(PROTOCOL_ERRORS, "code" => error_label(c)).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::Path;

    /// Every `camdnn_*` metric name written in the daemon's sources.
    fn names_in_sources(dir: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).expect("source folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                names_in_sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("source file");
                for (i, _) in text.match_indices("\"camdnn_") {
                    let name: String = text[i + 1..]
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                        .collect();
                    // A metric name ends the literal or starts a label set.
                    let ends = text[i + 1 + name.len()..].starts_with(['"', '{']);
                    if ends && name.len() > "camdnn_".len() {
                        out.insert(name);
                    }
                }
            }
        }
    }

    #[test]
    fn every_family_named_in_the_sources_has_a_row_with_help() {
        let mut names = BTreeSet::new();
        names_in_sources(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut names,
        );
        assert!(names.len() > 20, "the scan found too little: {names:?}");
        let missing: Vec<&String> = names
            .iter()
            .filter(|n| {
                let base = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| n.strip_suffix(s).filter(|b| family_of(b).is_some()))
                    .unwrap_or(n);
                family_of(base).is_none()
            })
            .collect();
        assert!(
            missing.is_empty(),
            "metric families without a row (HELP, kind, start-up series) in \
             telemetry::FAMILIES: {missing:?}"
        );
    }

    #[test]
    fn every_family_is_rendered_at_zero_from_start_up() {
        let recorder = builder().unwrap().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            describe("camdnnd-test");
            register_pipeline(["det", "cls"], ["cpu", "gpu"]);
        });
        let body = handle.render();
        for f in FAMILIES {
            let kind = match f.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
                Kind::Histogram => "histogram",
            };
            assert!(
                body.contains(&format!(
                    "# HELP {} {}\n# TYPE {} {kind}\n",
                    f.name, f.help, f.name
                )),
                "{} not rendered with HELP and TYPE:\n{body}",
                f.name
            );
        }
        for line in [
            "camdnn_ready 0\n",
            "camdnn_resident_models{processor=\"gpu\"} 0\n",
            "camdnn_batch_size_count{model=\"cls\",processor=\"cpu\"} 0\n",
            "camdnn_frames_dropped_total{reason=\"superseded\"} 0\n",
            "camdnn_pipeline_seconds_bucket{stage=\"total\",le=\"+Inf\"} 0\n",
        ] {
            assert!(body.contains(line), "no {line:?} in:\n{body}");
        }
        assert!(
            body.contains("camdnn_build_info{version=\"")
                && body.contains("config=\"camdnnd-test\"} 1"),
            "{body}"
        );
    }

    #[test]
    fn the_table_follows_prometheus_naming() {
        let mut seen = BTreeSet::new();
        for f in FAMILIES {
            assert!(seen.insert(f.name), "{} twice", f.name);
            assert!(!f.help.trim().is_empty(), "{} has no HELP", f.name);
            assert_eq!(
                f.kind == Kind::Counter,
                f.name.ends_with("_total"),
                "{}: counters and only counters end in _total",
                f.name
            );
            for unit in ["_ms", "_us", "_milliseconds", "_percent", "_mb", "_kb"] {
                assert!(!f.name.contains(unit), "{}: not a base unit", f.name);
            }
            // Under OpenMetrics a counter `x_total` is family `x`: no other
            // family may be called `x`.
            if let Some(stem) = f.name.strip_suffix("_total") {
                assert!(family_of(stem).is_none(), "{} collides with {stem}", f.name);
            }
        }
    }
}
