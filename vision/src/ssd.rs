//! SSD decoding as in the TF Object Detection API MobileNet-SSD: multiple-grid anchor generation
//! (`create_ssd_anchors`), the faster-RCNN box coder with scales `y, x, h, w = 10, 10, 5, 5`,
//! and per-class scores with a background class at index 0.

use serde::{Deserialize, Serialize};

use crate::{BBox, Detection, Result, Transform, VisionError};

/// Anchor generation settings; the defaults are MobileNet-SSD v1/v2 at 300x300 (1917 anchors).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AnchorConfig {
    /// Smallest anchor scale, relative to the input (first layer).
    pub min_scale: f32,
    /// Largest anchor scale (last layer).
    pub max_scale: f32,
    /// Aspect ratios (width / height) of the anchors of every layer but a reduced first one.
    pub aspect_ratios: Vec<f32>,
    /// Aspect ratio of the extra anchor at scale `sqrt(s_i * s_{i+1})`; 0 or less for none.
    pub interpolated_scale_aspect_ratio: f32,
    /// First layer uses only (0.1, 1.0), (s0, 2.0), (s0, 0.5), as the TF API does.
    pub reduce_boxes_in_lowest_layer: bool,
    /// `[height, width]` of each feature map, one per layer, first layer first.
    pub feature_map_sizes: Vec<[usize; 2]>,
}

impl Default for AnchorConfig {
    fn default() -> Self {
        Self {
            min_scale: 0.2,
            max_scale: 0.95,
            aspect_ratios: vec![1.0, 2.0, 0.5, 3.0, 0.3333],
            interpolated_scale_aspect_ratio: 1.0,
            reduce_boxes_in_lowest_layer: true,
            feature_map_sizes: vec![[19, 19], [10, 10], [5, 5], [3, 3], [2, 2], [1, 1]],
        }
    }
}

/// One anchor in normalised input coordinates (0..1), centre and size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Anchor {
    /// Centre y.
    pub cy: f32,
    /// Centre x.
    pub cx: f32,
    /// Height.
    pub h: f32,
    /// Width.
    pub w: f32,
}

/// Most anchors a config may generate (a guard against absurd feature map sizes).
pub const MAX_ANCHORS: usize = 1 << 21;

/// Generates the anchors in the TF order: layer, then row, then column, then box spec.
pub fn generate_anchors(cfg: &AnchorConfig) -> Result<Vec<Anchor>> {
    let layers = cfg.feature_map_sizes.len();
    if layers == 0 {
        return Err(VisionError::config(
            "feature_map_sizes",
            "needs at least one layer",
        ));
    }
    if cfg
        .feature_map_sizes
        .iter()
        .any(|s| s[0] == 0 || s[1] == 0 || s[0] > 4096 || s[1] > 4096)
    {
        return Err(VisionError::config(
            "feature_map_sizes",
            "every size must be 1..=4096",
        ));
    }
    if !(cfg.min_scale > 0.0 && cfg.max_scale >= cfg.min_scale && cfg.max_scale.is_finite()) {
        return Err(VisionError::config(
            "min_scale",
            "need 0 < min_scale <= max_scale, finite",
        ));
    }
    if cfg
        .aspect_ratios
        .iter()
        .any(|a| !(a.is_finite() && *a > 0.0))
    {
        return Err(VisionError::config(
            "aspect_ratios",
            "every ratio must be finite and positive",
        ));
    }
    let mut scales: Vec<f32> = (0..layers)
        .map(|i| {
            if layers == 1 {
                cfg.min_scale
            } else {
                cfg.min_scale + (cfg.max_scale - cfg.min_scale) * i as f32 / (layers - 1) as f32
            }
        })
        .collect();
    scales.push(1.0);
    let per_cell = cfg.aspect_ratios.len() + usize::from(cfg.interpolated_scale_aspect_ratio > 0.0);
    let cells: usize = cfg.feature_map_sizes.iter().map(|s| s[0] * s[1]).sum();
    if cells.saturating_mul(per_cell.max(3)) > MAX_ANCHORS {
        return Err(VisionError::config(
            "feature_map_sizes",
            format!("more than {MAX_ANCHORS} anchors ({cells} cells x {per_cell} boxes)"),
        ));
    }
    let mut anchors = Vec::new();
    for (layer, &[fh, fw]) in cfg.feature_map_sizes.iter().enumerate() {
        let (scale, next) = (scales[layer], scales[layer + 1]);
        let specs: Vec<(f32, f32)> = if layer == 0 && cfg.reduce_boxes_in_lowest_layer {
            vec![(0.1, 1.0), (scale, 2.0), (scale, 0.5)]
        } else {
            let mut v: Vec<(f32, f32)> = cfg.aspect_ratios.iter().map(|&a| (scale, a)).collect();
            if cfg.interpolated_scale_aspect_ratio > 0.0 {
                v.push(((scale * next).sqrt(), cfg.interpolated_scale_aspect_ratio));
            }
            v
        };
        let (sy, sx) = (1.0 / fh as f32, 1.0 / fw as f32);
        for y in 0..fh {
            for x in 0..fw {
                for &(s, a) in &specs {
                    let r = a.sqrt();
                    anchors.push(Anchor {
                        cy: (y as f32 + 0.5) * sy,
                        cx: (x as f32 + 0.5) * sx,
                        h: s / r,
                        w: s * r,
                    });
                }
            }
        }
    }
    Ok(anchors)
}

