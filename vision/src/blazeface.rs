//! BlazeFace decoding, as MediaPipe's face detector (`face_detection_short_range.tflite`)
//! is read: SSD anchors of fixed unit size on the grid of each stride
//! (`SsdAnchorsCalculator` with `fixed_anchor_size`), box centres and sizes regressed in
//! input pixels relative to the anchor centre (`TensorsToDetectionsCalculator`), one
//! logit per anchor turned into a score by a clipped sigmoid.

use serde::{Deserialize, Serialize};

use crate::{BBox, Detection, Result, Transform, VisionError};

/// Anchors and decoding settings; the defaults are the short-range face detector's
/// (128x128 input, strides 8, 16, 16, 16: 896 anchors).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BlazeFaceConfig {
    /// Network input width, pixels (regressions are in these pixels).
    pub input_width: usize,
    /// Network input height, pixels.
    pub input_height: usize,
    /// Stride of each anchor layer; consecutive equal strides share one grid.
    pub strides: Vec<usize>,
    /// Anchors per grid cell and layer (one aspect ratio plus the interpolated scale: 2).
    pub anchors_per_layer: usize,
    /// Values per anchor in the regression output: 4 box values, then (x, y) per keypoint.
    pub values_per_anchor: usize,
    /// Logits are clipped to +-this before the sigmoid.
    pub score_clip: f32,
}

impl Default for BlazeFaceConfig {
    fn default() -> Self {
        Self {
            input_width: 128,
            input_height: 128,
            strides: vec![8, 16, 16, 16],
            anchors_per_layer: 2,
            values_per_anchor: 16,
            score_clip: 100.0,
        }
    }
}

/// An anchor centre in normalised input coordinates (unit size: `fixed_anchor_size`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AnchorCenter {
    /// Centre x, 0..1.
    pub x: f32,
    /// Centre y, 0..1.
    pub y: f32,
}

/// Most anchors a config may generate (a guard against absurd inputs or strides).
const MAX_ANCHORS: usize = 1 << 20;

/// Generates the anchors in MediaPipe's order: grid (by stride group), row, column, anchor.
pub fn anchors(cfg: &BlazeFaceConfig) -> Result<Vec<AnchorCenter>> {
    if cfg.strides.is_empty() || cfg.strides.contains(&0) {
        return Err(VisionError::config(
            "strides",
            "needs at least one stride, none 0",
        ));
    }
    if cfg.input_width == 0 || cfg.input_height == 0 || cfg.anchors_per_layer == 0 {
        return Err(VisionError::config(
            "input_width",
            "input sizes and anchors_per_layer must be positive",
        ));
    }
    let mut out = Vec::new();
    let mut layer = 0;
    while layer < cfg.strides.len() {
        let stride = cfg.strides[layer];
        let same = cfg.strides[layer..]
            .iter()
            .take_while(|&&s| s == stride)
            .count();
        let per_cell = same * cfg.anchors_per_layer;
        let (fw, fh) = (
            cfg.input_width.div_ceil(stride),
            cfg.input_height.div_ceil(stride),
        );
        if out.len() + fw * fh * per_cell > MAX_ANCHORS {
            return Err(VisionError::config("strides", "too many anchors"));
        }
        for y in 0..fh {
            for x in 0..fw {
                let c = AnchorCenter {
                    x: (x as f32 + 0.5) / fw as f32,
                    y: (y as f32 + 0.5) / fh as f32,
                };
                out.extend(std::iter::repeat_n(c, per_cell));
            }
        }
        layer += same;
    }
    Ok(out)
}

/// The BlazeFace decoder with its anchors generated once.
#[derive(Debug, Clone)]
pub struct BlazeFaceDecoder {
    cfg: BlazeFaceConfig,
    anchors: Vec<AnchorCenter>,
}

impl BlazeFaceDecoder {
    /// Builds the decoder (generates the anchors).
    pub fn new(cfg: BlazeFaceConfig) -> Result<Self> {
        if cfg.values_per_anchor < 4 {
            return Err(VisionError::config(
                "values_per_anchor",
                "needs at least the 4 box values",
            ));
        }
        let anchors = anchors(&cfg)?;
        Ok(Self { cfg, anchors })
    }

    /// Number of anchors (the detector's N).
    pub fn num_anchors(&self) -> usize {
        self.anchors.len()
    }

