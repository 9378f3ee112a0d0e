//! Routing detections to classifiers: class id -> class name -> classifier model, with the
//! per-frame object cap (highest scores kept) and the minimum object size.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::{Detection, Result, VisionError};

/// Which classifier handles which detector class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingConfig {
    /// Detector class names, indexed by class id.
    pub labels: Vec<String>,
    /// Detector class name -> classifier model name; unlisted classes are not classified.
    pub routes: BTreeMap<String, String>,
    /// Most objects classified per frame, the highest scores kept (default 32).
    #[serde(default = "d_max")]
    pub max_objects: usize,
    /// Objects narrower or lower than this many frame pixels are not classified (default 0).
    #[serde(default)]
    pub min_object_size: f32,
}

fn d_max() -> usize {
    32
}

/// One detection with the names it was routed by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoutedObject<'a> {
    /// The detection, frame pixels.
    pub detection: Detection,
    /// Its class name.
    pub class_name: &'a str,
    /// The classifier model that handles it.
    pub model: &'a str,
}

/// A validated routing table.
#[derive(Debug, Clone)]
pub struct Router {
    labels: Vec<String>,
    /// Model per class id.
    models: Vec<Option<String>>,
    max_objects: usize,
    min_object_size: f32,
}

impl Router {
    /// Checks that labels are unique, every routed class exists and the limits make sense.
    pub fn new(config: RoutingConfig) -> Result<Self> {
        let mut seen = HashSet::new();
        for l in &config.labels {
            if !seen.insert(l.as_str()) {
                return Err(VisionError::config(
                    "labels",
                    format!("class name {l:?} appears twice"),
                ));
            }
        }
        for (class, model) in &config.routes {
            if !seen.contains(class.as_str()) {
                return Err(VisionError::config(
                    format!("routes.{class}"),
                    format!(
                        "class {class:?} is not in labels ({} names)",
                        config.labels.len()
                    ),
                ));
            }
            if model.trim().is_empty() {
                return Err(VisionError::config(
                    format!("routes.{class}"),
                    "model name is empty",
                ));
            }
        }
        if config.max_objects == 0 {
            return Err(VisionError::config("max_objects", "must be at least 1"));
        }
        if !(config.min_object_size.is_finite() && config.min_object_size >= 0.0) {
            return Err(VisionError::config(
                "min_object_size",
                "must be finite and >= 0",
            ));
        }
        let models = config
            .labels
            .iter()
            .map(|l| config.routes.get(l).cloned())
            .collect();
        Ok(Self {
            labels: config.labels,
            models,
            max_objects: config.max_objects,
            min_object_size: config.min_object_size,
        })
    }

    /// The class name of `class_id`, if the label list has one.
    pub fn class_name(&self, class_id: usize) -> Option<&str> {
        self.labels.get(class_id).map(String::as_str)
    }

    /// The classifier model for `class_id`, if the class is routed.
    pub fn model_for(&self, class_id: usize) -> Option<&str> {
        self.models.get(class_id)?.as_deref()
    }

    /// The most objects classified per frame.
    pub fn max_objects(&self) -> usize {
        self.max_objects
    }

    /// The detections to classify: routed classes only, at least the minimum size on both sides,
    /// finite scores, at most `max_objects` of them ([`keep_best`]), highest score first.
    pub fn route(&self, detections: &[Detection]) -> Vec<RoutedObject<'_>> {
        let candidates: Vec<RoutedObject<'_>> = detections
            .iter()
            .filter(|d| {
                d.score.is_finite()
                    && d.bbox.is_finite()
                    && d.bbox.width() >= self.min_object_size
                    && d.bbox.height() >= self.min_object_size
            })
            .filter_map(|d| {
                Some(RoutedObject {
                    detection: *d,
                    class_name: self.class_name(d.class_id)?,
                    model: self.model_for(d.class_id)?,
                })
            })
            .collect();
        let scores: Vec<f32> = candidates.iter().map(|o| o.detection.score).collect();
        let mut out: Vec<RoutedObject<'_>> = keep_best(&scores, self.max_objects)
            .into_iter()
            .map(|i| candidates[i])
            .collect();
        out.sort_by(|a, b| b.detection.score.total_cmp(&a.detection.score));
        out
    }
}

