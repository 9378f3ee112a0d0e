//! How a model's outputs are read: the decoder its config names, built
//! once, and the dispatch of one item's outputs to the reader of its kind
//! ([`super::objects`] for detectors, [`super::results`] per object).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use camdnn_engine::Tensor;
use camdnn_vision::blazeface::BlazeFaceDecoder;
use camdnn_vision::ctc::CtcDecoder;
use camdnn_vision::dbnet::DbNetConfig;
use camdnn_vision::mtcnn::{self, MapLayout, PnetConfig};
use camdnn_vision::pose_face::FaceRule;
use camdnn_vision::ssd::SsdDecoder;
use camdnn_vision::{Detection, Layout, NmsConfig, Placement};

use super::decoded::{Decoded, Found, ItemContext};
use super::results::LandmarkInput;
use super::tensors::named_as;
use super::{objects, results};
use crate::pipeline::config::{ModelEntry, OutputSpec};
use crate::pipeline::onnx_meta;

/// How a model's outputs are read.
#[derive(Debug)]
pub enum Decoder {
    /// YOLOv8 detector.
    Yolo { labels: Vec<String>, nms: NmsConfig },
    /// CenterNet detector (detections decoded in the graph).
    Centernet { labels: Vec<String>, nms: NmsConfig },
    /// MoveNet pose on a person's fit crop, optionally giving its children the face box.
    Movenet {
        /// The crop's input size and placement (keypoints map back through them).
        input: (u32, u32, Placement),
        face: Option<FaceRule>,
    },
    /// Gender of a face, and its age when `age`.
    AgeGender { age: bool },
    /// SSD detector.
    Ssd {
        labels: Vec<String>,
        decoder: Box<SsdDecoder>,
        nms: NmsConfig,
    },
    /// DBNet text detector.
    Dbnet { config: DbNetConfig },
    /// Detections come with the frame; never run. `labels` name class ids.
    Upstream { labels: Vec<String> },
    /// MTCNN P-Net on a canvas of pyramid scales.
    Pnet {
        config: PnetConfig,
        label: String,
        layout: MapLayout,
    },
    /// MTCNN R-Net: reject or refine a candidate.
    Rnet { threshold: f32 },
    /// MTCNN O-Net: reject, or final box and landmarks; then frame-wide suppression.
    Onet { threshold: f32, nested_overlap: f32 },
    /// MediaPipe BlazeFace detector.
    Blazeface {
        decoder: Box<BlazeFaceDecoder>,
        nms: NmsConfig,
        label: String,
    },
    /// MediaPipe face landmarks on the square region `roi_scale` cuts around the face.
    FaceLandmarks {
        threshold: f32,
        roi_scale: f32,
        input_width: f32,
        input_height: f32,
    },
    /// Top-k classifier.
    TopK {
        k: usize,
        labels: Vec<String>,
        softmax: bool,
    },
    /// 0/180 orientation.
    Orientation { threshold: f32 },
    /// CTC text recogniser.
    Ctc { decoder: CtcDecoder },
    /// Raw tensors.
    Tensors,
}

impl Decoder {
    pub(super) fn new(m: &ModelEntry, resolve: &dyn Fn(&Path) -> PathBuf) -> anyhow::Result<Self> {
        Ok(match &m.output {
            OutputSpec::Yolov8 { labels, nms } => Decoder::Yolo {
                labels: labels.clone(),
                nms: nms.clone(),
            },
            OutputSpec::Centernet { labels, nms } => Decoder::Centernet {
                labels: labels.clone(),
                nms: nms.clone(),
            },
            OutputSpec::Movenet { face } => Decoder::Movenet {
                input: (m.input.width, m.input.height, m.input.placement.placement()),
                face: face.as_ref().map(|f| f.rule(&m.name)).transpose()?,
            },
            OutputSpec::AgeGender { age } => Decoder::AgeGender { age: *age },
            OutputSpec::Ssd { labels, ssd, nms } => Decoder::Ssd {
                labels: labels.clone(),
                decoder: Box::new(
                    SsdDecoder::new(ssd.clone())
                        .with_context(|| format!("model {:?}: output.ssd", m.name))?,
                ),
                nms: nms.clone(),
            },
            OutputSpec::Dbnet { db } => Decoder::Dbnet { config: db.clone() },
            OutputSpec::Upstream { labels } => Decoder::Upstream {
                labels: labels.clone(),
            },
            OutputSpec::MtcnnPnet { pnet, label } => Decoder::Pnet {
                config: pnet.clone(),
                label: label.clone(),
                layout: match m.input.norm.layout {
                    Layout::Nwhc => MapLayout::Whc,
                    _ => MapLayout::Hwc,
                },
            },
            OutputSpec::MtcnnRnet { threshold } => Decoder::Rnet {
                threshold: *threshold,
            },
            OutputSpec::MtcnnOnet {
                threshold,
                nested_overlap,
            } => Decoder::Onet {
                threshold: *threshold,
                nested_overlap: *nested_overlap,
            },
            OutputSpec::Blazeface {
                blazeface,
                nms,
                label,
            } => Decoder::Blazeface {
                decoder: Box::new(
                    BlazeFaceDecoder::new(blazeface.clone())
                        .with_context(|| format!("model {:?}: output.blazeface", m.name))?,
                ),
                nms: nms.clone(),
                label: label.clone(),
            },
            OutputSpec::FaceLandmarks { threshold } => Decoder::FaceLandmarks {
                threshold: *threshold,
                roi_scale: m.input.roi_scale.unwrap_or(1.0),
                input_width: m.input.width as f32,
                input_height: m.input.height as f32,
            },
            OutputSpec::Topk {
                k,
                labels,
                labels_file,
                softmax,
            } => {
                let labels = match labels_file {
                    Some(f) => read_lines(&resolve(f))?,
                    None => labels.clone(),
                };
                Decoder::TopK {
                    k: (*k).max(1),
                    labels,
                    softmax: *softmax,
                }
            }
            OutputSpec::Orientation { threshold } => Decoder::Orientation {
                threshold: *threshold,
            },
            OutputSpec::Ctc {
                dict_file,
                dict_metadata,
                use_space,
            } => {
                let (text, from) = match (dict_file, dict_metadata, &m.path) {
                    (Some(f), _, _) => {
                        let path = resolve(f);
                        let text = std::fs::read_to_string(&path).with_context(|| {
                            format!("model {:?}: reading dict_file {}", m.name, path.display())
                        })?;
                        (text, format!("dict_file {}", path.display()))
                    }
                    (None, Some(key), Some(model)) => {
                        let path = resolve(model);
                        let text = onnx_meta::read_metadata(&path, key).with_context(|| {
                            format!("model {:?}: dict_metadata {key:?}", m.name)
                        })?;
                        (text, format!("metadata {key:?} of {}", path.display()))
                    }
                    _ => bail!(
                        "model {:?}: output kind ctc needs dict_file, or dict_metadata with a model path",
                        m.name
                    ),
                };
                Decoder::Ctc {
                    decoder: CtcDecoder::from_dict_text(&text, *use_space)
                        .with_context(|| format!("model {:?}: {from}", m.name))?,
                }
            }
            OutputSpec::Tensors => Decoder::Tensors,
        })
    }