/// How raw class outputs become scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScoreConversion {
    /// Logistic per class (the TF API's MobileNet-SSD).
    #[default]
    Sigmoid,
    /// Softmax over each anchor's classes.
    Softmax,
    /// Already probabilities.
    Identity,
}

/// SSD decoding settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SsdConfig {
    /// Anchor generation.
    pub anchors: AnchorConfig,
    /// Box coder scales `[y, x, h, w]` (the variances' inverses).
    pub box_scales: [f32; 4],
    /// Raw score conversion.
    pub score_conversion: ScoreConversion,
    /// Class 0 of the scores is background: skipped, and class ids shift down by one.
    pub has_background: bool,
    /// Candidates scoring below this are dropped.
    pub score_threshold: f32,
}

impl Default for SsdConfig {
    fn default() -> Self {
        Self {
            anchors: AnchorConfig::default(),
            box_scales: [10.0, 10.0, 5.0, 5.0],
            score_conversion: ScoreConversion::Sigmoid,
            has_background: true,
            score_threshold: 0.3,
        }
    }
}

/// Decodes raw SSD heads against precomputed anchors.
#[derive(Debug, Clone)]
pub struct SsdDecoder {
    config: SsdConfig,
    anchors: Vec<Anchor>,
}

impl SsdDecoder {
    /// Validates the config and generates its anchors.
    pub fn new(config: SsdConfig) -> Result<Self> {
        if config
            .box_scales
            .iter()
            .any(|s| !(s.is_finite() && *s > 0.0))
        {
            return Err(VisionError::config(
                "box_scales",
                "every scale must be finite and positive",
            ));
        }
        let anchors = generate_anchors(&config.anchors)?;
        Ok(Self { config, anchors })
    }

    /// The anchors, in output order.
    pub fn anchors(&self) -> &[Anchor] {
        &self.anchors
    }

