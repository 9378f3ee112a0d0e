//! Per-model pre- and post-processing: how a model's input tensor is made
//! from an image, and how its outputs become detections or per-object
//! results.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use camdnn_engine::Tensor;
use camdnn_protocol::{Label, OutputValue};
use camdnn_vision::ctc::CtcDecoder;
use camdnn_vision::dbnet::{decode_dbnet, DbNetConfig};
use camdnn_vision::ssd::SsdDecoder;
use camdnn_vision::{
    nms, BBox, Detection, NmsConfig, Normalizer, Placement, Preprocessor, RgbImage, Transform,
};

use super::config::{ModelEntry, OutputSpec, Resize};

/// A model's input side: resize and normalise an image (or a crop of one).
#[derive(Debug, Clone)]
pub struct InputPrep {
    width: u32,
    height: u32,
    resize: Resize,
    pad: [u8; 3],
    norm: Normalizer,
}

impl InputPrep {
    fn new(m: &ModelEntry) -> anyhow::Result<Self> {
        Ok(InputPrep {
            width: m.input.width,
            height: m.input.height,
            resize: m.input.resize,
            pad: m.input.pad,
            norm: Normalizer::new(m.input.norm.clone())
                .with_context(|| format!("model {:?}: input.norm", m.name))?,
        })
    }

    /// One item (batch 1) from the region `bbox` of `image` (the whole image
    /// when `None`), rotated 180 degrees when `rotate`; also the transform from
    /// network pixels back to frame pixels.
    pub fn prepare(
        &self,
        pre: &mut Preprocessor,
        image: &RgbImage,
        bbox: Option<BBox>,
        rotate: bool,
    ) -> anyhow::Result<(Tensor, Transform)> {
        let (mut img, transform) = match bbox {
            None => match self.resize {
                Resize::Stretch => pre.stretch(image, self.width, self.height)?,
                Resize::Letterbox => {
                    pre.letterbox(image, self.width, self.height, self.pad, Placement::Center)?
                }
            },
            Some(b) => {
                let crop = pre.crop(image, b, self.width, self.height)?;
                (crop, Transform::identity(self.width, self.height))
            }
        };
        if rotate {
            img.rotate_180();
        }
        let t = self.norm.tensor(&img);
        let tensor = Tensor::from_f32(t.shape.to_vec(), t.data)?;
        Ok((tensor, transform))
    }
}

/// How a model's outputs are read.
#[derive(Debug)]
pub enum Decoder {
    /// YOLOv8 detector.
    Yolo { labels: Vec<String>, nms: NmsConfig },
    /// SSD detector.
    Ssd {
        labels: Vec<String>,
        decoder: Box<SsdDecoder>,
        nms: NmsConfig,
    },
    /// DBNet text detector.
    Dbnet { config: DbNetConfig },
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

/// A detection with its class name.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// Box, score and class id, frame pixels.
    pub detection: Detection,
    /// Class name.
    pub class: String,
}

/// What one item's outputs mean.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    /// A detector's objects.
    Objects(Vec<Found>),
    /// A per-object result; `rotate` tells children to see the crop turned 180 degrees.
    Output {
        /// The protocol value.
        value: OutputValue,
        /// Whether children should rotate the crop.
        rotate: bool,
    },
}

