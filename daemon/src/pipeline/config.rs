//! `[pipeline]`: the processors (with their engines), the models (files,
//! graph, pre- and post-processing), the profile the scheduler plans with,
//! and the scheduler's knobs. Together with the profile file it yields the
//! policy crate's `System`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use camdnn_engine::{EngineKind, ModelSource, OrtProvider, ProcessorConfig, QnnOptions};
use camdnn_policy::spec::{ModelSpec, ProcessorKind, ProcessorSpec, SystemSpec};
use camdnn_policy::System;
use camdnn_vision::dbnet::DbNetConfig;
use camdnn_vision::ssd::SsdConfig;
use camdnn_vision::{NmsConfig, NormConfig};
use serde::Deserialize;

/// `[pipeline]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// System file whose `[profile]` gives t_e / t_l for these processors and
    /// models (as written by `camdnnd profile`); a missing pair = unsupported.
    pub profile: PathBuf,
    /// n_b: the largest batch the scheduler forms.
    #[serde(default = "d_max_batch")]
    pub max_batch: usize,
    /// Sync-timer WaitTime, ms.
    #[serde(default = "d_wait")]
    pub wait_ms: f64,
    /// Global step interval, ms.
    #[serde(default = "d_epoch")]
    pub epoch_ms: f64,
    /// Frames processed at once; more wait at the server (newest wins).
    #[serde(default = "d_in_flight")]
    pub max_in_flight: usize,
    /// Threads preparing frames and crops.
    #[serde(default = "d_prep")]
    pub prep_threads: usize,
    /// Optional learned global policy (ONNX + sidecar from `ilmodel export`).
    #[serde(default)]
    pub policy: Option<PolicyFiles>,
    /// The processing units.
    #[serde(rename = "processor")]
    pub processors: Vec<ProcessorEntry>,
    /// The models, detectors first or not: the graph comes from `parent`.
    #[serde(rename = "model")]
    pub models: Vec<ModelEntry>,
}

fn d_max_batch() -> usize {
    4
}
fn d_wait() -> f64 {
    5.0
}
fn d_epoch() -> f64 {
    5000.0
}
fn d_in_flight() -> usize {
    2
}
fn d_prep() -> usize {
    1
}

/// Files of a learned global policy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFiles {
    /// The ONNX network.
    pub onnx: PathBuf,
    /// Its sidecar (feature layout, decoding).
    pub sidecar: PathBuf,
}

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
}

fn d_one() -> usize {
    1
}

/// `[[pipeline.model]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// Unique name (the profile's keys use it).
    pub name: String,
    /// Model file (ONNX or TFLite).
    pub path: PathBuf,
    /// The model whose outputs feed this one; none for a detector.
    #[serde(default)]
    pub parent: Option<String>,
    /// Detector classes routed to this model (children of a detector).
    #[serde(default)]
    pub classes: Vec<String>,
    /// Explicit input shapes (-1 leading = dynamic batch).
    #[serde(default)]
    pub input_shapes: BTreeMap<String, Vec<i64>>,
    /// How the input tensor is made from the frame or the object's crop.
    pub input: InputSpec,
    /// How the outputs are read.
    pub output: OutputSpec,
    /// Output shapes the sim engine returns (per-item dims, batch excluded).
    #[serde(default)]
    pub sim_outputs: BTreeMap<String, Vec<usize>>,
}

/// Input preparation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    /// Network input width, pixels.
    pub width: u32,
    /// Network input height, pixels.
    pub height: u32,
    /// Keep the aspect ratio and pad (letterbox) or stretch.
    #[serde(default)]
    pub resize: Resize,
    /// Pad colour for letterboxing.
    #[serde(default)]
    pub pad: [u8; 3],
    /// Normalisation to f32.
    pub norm: NormConfig,
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

