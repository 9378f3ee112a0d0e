//! DBNet text-detection post-processing as in PP-OCR's `DBPostProcess` (fast score mode), with
//! axis-aligned boxes: threshold the probability map, take 8-connected components, score each
//! box by the mean probability inside it, expand it by the unclip distance
//! `area * unclip_ratio / perimeter` and map it to frame pixels.
//!
//! As in PP-OCR, box corners sit on pixel centres: a component spanning columns 10..=39 is
//! 29 pixels wide before unclipping.

use serde::{Deserialize, Serialize};

use crate::{BBox, Detection, Result, Transform, VisionError};

/// DBNet post-processing settings (defaults: RapidOCR's PP-OCR det settings).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DbNetConfig {
    /// Pixels with probability above this are text.
    pub thresh: f32,
    /// Boxes whose mean probability is below this are dropped.
    pub box_thresh: f32,
    /// Expansion ratio of the shrunk text kernels (PP-OCR 1.5-2.0).
    pub unclip_ratio: f32,
    /// Boxes whose short side (map pixels) is below this before unclipping, or below this + 2
    /// after, are dropped.
    pub min_size: f32,
    /// Components with fewer pixels than this are dropped.
    pub min_area: usize,
    /// At most this many components are considered, in scan order.
    pub max_candidates: usize,
}

impl Default for DbNetConfig {
    fn default() -> Self {
        Self {
            thresh: 0.3,
            box_thresh: 0.5,
            unclip_ratio: 1.6,
            min_size: 3.0,
            min_area: 1,
            max_candidates: 1000,
        }
    }
}

/// Pixel bounds of one connected component.
struct Component {
    x0: usize,
    y0: usize,
    x1: usize,
    y1: usize,
    pixels: usize,
}

/// 8-connected components of `mask` (`w` x `h`), at most `max` of them, scan order.
fn components(mask: &[bool], w: usize, h: usize, max: usize) -> Vec<Component> {
    let mut seen = vec![false; mask.len()];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    for start in 0..mask.len() {
        if !mask[start] || seen[start] {
            continue;
        }
        if out.len() >= max {
            break;
        }
        seen[start] = true;
        stack.push(start);
        let mut c = Component {
            x0: usize::MAX,
            y0: usize::MAX,
            x1: 0,
            y1: 0,
            pixels: 0,
        };
        while let Some(i) = stack.pop() {
            let (x, y) = (i % w, i / w);
            c.x0 = c.x0.min(x);
            c.x1 = c.x1.max(x);
            c.y0 = c.y0.min(y);
            c.y1 = c.y1.max(y);
            c.pixels += 1;
            for ny in y.saturating_sub(1)..=(y + 1).min(h - 1) {
                for nx in x.saturating_sub(1)..=(x + 1).min(w - 1) {
                    let j = ny * w + nx;
                    if mask[j] && !seen[j] {
                        seen[j] = true;
                        stack.push(j);
                    }
                }
            }
        }
        out.push(c);
    }
    out
}