    /// Decodes `boxes` (`[N, 4]`: ty, tx, th, tw) and `scores` (`[N, classes]`) into candidates
    /// in frame pixels (best class per anchor, at least the score threshold); run
    /// [`crate::nms()`] on the result.
    pub fn decode(
        &self,
        boxes: &[f32],
        scores: &[f32],
        transform: &Transform,
    ) -> Result<Vec<Detection>> {
        let n = self.anchors.len();
        if boxes.len() != n * 4 {
            return Err(VisionError::tensor(
                "SSD box encodings",
                format!(
                    "{n} anchors need {} values ([N, 4]), got {}",
                    n * 4,
                    boxes.len()
                ),
            ));
        }
        if scores.is_empty() || scores.len() % n != 0 {
            return Err(VisionError::tensor(
                "SSD class scores",
                format!(
                    "{} values is not a whole number of classes for {n} anchors",
                    scores.len()
                ),
            ));
        }
        let classes = scores.len() / n;
        let first = usize::from(self.config.has_background);
        if classes <= first {
            return Err(VisionError::tensor(
                "SSD class scores",
                "no class besides background",
            ));
        }
        let [ys, xs, hs, ws] = self.config.box_scales;
        let mut probs = vec![0f32; classes];
        let mut out = Vec::new();
        for (i, a) in self.anchors.iter().enumerate() {
            let raw = &scores[i * classes..(i + 1) * classes];
            match self.config.score_conversion {
                ScoreConversion::Identity => probs.copy_from_slice(raw),
                ScoreConversion::Sigmoid => {
                    for (p, r) in probs.iter_mut().zip(raw) {
                        *p = 1.0 / (1.0 + (-r).exp());
                    }
                }
                ScoreConversion::Softmax => crate::classify::softmax_into(raw, &mut probs),
            }
            let mut best = (0usize, f32::NEG_INFINITY);
            for (c, &p) in probs.iter().enumerate().skip(first) {
                if p > best.1 {
                    best = (c, p);
                }
            }
            if !best.1.is_finite() || best.1 < self.config.score_threshold {
                continue;
            }
            let e = &boxes[i * 4..i * 4 + 4];
            let cy = e[0] / ys * a.h + a.cy;
            let cx = e[1] / xs * a.w + a.cx;
            let h = (e[2] / hs).exp() * a.h;
            let w = (e[3] / ws).exp() * a.w;
            let b = BBox::new(
                (cx - w / 2.0) * transform.input_width,
                (cy - h / 2.0) * transform.input_height,
                (cx + w / 2.0) * transform.input_width,
                (cy + h / 2.0) * transform.input_height,
            );
            if !b.is_finite() {
                continue;
            }
            out.push(Detection {
                bbox: transform.to_frame(b),
                class_id: best.0 - first,
                score: best.1,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mobilenet_ssd_anchor_count_and_values() {
        let a = generate_anchors(&AnchorConfig::default()).unwrap();
        assert_eq!(a.len(), 1917);
        // First anchor: cell (0,0) of the 19x19 map, scale 0.1, ratio 1.
        let close = |x: f32, y: f32| (x - y).abs() < 1e-5;
        assert!(close(a[0].cy, 0.5 / 19.0) && close(a[0].cx, 0.5 / 19.0));
        assert!(close(a[0].h, 0.1) && close(a[0].w, 0.1));
        // Second: scale 0.2, ratio 2 -> h = 0.2/sqrt2, w = 0.2*sqrt2.
        assert!(close(a[1].h, 0.2 / 2f32.sqrt()) && close(a[1].w, 0.2 * 2f32.sqrt()));
        // Last anchor: the 1x1 map, interpolated scale sqrt(0.95 * 1.0), ratio 1, centred.
        let l = a[1916];
        assert!(close(l.cx, 0.5) && close(l.cy, 0.5));
        assert!(close(l.w, 0.95f32.sqrt()) && close(l.h, 0.95f32.sqrt()));
        // Second layer (10x10) starts at 1083 with scale 0.35, ratio 1.
        assert!(close(a[1083].w, 0.35) && close(a[1083].cx, 0.05));
    }

    #[test]
    fn decodes_a_known_box() {
        let dec = SsdDecoder::new(SsdConfig {
            score_conversion: ScoreConversion::Identity,
            ..Default::default()
        })
        .unwrap();
        let n = dec.anchors().len();
        let classes = 3; // background + 2
        let mut boxes = vec![0f32; n * 4];
        let mut scores = vec![0f32; n * classes];
        // Anchor 1916 (centre 0.5, size sqrt(0.95)): shift the centre by +0.1*w in x, double h.
        let a = dec.anchors()[1916];
        boxes[1916 * 4..1916 * 4 + 4].copy_from_slice(&[0.0, 1.0, 5.0 * 2f32.ln(), 0.0]);
        scores[1916 * classes + 2] = 0.9;
        // Anchor 0 is background-only: never a detection.
        scores[0] = 0.99;
        // 300x300 input stretched from a 600x300 frame.
        let t = Transform {
            scale_x: 0.5,
            scale_y: 1.0,
            pad_x: 0.0,
            pad_y: 0.0,
            frame_width: 600.0,
            frame_height: 300.0,
            input_width: 300.0,
            input_height: 300.0,
        };
        let dets = dec.decode(&boxes, &scores, &t).unwrap();
        assert_eq!(dets.len(), 1);
        assert_eq!(dets[0].class_id, 1);
        let cx = 0.5 + 0.1 * a.w;
        let want = BBox::new(
            (cx - a.w / 2.0) * 600.0,
            0.0, // 0.5 - a.h (2h/2) < 0: clamped
            ((cx + a.w / 2.0) * 600.0).min(600.0),
            300.0,
        );
        let got = dets[0].bbox;
        assert!(
            (got.x0 - want.x0).abs() < 1e-2 && (got.x1 - want.x1).abs() < 1e-2,
            "{got:?} vs {want:?}"
        );
        assert_eq!((got.y0, got.y1), (want.y0, want.y1));
    }

    #[test]
    fn sigmoid_scores_and_bad_inputs() {
        let dec = SsdDecoder::new(SsdConfig::default()).unwrap();
        let n = dec.anchors().len();
        let boxes = vec![0f32; n * 4];
        let mut scores = vec![-10f32; n * 2];
        scores[5 * 2 + 1] = 2.0; // sigmoid(2) = 0.88
        let t = Transform::identity(300, 300);
        let dets = dec.decode(&boxes, &scores, &t).unwrap();
        assert_eq!(dets.len(), 1);
        assert!((dets[0].score - 0.8808).abs() < 1e-3);
        assert!(dec.decode(&boxes[1..], &scores, &t).is_err());
        assert!(dec.decode(&boxes, &scores[1..], &t).is_err());
        assert!(dec.decode(&boxes, &scores[..n], &t).is_err());
        let bad = SsdConfig {
            anchors: AnchorConfig {
                feature_map_sizes: vec![],
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(SsdDecoder::new(bad).is_err());
        let cfg: SsdConfig =
            toml::from_str("score_threshold = 0.5\n[anchors]\nfeature_map_sizes = [[2, 2]]")
                .unwrap();
        assert_eq!(generate_anchors(&cfg.anchors).unwrap().len(), 12);
        assert!(toml::from_str::<SsdConfig>("anchor = 1").is_err());
        let huge = AnchorConfig {
            feature_map_sizes: vec![[4096, 4096]],
            ..Default::default()
        };
        assert!(generate_anchors(&huge)
            .unwrap_err()
            .to_string()
            .contains("anchors"));
    }
}
