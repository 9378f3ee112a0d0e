//! `[pipeline]`: processors, models, the graph and the scheduler's knobs.

use serde::Deserialize;

/// `[pipeline]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {}
