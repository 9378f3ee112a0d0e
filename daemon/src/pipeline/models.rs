//! Per-model pre- and post-processing: how a model's input tensor is made
//! from an image, and how its outputs become detections or per-object
//! results.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use camdnn_engine::Tensor;
use camdnn_protocol::{Label, OutputValue};
use camdnn_vision::age_gender::decode_age_gender;
use camdnn_vision::blazeface::BlazeFaceDecoder;
use camdnn_vision::centernet::decode_centernet;
use camdnn_vision::ctc::CtcDecoder;
use camdnn_vision::dbnet::{decode_dbnet, DbNetConfig};
use camdnn_vision::face_landmarks;
use camdnn_vision::mtcnn::{self, MapLayout, PnetConfig, PyramidConfig};
use camdnn_vision::pose::decode_movenet;
use camdnn_vision::pose_face::{face_from_pose, FaceRule};
use camdnn_vision::ssd::SsdDecoder;
use camdnn_vision::{
    nms, BBox, Detection, Layout, NmsConfig, Normalizer, Placement, Preprocessor, RgbImage,
    Transform,
};

use super::config::{CropMode, ModelEntry, OutputSpec, Resize};
use super::onnx_meta;

/// A model's input side: resize and normalise an image (or a crop of one).
#[derive(Debug, Clone)]
pub struct InputPrep {
    width: u32,
    height: u32,
    resize: Resize,
    placement: Placement,
    crop: CropMode,
    pad: [u8; 3],
    norm: Normalizer,
    pyramid: Option<PyramidConfig>,
    roi_scale: Option<f32>,
}

impl InputPrep {
    fn new(m: &ModelEntry) -> anyhow::Result<Self> {
        Ok(InputPrep {
            width: m.input.width,
            height: m.input.height,
            resize: m.input.resize,
            placement: m.input.placement.placement(),
            crop: m.input.crop,
            pad: m.input.pad,
            norm: Normalizer::new(m.input.norm.clone())
                .with_context(|| format!("model {:?}: input.norm", m.name))?,
            pyramid: m.input.pyramid.clone(),
            roi_scale: m.input.roi_scale,
        })
    }

    /// The detector's items for a whole frame: one (resized or letterboxed) input, or the
    /// input-sized canvases a pyramid's scales are packed on (`mtcnn::pack_scales`), each with
    /// its regions' transforms from network pixels back to frame pixels. Empty when the frame
    /// is too small for any pyramid scale.
    pub fn prepare_frame(
        &self,
        pre: &mut Preprocessor,
        image: &RgbImage,
    ) -> anyhow::Result<Vec<(Tensor, Vec<Transform>)>> {
        let Some(pyramid) = &self.pyramid else {
            let (t, transform) = self.prepare(pre, image, None, false)?;
            return Ok(vec![(t, vec![transform])]);
        };
        let (fw, fh) = (image.width(), image.height());
        let scales = mtcnn::pyramid_scales(fw, fh, self.width, self.height, pyramid)?;
        let sizes: Vec<(u32, u32)> = scales
            .iter()
            .map(|s| {
                let sw = ((fw as f32 * s).round() as u32).clamp(1, self.width);
                let sh = ((fh as f32 * s).round() as u32).clamp(1, self.height);
                (sw, sh)
            })
            .collect();
        let places = mtcnn::pack_scales(&sizes, self.width, self.height, pyramid.pack)?;
        let n_canvases = places.iter().map(|p| p.0 + 1).max().unwrap_or(0);
        let mut canvases = (0..n_canvases)
            .map(|_| RgbImage::filled(self.width, self.height, self.pad).map(|c| (c, Vec::new())))
            .collect::<Result<Vec<_>, _>>()?;
        let stride = self.width as usize * 3;
        for (&(sw, sh), &(n, x, y)) in sizes.iter().zip(&places) {
            let (scaled, _) = pre.stretch(image, sw, sh)?;
            let (canvas, regions) = &mut canvases[n];
            let row = sw as usize * 3;
            let dst = canvas.data_mut();
            for (r, src) in scaled.data().chunks_exact(row).enumerate() {
                let at = (y as usize + r) * stride + x as usize * 3;
                dst[at..at + row].copy_from_slice(src);
            }
            regions.push(Transform {
                scale_x: sw as f32 / fw as f32,
                scale_y: sh as f32 / fh as f32,
                pad_x: x as f32,
                pad_y: y as f32,
                input_width: self.width as f32,
                input_height: self.height as f32,
                ..Transform::identity(fw, fh)
            });
        }
        canvases
            .into_iter()
            .map(|(canvas, regions)| Ok((self.tensor(&canvas)?, regions)))
            .collect()
    }

