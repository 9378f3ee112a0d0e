//! Inference engines behind one trait (tract, ONNX Runtime, sim) and the per-processor
//! worker threads of camdnnd.
//!
//! - [`Engine`] loads a [`ModelSource`] for a [`ProcessorConfig`] into a resident
//!   [`LoadedModel`]; [`LoadedModel::run`] runs one batch of owned [`Tensor`]s.
//! - [`TractEngine`], [`OrtEngine`], [`SimEngine`] are the three engines.
//! - [`Worker`] is one OS thread per processor executing load/unload/run commands in order;
//!   a command that outlives its limit gets the thread replaced ([`Supervision`]).
//!
//! Batching: a model whose batch dim is dynamic runs batch k in one call
//! ([`BatchMode::Native`]); a fixed-batch model runs k / b calls ([`BatchMode::Loop`]).

mod command;
mod config;
mod engine;
mod error;
mod executor;
mod model;
mod name;
mod ort_engine;
mod sim;
mod supervise;
mod tensor;
mod tflite;
mod throttled;
mod tract_engine;
mod worker;

pub use command::{Command, LoadReport, Reply, RunLimit, RunReport};
pub use config::{EngineKind, ModelFormat, ModelSource, OrtProvider, ProcessorConfig, QnnOptions};
pub use engine::{Engine, LoadedModel};
pub use error::EngineError;
pub use model::{BatchMode, Dim, ModelInfo, TensorInfo};
pub use name::ModelName;
pub use ort_engine::{dev_ort_library, packaged_ort_library, OrtEngine};
pub use sim::{SimEngine, SimFaults, SimModelSpec};
pub use supervise::{StuckCommand, Supervision, WorkerStatus, DEFAULT_MAX_ABANDONED};
pub use tensor::{DType, Tensor, TensorData};
pub use throttled::{Throttle, ThrottledEngine};
pub use tract_engine::TractEngine;
pub use worker::{Worker, WorkerHandle};