/// How a model's outputs become results.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, tag = "kind", rename_all = "lowercase")]
pub enum OutputSpec {
    /// Detector: YOLOv8 `[1, 4+nc, N]`.
    Yolov8 {
        /// Class names by id.
        labels: Vec<String>,
        /// Suppression.
        #[serde(default = "d_nms")]
        nms: NmsConfig,
    },
    /// Detector: SSD with anchors (outputs: boxes then scores).
    Ssd {
        /// Class names by id.
        labels: Vec<String>,
        /// Decoding.
        #[serde(default)]
        ssd: SsdConfig,
        /// Suppression.
        #[serde(default = "d_nms")]
        nms: NmsConfig,
    },
    /// Detector: DBNet text probability map; every box is class "text".
    Dbnet {
        /// Post-processing.
        #[serde(default)]
        db: DbNetConfig,
    },
    /// Classifier: top-k labels.
    Topk {
        /// How many labels.
        #[serde(default = "d_k")]
        k: usize,
        /// Label names (index order); a file with one label per line also works.
        #[serde(default)]
        labels: Vec<String>,
        /// File with one label per line.
        #[serde(default)]
        labels_file: Option<PathBuf>,
        /// Apply softmax to the logits first.
        #[serde(default)]
        softmax: bool,
    },
    /// Per-box 0/180 degree orientation; rotates the crop its children see.
    Orientation {
        /// Rotate when the "180" score exceeds this.
        #[serde(default = "d_orient")]
        threshold: f32,
    },
    /// Text recognition with CTC greedy decoding.
    Ctc {
        /// Character dictionary, one per line (blank is index 0).
        dict_file: PathBuf,
        /// Append a space character to the dictionary.
        #[serde(default = "d_true")]
        use_space: bool,
    },
    /// Raw named tensors.
    Tensors,
}

fn d_nms() -> NmsConfig {
    toml::from_str("").expect("NmsConfig has defaults")
}
fn d_k() -> usize {
    5
}
fn d_orient() -> f32 {
    0.9
}
fn d_true() -> bool {
    true
}

impl OutputSpec {
    /// Whether this output makes a model a detector (a graph root).
    pub fn is_detector(&self) -> bool {
        matches!(
            self,
            OutputSpec::Yolov8 { .. } | OutputSpec::Ssd { .. } | OutputSpec::Dbnet { .. }
        )
    }
}

impl PipelineConfig {
    /// The scheduler's view: processors and graph from this config, timings
    /// from the profile file (resolved with `resolve`).
    pub fn system(&self, resolve: impl Fn(&Path) -> PathBuf) -> anyhow::Result<System> {
        let path = resolve(&self.profile);
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading profile {} (write one with `camdnnd profile`)",
                path.display()
            )
        })?;
        let measured = SystemSpec::from_toml(&text)
            .with_context(|| format!("in profile {}", path.display()))?;
        let spec = self.system_spec(measured.profile);
        System::from_spec(&spec)
            .with_context(|| format!("pipeline config with the profile {}", path.display()))
    }

    /// The system spec for these processors and models with a given profile table.
    pub fn system_spec(&self, profile: camdnn_policy::spec::ProfileSpec) -> SystemSpec {
        SystemSpec {
            name: String::from("camdnnd"),
            max_batch: self.max_batch,
            processors: self
                .processors
                .iter()
                .map(|p| ProcessorSpec {
                    name: p.name.clone(),
                    kind: p.kind,
                    max_resident: p.max_resident,
                    memory_budget_mb: p.memory_budget_mb,
                })
                .collect(),
            models: self
                .models
                .iter()
                .map(|m| ModelSpec {
                    name: m.name.clone(),
                    parent: m.parent.clone(),
                    classes: m.classes.clone(),
                })
                .collect(),
            profile,
        }
    }

    /// Cross-checks that the graph and the output kinds agree.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.processors.is_empty() {
            bail!("[pipeline] needs at least one [[pipeline.processor]]");
        }
        if self.models.is_empty() {
            bail!("[pipeline] needs at least one [[pipeline.model]]");
        }
        for m in &self.models {
            match (&m.parent, m.output.is_detector()) {
                (None, false) => bail!(
                    "model {:?} has no parent, so it is a detector, but its output kind is not one (yolov8, ssd, dbnet)",
                    m.name
                ),
                (Some(_), true) => bail!("model {:?} has a detector output but a parent; detectors are graph roots", m.name),
                _ => {}
            }
            if m.input.width == 0 || m.input.height == 0 {
                bail!(
                    "model {:?}: input width and height must be positive",
                    m.name
                );
            }
        }
        if !(self.wait_ms.is_finite() && self.wait_ms >= 0.0) {
            bail!("pipeline.wait_ms = {}: must be >= 0", self.wait_ms);
        }
        if self.max_in_flight == 0 || self.prep_threads == 0 {
            bail!("pipeline.max_in_flight and pipeline.prep_threads must be at least 1");
        }
        Ok(())
    }
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
        }
    }
}

impl ModelEntry {
    /// The engine-side description of this model, paths resolved.
    pub fn source(&self, resolve: impl Fn(&Path) -> PathBuf) -> ModelSource {
        let mut s = ModelSource::new(self.name.clone(), resolve(&self.path));
        s.input_shapes = self.input_shapes.clone();
        s
    }
}