    fn tensor(&self, img: &RgbImage) -> anyhow::Result<Tensor> {
        let t = self.norm.tensor(img);
        Ok(Tensor::from_f32(t.shape.to_vec(), t.data)?)
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
        let (w, h, pad) = (self.width, self.height, self.pad);
        let (mut img, transform) = match bbox {
            None => match self.resize {
                Resize::Stretch => pre.stretch(image, w, h)?,
                Resize::Letterbox => pre.letterbox(image, w, h, pad, self.placement)?,
            },
            Some(b) => {
                let b = self
                    .roi_scale
                    .map_or(b, |s| face_landmarks::landmark_roi(b, s));
                let crop = match self.crop {
                    CropMode::Stretch => pre.crop(image, b, w, h)?,
                    CropMode::Fit => pre.crop_fit(image, b, w, h, pad, self.placement)?,
                    CropMode::FitHeight => pre.crop_fit_height(image, b, w, h, pad)?,
                    CropMode::Pad => pre.crop_padded(image, b, w, h, pad)?,
                };
                (crop, Transform::identity(w, h))
            }
        };
        if rotate {
            img.rotate_180();
        }
        Ok((self.tensor(&img)?, transform))
    }
}

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
    /// A detector's objects (of one of the frame's detector items).
    Objects(Vec<Found>),
    /// A per-object result; `rotate` tells children to see the crop turned 180 degrees.
    Output {
        /// The protocol value.
        value: OutputValue,
        /// Whether children should rotate the crop.
        rotate: bool,
        /// What this result does to the object.
        verdict: Verdict,
    },
}

/// What a per-object result does to its object.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Nothing: the object keeps its box and its children run.
    Keep,
    /// The object gets a new box (its children crop it) and score.
    Refine {
        /// New box, frame pixels.
        bbox: BBox,
        /// New score.
        score: f32,
    },
    /// The object keeps its box, but its children crop this part of it (a person's face), or
    /// do not run when the part was not found.
    Part(Option<BBox>),
    /// The object is not what the detector thought: its children do not run and it is
    /// left out of the frame's result.
    Reject,
}

impl Verdict {
    /// The box this object's children crop, given the object's box after the verdict
    /// (`None`: they do not run).
    pub fn child_crop(&self, object_box: BBox) -> Option<BBox> {
        match self {
            Verdict::Keep | Verdict::Refine { .. } => Some(object_box),
            Verdict::Part(part) => *part,
            Verdict::Reject => None,
        }
    }
}

/// What a decoder knows about the item besides its outputs.
#[derive(Debug, Clone, Copy)]
pub struct ItemContext<'a> {
    /// Network pixels to frame pixels, one transform per region of the frame drawn on the
    /// input: one for a resized or letterboxed frame (and per-object items), one per pyramid
    /// scale packed on a P-Net canvas (its offset in `pad_x` / `pad_y`).
    pub regions: &'a [Transform],
    /// The object's box the input was cut from (per-object items).
    pub bbox: Option<BBox>,
}

