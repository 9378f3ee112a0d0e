//! camdnnd's configuration file: one TOML document with a section per
//! concern. Unknown fields are errors everywhere, so a typo never passes
//! silently.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;

use crate::pipeline::config::PipelineConfig;
use crate::server::config::{LogConfig, ServerConfig};
use crate::telemetry::MetricsConfig;

/// The whole daemon configuration (`/etc/camdnn/camdnnd.toml`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonConfig {
    /// Socket listener and flow control.
    pub server: ServerConfig,
    /// Prometheus exporter and health endpoints.
    #[serde(default)]
    pub metrics: MetricsConfig,
    /// Logging.
    #[serde(default)]
    pub log: LogConfig,
    /// Processors, models, graph and scheduler; its relative paths are
    /// resolved against the file's folder, set by [`DaemonConfig::load`].
    pub pipeline: PipelineConfig,
}

impl DaemonConfig {
    /// Reads, parses and validates a config file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config {}", path.display()))?;
        let mut cfg: DaemonConfig =
            toml::from_str(&text).with_context(|| format!("parsing config {}", path.display()))?;
        cfg.pipeline.base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(cfg)
    }

    /// A path from the config, resolved against the config file's folder.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        self.pipeline.resolve(p)
    }
}
