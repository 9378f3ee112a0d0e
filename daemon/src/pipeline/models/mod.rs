//! Per-model pre- and post-processing: how a model's input tensor is made
//! from an image ([`input`]), and how its outputs become detections
//! ([`objects`]) or per-object results ([`results`]), read by the decoder its
//! config names ([`decoder`]).

use std::path::{Path, PathBuf};

mod decoded;
mod decoder;
mod input;
mod objects;
mod results;
mod tensors;

pub use decoded::{Decoded, Found, ItemContext, Verdict};
pub use decoder::Decoder;
pub use input::InputPrep;

use crate::pipeline::config::ModelEntry;

/// Everything the pipeline needs to run one model apart from the engine.
#[derive(Debug)]
pub struct ModelRuntime {
    /// Input preparation.
    pub input: InputPrep,
    /// Output reading.
    pub decoder: Decoder,
}

impl ModelRuntime {
    /// Builds the runtime of a configured model.
    pub fn new(m: &ModelEntry, resolve: &dyn Fn(&Path) -> PathBuf) -> anyhow::Result<Self> {
        Ok(ModelRuntime {
            input: InputPrep::new(m)?,
            decoder: Decoder::new(m, resolve)?,
        })
    }
}

#[cfg(test)]
mod tests;