impl Decoder {
    fn new(m: &ModelEntry, resolve: &dyn Fn(&Path) -> PathBuf) -> anyhow::Result<Self> {
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
            Decoder::Centernet { labels, nms: cfg } => {
                let t = by_last_dim(outputs, 6, "CenterNet detections [1, N, 6]")?;
                let dets = decode_centernet(
                    f32s(t)?,
                    t.shape(),
                    labels.len(),
                    cfg.score_threshold,
                    transform,
                )?;
                Decoded::Objects(named(nms(&dets, cfg), labels))
            }
            Decoder::Movenet {
                input: (w, h, placement),
                face,
            } => {
                let bbox = ctx.bbox.context("MoveNet runs on a person's crop")?;
                let (fw, fh) = (transform.frame_width, transform.frame_height);
                let crop = camdnn_vision::crop_fit_transform(
                    fw as u32, fh as u32, bbox, *w, *h, *placement,
                )?;
                let t = outputs.first().context("MoveNet has no output")?;
                let points = decode_movenet(f32s(t)?, t.shape(), &crop)?;
                let mut tensors = vec![camdnn_protocol::Tensor {
                    name: "keypoints".into(),
                    dims: vec![points.len() as u32, 3],
                    data: points.iter().flat_map(|k| [k.x, k.y, k.score]).collect(),
                }];
                let verdict = match face {
                    None => Verdict::Keep,
                    Some(f) => {
                        let b = face_from_pose(&points, f, fw, fh).ok();
                        if let Some(b) = b {
                            tensors.push(camdnn_protocol::Tensor {
                                name: "face_box".into(),
                                dims: vec![4],
                                data: vec![b.x0, b.y0, b.x1, b.y1],
                            });
                        }
                        Verdict::Part(b)
                    }
                };
                Decoded::Output {
                    value: OutputValue::Tensors(tensors),
                    rotate: false,
                    verdict,
                }
            }
            Decoder::AgeGender { age: with_age } => {
                let age = f32s(by_last_dim(outputs, 100, "age head [1, 100]")?)?;
                let male = f32s(by_last_dim(outputs, 1, "gender head [1, 1]")?)?;
                let a = decode_age_gender(age, male[0])?;
                let one = |name: &str, v: f32| camdnn_protocol::Tensor {
                    name: name.into(),
                    dims: vec![1],
                    data: vec![v],
                };
                let mut tensors = vec![one("male", male[0])];
                if *with_age {
                    tensors.insert(0, one("age", a.age));
                }
                Decoded::Output {
                    value: OutputValue::Tensors(tensors),
                    rotate: false,
                    verdict: Verdict::Keep,
                }
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
            Decoder::Upstream { .. } => {
                bail!("the upstream detector is never run, so it has no outputs to read")
            }
            Decoder::Pnet {
                config,
                label,
                layout,
            } => {
                let prob = by_last_dim(outputs, 2, "P-Net face probabilities")?;
                let reg = by_last_dim(outputs, 4, "P-Net box regression")?;
                let (a, b) = match prob.shape() {
                    [1, a, b, 2] => (*a, *b),
                    s => bail!("P-Net probability map shape {s:?} is not [1, _, _, 2]"),
                };
                let (map_w, map_h) = match layout {
                    MapLayout::Whc => (a, b),
                    MapLayout::Hwc => (b, a),
                };
                let (prob, reg) = (f32s(prob)?, f32s(reg)?);
                let mut dets = Vec::new();
                for region in ctx.regions {
                    dets.extend(mtcnn::decode_pnet(
                        prob, reg, map_w, map_h, *layout, region, config,
                    )?);
                }
                Decoded::Objects(named_as(dets, label))
            }
            Decoder::Rnet { threshold } => {
                let bbox = ctx.bbox.context("R-Net runs on an object's crop")?;
                let prob = f32s(by_last_dim(outputs, 2, "R-Net scores")?)?;
                let reg = f32s(by_last_dim(outputs, 4, "R-Net box regression")?)?;
                let (value, verdict) = match mtcnn::refine_rnet(bbox, reg, prob, *threshold)? {
                    Some((bbox, score)) => (face_label(score), Verdict::Refine { bbox, score }),
                    None => (face_label(prob[1]), Verdict::Reject),
                };
                Decoded::Output {
                    value,
                    rotate: false,
                    verdict,
                }
            }
            Decoder::Onet { threshold, .. } => {
                let bbox = ctx.bbox.context("O-Net runs on an object's crop")?;
                let prob = f32s(by_last_dim(outputs, 2, "O-Net scores")?)?;
                let reg = f32s(by_last_dim(outputs, 4, "O-Net box regression")?)?;
                let points = f32s(by_last_dim(outputs, 10, "O-Net landmarks")?)?;
                match mtcnn::decode_onet(bbox, reg, points, prob, *threshold)? {
                    Some(face) => Decoded::Output {
                        value: OutputValue::Tensors(vec![camdnn_protocol::Tensor {
                            name: "landmarks".into(),
                            dims: vec![5, 2],
                            data: face.landmarks.iter().flatten().copied().collect(),
                        }]),
                        rotate: false,
                        verdict: Verdict::Refine {
                            bbox: face.bbox,
                            score: face.score,
                        },
                    },
                    None => Decoded::Output {
                        value: face_label(prob[1]),
                        rotate: false,
                        verdict: Verdict::Reject,
                    },
                }
            }
            Decoder::Blazeface {
                decoder,
                nms: cfg,
                label,
            } => {
                let n = decoder.num_anchors();
                let boxes = by_len(outputs, n * 16, "BlazeFace box regressions")?;
                let logits = by_len(outputs, n, "BlazeFace scores")?;
                let dets =
                    decoder.decode(f32s(boxes)?, f32s(logits)?, cfg.score_threshold, transform)?;
                Decoded::Objects(named_as(nms(&dets, cfg), label))
            }
            Decoder::FaceLandmarks {
                threshold,
                roi_scale,
                input_width,
                input_height,
            } => {
                let bbox = ctx.bbox.context("face landmarks run on a face's crop")?;
                let flag = f32s(by_len(outputs, 1, "face flag")?)?[0];
                let raw = outputs
                    .iter()
                    .find(|t| t.len() > 3 && t.len() % 3 == 0)
                    .context("face landmarks: no output of (x, y, z) triples")?;
                let roi = face_landmarks::landmark_roi(bbox, *roi_scale);
                match face_landmarks::decode_face_landmarks(
                    f32s(raw)?,
                    flag,
                    roi,
                    *input_width,
                    *input_height,
                    *threshold,
                )? {
                    Some(face) => Decoded::Output {
                        value: OutputValue::Tensors(vec![camdnn_protocol::Tensor {
                            name: "landmarks".into(),
                            dims: vec![face.points.len() as u32, 3],
                            data: face.points.iter().flatten().copied().collect(),
                        }]),
                        rotate: false,
                        verdict: Verdict::Keep,
                    },
                    None => Decoded::Output {
                        value: face_label(1.0 / (1.0 + (-flag).exp())),
                        rotate: false,
                        verdict: Verdict::Reject,
                    },
                }
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
                    verdict: Verdict::Keep,
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
                    verdict: Verdict::Keep,
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
                    verdict: Verdict::Keep,
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
                verdict: Verdict::Keep,
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

fn named_as(dets: Vec<Detection>, label: &str) -> Vec<Found> {
    dets.into_iter()
        .map(|d| Found {
            detection: d,
            class: label.to_string(),
        })
        .collect()
}

/// The output whose last dim is `n` (MTCNN's outputs are told apart by their channels).
fn by_last_dim<'a>(outputs: &'a [Tensor], n: usize, what: &str) -> anyhow::Result<&'a Tensor> {
    outputs
        .iter()
        .find(|t| t.shape().last() == Some(&n))
        .with_context(|| {
            let shapes: Vec<_> = outputs.iter().map(|t| t.shape().to_vec()).collect();
            format!("{what}: no output with last dim {n} among {shapes:?}")
        })
}

/// The output with `n` elements (BlazeFace's and the landmark model's outputs are told
/// apart by their sizes).
fn by_len<'a>(outputs: &'a [Tensor], n: usize, what: &str) -> anyhow::Result<&'a Tensor> {
    outputs.iter().find(|t| t.len() == n).with_context(|| {
        let shapes: Vec<_> = outputs.iter().map(|t| t.shape().to_vec()).collect();
        format!("{what}: no output of {n} values among {shapes:?}")
    })
}