/// Decodes a `map_width` x `map_height` text probability map (the DBNet output, covering the
/// whole network input) into text boxes in frame pixels, class 0, scored by mean probability.
pub fn decode_dbnet(
    prob: &[f32],
    map_width: usize,
    map_height: usize,
    config: &DbNetConfig,
    transform: &Transform,
) -> Result<Vec<Detection>> {
    const WHAT: &str = "DBNet probability map";
    if map_width == 0 || map_height == 0 {
        return Err(VisionError::tensor(
            WHAT,
            format!("size {map_width}x{map_height} is empty"),
        ));
    }
    if map_width.checked_mul(map_height) != Some(prob.len()) {
        return Err(VisionError::tensor(
            WHAT,
            format!(
                "a {map_width}x{map_height} map needs {} values, got {}",
                map_width.saturating_mul(map_height),
                prob.len()
            ),
        ));
    }
    if !(config.unclip_ratio.is_finite() && config.unclip_ratio >= 0.0) {
        return Err(VisionError::config(
            "unclip_ratio",
            "must be finite and >= 0",
        ));
    }
    let mask: Vec<bool> = prob.iter().map(|&p| p > config.thresh).collect();
    let sx = transform.input_width / map_width as f32;
    let sy = transform.input_height / map_height as f32;
    let mut out = Vec::new();
    for c in components(&mask, map_width, map_height, config.max_candidates) {
        if c.pixels < config.min_area {
            continue;
        }
        let (w, h) = ((c.x1 - c.x0) as f32, (c.y1 - c.y0) as f32);
        if w.min(h) < config.min_size {
            continue;
        }
        let mut sum = 0f32;
        for y in c.y0..=c.y1 {
            sum += prob[y * map_width + c.x0..=y * map_width + c.x1]
                .iter()
                .sum::<f32>();
        }
        let score = sum / ((c.x1 - c.x0 + 1) * (c.y1 - c.y0 + 1)) as f32;
        if score.is_nan() || score < config.box_thresh {
            continue;
        }
        let d = w * h * config.unclip_ratio / (2.0 * (w + h));
        if (w + 2.0 * d).min(h + 2.0 * d) < config.min_size + 2.0 {
            continue;
        }
        let b = BBox::new(
            (c.x0 as f32 - d) * sx,
            (c.y0 as f32 - d) * sy,
            (c.x1 as f32 + d) * sx,
            (c.y1 as f32 + d) * sy,
        );
        out.push(Detection {
            bbox: transform.to_frame(b),
            class_id: 0,
            score,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map_with(w: usize, h: usize, rects: &[(usize, usize, usize, usize, f32)]) -> Vec<f32> {
        let mut m = vec![0.02f32; w * h];
        for &(x0, y0, x1, y1, p) in rects {
            for y in y0..=y1 {
                for x in x0..=x1 {
                    m[y * w + x] = p;
                }
            }
        }
        m
    }

    #[test]
    fn two_rectangles_give_two_boxes() {
        let (w, h) = (100, 60);
        let m = map_with(w, h, &[(10, 10, 39, 19, 0.9), (60, 35, 89, 49, 0.8)]);
        let cfg = DbNetConfig {
            unclip_ratio: 1.5,
            ..Default::default()
        };
        let dets = decode_dbnet(&m, w, h, &cfg, &Transform::identity(100, 60)).unwrap();
        assert_eq!(dets.len(), 2);
        // First: 29x9 -> d = 29*9*1.5 / (2*38) = 5.1513.
        let d = 29.0 * 9.0 * 1.5 / 76.0;
        let want = BBox::new(10.0 - d, 10.0 - d, 39.0 + d, 19.0 + d);
        let got = dets[0].bbox;
        for (g, w) in [
            (got.x0, want.x0),
            (got.y0, want.y0),
            (got.x1, want.x1),
            (got.y1, want.y1),
        ] {
            assert!((g - w).abs() < 1e-4, "{got:?} vs {want:?}");
        }
        assert!((dets[0].score - 0.9).abs() < 1e-6);
        // Second: 29x14 -> d = 29*14*1.5 / 86.
        let d = 29.0 * 14.0 * 1.5 / 86.0;
        let got = dets[1].bbox;
        assert!(
            (got.x0 - (60.0 - d)).abs() < 1e-4 && (got.y1 - (49.0 + d)).abs() < 1e-4,
            "{got:?}"
        );
        assert!((dets[1].score - 0.8).abs() < 1e-6);
    }

    #[test]
    fn map_scales_to_frame_and_filters() {
        let (w, h) = (64, 32);
        let m = map_with(
            w,
            h,
            &[
                (8, 4, 24, 12, 0.9),   // kept
                (30, 4, 31, 20, 0.9),  // 1 px wide (pixel-centre width) < min_size 3
                (40, 4, 60, 12, 0.35), // above thresh but mean 0.35 < box_thresh
            ],
        );
        // Map covers a 128x64 input stretched from a 256x64 frame.
        let t = Transform {
            scale_x: 0.5,
            scale_y: 1.0,
            pad_x: 0.0,
            pad_y: 0.0,
            frame_width: 256.0,
            frame_height: 64.0,
            input_width: 128.0,
            input_height: 64.0,
        };
        let dets = decode_dbnet(&m, w, h, &DbNetConfig::default(), &t).unwrap();
        assert_eq!(dets.len(), 1);
        let d = 16.0 * 8.0 * 1.6 / 48.0;
        let b = dets[0].bbox;
        assert!((b.x0 - (8.0 - d) * 4.0).abs() < 1e-3, "{b:?}");
        assert!((b.y1 - (12.0 + d) * 2.0).abs() < 1e-3, "{b:?}");
    }

    #[test]
    fn diagonal_pixels_are_one_component_and_bad_maps_error() {
        let (w, h) = (8, 8);
        let mut m = vec![0.0; 64];
        for i in 0..8 {
            m[i * w + i] = 1.0;
        }
        let cfg = DbNetConfig {
            min_size: 0.0,
            box_thresh: 0.0,
            ..Default::default()
        };
        let dets = decode_dbnet(&m, w, h, &cfg, &Transform::identity(8, 8)).unwrap();
        assert_eq!(dets.len(), 1);
        assert!(decode_dbnet(&m, 7, 8, &cfg, &Transform::identity(8, 8)).is_err());
        assert!(decode_dbnet(&[], 0, 0, &cfg, &Transform::identity(8, 8)).is_err());
        assert!(decode_dbnet(&m, usize::MAX, 2, &cfg, &Transform::identity(8, 8)).is_err());
    }
}
