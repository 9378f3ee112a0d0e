//! The sim engine: for hosts without the board's processors, and for tests. Loading
//! sleeps for the model's t_l, running a batch of k sleeps for t_e(k) and returns zero
//! tensors of the model's output shapes. Timings and shapes are handed in per model;
//! the model file is never read.
//!
//! **Test-only fault injection** ([`SimFaults`], [`SimEngine::with_faults`]):
//! chosen loads of a model fail, chosen runs panic inside the engine, runs
//! and loads stall. It exists so the daemon's recovery paths (load retry with backoff,
//! worker restart after an engine panic) can be exercised end to end; a
//! production config never sets it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::engine::expect_kind;
use crate::model::batch_mode_of;
use crate::{
    BatchMode, Dim, Engine, EngineError, EngineKind, LoadedModel, ModelInfo, ModelSource,
    ProcessorConfig, Tensor, TensorInfo,
};

/// What the sim engine pretends a model is on one processor.
#[derive(Debug, Clone, PartialEq)]
pub struct SimModelSpec {
    /// Inputs (a leading [`Dim::Batch`] makes batch k one call; a fixed leading dim
    /// makes batches loop, as the real engines do).
    pub inputs: Vec<TensorInfo>,
    /// Outputs; zeros of these shapes (batch dim = k) are returned. Every dim other than
    /// the batch must be [`Dim::Fixed`].
    pub outputs: Vec<TensorInfo>,
    /// t_l: how long a load takes.
    pub load_time: Duration,
    /// t_e(k) for k = 1..=len: `exec_time[k - 1]` is one call with batch k (for a
    /// fixed-batch model, one call with the model's batch).
    pub exec_time: Vec<Duration>,
}

/// Faults the sim engine injects into one model (test-only; see the module docs).
/// Loads and runs are counted from 1 per engine (that is, per processor).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimFaults {
    /// Only on this processor (`None`: every sim processor running the model).
    #[serde(default)]
    pub processor: Option<String>,
    /// These loads fail with an engine error.
    #[serde(default)]
    pub fail_loads: Vec<u64>,
    /// These runs panic inside the engine.
    #[serde(default)]
    pub panic_on_runs: Vec<u64>,
    /// The runs listed in `stall_on_runs` (every run when it is empty) take
    /// this much longer, ms (a hung or slow engine).
    #[serde(default)]
    pub stall_ms: u64,
    /// Which runs stall (see `stall_ms`).
    #[serde(default)]
    pub stall_on_runs: Vec<u64>,
    /// The loads listed in `stall_on_loads` (every load when it is empty)
    /// take this much longer, ms (a hung or slow load).
    #[serde(default)]
    pub load_stall_ms: u64,
    /// Which loads stall (see `load_stall_ms`).
    #[serde(default)]
    pub stall_on_loads: Vec<u64>,
}

/// A model's faults and its load / run counters.
#[derive(Debug, Default)]
struct FaultState {
    faults: SimFaults,
    loads: AtomicU64,
    runs: AtomicU64,
}

/// The sim engine: a table of [`SimModelSpec`] by model name.
#[derive(Debug, Clone, Default)]
pub struct SimEngine {
    models: HashMap<String, SimModelSpec>,
    faults: HashMap<String, Arc<FaultState>>,
}

impl SimEngine {
    /// A sim engine that knows the given models (by model name).
    pub fn new(models: HashMap<String, SimModelSpec>) -> SimEngine {
        SimEngine {
            models,
            faults: HashMap::new(),
        }
    }

    /// Injects `faults` into `model` (test-only: see the module docs).
    pub fn with_faults(mut self, model: impl Into<String>, faults: SimFaults) -> SimEngine {
        let state = FaultState {
            faults,
            ..FaultState::default()
        };
        self.faults.insert(model.into(), Arc::new(state));
        self
    }

    /// Adds or replaces one model.
    pub fn with_model(mut self, name: impl Into<String>, spec: SimModelSpec) -> SimEngine {
        self.models.insert(name.into(), spec);
        self
    }
}