fn f32s(t: &Tensor) -> anyhow::Result<&[f32]> {
    t.as_f32()
        .with_context(|| format!("output {:?} is not f32", t.name()))
}

fn face_label(score: f32) -> OutputValue {
    OutputValue::TopK(vec![Label {
        label: "face".into(),
        score,
    }])
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::config::PipelineConfig;

    fn pnet_entry() -> ModelEntry {
        entry(
            r#"[[model]]
name = "pnet"
path = "pnet.onnx"
input = { width = 160, height = 160, pad = [9, 9, 9], pyramid = { min_face = 40 }, norm = { layout = "nwhc" } }
output = { kind = "mtcnn_pnet" }
"#,
        )
    }

    #[test]
    fn the_pyramids_scales_are_packed_on_canvases() {
        let m = pnet_entry();
        let rt = ModelRuntime::new(&m, &|p| p.to_path_buf()).unwrap();
        let img = RgbImage::filled(512, 256, [200, 10, 10]).unwrap();
        // 12 / 40 = 0.3 would make 153.6 px, which fits; 256 * 0.3 * 0.709^k >= 12 for k < 6.
        let scale = |n: usize| (512.0 * 0.3 * 0.709f32.powi(n as i32)).round() / 512.0;
        let check = |items: &[(Tensor, Vec<Transform>)]| {
            let mut regions: Vec<&Transform> = items.iter().flat_map(|(_, r)| r).collect();
            regions.sort_by(|a, b| b.scale_x.total_cmp(&a.scale_x));
            assert_eq!(regions.len(), 6);
            for (n, tr) in regions.iter().enumerate() {
                assert!((tr.scale_x - scale(n)).abs() < 1e-6, "{tr:?}");
                assert_eq!(tr.frame_width, 512.0);
            }
            for (t, regions) in items {
                assert_eq!(t.shape(), &[1, 160, 160, 3], "NWHC canvas");
                let data = t.as_f32().unwrap();
                // Each region's top-left pixel is the image's; the far corner is padding.
                for tr in regions {
                    let (x, y) = (tr.pad_x as usize, tr.pad_y as usize);
                    assert_eq!(data[(x * 160 + y) * 3], 200.0, "{tr:?}");
                }
                assert_eq!(data[data.len() - 3], 9.0);
            }
        };
        let packed = rt
            .input
            .prepare_frame(&mut Preprocessor::new(), &img)
            .unwrap();
        check(&packed);
        assert_eq!(packed.len(), 2, "6 scales on 2 canvases");
        // Unpacked: one canvas per scale, the scale at its top-left.
        let mut m = pnet_entry();
        m.input.pyramid.as_mut().unwrap().pack = false;
        let rt1 = ModelRuntime::new(&m, &|p| p.to_path_buf()).unwrap();
        let one = rt1
            .input
            .prepare_frame(&mut Preprocessor::new(), &img)
            .unwrap();
        check(&one);
        assert_eq!(one.len(), 6);
        assert!(one
            .iter()
            .all(|(_, r)| r.len() == 1 && (r[0].pad_x, r[0].pad_y) == (0.0, 0.0)));
        assert!(matches!(
            rt.decoder,
            Decoder::Pnet {
                layout: MapLayout::Whc,
                ..
            }
        ));
        let tiny = RgbImage::filled(8, 8, [0; 3]).unwrap();
        assert!(rt
            .input
            .prepare_frame(&mut Preprocessor::new(), &tiny)
            .unwrap()
            .is_empty());
    }

    fn entry(model: &str) -> ModelEntry {
        let cfg: PipelineConfig = toml::from_str(&format!(
            r#"
profile = "p.toml"
[[processor]]
name = "cpu"
kind = "cpu"
max_resident = 1
engine = "sim"
{model}
"#
        ))
        .unwrap();
        cfg.models[0].clone()
    }

    #[test]
    fn movenet_gives_keypoints_and_its_children_the_face() {
        let m = entry(
            r#"[[model]]
name = "movenet"
path = "m.onnx"
parent = "det"
input = { width = 192, height = 192, crop = "fit", norm = { layout = "nhwc" } }
output = { kind = "movenet", face = { min_side = 16 } }"#,
        );
        let rt = ModelRuntime::new(&m, &|p| p.to_path_buf()).unwrap();
        // A 96x192 person box fit into 192x192: drawn 96 wide at left 48, scale 1.
        let person = BBox::new(100.0, 50.0, 196.0, 242.0);
        let ctx = ItemContext {
            regions: &[Transform::identity(640, 480)],
            bbox: Some(person),
        };
        let mut k = vec![0.0f32; 51];
        // nose, left eye, right eye at the crop's top centre (y, x as input fractions).
        for (i, (y, x)) in [(0.12, 0.5), (0.1, 0.53), (0.1, 0.47)]
            .into_iter()
            .enumerate()
        {
            k[3 * i..3 * i + 3].copy_from_slice(&[y, x, 0.9]);
        }
        let out = vec![Tensor::from_f32(vec![1, 1, 17, 3], k.clone()).unwrap()];
        let Decoded::Output { value, verdict, .. } = rt.decoder.decode(&out, &ctx).unwrap() else {
            panic!("per-object output expected")
        };
        let OutputValue::Tensors(t) = value else {
            panic!("tensors expected")
        };
        assert_eq!(
            (t[0].name.as_str(), t[0].dims.as_slice()),
            ("keypoints", &[17u32, 3][..])
        );
        // The nose: x = 0.5 * 192 - 48 + 100 = 148, y = 0.12 * 192 + 50 = 73.04.
        assert!((t[0].data[0] - 148.0).abs() < 1e-3 && (t[0].data[1] - 73.04).abs() < 1e-3);
        assert_eq!(t[1].name, "face_box");
        let Verdict::Part(Some(face)) = verdict else {
            panic!("the face is the children's crop: {verdict:?}")
        };
        assert_eq!([face.x0, face.y0, face.x1, face.y1], t[1].data[..]);
        assert_eq!(verdict.child_crop(person), Some(face));
        assert!(face.x0 > person.x0 && face.x1 < person.x1, "{face:?}");
        // No eyes seen: no face, the children do not run, the person stays.
        for i in 0..3 {
            k[3 * i + 2] = 0.1;
        }
        let out = vec![Tensor::from_f32(vec![1, 1, 17, 3], k).unwrap()];
        let Decoded::Output { verdict, .. } = rt.decoder.decode(&out, &ctx).unwrap() else {
            panic!()
        };
        assert_eq!(verdict, Verdict::Part(None));
        assert_eq!(verdict.child_crop(person), None);
    }

    #[test]
    fn age_gender_reads_both_heads_by_size() {
        let rt = ModelRuntime::new(
            &entry(
                r#"[[model]]
name = "faceres"
path = "f.onnx"
parent = "pose"
input = { width = 224, height = 224, norm = { layout = "nhwc" } }
output = { kind = "age_gender", age = true }"#,
            ),
            &|p| p.to_path_buf(),
        )
        .unwrap();
        let mut age = vec![0.0; 100];
        age[40] = 0.9;
        let out = vec![
            Tensor::from_f32(vec![1, 100], age).unwrap(),
            Tensor::from_f32(vec![1, 1], vec![0.1]).unwrap(),
        ];
        let ctx = ItemContext {
            regions: &[Transform::identity(100, 100)],
            bbox: Some(BBox::new(0.0, 0.0, 50.0, 50.0)),
        };
        let Decoded::Output {
            value: OutputValue::Tensors(t),
            verdict,
            ..
        } = rt.decoder.decode(&out, &ctx).unwrap()
        else {
            panic!()
        };
        assert_eq!(verdict, Verdict::Keep);
        assert_eq!((t[0].name.as_str(), t[0].data[0]), ("age", 40.0));
        assert_eq!((t[1].name.as_str(), t[1].data[0]), ("male", 0.1));
        // Without `age` (the default) only the gender is reported.
        let Decoded::Output {
            value: OutputValue::Tensors(t),
            ..
        } = Decoder::AgeGender { age: false }
            .decode(&out, &ctx)
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(
            t.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["male"]
        );
        let e = rt.decoder.decode(&out[1..], &ctx).unwrap_err();
        assert!(format!("{e:#}").contains("age head"), "{e:#}");
    }

    #[test]
    fn rnet_outputs_are_found_by_shape_and_reject_or_refine() {
        let rnet = Decoder::Rnet { threshold: 0.7 };
        let ctx = ItemContext {
            regions: &[Transform::identity(100, 100)],
            bbox: Some(BBox::new(10.0, 10.0, 49.0, 49.0)),
        };
        let out = |p: f32| {
            vec![
                Tensor::from_f32(vec![1, 4], vec![0.0; 4]).unwrap(),
                Tensor::from_f32(vec![1, 2], vec![1.0 - p, p]).unwrap(),
            ]
        };
        let Decoded::Output { verdict, .. } = rnet.decode(&out(0.9), &ctx).unwrap() else {
            panic!()
        };
        assert!(matches!(verdict, Verdict::Refine { score, .. } if score == 0.9));
        let Decoded::Output { verdict, .. } = rnet.decode(&out(0.2), &ctx).unwrap() else {
            panic!()
        };
        assert_eq!(verdict, Verdict::Reject);
        let e = rnet.decode(&out(0.9)[..1], &ctx).unwrap_err();
        assert!(
            format!("{e:#}").contains("no output with last dim 2"),
            "{e:#}"
        );
        let no_box = ItemContext { bbox: None, ..ctx };
        assert!(rnet.decode(&out(0.9), &no_box).is_err());
        assert!(Decoder::Upstream { labels: vec![] }
            .decode(&out(0.9), &ctx)
            .is_err());
    }
}
