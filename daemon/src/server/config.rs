//! Config sections of the service shell.

use std::path::PathBuf;

use serde::Deserialize;

/// `[server]`: the Unix socket listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Socket path (ignored when systemd passes a listener).
    pub socket: PathBuf,
}

/// `[metrics]`: the Prometheus exporter.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {}

/// `[log]`: logging.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {}
