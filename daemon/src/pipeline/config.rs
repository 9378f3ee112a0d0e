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
use camdnn_vision::blazeface::BlazeFaceConfig;
use camdnn_vision::dbnet::DbNetConfig;
use camdnn_vision::mtcnn::{PnetConfig, PyramidConfig};
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
    /// Global step interval, ms: the longest time between two global
    /// steps, counted from the last one, timer or trigger (0: no timer;
    /// `policy::stepper`).
    #[serde(default = "d_epoch")]
    pub epoch_ms: f64,
    /// A dropped frame (its deadline passed, or the server superseded it or
    /// was overloaded) brings the global step forward when none has run yet
    /// or the last one ran at least this long ago, ms (0: the epoch timer alone;
    /// `policy::stepper`).
    #[serde(default = "d_drop_step_gap")]
    pub drop_step_gap_ms: f64,
    /// Adapt while running: every finished batch refines the live
    /// estimates the scheduler plans with, and a lasting change of a
    /// processor's speed or of the scene mix runs the global step at once
    /// (`policy::adapt`).
    #[serde(default)]
    pub adapt: bool,
    /// With `adapt`: where the live estimates are written as a profile file
    /// (the format `camdnnd profile` writes) when the pipeline stops, at
    /// shutdown and for the old pipeline on a SIGHUP reload.
    #[serde(default)]
    pub adapt_profile_out: Option<PathBuf>,
    /// Frames processed at once; more wait at the server (newest wins).
    #[serde(default = "d_in_flight")]
    pub max_in_flight: usize,
    /// Threads preparing frames and crops.
    #[serde(default = "d_prep")]
    pub prep_threads: usize,
    /// Most objects one frame may bring (its upstream boxes, or what its detector found):
    /// the highest scores are kept before any crop is cut, the rest are answered as
    /// `objects_dropped` in the frame's `Result`. Bounds a frame's crops and memory
    /// (`docs/operations.md`, "Limits").
    #[serde(default = "d_max_objects")]
    pub max_objects: usize,
    /// Late binding: the most queued work, ms, a processor may have for the
    /// scheduler to place another batch on it. A batch whose chosen host is
    /// further behind waits in the scheduler and is placed when some host
    /// catches up, with what is known then (absent: place every batch at
    /// once, as the paper's dispatcher does).
    #[serde(default)]
    pub dispatch_ahead_ms: Option<f64>,
    /// Deadline admission (`policy::admission`): a frame with a deadline
    /// that cannot be answered by it, even with every t_e at the live
    /// estimates' mean + this many standard deviations (0: the mean;
    /// without `adapt` there is no spread), is answered `Dropped` at once
    /// instead of taking processor time (absent: off).
    #[serde(default)]
    pub deadline_admission: Option<f64>,
    /// Real-time dropping (`policy::admission`, the simulator's default),
    /// ms: a frame whose detector no processor could start within this long
    /// (queued and held work, and its load) is answered `Dropped`
    /// (`overloaded`) before it costs any work; one with objects is, after
    /// its detector, when some processor has more queued work than what its
    /// age leaves of this. The frames already in the pipeline keep their
    /// deadlines; a frame with no objects is always answered. One camera
    /// frame period is the simulator's setting (absent: off).
    #[serde(default)]
    pub drop_behind_ms: Option<f64>,
    /// Real-time dropping held to each camera's own period, estimated from
    /// its frames (`policy::frame_period`: their capture times, else their
    /// arrival, per sequence number): a frame is dropped as with
    /// `drop_behind_ms` at this many of its stream's frame periods, so the
    /// operator need not know the cameras' rates. 1 is the simulator's
    /// setting. A stream's first frame has no period yet and is not dropped.
    /// Not with `drop_behind_ms` (absent: off).
    #[serde(default)]
    pub drop_behind_periods: Option<f64>,
    /// Optional learned global policy (ONNX + sidecar from `ilmodel export`).
    #[serde(default)]
    pub policy: Option<PolicyFiles>,
    /// The scheduler that places batches: `camdnn` (local dispatcher plus the
    /// global step, with `policy` when given, else the greedy planner), or a
    /// baseline of the simulator by name (`camdnn-local`, `heft`, `cq`, ...)
    /// for side-by-side comparisons on the real pipeline.
    #[serde(default = "d_scheduler")]
    pub scheduler: String,
    /// Limits on engine calls and on a pipeline that makes no progress
    /// (`[pipeline.stall]`, `pipeline::stall`).
    #[serde(default)]
    pub stall: super::stall::StallConfig,
    /// Following each stream's objects across frames, and the detector interval
    /// (`track_config.rs`; absent: off).
    #[serde(default)]
    pub track: Option<camdnn_vision::track::TrackerConfig>,
    /// The processing units.
    #[serde(rename = "processor")]
    pub processors: Vec<ProcessorEntry>,
    /// The models, detectors first or not: the graph comes from `parent`.
    #[serde(rename = "model")]
    pub models: Vec<ModelEntry>,
}