impl Engine for SimEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Sim
    }

    fn check_processor(&self, proc: &ProcessorConfig) -> Result<(), EngineError> {
        expect_kind(proc, EngineKind::Sim)
    }

    fn load(
        &self,
        model: &ModelSource,
        proc: &ProcessorConfig,
    ) -> Result<Box<dyn LoadedModel>, EngineError> {
        self.check_processor(proc)?;
        let bad = |reason: String| EngineError::BadModelConfig {
            model: model.name.clone(),
            reason,
        };
        let spec = self.models.get(model.name.as_str()).ok_or_else(|| {
            bad(format!(
                "the sim engine has no timings for this model (it knows: {})",
                {
                    let mut k: Vec<&str> = self.models.keys().map(String::as_str).collect();
                    k.sort();
                    k.join(", ")
                }
            ))
        })?;
        if spec.exec_time.is_empty() {
            return Err(bad("sim spec has no exec_time (t_e) entries".into()));
        }
        for out in &spec.outputs {
            if out
                .shape
                .iter()
                .skip(1)
                .any(|d| !matches!(d, Dim::Fixed(_)))
            {
                return Err(bad(format!(
                    "sim output `{}` has a dynamic non-batch dim; give fixed sizes",
                    out.name
                )));
            }
        }
        let batch = batch_mode_of(&model.name, &spec.inputs)?;
        let faults = self.faults.get(model.name.as_str()).cloned();
        if let Some(f) = &faults {
            let n = f.loads.fetch_add(1, Ordering::Relaxed) + 1;
            if f.faults.fail_loads.contains(&n) {
                return Err(EngineError::Backend {
                    model: model.name.clone(),
                    engine: "sim",
                    stage: "loading".into(),
                    reason: format!("injected fault: load {n} fails (sim fault injection)"),
                });
            }
        }
        let start = Instant::now();
        if let Some(f) = &faults {
            let n = f.loads.load(Ordering::Relaxed);
            if f.faults.stall_on_loads.is_empty() || f.faults.stall_on_loads.contains(&n) {
                std::thread::sleep(Duration::from_millis(f.faults.load_stall_ms));
            }
        }
        std::thread::sleep(spec.load_time);
        let info = ModelInfo {
            name: model.name.clone(),
            engine: EngineKind::Sim,
            inputs: spec.inputs.clone(),
            outputs: spec.outputs.clone(),
            batch,
            load_time: start.elapsed(),
            detail: "sim: sleeps for the profiled t_e(k)".into(),
        };
        Ok(Box::new(SimModel {
            info,
            exec_time: spec.exec_time.clone(),
            faults,
        }))
    }
}

/// A model "resident" in the sim engine.
struct SimModel {
    info: ModelInfo,
    exec_time: Vec<Duration>,
    faults: Option<Arc<FaultState>>,
}

impl LoadedModel for SimModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>, EngineError> {
        let SimModel {
            info,
            exec_time,
            faults,
        } = self;
        if let Some(f) = faults {
            let n = f.runs.fetch_add(1, Ordering::Relaxed) + 1;
            if f.faults.stall_on_runs.is_empty() || f.faults.stall_on_runs.contains(&n) {
                std::thread::sleep(Duration::from_millis(f.faults.stall_ms));
            }
            if f.faults.panic_on_runs.contains(&n) {
                panic!(
                    "injected fault: run {n} of model `{}` panics (sim fault injection)",
                    info.name
                );
            }
        }
        info.run_batched(inputs, |chunk| {
            let k = chunk.first().and_then(|t| t.batch()).unwrap_or(1);
            let t = exec_time.get(k - 1).ok_or_else(|| EngineError::BadInput {
                model: info.name.clone(),
                reason: format!(
                    "batch {k} is larger than the sim profile's largest batch {}",
                    exec_time.len()
                ),
            })?;
            std::thread::sleep(*t);
            Ok(info
                .outputs
                .iter()
                .map(|o| {
                    let shape = o
                        .shape
                        .iter()
                        .enumerate()
                        .map(|(ix, d)| match d {
                            Dim::Fixed(n) if ix > 0 || info.batch != BatchMode::Native => *n,
                            _ => k,
                        })
                        .collect();
                    Tensor::zeros(o.name.clone(), o.dtype, shape)
                })
                .collect())
        })
    }
}
