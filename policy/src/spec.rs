//! The TOML description of a board and an application, as written by people
//! and by `camdnnd profile`. [`crate::System`] is its validated, indexed form.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A whole system file: processors, models (the application graph) and the
/// measured profile t_e(i,j,k), t_l(i,j).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SystemSpec {
    /// A name for reports.
    #[serde(default)]
    pub name: String,
    /// n_b: the largest batch size any model is run with.
    pub max_batch: usize,
    /// The processing units p_j.
    #[serde(rename = "processor")]
    pub processors: Vec<ProcessorSpec>,
    /// The models M_i; the ones without a parent are detectors (graph roots).
    #[serde(rename = "model")]
    pub models: Vec<ModelSpec>,
    /// profile.MODEL.PROCESSOR = timings; a missing pair means "unsupported".
    pub profile: ProfileSpec,
}

/// Measured timings, keyed by model name then processor name.
pub type ProfileSpec = BTreeMap<String, BTreeMap<String, PairSpec>>;

/// What kind of unit a processor is; used by the single-unit baselines.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum ProcessorKind {
    /// A general-purpose CPU (cluster).
    Cpu,
    /// A GPU.
    Gpu,
    /// A DSP / NPU.
    Dsp,
    /// Anything else.
    Other,
}

/// One processing unit p_j.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProcessorSpec {
    /// Unique name, referenced by the profile and the daemon config.
    pub name: String,
    /// Kind of unit.
    pub kind: ProcessorKind,
    /// N_j: most models resident at once.
    pub max_resident: usize,
    /// Optional memory budget for resident models, in MB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_budget_mb: Option<f64>,
    /// Optional utilisation cap in (0, 1]: the share of time the unit may be
    /// busy (thermal or power headroom); the scheduler rests it after each
    /// batch so that it never works more than this share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilisation_cap: Option<f64>,
}

/// One model M_i and its place in the application graph.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Unique name.
    pub name: String,
    /// The model whose outputs feed this one; none for a detector (root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Detector classes routed to this model (only meaningful under a detector).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<String>,
}

/// Timings of one model on one processor.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PairSpec {
    /// t_e(i,j,k) for k = 1..len, milliseconds; len <= max_batch.
    pub exec_ms: Vec<f64>,
    /// t_l(i,j): time to make the model resident, milliseconds.
    pub load_ms: f64,
    /// Resident size, MB (needed when the processor has a memory budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_mb: Option<f64>,
}

impl SystemSpec {
    /// Parses a system file; syntax and type errors carry TOML's line and column.
    pub fn from_toml(text: &str) -> Result<Self, crate::SpecError> {
        toml::from_str(text).map_err(|e| crate::SpecError::Toml(e.to_string()))
    }

    /// Serialises back to TOML (used by `camdnnd profile`).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a SystemSpec always serialises")
    }
}
