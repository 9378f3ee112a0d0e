//! `[[pipeline.processor]]`: a unit the scheduler places work on, and the
//! engine that runs it.

use camdnn_engine::{EngineKind, OrtProvider, ProcessorConfig, QnnOptions};
use camdnn_policy::spec::ProcessorKind;
use serde::Deserialize;

/// `[[pipeline.processor]]`: a unit for the scheduler and its engine.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessorEntry {
    /// Unique name (the profile's keys use it).
    pub name: String,
    /// Kind of unit.
    pub kind: ProcessorKind,
    /// N_j.
    pub max_resident: usize,
    /// Memory budget, MB (needs `size_mb` in the profile).
    #[serde(default)]
    pub memory_budget_mb: Option<f64>,
    /// Most share of time the unit may be busy, in (0, 1]: the scheduler
    /// rests it after each batch (thermal / power headroom).
    #[serde(default)]
    pub utilisation_cap: Option<f64>,
    /// Engine running this unit's models.
    pub engine: EngineKind,
    /// ONNX Runtime execution provider (ort only).
    #[serde(default)]
    pub provider: Option<OrtProvider>,
    /// Intra-op threads.
    #[serde(default = "d_one")]
    pub intra_threads: usize,
    /// CPU core to pin the worker thread to.
    #[serde(default)]
    pub core: Option<usize>,
    /// QNN options (ort with provider "qnn").
    #[serde(default)]
    pub qnn: Option<QnnOptions>,
    /// A throttling drill: this unit's batches run `factor` times as long
    /// between `from_s` and `until_s` seconds after the pipeline starts, as
    /// DVFS or heat would make them (for recovery tests and `bench
    /// --throttle`; never set in production).
    #[serde(default)]
    pub throttle_drill: Option<ThrottleDrill>,
}

/// `throttle_drill` of a processor.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThrottleDrill {
    /// Run time multiplier, at least 1.
    pub factor: f64,
    /// Start of the slow spell, s after the pipeline starts.
    #[serde(default)]
    pub from_s: f64,
    /// Its end (absent: it never ends).
    #[serde(default)]
    pub until_s: Option<f64>,
}

impl ThrottleDrill {
    /// The engine's throttle; an error naming the bad field.
    pub fn throttle(&self) -> anyhow::Result<camdnn_engine::Throttle> {
        if !(self.factor.is_finite() && self.factor >= 1.0) {
            anyhow::bail!("throttle_drill.factor must be >= 1, got {}", self.factor);
        }
        if !(self.from_s.is_finite() && self.from_s >= 0.0) {
            anyhow::bail!("throttle_drill.from_s must be >= 0, got {}", self.from_s);
        }
        if let Some(u) = self.until_s {
            if !(u.is_finite() && u > self.from_s) {
                anyhow::bail!(
                    "throttle_drill.until_s must be after from_s ({}), got {u}",
                    self.from_s
                );
            }
        }
        Ok(camdnn_engine::Throttle {
            factor: self.factor,
            from: std::time::Duration::from_secs_f64(self.from_s),
            until: self.until_s.map(std::time::Duration::from_secs_f64),
        })
    }
}

fn d_one() -> usize {
    1
}

impl ProcessorEntry {
    /// The engine-side config of this processor.
    pub fn engine_config(&self) -> ProcessorConfig {
        ProcessorConfig {
            name: self.name.clone(),
            engine: self.engine,
            provider: self.provider,
            intra_threads: self.intra_threads,
            core: self.core,
            qnn: self.qnn.clone(),
            utilisation_cap: self.utilisation_cap,
        }
    }
}