/// The per-frame object cap: the indices of the `max` highest of `scores` (NaN counts as the
/// lowest; equal scores keep the earlier object), in their original order. Everything past the
/// cap is left out before any crop is cut, so a frame's work is bounded whatever its object
/// count; the caller reports `scores.len() - kept.len()` as dropped. O(n) time, one index
/// vector of memory.
pub fn keep_best(scores: &[f32], max: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    if idx.len() > max {
        let key = |i: usize| {
            let s = scores[i];
            if s.is_nan() {
                f32::NEG_INFINITY
            } else {
                s
            }
        };
        let better = |a: &usize, b: &usize| key(*b).total_cmp(&key(*a)).then(a.cmp(b));
        if max > 0 {
            idx.select_nth_unstable_by(max - 1, better);
        }
        idx.truncate(max);
        idx.sort_unstable();
    }
    idx
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BBox;

    fn router(max: usize) -> Router {
        let cfg: RoutingConfig = toml::from_str(&format!(
            r#"
            labels = ["person", "bicycle", "car"]
            max_objects = {max}
            min_object_size = 8
            [routes]
            person = "squeezenet"
            car = "resnet50"
            "#
        ))
        .unwrap();
        Router::new(cfg).unwrap()
    }

    fn det(class_id: usize, score: f32, size: f32) -> Detection {
        Detection {
            bbox: BBox::new(0.0, 0.0, size, size),
            class_id,
            score,
        }
    }

    #[test]
    fn routes_by_class_size_and_score() {
        let r = router(2);
        assert_eq!(r.class_name(1), Some("bicycle"));
        assert_eq!(r.model_for(1), None);
        assert_eq!(r.model_for(2), Some("resnet50"));
        assert_eq!(r.model_for(9), None);
        let dets = [
            det(0, 0.5, 20.0),
            det(1, 0.99, 20.0), // no route
            det(2, 0.7, 20.0),
            det(0, 0.95, 4.0), // too small
            det(7, 0.9, 20.0), // unknown class
            det(0, 0.6, 20.0), // third best routed: over the cap of 2
        ];
        let out = r.route(&dets);
        assert_eq!(out.len(), 2);
        assert_eq!(
            (out[0].class_name, out[0].model, out[0].detection.score),
            ("car", "resnet50", 0.7)
        );
        assert_eq!(
            (out[1].class_name, out[1].model, out[1].detection.score),
            ("person", "squeezenet", 0.6)
        );
    }

    #[test]
    fn keep_best_keeps_the_highest_scores_in_order() {
        let scores = [0.1, 0.9, f32::NAN, 0.5, 0.9, 0.2];
        assert_eq!(keep_best(&scores, 3), vec![1, 3, 4]);
        assert_eq!(keep_best(&scores, 1), vec![1]);
        assert_eq!(keep_best(&scores, 0), Vec::<usize>::new());
        assert_eq!(keep_best(&scores, 6), (0..6).collect::<Vec<_>>());
        assert_eq!(keep_best(&scores, 99), (0..6).collect::<Vec<_>>());
        assert_eq!(keep_best(&scores, 5), vec![0, 1, 3, 4, 5]);
    }

    #[test]
    fn bad_configs_name_the_field() {
        let base = RoutingConfig {
            labels: vec!["a".into(), "b".into()],
            routes: BTreeMap::from([("c".to_string(), "m".to_string())]),
            max_objects: 4,
            min_object_size: 0.0,
        };
        let e = Router::new(base.clone()).unwrap_err().to_string();
        assert!(e.contains("routes.c") && e.contains("not in labels"), "{e}");
        let dup = RoutingConfig {
            labels: vec!["a".into(), "a".into()],
            routes: BTreeMap::new(),
            ..base.clone()
        };
        assert!(Router::new(dup).unwrap_err().to_string().contains("twice"));
        let zero = RoutingConfig {
            routes: BTreeMap::new(),
            max_objects: 0,
            ..base
        };
        assert!(Router::new(zero)
            .unwrap_err()
            .to_string()
            .contains("max_objects"));
        assert!(
            toml::from_str::<RoutingConfig>("labels = []\nroutes = {}\nmax_object = 3").is_err()
        );
    }
}
