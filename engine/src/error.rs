//! The one error type of the engine layer: every failure names what was wrong.

use std::path::PathBuf;

use crate::ModelName;

/// Why loading a model, running a batch or starting a worker failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The model file does not exist or cannot be read.
    #[error("model `{model}`: cannot read {path}: {reason}")]
    ModelFile {
        /// Model name from the config.
        model: ModelName,
        /// Path that was tried.
        path: PathBuf,
        /// What the OS or the parser said.
        reason: String,
    },
    /// The model uses operators this engine does not implement; it is refused at load.
    #[error("model `{model}` uses operators the {engine} engine does not support: {}", ops.join(", "))]
    UnsupportedOps {
        /// Model name from the config.
        model: ModelName,
        /// Engine that refused it.
        engine: &'static str,
        /// Operator types (ONNX op_type) that are missing, sorted, without duplicates.
        ops: Vec<String>,
    },
    /// The model or the processor config is inconsistent (unknown input, symbolic dim without a value, ...).
    #[error("model `{model}`: {reason}")]
    BadModelConfig {
        /// Model name from the config.
        model: ModelName,
        /// What is wrong.
        reason: String,
    },
    /// The processor config cannot be served by this engine (wrong engine kind, provider missing, ...).
    #[error("processor `{processor}`: {reason}")]
    Processor {
        /// Processor name from the config.
        processor: String,
        /// What is wrong.
        reason: String,
    },
    /// The ONNX Runtime shared library could not be found or loaded.
    #[error("ONNX Runtime library: {0}")]
    OrtLibrary(String),
    /// Inputs given to `run` do not match the model's inputs.
    #[error("model `{model}`: bad input: {reason}")]
    BadInput {
        /// Model name.
        model: ModelName,
        /// What does not match.
        reason: String,
    },
    /// A tensor was built with a shape that does not match its data.
    #[error("tensor `{name}`: shape {shape:?} needs {expected} elements but {actual} were given")]
    TensorShape {
        /// Tensor name (may be empty).
        name: String,
        /// The requested shape.
        shape: Vec<usize>,
        /// Elements the shape needs.
        expected: usize,
        /// Elements given.
        actual: usize,
    },
    /// The backend failed while loading or running (message from tract / ONNX Runtime).
    #[error("model `{model}`: {engine} engine failed while {stage}: {reason}")]
    Backend {
        /// Model name.
        model: ModelName,
        /// Engine name.
        engine: &'static str,
        /// What it was doing ("loading", "optimizing for batch 4", "running").
        stage: String,
        /// Backend message (full error chain).
        reason: String,
    },
    /// A worker command named a model that is not resident on that processor.
    #[error("processor `{processor}`: model `{model}` is not loaded")]
    NotLoaded {
        /// Processor name.
        processor: String,
        /// Model name.
        model: ModelName,
    },
    /// The engine panicked while loading or running a model. After a panic
    /// while running, the worker restarted: it dropped every model it held
    /// (the engine's state is not trusted after a panic) and serves on.
    #[error("processor `{processor}`: the {engine} engine panicked while {stage} model `{model}`{}", restart_note(.restarted))]
    Panicked {
        /// Processor name.
        processor: String,
        /// Model name.
        model: ModelName,
        /// Engine name.
        engine: &'static str,
        /// What it was doing ("loading", "running").
        stage: &'static str,
        /// True when the worker dropped every resident model.
        restarted: bool,
    },
    /// A run or a load took longer than the limit its command carried. The
    /// engine cannot be interrupted, so its thread was abandoned (it ends
    /// whenever the engine returns, its answer discarded). With `restarted`,
    /// a fresh worker thread took over the processor, empty (every model it
    /// held went with the stuck thread); without, the processor already had
    /// as many stuck threads as its worker allows and the worker retired
    /// (every later command is answered [`EngineError::WorkerGone`]).
    #[error("processor `{processor}`: the {engine} engine was still {stage} model `{model}` after its limit of {limit_ms} ms{}", timeout_note(.restarted))]
    TimedOut {
        /// Processor name.
        processor: String,
        /// Model name.
        model: ModelName,
        /// Engine name.
        engine: &'static str,
        /// What it was doing ("loading", "running").
        stage: &'static str,
        /// The limit the command carried, ms.
        limit_ms: u64,
        /// True when a fresh worker thread took over; false when the worker retired.
        restarted: bool,
    },
    /// The worker thread is gone (shut down or panicked) and cannot take commands.
    #[error("processor `{processor}`: worker thread is not running")]
    WorkerGone {
        /// Processor name.
        processor: String,
    },
}

/// The tail of [`EngineError::Panicked`]'s message.
fn restart_note(restarted: &bool) -> &'static str {
    if *restarted {
        "; the worker dropped its models and restarted"
    } else {
        ""
    }
}

/// The tail of [`EngineError::TimedOut`]'s message.
fn timeout_note(restarted: &bool) -> &'static str {
    if *restarted {
        "; its thread was abandoned and a fresh worker thread took over, without models"
    } else {
        "; its thread was abandoned and the worker retired (too many stuck threads)"
    }
}
