//! The daemon's Prometheus metrics: every family's name, kind, HELP text
//! and start-up series in one table ([`FAMILIES`], [`families`]), the
//! exporter and the recording helpers ([`exporter`], rendered by
//! [`crate::server::http`]), and their `[metrics]` config section.
//!
//! Every family is described and present (at zero) from start-up, so a
//! dashboard or an alert never sees a family appear on first use, and
//! `promtool check metrics` finds HELP on all of them. A family recorded
//! anywhere in the daemon must have a row in [`FAMILIES`]; a test scans the
//! sources for `camdnn_*` names and fails on any without one.
//!
//! Every frame is counted once in `camdnn_frames_received_total` and, when
//! answered, once in `camdnn_frames_total{outcome}` and, for drops and
//! rejections, once in `camdnn_frames_dropped_total{reason}` or
//! `camdnn_frames_rejected_total{reason}`; so at rest
//! `received == completed + dropped + rejected`.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use anyhow::bail;
use serde::Deserialize;

mod exporter;
mod families;

pub use exporter::{
    describe, frame_completed, frame_dropped, frame_received, frame_rejected, install,
    protocol_error, register_pipeline, Exporter, COUNT_BUCKETS,
};
// The family table and its names are this module's vocabulary: every one is public.
pub use families::*;

/// `[metrics]`: the Prometheus exporter and the health endpoints, served on
/// one HTTP listener (`/metrics`, `/health/live`, `/health/ready`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Serve metrics and health at all.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Listen address; loopback by default so nothing is exposed off the board.
    #[serde(default = "default_metrics_listen")]
    pub listen: SocketAddr,
    /// Constant labels put on every series, naming this board in a fleet
    /// (e.g. `{ board = "rb5-07", site = "depot-3" }`): at most
    /// [`MAX_FLEET_LABELS`], fixed for the process's life, so they add no
    /// cardinality within one board.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// Most constant labels `[metrics] labels` may hold.
pub const MAX_FLEET_LABELS: usize = 8;
/// Longest value of a constant label, bytes.
const MAX_LABEL_VALUE: usize = 128;

impl MetricsConfig {
    /// Checks the constant labels: few, valid Prometheus label names not
    /// used by the daemon's own series, short non-empty values.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.labels.len() > MAX_FLEET_LABELS {
            bail!(
                "[metrics] labels has {} entries; at most {MAX_FLEET_LABELS} are allowed",
                self.labels.len()
            );
        }
        for (k, v) in &self.labels {
            let valid_name = k
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !k.starts_with("__");
            if !valid_name {
                bail!("[metrics] labels: {k:?} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)");
            }
            if families::OWN_LABELS.contains(&k.as_str()) || k == "instance" || k == "job" {
                bail!("[metrics] labels: {k:?} is a label the daemon or Prometheus sets itself");
            }
            if v.is_empty() || v.len() > MAX_LABEL_VALUE {
                bail!(
                    "[metrics] labels: the value of {k:?} must have 1 to {MAX_LABEL_VALUE} bytes"
                );
            }
        }
        Ok(())
    }
}

fn yes() -> bool {
    true
}
fn default_metrics_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 9464))
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: default_metrics_listen(),
            labels: BTreeMap::new(),
        }
    }
}
