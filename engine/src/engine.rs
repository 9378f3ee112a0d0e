//! The engine trait every backend implements, and the resident-model handle it returns.

use crate::{EngineError, EngineKind, ModelInfo, ModelSource, ProcessorConfig, Tensor};

/// An inference backend (tract, ONNX Runtime, sim). One engine value may serve several
/// processors; the processor config picks threads and execution provider.
pub trait Engine: Send + Sync {
    /// Which engine this is.
    fn kind(&self) -> EngineKind;

    /// Checks at start-up that this engine can serve `proc` (engine kind matches, the
    /// execution provider exists in this build, ...). Workers call it before taking
    /// commands, so a misconfigured processor fails early and loudly.
    fn check_processor(&self, proc: &ProcessorConfig) -> Result<(), EngineError>;

    /// Loads `model` for `proc` and returns the resident handle; its
    /// [`ModelInfo::load_time`] is the measured load time. Dropping the handle unloads.
    fn load(
        &self,
        model: &ModelSource,
        proc: &ProcessorConfig,
    ) -> Result<Box<dyn LoadedModel>, EngineError>;
}

/// A model resident on one processor.
pub trait LoadedModel: Send {
    /// Inputs, outputs, batching mode and load time.
    fn info(&self) -> &ModelInfo;

    /// Runs one batch: every input's leading dim is the batch size k; outputs are named
    /// and come in [`ModelInfo::outputs`] order with leading dim k.
    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>, EngineError>;

    /// Whether a batch of `batch` runs without first preparing something for
    /// it (tract builds a plan per batch size on that size's first run, which
    /// costs about as much as a load); the worker gives a run that is not
    /// prepared its longer limit ([`crate::RunLimit::cold`]).
    fn prepared_for(&self, _batch: usize) -> bool {
        true
    }
}

/// Refuses a processor whose engine kind is not `kind`.
pub(crate) fn expect_kind(proc: &ProcessorConfig, kind: EngineKind) -> Result<(), EngineError> {
    if proc.engine != kind {
        return Err(EngineError::Processor {
            processor: proc.name.clone(),
            reason: format!(
                "configured for engine `{}` but handed to the `{}` engine",
                proc.engine.as_str(),
                kind.as_str()
            ),
        });
    }
    if kind != EngineKind::Ort && (proc.provider.is_some() || proc.qnn.is_some()) {
        return Err(EngineError::Processor {
            processor: proc.name.clone(),
            reason: format!(
                "`provider`/`qnn` only apply to engine `ort`, not `{}`",
                kind.as_str()
            ),
        });
    }
    if proc.intra_threads == 0 {
        return Err(EngineError::Processor {
            processor: proc.name.clone(),
            reason: "intra_threads must be at least 1".into(),
        });
    }
    Ok(())
}