impl Decoder {
    fn new(m: &ModelEntry, resolve: &dyn Fn(&Path) -> PathBuf) -> anyhow::Result<Self> {
        Ok(match &m.output {
            OutputSpec::Yolov8 { labels, nms } => Decoder::Yolo {
                labels: labels.clone(),
                nms: nms.clone(),
            },
            OutputSpec::Ssd { labels, ssd, nms } => Decoder::Ssd {
                labels: labels.clone(),
                decoder: Box::new(
                    SsdDecoder::new(ssd.clone())
                        .with_context(|| format!("model {:?}: output.ssd", m.name))?,
                ),
                nms: nms.clone(),
            },
            OutputSpec::Dbnet { db } => Decoder::Dbnet { config: db.clone() },
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
                use_space,
            } => {
                let path = resolve(dict_file);
                let text = std::fs::read_to_string(&path).with_context(|| {
                    format!("model {:?}: reading dict_file {}", m.name, path.display())
                })?;
                Decoder::Ctc {
                    decoder: CtcDecoder::from_dict_text(&text, *use_space).with_context(|| {
                        format!("model {:?}: dict_file {}", m.name, path.display())
                    })?,
                }
            }
            OutputSpec::Tensors => Decoder::Tensors,
        })
    }

    /// Reads one item's outputs (batch dim 1).
    pub fn decode(&self, outputs: &[Tensor], transform: &Transform) -> anyhow::Result<Decoded> {
        let f32_of = |n: usize| -> anyhow::Result<&[f32]> {
            let t = outputs
                .get(n)
                .with_context(|| format!("the model has no output #{n}"))?;
            t.as_f32()
                .with_context(|| format!("output {:?} is not f32", t.name()))
        };
        Ok(match self {
            Decoder::Yolo { labels, nms: cfg } => {
                let shape = outputs.first().context("no output")?.shape().to_vec();
                let dets = camdnn_vision::yolo::decode_yolov8(
                    f32_of(0)?,
                    &shape,
                    cfg.score_threshold,
                    transform,
                )?;
                Decoded::Objects(named(nms(&dets, cfg), labels))
            }
            Decoder::Ssd {
                labels,
                decoder,
                nms: cfg,
            } => {
                let dets = decoder.decode(f32_of(0)?, f32_of(1)?, transform)?;
                Decoded::Objects(named(nms(&dets, cfg), labels))
            }
            Decoder::Dbnet { config } => {
                let t = outputs.first().context("no output")?;
                let shape = t.shape();
                let (h, w) = match shape {
                    [.., h, w] => (*h, *w),
                    _ => bail!("DBNet output shape {shape:?} is not [.., H, W]"),
                };
                let boxes = decode_dbnet(f32_of(0)?, w, h, config, transform)?;
                Decoded::Objects(
                    boxes
                        .into_iter()
                        .map(|d| Found {
                            detection: d,
                            class: "text".into(),
                        })
                        .collect(),
                )
            }
            Decoder::TopK { k, labels, softmax } => {
                let scores = camdnn_vision::classify::top_k(f32_of(0)?, *k, *softmax);
                let value = OutputValue::TopK(
                    scores
                        .iter()
                        .map(|s| Label {
                            label: s
                                .label(labels)
                                .map_or_else(|| s.class_id.to_string(), str::to_string),
                            score: s.score,
                        })
                        .collect(),
                );
                Decoded::Output {
                    value,
                    rotate: false,
                }
            }
            Decoder::Orientation { threshold } => {
                let p = f32_of(0)?;
                if p.len() < 2 {
                    bail!(
                        "orientation output has {} scores, needs 2 (0 and 180 degrees)",
                        p.len()
                    );
                }
                let rotate = p[1] > *threshold;
                let (label, score) = if p[1] > p[0] {
                    ("180", p[1])
                } else {
                    ("0", p[0])
                };
                Decoded::Output {
                    value: OutputValue::TopK(vec![Label {
                        label: label.into(),
                        score,
                    }]),
                    rotate,
                }
            }
            Decoder::Ctc { decoder } => {
                let text = decoder.decode(f32_of(0)?)?;
                Decoded::Output {
                    value: OutputValue::TopK(vec![Label {
                        label: text.text,
                        score: text.score,
                    }]),
                    rotate: false,
                }
            }
            Decoder::Tensors => Decoded::Output {
                value: OutputValue::Tensors(
                    outputs
                        .iter()
                        .map(|t| camdnn_protocol::Tensor {
                            name: t.name().to_string(),
                            dims: t.shape().iter().map(|&d| d as u32).collect(),
                            data: t.as_f32().map(<[f32]>::to_vec).unwrap_or_default(),
                        })
                        .collect(),
                ),
                rotate: false,
            },
        })
    }
}

fn named(dets: Vec<Detection>, labels: &[String]) -> Vec<Found> {
    dets.into_iter()
        .map(|d| Found {
            class: labels
                .get(d.class_id)
                .cloned()
                .unwrap_or_else(|| d.class_id.to_string()),
            detection: d,
        })
        .collect()
}

fn read_lines(path: &Path) -> anyhow::Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text.lines().map(str::to_string).collect())
}

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