fn d_scheduler() -> String {
    "camdnn".into()
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
fn d_drop_step_gap() -> f64 {
    camdnn_policy::stepper::DROP_STEP_GAP_MS
}
fn d_in_flight() -> usize {
    2
}
fn d_prep() -> usize {
    1
}
fn d_max_objects() -> usize {
    64
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

/// How a model's outputs become results.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, tag = "kind", rename_all = "snake_case")]
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
    /// Detector: CenterNet with its detections decoded in the graph (an output `[1, N, 6]`:
    /// `x0, y0, x1, y1` in input pixels, score, class index), as the TF.js CenterNet
    /// (MobileNetV3, COCO-80) of the Human library converts (`scripts/tfjs_to_onnx.py`).
    /// Suppression defaults to the model authors' score 0.2 and class-agnostic IoU 0.4.
    Centernet {
        /// Class names by index (default: the 80 COCO classes).
        #[serde(default = "d_coco")]
        labels: Vec<String>,
        /// Suppression.
        #[serde(default = "d_centernet_nms")]
        nms: NmsConfig,
    },
    /// Single-person pose on a person's `fit` crop (MoveNet, output `[1, 1, 17, 3]`): the 17
    /// COCO keypoints in frame pixels (output `keypoints`, dims [17, 3]: x, y, score). With
    /// `face`, the face box the head keypoints imply (output `face_box`: x0, y0, x1, y1) is
    /// what this model's children crop; when no face is seen they do not run.
    Movenet {
        /// How the face box is derived (absent: children crop the person's box).
        #[serde(default)]
        face: Option<FaceFromPose>,
    },
    /// Gender (and, with `age`, age) of a face (the Human library's `faceres`: a 100-way age
    /// softmax and a gender sigmoid, told apart by their sizes): output `male` (the sigmoid,
    /// above 0.5 male) and, with `age = true`, `age` (years).
    AgeGender {
        /// Report the age head. Off by default: faceres's age head gives about 29 years for
        /// almost every woman and 39 for almost every man, in the Human library's own pipeline
        /// too (docs/decisions.md), so it tells nothing the gender does not.
        #[serde(default)]
        age: bool,
    },
    /// Detector: DBNet text probability map; every box is class "text".
    Dbnet {
        /// Post-processing.
        #[serde(default)]
        db: DbNetConfig,
    },
    /// Detector stage done upstream (e.g. DeepStream's primary detector): there is no
    /// model file, it is never loaded or run, and frames must carry their detections
    /// (a frame without them is rejected). Its profile entry should be a negligible cost.
    Upstream {
        /// Class names by id: a box whose class is sent as id `i` (protocol `class` kind 0,
        /// "the detector's label index") is the class `labels[i]` and routed by that name.
        #[serde(default)]
        labels: Vec<String>,
    },
    /// Detector: MTCNN P-Net on an image pyramid (`input.pyramid`); every box is class
    /// `label`. Outputs are told apart by their channels (2 = face/not face, 4 = box
    /// regression); the map layout follows `input.norm.layout` (`nwhc` = transposed).
    MtcnnPnet {
        /// Decoding and suppression (within a scale and across scales).
        #[serde(default)]
        pnet: PnetConfig,
        /// Class name of the candidates (route R-Net with it).
        #[serde(default = "d_face")]
        label: String,
    },
    /// MTCNN R-Net on a candidate's crop: rejects it (the object is not reported and its
    /// children do not run) or refines its box to the square its children crop.
    MtcnnRnet {
        /// Face probability a candidate must exceed.
        #[serde(default = "d_mtcnn_threshold")]
        threshold: f32,
    },
    /// MTCNN O-Net: rejects the candidate or gives the final box and the five landmarks
    /// (output `landmarks`, dims [5, 2], frame pixels x, y). When the frame's objects are
    /// all done, faces overlapping a better one by more than `nested_overlap` of the
    /// smaller area are dropped (MTCNN's last "Min" suppression).
    MtcnnOnet {
        /// Face probability a candidate must exceed.
        #[serde(default = "d_mtcnn_threshold")]
        threshold: f32,
        /// Overlap (of the smaller box) above which the worse of two faces is dropped.
        #[serde(default = "d_mtcnn_threshold")]
        nested_overlap: f32,
    },
    /// Detector: MediaPipe BlazeFace (TFLite face detector; outputs: box regressions
    /// `[1, N, 16]` and logits `[1, N, 1]`); every box is class `label`. `nms`'s
    /// score threshold is the detector's minimum score.
    Blazeface {
        /// Anchors and decoding.
        #[serde(default)]
        blazeface: BlazeFaceConfig,
        /// Suppression.
        #[serde(default = "d_nms")]
        nms: NmsConfig,
        /// Class name of the faces (route the landmark model with it).
        #[serde(default = "d_face")]
        label: String,
    },
    /// MediaPipe face landmarks on the region `input.roi_scale` cuts around the face:
    /// rejects a crop whose face flag is below `threshold`, else gives the output
    /// `landmarks` (dims `[468, 3]`, frame pixels x, y and relative depth z).
    FaceLandmarks {
        /// Face probability the crop must reach.
        #[serde(default = "d_face_flag")]
        threshold: f32,
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
    /// Text recognition with CTC greedy decoding. The character dictionary (one per
    /// line, blank is index 0) comes from `dict_file` or from the model file's ONNX
    /// metadata entry `dict_metadata` (PP-OCRv4 rec ships it as `character`).
    Ctc {
        /// Character dictionary file.
        #[serde(default)]
        dict_file: Option<PathBuf>,
        /// ONNX metadata key holding the dictionary.
        #[serde(default)]
        dict_metadata: Option<String>,
        /// Append a space character to the dictionary.
        #[serde(default = "d_true")]
        use_space: bool,
    },
    /// Raw named tensors.
    Tensors,
}

/// How a face box is read from pose keypoints (`vision::pose::face_box`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaceFromPose {
    /// Confidence the nose and both eyes need.
    #[serde(default = "d_face_score")]
    pub min_score: f32,
    /// How much larger than the head keypoints' extent the box is (0.2 = 20 %: 3.5 eye
    /// distances, the crop the Human library cuts for faceres).
    #[serde(default = "d_face_margin")]
    pub margin: f32,
    /// Smallest face side in frame pixels; a smaller face is not classified (faceres's
    /// gender drifts to its prior below 48 px: docs/decisions.md).
    #[serde(default = "d_face_min_side")]
    pub min_side: f32,
}

impl FaceFromPose {
    /// The vision-side rule, after checking every field (`model` names the model in errors).
    pub fn rule(&self, model: &str) -> anyhow::Result<camdnn_vision::pose_face::FaceRule> {
        if !(self.min_score.is_finite() && (0.0..=1.0).contains(&self.min_score)) {
            bail!(
                "model {model:?}: output.face.min_score = {}: must be in 0..=1",
                self.min_score
            );
        }
        if !(self.margin.is_finite() && self.margin >= 0.0) {
            bail!(
                "model {model:?}: output.face.margin = {}: must be a finite share >= 0",
                self.margin
            );
        }
        if !(self.min_side.is_finite() && self.min_side >= 1.0) {
            bail!(
                "model {model:?}: output.face.min_side = {}: must be at least 1 pixel",
                self.min_side
            );
        }
        Ok(camdnn_vision::pose_face::FaceRule {
            min_score: self.min_score,
            margin: self.margin,
            min_side: self.min_side,
        })
    }
}

fn d_face_score() -> f32 {
    0.3
}
fn d_face_margin() -> f32 {
    0.2
}
fn d_face_min_side() -> f32 {
    48.0
}
fn d_coco() -> Vec<String> {
    camdnn_vision::centernet::COCO_LABELS
        .iter()
        .map(|s| s.to_string())
        .collect()
}
fn d_centernet_nms() -> NmsConfig {
    NmsConfig {
        iou_threshold: 0.4,
        score_threshold: 0.2,
        max_detections: 100,
        class_agnostic: true,
    }
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
fn d_face() -> String {
    "face".into()
}
fn d_face_flag() -> f32 {
    0.5
}
fn d_mtcnn_threshold() -> f32 {
    0.7
}

impl OutputSpec {
    /// Whether this output makes a model a detector (a graph root).
    pub fn is_detector(&self) -> bool {
        matches!(
            self,
            OutputSpec::Yolov8 { .. }
                | OutputSpec::Centernet { .. }
                | OutputSpec::Ssd { .. }
                | OutputSpec::Dbnet { .. }
                | OutputSpec::Upstream { .. }
                | OutputSpec::MtcnnPnet { .. }
                | OutputSpec::Blazeface { .. }
        )
    }

    /// Whether this is an upstream-only detector (no model, never run).
    pub fn is_upstream(&self) -> bool {
        matches!(self, OutputSpec::Upstream { .. })
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
        let spec = self.system_spec(measured.name, measured.profile);
        System::from_spec(&spec)
            .with_context(|| format!("pipeline config with the profile {}", path.display()))
    }

    /// The system spec for these processors and models with a given profile
    /// table; `name` is the board's (a learned policy is checked against it).
    pub fn system_spec(
        &self,
        name: String,
        profile: camdnn_policy::spec::ProfileSpec,
    ) -> SystemSpec {
        SystemSpec {
            name,
            max_batch: self.max_batch,
            processors: self
                .processors
                .iter()
                .map(|p| ProcessorSpec {
                    utilisation_cap: p.utilisation_cap,
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
        self.stall.validate()?;
        if self.processors.is_empty() {
            bail!("[pipeline] needs at least one [[pipeline.processor]]");
        }
        if self.models.is_empty() {
            bail!("[pipeline] needs at least one [[pipeline.model]]");
        }
        for m in &self.models {
            match (&m.parent, m.output.is_detector()) {
                (None, false) => bail!(
                    "model {:?} has no parent, so it is a detector, but its output kind is not one (yolov8, centernet, ssd, dbnet, mtcnn_pnet, upstream)",
                    m.name
                ),
                (Some(_), true) => bail!("model {:?} has a detector output but a parent; detectors are graph roots", m.name),
                _ => {}
            }
            if !m.output.is_upstream() && (m.input.width == 0 || m.input.height == 0) {
                bail!(
                    "model {:?}: input width and height must be positive",
                    m.name
                );
            }
            match (&m.path, m.output.is_upstream()) {
                (Some(p), true) => bail!(
                    "model {:?} is an upstream detector (never loaded) but names the file {}; remove `path`",
                    m.name,
                    p.display()
                ),
                (None, false) => bail!("model {:?} needs `path` (its model file)", m.name),
                _ => {}
            }
            let pnet = matches!(m.output, OutputSpec::MtcnnPnet { .. });
            match (&m.input.pyramid, pnet) {
                (None, true) => bail!(
                    "model {:?}: output kind mtcnn_pnet needs input.pyramid (P-Net runs on an image pyramid)",
                    m.name
                ),
                (Some(_), false) => bail!(
                    "model {:?}: input.pyramid is only supported with output kind mtcnn_pnet",
                    m.name
                ),
                _ => {}
            }
            if matches!(m.output, OutputSpec::Movenet { .. }) && m.input.crop != CropMode::Fit {
                bail!(
                    "model {:?}: output kind movenet needs input.crop = \"fit\" (its keypoints are read back through the fit crop)",
                    m.name
                );
            }
            if let OutputSpec::Movenet { face: Some(face) } = &m.output {
                face.rule(&m.name)?;
            }
            if let OutputSpec::Ctc {
                dict_file,
                dict_metadata,
                ..
            } = &m.output
            {
                if dict_file.is_some() == dict_metadata.is_some() {
                    bail!(
                        "model {:?}: output kind ctc needs exactly one of dict_file and dict_metadata",
                        m.name
                    );
                }
            }
        }
        if !(self.wait_ms.is_finite() && self.wait_ms >= 0.0) {
            bail!("pipeline.wait_ms = {}: must be >= 0", self.wait_ms);
        }
        if !(self.drop_step_gap_ms.is_finite() && self.drop_step_gap_ms >= 0.0) {
            bail!(
                "pipeline.drop_step_gap_ms = {}: must be >= 0 (0: the epoch timer alone)",
                self.drop_step_gap_ms
            );
        }
        for q in &self.processors {
            if let Some(drill) = &q.throttle_drill {
                drill
                    .throttle()
                    .with_context(|| format!("pipeline.processor {:?}", q.name))?;
            }
        }
        if let Some(z) = self.deadline_admission {
            if !(z.is_finite() && z >= 0.0) {
                bail!("pipeline.deadline_admission = {z}: must be a finite number of standard deviations >= 0 (or left out)");
            }
        }
        if let Some(b) = self.drop_behind_ms {
            if !(b.is_finite() && b >= 0.0) {
                bail!("pipeline.drop_behind_ms = {b}: must be a finite number of ms >= 0 (or left out)");
            }
        }
        if let Some(n) = self.drop_behind_periods {
            if !(n.is_finite() && n > 0.0) {
                bail!("pipeline.drop_behind_periods = {n}: must be a finite number of frame periods > 0 (or left out)");
            }
            if self.drop_behind_ms.is_some() {
                bail!("pipeline.drop_behind_periods and pipeline.drop_behind_ms are both set: set one (a fixed limit in ms, or one held to each camera's period)");
            }
        }
        if let Some(h) = self.dispatch_ahead_ms {
            if !(h.is_finite() && h >= 0.0) {
                bail!("pipeline.dispatch_ahead_ms = {h}: must be >= 0 (or left out)");
            }
        }
        super::track_config::check(self)?;
        if self.max_in_flight == 0 || self.prep_threads == 0 || self.max_objects == 0 {
            bail!(
                "pipeline.max_in_flight, pipeline.prep_threads and pipeline.max_objects must be at least 1"
            );
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
            utilisation_cap: self.utilisation_cap,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    const PROCS: &str = r#"
profile = "p.toml"
[[processor]]
name = "cpu"
kind = "cpu"
max_resident = 2
engine = "tract"
"#;

    fn parse(models: &str) -> anyhow::Result<PipelineConfig> {
        let cfg: PipelineConfig = toml::from_str(&format!("{PROCS}{models}"))?;
        cfg.check()?;
        Ok(cfg)
    }

    fn err(models: &str) -> String {
        format!("{:#}", parse(models).unwrap_err())
    }

    const CLASSIFIER: &str = r#"
[[model]]
name = "cls"
path = "c.onnx"
parent = "det"
classes = ["person"]
input = { width = 8, height = 8, norm = {} }
output = { kind = "topk" }
"#;

    #[test]
    fn bad_face_settings_are_refused_naming_the_field() {
        let pose = |face: &str| {
            format!(
                "[[model]]\nname = \"det\"\noutput = {{ kind = \"upstream\" }}\n\
                 [[model]]\nname = \"pose\"\npath = \"m.onnx\"\nparent = \"det\"\n\
                 input = {{ width = 192, height = 192, crop = \"fit\", norm = {{}} }}\n\
                 output = {{ kind = \"movenet\", face = {{ {face} }} }}\n"
            )
        };
        let ok = parse(&pose("")).unwrap();
        let OutputSpec::Movenet { face: Some(f) } = &ok.models[1].output else {
            panic!("movenet with a face")
        };
        assert_eq!((f.min_score, f.margin, f.min_side), (0.3, 0.2, 48.0));
        for (face, field) in [
            ("min_side = 0.5", "output.face.min_side = 0.5"),
            ("min_score = 1.5", "output.face.min_score = 1.5"),
            ("margin = -1.0", "output.face.margin = -1"),
        ] {
            let e = err(&pose(face));
            assert!(e.contains(field) && e.contains("\"pose\""), "{face}: {e}");
        }
    }

    #[test]
    fn an_upstream_detector_has_no_file_and_no_input() {
        let cfg = parse(&format!(
            "[[model]]\nname = \"det\"\noutput = {{ kind = \"upstream\" }}\n{CLASSIFIER}"
        ))
        .unwrap();
        assert!(cfg.models[0].output.is_upstream() && cfg.models[0].output.is_detector());
        assert_eq!(
            cfg.models[0].source(|p| p.to_path_buf(), 1).path,
            PathBuf::new()
        );
        let e = err(&format!(
            "[[model]]\nname = \"det\"\npath = \"d.onnx\"\noutput = {{ kind = \"upstream\" }}\n{CLASSIFIER}"
        ));
        assert!(
            e.contains("upstream detector") && e.contains("remove `path`"),
            "{e}"
        );
        let e = err(&format!(
            "[[model]]\nname = \"det\"\ninput = {{ width = 8, height = 8, norm = {{}} }}\noutput = {{ kind = \"dbnet\" }}\n{CLASSIFIER}"
        ));
        assert!(e.contains("needs `path`"), "{e}");
    }

    #[test]
    fn pnet_and_the_pyramid_go_together() {
        let pnet = |input: &str| {
            format!("[[model]]\nname = \"det\"\npath = \"p.onnx\"\ninput = {{ width = 64, height = 64, norm = {{}}{input} }}\noutput = {{ kind = \"mtcnn_pnet\" }}\n{CLASSIFIER}")
        };
        let cfg = parse(&pnet(", pyramid = { min_face = 30 }")).unwrap();
        assert_eq!(cfg.models[0].input.pyramid.as_ref().unwrap().min_face, 30.0);
        assert!(err(&pnet("")).contains("needs input.pyramid"));
        let e = err(&format!(
            "[[model]]\nname = \"det\"\npath = \"d.onnx\"\ninput = {{ width = 8, height = 8, norm = {{}}, pyramid = {{}} }}\noutput = {{ kind = \"dbnet\" }}\n{CLASSIFIER}"
        ));
        assert!(
            e.contains("only supported with output kind mtcnn_pnet"),
            "{e}"
        );
    }

    #[test]
    fn the_drop_step_gap_is_a_number_of_ms_at_least_zero() {
        let models =
            format!("[[model]]\nname = \"det\"\noutput = {{ kind = \"upstream\" }}\n{CLASSIFIER}");
        let with = |line: &str| -> anyhow::Result<PipelineConfig> {
            let cfg: PipelineConfig = toml::from_str(&format!("{line}\n{PROCS}{models}"))?;
            cfg.check()?;
            Ok(cfg)
        };
        // Absent: the policy crate's default, a second.
        assert_eq!(
            with("").unwrap().drop_step_gap_ms,
            camdnn_policy::stepper::DROP_STEP_GAP_MS
        );
        assert_eq!(
            with("drop_step_gap_ms = 0.0").unwrap().drop_step_gap_ms,
            0.0
        );
        for bad in ["-1.0", "nan", "inf"] {
            let e = format!(
                "{:#}",
                with(&format!("drop_step_gap_ms = {bad}")).unwrap_err()
            );
            assert!(e.contains("pipeline.drop_step_gap_ms"), "{bad}: {e}");
        }
    }

    #[test]
    fn ctc_needs_exactly_one_dictionary_source() {
        let rec = |out: &str| {
            format!("[[model]]\nname = \"det\"\noutput = {{ kind = \"upstream\" }}\n[[model]]\nname = \"rec\"\npath = \"r.onnx\"\nparent = \"det\"\nclasses = [\"text\"]\ninput = {{ width = 8, height = 8, crop = \"fit_height\", norm = {{}} }}\noutput = {out}\n")
        };
        parse(&rec(r#"{ kind = "ctc", dict_metadata = "character" }"#)).unwrap();
        parse(&rec(r#"{ kind = "ctc", dict_file = "keys.txt" }"#)).unwrap();
        for bad in [
            r#"{ kind = "ctc" }"#,
            r#"{ kind = "ctc", dict_file = "k.txt", dict_metadata = "character" }"#,
        ] {
            assert!(err(&rec(bad)).contains("exactly one of dict_file and dict_metadata"));
        }
        assert!(parse(&rec(r#"{ kind = "ctc", dict_metdata = "x" }"#)).is_err());
    }
}