    /// The frame-wide suppression over the objects this model refined, applied when
    /// the frame completes: the overlap (of the smaller box) above which the worse of
    /// two objects is dropped.
    pub fn final_suppression(&self) -> Option<f32> {
        match self {
            Decoder::Onet { nested_overlap, .. } => Some(*nested_overlap),
            _ => None,
        }
    }

    /// Whether this is an upstream detector (never loaded or run).
    pub fn is_upstream(&self) -> bool {
        matches!(self, Decoder::Upstream { .. })
    }

    /// A detector's class names by class id (empty for detectors without ids).
    pub fn labels(&self) -> &[String] {
        match self {
            Decoder::Yolo { labels, .. }
            | Decoder::Ssd { labels, .. }
            | Decoder::Upstream { labels } => labels,
            _ => &[],
        }
    }

    /// Combines the objects of all of a frame's detector items (pyramid canvases:
    /// suppression across scales; one item: as they are).
    pub fn merge(&self, found: Vec<Found>) -> Vec<Found> {
        match self {
            Decoder::Pnet { config, label, .. } => {
                let dets: Vec<Detection> = found.into_iter().map(|f| f.detection).collect();
                named_as(mtcnn::merge_pnet(&dets, config), label)
            }
            _ => found,
        }
    }

    /// Reads one item's outputs (batch dim 1).
    pub fn decode(&self, outputs: &[Tensor], ctx: &ItemContext<'_>) -> anyhow::Result<Decoded> {
        let transform = ctx
            .regions
            .first()
            .context("the item has no transform to the frame")?;
        match self {
            Decoder::Yolo { labels, nms } => objects::yolo(outputs, transform, labels, nms),
            Decoder::Centernet { labels, nms } => {
                objects::centernet(outputs, transform, labels, nms)
            }
            Decoder::Ssd {
                labels,
                decoder,
                nms,
            } => objects::ssd(outputs, transform, labels, decoder, nms),
            Decoder::Dbnet { config } => objects::dbnet(outputs, transform, config),
            Decoder::Upstream { .. } => {
                bail!("the upstream detector is never run, so it has no outputs to read")
            }
            Decoder::Pnet {
                config,
                label,
                layout,
            } => objects::pnet(outputs, ctx.regions, config, label, *layout),
            Decoder::Blazeface {
                decoder,
                nms,
                label,
            } => objects::blazeface(outputs, transform, decoder, nms, label),
            Decoder::Movenet { input, face } => {
                results::movenet(outputs, transform, ctx.bbox, *input, face.as_ref())
            }
            Decoder::AgeGender { age } => results::age_gender(outputs, *age),
            Decoder::Rnet { threshold } => results::rnet(outputs, ctx.bbox, *threshold),
            Decoder::Onet { threshold, .. } => results::onet(outputs, ctx.bbox, *threshold),
            Decoder::FaceLandmarks {
                threshold,
                roi_scale,
                input_width,
                input_height,
            } => results::face_landmarks(
                outputs,
                ctx.bbox,
                LandmarkInput {
                    threshold: *threshold,
                    roi_scale: *roi_scale,
                    width: *input_width,
                    height: *input_height,
                },
            ),
            Decoder::TopK { k, labels, softmax } => results::top_k(outputs, *k, labels, *softmax),
            Decoder::Orientation { threshold } => results::orientation(outputs, *threshold),
            Decoder::Ctc { decoder } => results::ctc(outputs, decoder),
            Decoder::Tensors => Ok(results::raw_tensors(outputs)),
        }
    }
}

/// A file's lines (a labels file).
fn read_lines(path: &Path) -> anyhow::Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text.lines().map(str::to_string).collect())
}
