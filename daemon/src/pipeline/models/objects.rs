//! Detectors' outputs read as objects in frame pixels.

use anyhow::{bail, Context};
use camdnn_engine::Tensor;
use camdnn_vision::blazeface::BlazeFaceDecoder;
use camdnn_vision::centernet::decode_centernet;
use camdnn_vision::dbnet::{decode_dbnet, DbNetConfig};
use camdnn_vision::mtcnn::{self, MapLayout, PnetConfig};
use camdnn_vision::ssd::SsdDecoder;
use camdnn_vision::{nms, NmsConfig, Transform};

use super::decoded::{Decoded, Found};
use super::tensors::{by_last_dim, by_len, f32_at, f32s, named, named_as};

/// YOLOv8: boxes and class scores in one [1, 4 + C, N] output.
pub(super) fn yolo(
    outputs: &[Tensor],
    transform: &Transform,
    labels: &[String],
    cfg: &NmsConfig,
) -> anyhow::Result<Decoded> {
    let shape = outputs.first().context("no output")?.shape().to_vec();
    let dets = camdnn_vision::yolo::decode_yolov8(
        f32_at(outputs, 0)?,
        &shape,
        cfg.score_threshold,
        transform,
    )?;
    Ok(Decoded::Objects(named(nms(&dets, cfg), labels)))
}

/// CenterNet: detections decoded in the graph, [1, N, 6].
pub(super) fn centernet(
    outputs: &[Tensor],
    transform: &Transform,
    labels: &[String],
    cfg: &NmsConfig,
) -> anyhow::Result<Decoded> {
    let t = by_last_dim(outputs, 6, "CenterNet detections [1, N, 6]")?;
    let dets = decode_centernet(
        f32s(t)?,
        t.shape(),
        labels.len(),
        cfg.score_threshold,
        transform,
    )?;
    Ok(Decoded::Objects(named(nms(&dets, cfg), labels)))
}

/// SSD: box regressions against anchors and class scores.
pub(super) fn ssd(
    outputs: &[Tensor],
    transform: &Transform,
    labels: &[String],
    decoder: &SsdDecoder,
    cfg: &NmsConfig,
) -> anyhow::Result<Decoded> {
    let dets = decoder.decode(f32_at(outputs, 0)?, f32_at(outputs, 1)?, transform)?;
    Ok(Decoded::Objects(named(nms(&dets, cfg), labels)))
}

/// DBNet: a text probability map [.., H, W] read as text boxes.
pub(super) fn dbnet(
    outputs: &[Tensor],
    transform: &Transform,
    config: &DbNetConfig,
) -> anyhow::Result<Decoded> {
    let t = outputs.first().context("no output")?;
    let shape = t.shape();
    let (h, w) = match shape {
        [.., h, w] => (*h, *w),
        _ => bail!("DBNet output shape {shape:?} is not [.., H, W]"),
    };
    let boxes = decode_dbnet(f32_at(outputs, 0)?, w, h, config, transform)?;
    Ok(Decoded::Objects(
        boxes
            .into_iter()
            .map(|d| Found {
                detection: d,
                class: "text".into(),
            })
            .collect(),
    ))
}

/// MTCNN P-Net: face probability and box regression maps over a canvas of
/// pyramid scales, one region (and transform) per scale.
pub(super) fn pnet(
    outputs: &[Tensor],
    regions: &[Transform],
    config: &PnetConfig,
    label: &str,
    layout: MapLayout,
) -> anyhow::Result<Decoded> {
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
    for region in regions {
        dets.extend(mtcnn::decode_pnet(
            prob, reg, map_w, map_h, layout, region, config,
        )?);
    }
    Ok(Decoded::Objects(named_as(dets, label)))
}

/// MediaPipe BlazeFace: box regressions (16 values per anchor) and scores.
pub(super) fn blazeface(
    outputs: &[Tensor],
    transform: &Transform,
    decoder: &BlazeFaceDecoder,
    cfg: &NmsConfig,
    label: &str,
) -> anyhow::Result<Decoded> {
    let n = decoder.num_anchors();
    let boxes = by_len(outputs, n * 16, "BlazeFace box regressions")?;
    let logits = by_len(outputs, n, "BlazeFace scores")?;
    let dets = decoder.decode(f32s(boxes)?, f32s(logits)?, cfg.score_threshold, transform)?;
    Ok(Decoded::Objects(named_as(nms(&dets, cfg), label)))
}
