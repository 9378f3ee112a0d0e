//! `[[pipeline.model]]`: a model's file, its place in the graph, and how its
//! input is prepared.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use camdnn_engine::ModelSource;
use camdnn_vision::mtcnn::PyramidConfig;
use camdnn_vision::NormConfig;
use serde::Deserialize;

use super::OutputSpec;

/// `[[pipeline.model]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// Unique name (the profile's keys use it).
    pub name: String,
    /// Model file (ONNX or TFLite); none for an `upstream` detector, which is never loaded.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// The model whose outputs feed this one; none for a detector.
    #[serde(default)]
    pub parent: Option<String>,
    /// Detector classes routed to this model (children of a detector).
    #[serde(default)]
    pub classes: Vec<String>,
    /// Explicit input shapes (-1 leading = dynamic batch).
    #[serde(default)]
    pub input_shapes: BTreeMap<String, Vec<i64>>,
    /// How the input tensor is made from the frame or the object's crop (not needed
    /// by an `upstream` detector).
    #[serde(default)]
    pub input: InputSpec,
    /// How the outputs are read.
    pub output: OutputSpec,
    /// Output shapes the sim engine returns (per-item dims, batch excluded).
    #[serde(default)]
    pub sim_outputs: BTreeMap<String, Vec<usize>>,
    /// When a tracked object's earlier result of this model stands for this frame's
    /// (`camdnn_policy::reuse`; absent: inferred on every frame).
    #[serde(default)]
    pub reuse: Option<camdnn_policy::reuse::ReuseConfig>,
    /// TEST-ONLY fault injection on sim processors (failed loads, engine
    /// panics, stalls) to exercise recovery; never set it in production.
    #[serde(default)]
    pub sim_faults: Option<camdnn_engine::SimFaults>,
}

/// Input preparation (the default, 0x0, is only valid for an upstream detector).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    /// Network input width, pixels.
    pub width: u32,
    /// Network input height, pixels.
    pub height: u32,
    /// How the whole frame becomes a detector input: keep the aspect ratio and pad
    /// (letterbox) or stretch.
    #[serde(default)]
    pub resize: Resize,
    /// Where a letterboxed frame or a `fit` crop sits inside the input.
    #[serde(default)]
    pub placement: PlacementSpec,
    /// How an object's box becomes this model's input (children only).
    #[serde(default)]
    pub crop: CropMode,
    /// Pad colour for letterboxing, `fit` and `pad` crops and pyramid canvases.
    #[serde(default)]
    pub pad: [u8; 3],
    /// Normalisation to f32.
    pub norm: NormConfig,
    /// Detector only: run on an image pyramid instead of one resized frame. The scales are
    /// packed side by side on `width` x `height` canvases (one scale per canvas with
    /// `pack = false`); each canvas is one detector item of the frame (the items batch
    /// together). Needed by `mtcnn_pnet`.
    #[serde(default)]
    pub pyramid: Option<PyramidConfig>,
    /// Children only: cut the square of the object's longer side times this around its
    /// centre instead of the box itself (MediaPipe's face-landmark region, 1.5).
    #[serde(default)]
    pub roi_scale: Option<f32>,
}

/// Where a resized image sits in its padded input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlacementSpec {
    /// Centred.
    #[default]
    Center,
    /// Top-left corner, padding right and bottom (PP-OCR's right-padded text lines).
    Topleft,
}

impl PlacementSpec {
    /// The vision crate's placement.
    pub fn placement(self) -> camdnn_vision::Placement {
        match self {
            PlacementSpec::Center => camdnn_vision::Placement::Center,
            PlacementSpec::Topleft => camdnn_vision::Placement::TopLeft,
        }
    }
}

/// How an object's box is cut for a child model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CropMode {
    /// The box clamped to the frame, stretched to the input size (classifiers).
    #[default]
    Stretch,
    /// The box clamped to the frame, scaled to fit keeping its aspect, padded with `pad` at
    /// `placement`.
    Fit,
    /// The box clamped to the frame, scaled to the input height, its width following the
    /// aspect but capped at the input width (squeezed beyond), padded on the right with
    /// `pad` (PP-OCR's text-line crops for orientation and recognition).
    FitHeight,
    /// The box as is, stretched to the input size, the part outside the frame filled with
    /// `pad` (MTCNN's square boxes at the frame edge).
    Pad,
}

/// Resize mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Resize {
    /// Scale to fit, keep aspect, pad the rest.
    Letterbox,
    /// Scale each axis to the input size.
    #[default]
    Stretch,
}

impl ModelEntry {
    /// The engine-side description of this model, paths resolved (an upstream detector
    /// has an empty path: it is never loaded). Engines that plan per batch size prepare
    /// 1..=`max_batch` at load, so a load's cost (what the profile's t_l measures and
    /// the scheduler weighs) includes them instead of the first batch of each size.
    pub fn source(&self, resolve: impl Fn(&Path) -> PathBuf, max_batch: usize) -> ModelSource {
        let path = self.path.as_deref().map(resolve).unwrap_or_default();
        let mut s = ModelSource::new(self.name.clone(), path);
        s.input_shapes = self.input_shapes.clone();
        s.prepare_batches = (1..=max_batch.max(1)).collect();
        s
    }
}
