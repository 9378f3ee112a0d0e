//! Non-maximum suppression: keeps the best box of each cluster of overlapping same-class boxes.

use serde::{Deserialize, Serialize};

use crate::Detection;

/// NMS settings (defaults: Ultralytics' `iou = 0.45`, `conf = 0.25`, `max_det = 100`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NmsConfig {
    /// A box is suppressed when its IoU with a kept box of the same class is above this.
    #[serde(default = "d_iou")]
    pub iou_threshold: f32,
    /// Boxes scoring below this are dropped before suppression.
    #[serde(default = "d_score")]
    pub score_threshold: f32,
    /// At most this many boxes are kept, the highest scores first.
    #[serde(default = "d_max")]
    pub max_detections: usize,
    /// Suppress across classes too (one box per object whatever its class).
    #[serde(default)]
    pub class_agnostic: bool,
}

fn d_iou() -> f32 {
    0.45
}
fn d_score() -> f32 {
    0.25
}
fn d_max() -> usize {
    100
}

impl Default for NmsConfig {
    fn default() -> Self {
        Self {
            iou_threshold: d_iou(),
            score_threshold: d_score(),
            max_detections: d_max(),
            class_agnostic: false,
        }
    }
}

/// Greedy class-aware NMS: the survivors, highest score first. Boxes or scores that are not
/// finite are dropped; equal scores keep their input order.
pub fn nms(detections: &[Detection], config: &NmsConfig) -> Vec<Detection> {
    let mut cands: Vec<&Detection> = detections
        .iter()
        .filter(|d| d.score.is_finite() && d.bbox.is_finite() && d.score >= config.score_threshold)
        .collect();
    cands.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut kept: Vec<Detection> = Vec::new();
    for d in cands {
        if kept.len() >= config.max_detections {
            break;
        }
        let suppressed = kept.iter().any(|k| {
            (config.class_agnostic || k.class_id == d.class_id)
                && k.bbox.iou(&d.bbox) > config.iou_threshold
        });
        if !suppressed {
            kept.push(*d);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BBox;

    fn det(x0: f32, class_id: usize, score: f32) -> Detection {
        Detection {
            bbox: BBox::new(x0, 0.0, x0 + 10.0, 10.0),
            class_id,
            score,
        }
    }

    #[test]
    fn suppresses_overlap_of_same_class_only() {
        let dets = [
            det(0.0, 0, 0.8),  // kept
            det(1.0, 0, 0.9),  // kept (best), IoU with first 9/11 = 0.82 -> suppresses it
            det(1.0, 1, 0.7),  // other class: kept
            det(30.0, 0, 0.6), // no overlap: kept
            det(5.0, 0, 0.5),  // IoU with best 5/15 = 0.33 < 0.45: kept
            det(50.0, 0, 0.1), // under the score threshold
        ];
        let out = nms(&dets, &NmsConfig::default());
        let scores: Vec<f32> = out.iter().map(|d| d.score).collect();
        assert_eq!(scores, vec![0.9, 0.7, 0.6, 0.5]);
    }

    #[test]
    fn class_agnostic_max_and_nan() {
        let dets = [
            det(0.0, 0, 0.9),
            det(1.0, 1, 0.8),
            det(40.0, 2, f32::NAN),
            det(60.0, 2, 0.3),
        ];
        let cfg = NmsConfig {
            class_agnostic: true,
            ..Default::default()
        };
        let out = nms(&dets, &cfg);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].score, 0.3);
        let cfg = NmsConfig {
            max_detections: 1,
            ..Default::default()
        };
        assert_eq!(nms(&dets, &cfg).len(), 1);
        assert!(nms(&[], &cfg).is_empty());
    }

    #[test]
    fn threshold_edge_is_not_suppressed() {
        // IoU exactly 0.5 is not "above" a 0.5 threshold.
        let a = Detection {
            bbox: BBox::new(0.0, 0.0, 10.0, 10.0),
            class_id: 0,
            score: 0.9,
        };
        let b = Detection {
            bbox: BBox::new(0.0, 0.0, 10.0, 5.0),
            class_id: 0,
            score: 0.8,
        };
        let cfg = NmsConfig {
            iou_threshold: 0.5,
            ..Default::default()
        };
        assert_eq!(nms(&[a, b], &cfg).len(), 2);
        let cfg = NmsConfig {
            iou_threshold: 0.49,
            ..Default::default()
        };
        assert_eq!(nms(&[a, b], &cfg).len(), 1);
    }
}
