//! A per-object result kept for reuse (`camdnn_policy::reuse`), and what reusing it means for
//! positional outputs: keypoints and part boxes were computed in frame pixels on the box the
//! model ran on, so a reused result is moved with its object, from that box onto the box the
//! object has now (scaled and shifted, as if the object had kept its pose within its box).
//! Labels and values (age, gender, top-k) are reused as they are.

use camdnn_protocol::OutputValue;
use camdnn_vision::BBox;

use super::models::Verdict;

/// A model's decoded result for one object, as kept for its track.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptResult {
    /// The protocol value.
    pub value: OutputValue,
    /// What it did to the object (a face box for the children, a refined box...).
    pub verdict: Verdict,
}

/// Maps a point from `from` onto `to` (the same place relative to the box).
fn map_point(x: f32, y: f32, from: &BBox, to: &BBox) -> (f32, f32) {
    let sx = to.width() / from.width().max(1e-6);
    let sy = to.height() / from.height().max(1e-6);
    (to.x0 + (x - from.x0) * sx, to.y0 + (y - from.y0) * sy)
}

fn map_box(b: &BBox, from: &BBox, to: &BBox) -> BBox {
    let (x0, y0) = map_point(b.x0, b.y0, from, to);
    let (x1, y1) = map_point(b.x1, b.y1, from, to);
    BBox::new(x0, y0, x1, y1)
}

impl KeptResult {
    /// This result moved from the box it was computed on (`from`) onto the object's box now
    /// (`to`): the `keypoints` tensor's (x, y, score) rows, a `face_box` tensor and the
    /// verdict's boxes follow the object; everything else is unchanged.
    pub fn moved(&self, from: &BBox, to: &BBox) -> KeptResult {
        let value = match &self.value {
            OutputValue::Tensors(ts) => OutputValue::Tensors(
                ts.iter()
                    .map(|t| {
                        let mut t = t.clone();
                        match (t.name.as_str(), t.dims.as_slice()) {
                            ("keypoints", [_, 3]) => {
                                for row in t.data.chunks_exact_mut(3) {
                                    (row[0], row[1]) = map_point(row[0], row[1], from, to);
                                }
                            }
                            ("face_box", [4]) => {
                                let b = BBox::new(t.data[0], t.data[1], t.data[2], t.data[3]);
                                let m = map_box(&b, from, to);
                                t.data = vec![m.x0, m.y0, m.x1, m.y1];
                            }
                            _ => {}
                        }
                        t
                    })
                    .collect(),
            ),
            other => other.clone(),
        };
        let verdict = match self.verdict {
            Verdict::Part(Some(b)) => Verdict::Part(Some(map_box(&b, from, to))),
            Verdict::Refine { bbox, score } => Verdict::Refine {
                bbox: map_box(&bbox, from, to),
                score,
            },
            v => v,
        };
        KeptResult { value, verdict }
    }

    /// The result's own confidence for `reuse.min_score`: a top-k output's best score, the
    /// mean keypoint score of a pose, the gender head's certainty (0 at 0.5, 1 at 0 or 1);
    /// `None` for other tensors.
    pub fn confidence(&self) -> Option<f32> {
        match &self.value {
            OutputValue::TopK(labels) => labels.first().map(|l| l.score),
            OutputValue::Tensors(ts) => {
                if let Some(k) = ts.iter().find(|t| t.name == "keypoints") {
                    let scores: Vec<f32> = k.data.chunks_exact(3).map(|r| r[2]).collect();
                    return (!scores.is_empty())
                        .then(|| scores.iter().sum::<f32>() / scores.len() as f32);
                }
                let male = ts.iter().find(|t| t.name == "male")?.data.first()?;
                Some(((male - 0.5).abs() * 2.0).min(1.0))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use camdnn_protocol::{Label, Tensor};

    fn pose() -> KeptResult {
        KeptResult {
            value: OutputValue::Tensors(vec![
                Tensor {
                    name: "keypoints".into(),
                    dims: vec![2, 3],
                    data: vec![10.0, 20.0, 0.9, 30.0, 120.0, 0.5],
                },
                Tensor {
                    name: "face_box".into(),
                    dims: vec![4],
                    data: vec![10.0, 10.0, 30.0, 40.0],
                },
            ]),
            verdict: Verdict::Part(Some(BBox::new(10.0, 10.0, 30.0, 40.0))),
        }
    }

    #[test]
    fn positions_follow_the_box_and_the_rest_stays() {
        let from = BBox::new(0.0, 0.0, 40.0, 160.0);
        // Moved right by 100 and twice as large.
        let to = BBox::new(100.0, 0.0, 180.0, 320.0);
        let m = pose().moved(&from, &to);
        let OutputValue::Tensors(ts) = &m.value else {
            panic!("tensors")
        };
        assert_eq!(ts[0].data, vec![120.0, 40.0, 0.9, 160.0, 240.0, 0.5]);
        assert_eq!(ts[1].data, vec![120.0, 20.0, 160.0, 80.0]);
        assert_eq!(
            m.verdict,
            Verdict::Part(Some(BBox::new(120.0, 20.0, 160.0, 80.0)))
        );
        // The same box: nothing moves.
        assert_eq!(pose().moved(&from, &from), pose());
        let labels = KeptResult {
            value: OutputValue::TopK(vec![Label {
                label: "adult".into(),
                score: 0.8,
            }]),
            verdict: Verdict::Keep,
        };
        assert_eq!(labels.moved(&from, &to), labels);
    }

    #[test]
    fn confidence_per_kind_of_result() {
        assert!((pose().confidence().unwrap() - 0.7).abs() < 1e-6);
        let face = KeptResult {
            value: OutputValue::Tensors(vec![
                Tensor {
                    name: "age".into(),
                    dims: vec![1],
                    data: vec![30.0],
                },
                Tensor {
                    name: "male".into(),
                    dims: vec![1],
                    data: vec![0.1],
                },
            ]),
            verdict: Verdict::Keep,
        };
        assert!((face.confidence().unwrap() - 0.8).abs() < 1e-6);
        let raw = KeptResult {
            value: OutputValue::Tensors(vec![]),
            verdict: Verdict::Keep,
        };
        assert_eq!(raw.confidence(), None);
    }
}
