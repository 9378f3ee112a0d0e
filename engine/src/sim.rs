//! The sim engine: for hosts without the board's processors, and for tests. Loading
//! sleeps for the model's t_l, running a batch of k sleeps for t_e(k) and returns zero
//! tensors of the model's output shapes. Timings and shapes are handed in per model;
//! the model file is never read.

use std::collections::HashMap;
use std::time::{Duration, Instant};

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

/// The sim engine: a table of [`SimModelSpec`] by model name.
#[derive(Debug, Clone, Default)]
pub struct SimEngine {
    models: HashMap<String, SimModelSpec>,
}

impl SimEngine {
    /// A sim engine that knows the given models (by model name).
    pub fn new(models: HashMap<String, SimModelSpec>) -> SimEngine {
        SimEngine { models }
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
        let spec = self.models.get(&model.name).ok_or_else(|| {
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
        let start = Instant::now();
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
        }))
    }
}

/// A model "resident" in the sim engine.
struct SimModel {
    info: ModelInfo,
    exec_time: Vec<Duration>,
}

impl LoadedModel for SimModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>, EngineError> {
        let SimModel { info, exec_time } = self;
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
