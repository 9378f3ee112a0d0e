//! A model's `output`: how its outputs become detections or per-object
//! results, with each kind's settings.

use std::path::PathBuf;

use anyhow::bail;
use camdnn_vision::blazeface::BlazeFaceConfig;
use camdnn_vision::dbnet::DbNetConfig;
use camdnn_vision::mtcnn::PnetConfig;
use camdnn_vision::ssd::SsdConfig;
use camdnn_vision::NmsConfig;
use serde::Deserialize;

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