    /// Decodes `boxes` (`[N, values_per_anchor]`) and `logits` (`[N]`) into face boxes in
    /// frame pixels, keeping those scoring at least `min_score` (class id 0; not suppressed).
    pub fn decode(
        &self,
        boxes: &[f32],
        logits: &[f32],
        min_score: f32,
        transform: &Transform,
    ) -> Result<Vec<Detection>> {
        let n = self.anchors.len();
        let v = self.cfg.values_per_anchor;
        if boxes.len() != n * v {
            return Err(VisionError::tensor(
                "BlazeFace boxes",
                format!("{} values, expected {n} anchors x {v}", boxes.len()),
            ));
        }
        if logits.len() != n {
            return Err(VisionError::tensor(
                "BlazeFace scores",
                format!("{} values, expected one per anchor ({n})", logits.len()),
            ));
        }
        let (iw, ih) = (self.cfg.input_width as f32, self.cfg.input_height as f32);
        let clip = self.cfg.score_clip;
        let mut out = Vec::new();
        for ((a, raw), &logit) in self.anchors.iter().zip(boxes.chunks_exact(v)).zip(logits) {
            let score = 1.0 / (1.0 + (-logit.clamp(-clip, clip)).exp());
            if score.is_nan() || score < min_score {
                continue;
            }
            let cx = (raw[0] / iw + a.x) * iw;
            let cy = (raw[1] / ih + a.y) * ih;
            let b = BBox::from_center(cx, cy, raw[2], raw[3]);
            if !b.is_finite() {
                continue;
            }
            out.push(Detection {
                bbox: transform.to_frame(b),
                class_id: 0,
                score,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_range_anchors_are_mediapipes_896() {
        let a = anchors(&BlazeFaceConfig::default()).unwrap();
        assert_eq!(a.len(), 16 * 16 * 2 + 8 * 8 * 6);
        // first grid: 2 anchors per cell at (x + 0.5) / 16
        assert_eq!(
            a[0],
            AnchorCenter {
                x: 0.5 / 16.0,
                y: 0.5 / 16.0
            }
        );
        assert_eq!(a[1], a[0]);
        assert_eq!(a[2].x, 1.5 / 16.0);
        // second grid starts after 512 anchors, 6 per cell at (x + 0.5) / 8
        assert_eq!(
            a[512],
            AnchorCenter {
                x: 0.5 / 8.0,
                y: 0.5 / 8.0
            }
        );
        assert_eq!(a[517], a[512]);
        assert_eq!(a[518].x, 1.5 / 8.0);
        assert_eq!(
            a[895],
            AnchorCenter {
                x: 7.5 / 8.0,
                y: 7.5 / 8.0
            }
        );
    }

    #[test]
    fn a_box_is_regressed_from_its_anchor_and_mapped_to_the_frame() {
        let d = BlazeFaceDecoder::new(BlazeFaceConfig::default()).unwrap();
        let n = d.num_anchors();
        let mut boxes = vec![0.0; n * 16];
        let mut logits = vec![-10.0; n];
        // anchor 512 is centred at (8, 8) input pixels; shift by (+2, -1), size 20x10
        boxes[512 * 16..512 * 16 + 4].copy_from_slice(&[2.0, -1.0, 20.0, 10.0]);
        logits[512] = 2.0;
        // the frame is twice the input
        let t = Transform {
            scale_x: 0.5,
            scale_y: 0.5,
            input_width: 128.0,
            input_height: 128.0,
            ..Transform::identity(256, 256)
        };
        let dets = d.decode(&boxes, &logits, 0.5, &t).unwrap();
        assert_eq!(dets.len(), 1);
        let b = dets[0].bbox;
        assert!(
            (b.x0 - 0.0).abs() < 1e-4 && (b.x1 - 40.0).abs() < 1e-4,
            "{b:?}"
        );
        assert!(
            (b.y0 - 4.0).abs() < 1e-4 && (b.y1 - 24.0).abs() < 1e-4,
            "{b:?}"
        );
        assert!((dets[0].score - 1.0 / (1.0 + (-2.0f32).exp())).abs() < 1e-6);
        assert!(d.decode(&boxes[1..], &logits, 0.5, &t).is_err());
        assert!(d.decode(&boxes, &logits[1..], 0.5, &t).is_err());
    }

    #[test]
    fn bad_configs_are_refused() {
        let bad = BlazeFaceConfig {
            strides: vec![],
            ..Default::default()
        };
        assert!(BlazeFaceDecoder::new(bad).is_err());
        let bad = BlazeFaceConfig {
            strides: vec![1],
            input_width: 1 << 20,
            input_height: 1 << 20,
            ..Default::default()
        };
        assert!(BlazeFaceDecoder::new(bad).is_err());
    }
}
