//! Serde config of what the engine layer needs: one model to load and one processor to run on.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::ModelName;

/// Which engine a processor uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// tract (pure Rust, CPU).
    Tract,
    /// ONNX Runtime with an execution provider.
    Ort,
    /// Simulation: sleeps for the profiled time.
    Sim,
}

impl EngineKind {
    /// Lower-case name, as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Tract => "tract",
            EngineKind::Ort => "ort",
            EngineKind::Sim => "sim",
        }
    }
}

/// ONNX Runtime execution provider of one processor. There is never a silent CPU
/// fallback: a provider this ONNX Runtime build lacks is an error at start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrtProvider {
    /// The default CPU provider (MLAS).
    Cpu,
    /// XNNPACK (ARM/x86 CPU kernels).
    Xnnpack,
    /// NVIDIA CUDA.
    Cuda,
    /// Qualcomm QNN (Hexagon HTP / Adreno GPU, by backend library).
    Qnn,
}

impl OrtProvider {
    /// The provider's name as ONNX Runtime reports it in `GetAvailableProviders`.
    pub fn ort_name(self) -> &'static str {
        match self {
            OrtProvider::Cpu => "CPUExecutionProvider",
            OrtProvider::Xnnpack => "XnnpackExecutionProvider",
            OrtProvider::Cuda => "CUDAExecutionProvider",
            OrtProvider::Qnn => "QNNExecutionProvider",
        }
    }
}

/// Options of the QNN execution provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QnnOptions {
    /// QNN backend library: `libQnnHtp.so` (DSP/HTP) or `libQnnGpu.so` (Adreno).
    pub backend_path: PathBuf,
    /// Where to cache the compiled QNN context (an `_ctx.onnx` file per model is
    /// written in this directory on first load and reused after), so a reload skips
    /// graph finalisation. `None`: no cache.
    #[serde(default)]
    pub context_cache_dir: Option<PathBuf>,
    /// HTP performance mode (`burst`, `high_performance`, `balanced`, ...); `None`: QNN default.
    #[serde(default)]
    pub htp_performance_mode: Option<String>,
}

/// One processor as the engine layer sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessorConfig {
    /// Processor name (`cpu0`, `gpu`, `dsp`, ...).
    pub name: String,
    /// Engine this processor runs.
    pub engine: EngineKind,
    /// Execution provider; required for `engine = "ort"`, refused otherwise.
    #[serde(default)]
    pub provider: Option<OrtProvider>,
    /// Threads used inside one operator (ONNX Runtime intra-op, tract is single-threaded).
    #[serde(default = "one")]
    pub intra_threads: usize,
    /// Pin the worker thread to this CPU core; `None`: no pinning.
    #[serde(default)]
    pub core: Option<usize>,
    /// QNN options; required for `provider = "qnn"`.
    #[serde(default)]
    pub qnn: Option<QnnOptions>,
    /// Most share of time the unit may run, in (0, 1]: after a batch of
    /// length d the worker rests d (1/cap - 1) before the next command
    /// (thermal or power headroom; the scheduler plans with the same rest).
    #[serde(default)]
    pub utilisation_cap: Option<f64>,
}

fn one() -> usize {
    1
}

impl ProcessorConfig {
    /// A processor with defaults (1 thread, no pinning, no provider).
    pub fn new(name: impl Into<String>, engine: EngineKind) -> ProcessorConfig {
        ProcessorConfig {
            name: name.into(),
            engine,
            provider: None,
            intra_threads: 1,
            core: None,
            qnn: None,
            utilisation_cap: None,
        }
    }

    /// How long the unit rests after a batch that ran for `ran` (zero
    /// without a cap).
    pub fn rest_after(&self, ran: std::time::Duration) -> std::time::Duration {
        match self.utilisation_cap {
            Some(cap) if cap > 0.0 && cap < 1.0 => ran.mul_f64(1.0 / cap - 1.0),
            _ => std::time::Duration::ZERO,
        }
    }
}

/// File format of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelFormat {
    /// ONNX protobuf.
    Onnx,
    /// TensorFlow Lite flatbuffer (tract only).
    Tflite,
}

/// One model to load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSource {
    /// Model name, used in commands and errors.
    pub name: ModelName,
    /// Path of the model file.
    pub path: PathBuf,
    /// Format; `None`: from the file extension (`.onnx`, `.tflite`).
    #[serde(default)]
    pub format: Option<ModelFormat>,
    /// Input shapes by input name, replacing symbolic dims of the model. A `-1` in the
    /// leading position keeps the batch dim dynamic; every other entry must be > 0 and
    /// agree with the model's fixed dims. Needed for tract when a non-batch dim is
    /// symbolic (e.g. PP-OCR cls `x: [-1, 3, 48, 192]`); also enforced by ort.
    #[serde(default)]
    pub input_shapes: BTreeMap<String, Vec<i64>>,
    /// Batch sizes to prepare at load (tract optimises one plan per batch size; the
    /// others are prepared on first use). Empty: batch 1 only.
    #[serde(default)]
    pub prepare_batches: Vec<usize>,
}

impl ModelSource {
    /// A model from a path, with no input-shape overrides.
    pub fn new(name: impl Into<ModelName>, path: impl Into<PathBuf>) -> ModelSource {
        ModelSource {
            name: name.into(),
            path: path.into(),
            format: None,
            input_shapes: BTreeMap::new(),
            prepare_batches: Vec::new(),
        }
    }

    /// The same model with the shape of one input fixed (see [`ModelSource::input_shapes`]).
    pub fn with_input_shape(mut self, input: impl Into<String>, shape: Vec<i64>) -> ModelSource {
        self.input_shapes.insert(input.into(), shape);
        self
    }

    /// The format, from the config or the file extension.
    pub fn format(&self) -> Result<ModelFormat, crate::EngineError> {
        if let Some(f) = self.format {
            return Ok(f);
        }
        match self.path.extension().and_then(|e| e.to_str()) {
            Some("onnx") => Ok(ModelFormat::Onnx),
            Some("tflite") => Ok(ModelFormat::Tflite),
            _ => Err(crate::EngineError::BadModelConfig {
                model: self.name.clone(),
                reason: format!(
                    "cannot tell the format of {} from its extension; set `format` (onnx or tflite)",
                    self.path.display()
                ),
            }),
        }
    }
}
