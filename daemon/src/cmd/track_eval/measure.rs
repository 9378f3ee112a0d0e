//! What `track-eval` counts per model (requests offered, inferred, reused and why) and how a
//! result it served is compared with per-frame inference on the same object: pose keypoints
//! by their distance normalised by the person's box, age and gender by the gender label and
//! the age difference, a top-k output by its best label.

use std::collections::BTreeMap;

use camdnn_policy::reuse::{Decision, Why};
use camdnn_protocol::OutputValue;
use camdnn_vision::BBox;

/// Keypoints of per-frame inference below this score are not compared (MoveNet's usual
/// visibility threshold).
pub const KEYPOINT_MIN_SCORE: f32 = 0.3;

/// A pose agrees when its keypoints are on average within this share of the person box's
/// longer side of per-frame inference's.
pub const POSE_AGREES_WITHIN: f32 = 0.1;

/// How one served result compares with per-frame inference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Comparison {
    /// Mean keypoint distance over the box's longer side.
    Pose(f32),
    /// Same gender label, and the age difference in years when both report an age (faceres's
    /// age head is off by default).
    AgeGender(bool, Option<f32>),
    /// Same best label.
    Label(bool),
}

fn tensor<'a>(v: &'a OutputValue, name: &str) -> Option<&'a [f32]> {
    match v {
        OutputValue::Tensors(ts) => ts
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.data.as_slice()),
        OutputValue::TopK(_) => None,
    }
}

/// Compares a served result with per-frame inference's for the same object, whose box (for
/// a pose: the person's) is `reference_box`; `None` when they cannot be compared (no
/// confident keypoint, different kinds of output).
pub fn compare(
    served: &OutputValue,
    reference: &OutputValue,
    reference_box: BBox,
) -> Option<Comparison> {
    if let (Some(a), Some(b)) = (tensor(served, "keypoints"), tensor(reference, "keypoints")) {
        let size = reference_box.width().max(reference_box.height()).max(1.0);
        let d: Vec<f32> = a
            .chunks_exact(3)
            .zip(b.chunks_exact(3))
            .filter(|(_, r)| r[2] >= KEYPOINT_MIN_SCORE)
            .map(|(s, r)| ((s[0] - r[0]).powi(2) + (s[1] - r[1]).powi(2)).sqrt() / size)
            .collect();
        return (!d.is_empty()).then(|| Comparison::Pose(d.iter().sum::<f32>() / d.len() as f32));
    }
    if let (Some(ma), Some(mb)) = (tensor(served, "male"), tensor(reference, "male")) {
        let (ma, mb) = (ma.first()?, mb.first()?);
        let age = match (tensor(served, "age"), tensor(reference, "age")) {
            (Some(aa), Some(ab)) => Some((aa.first()? - ab.first()?).abs()),
            _ => None,
        };
        return Some(Comparison::AgeGender((*ma > 0.5) == (*mb > 0.5), age));
    }
    match (served, reference) {
        (OutputValue::TopK(a), OutputValue::TopK(b)) => Some(Comparison::Label(
            a.first().map(|l| &l.label) == b.first().map(|l| &l.label),
        )),
        _ => None,
    }
}

/// Agreement of a set of served results with per-frame inference.
#[derive(Debug, Default, Clone)]
pub struct Agreement {
    /// Pose errors (mean keypoint distance / box size).
    pub pose: Vec<f32>,
    /// Same gender label, per compared face.
    pub gender: Vec<bool>,
    /// Age differences, years.
    pub age: Vec<f32>,
    /// Same best label, per compared top-k output.
    pub label: Vec<bool>,
    /// Served results per-frame inference had nothing to compare with (no such object, or
    /// no face found there).
    pub unmatched: u64,
}

impl Agreement {
    /// Adds one comparison (`None`: unmatched).
    pub fn add(&mut self, c: Option<Comparison>) {
        match c {
            Some(Comparison::Pose(e)) => self.pose.push(e),
            Some(Comparison::AgeGender(g, a)) => {
                self.gender.push(g);
                self.age.extend(a);
            }
            Some(Comparison::Label(l)) => self.label.push(l),
            None => self.unmatched += 1,
        }
    }

    /// Results compared.
    pub fn compared(&self) -> usize {
        self.pose.len() + self.gender.len() + self.label.len()
    }

    /// The share of compared results that agree (a pose within [`POSE_AGREES_WITHIN`], the
    /// same gender, the same label); `None` when none was compared.
    pub fn share(&self) -> Option<f64> {
        let agree = self
            .pose
            .iter()
            .filter(|e| **e <= POSE_AGREES_WITHIN)
            .count()
            + self.gender.iter().filter(|g| **g).count()
            + self.label.iter().filter(|l| **l).count();
        let n = self.compared();
        (n > 0).then(|| agree as f64 / n as f64)
    }
}

/// The median and the 90th percentile of `v` (`None` when empty).
pub fn median_p90(v: &[f32]) -> Option<(f32, f32)> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f32::total_cmp);
    let at = |p: f64| s[((s.len() - 1) as f64 * p).round() as usize];
    Some((at(0.5), at(0.9)))
}

/// One model's counts over the clip.
#[derive(Debug, Default, Clone)]
pub struct ModelCounts {
    /// Requests the tracked pass offered (objects routed to the model).
    pub offered: u64,
    /// Requests it inferred, by reason.
    pub inferred: BTreeMap<String, u64>,
    /// Requests it answered with a stored result.
    pub reused: u64,
    /// Reused results against per-frame inference.
    pub reused_agreement: Agreement,
    /// Every served result (inferred or reused) against per-frame inference.
    pub all_agreement: Agreement,
    /// Ages, frames, of the reused results.
    pub reused_ages: Vec<f32>,
}

impl ModelCounts {
    /// Counts one decision.
    pub fn count(&mut self, d: &Decision) {
        self.offered += 1;
        match d {
            Decision::Infer(why) => *self.inferred.entry(why_name(*why).into()).or_default() += 1,
            Decision::Reuse { age_frames, .. } => {
                self.reused += 1;
                self.reused_ages.push(*age_frames as f32);
            }
        }
    }

    /// Inferred requests.
    pub fn inferred_total(&self) -> u64 {
        self.inferred.values().sum()
    }
}

/// A short name for a reason to infer.
pub fn why_name(w: Why) -> &'static str {
    w.name()
}

#[cfg(test)]
mod tests {
    use super::*;
    use camdnn_protocol::{Label, Tensor};

    fn kp(points: &[[f32; 3]]) -> OutputValue {
        OutputValue::Tensors(vec![Tensor {
            name: "keypoints".into(),
            dims: vec![points.len() as u32, 3],
            data: points.iter().flatten().copied().collect(),
        }])
    }

    #[test]
    fn poses_compare_by_distance_over_box_size_on_confident_keypoints() {
        let r = kp(&[[10.0, 10.0, 0.9], [50.0, 50.0, 0.1]]);
        let s = kp(&[[13.0, 14.0, 0.9], [0.0, 0.0, 0.9]]);
        // Only the first keypoint is confident: 5 px over a box of 100 px.
        let c = compare(&s, &r, BBox::new(0.0, 0.0, 50.0, 100.0));
        assert_eq!(c, Some(Comparison::Pose(0.05)));
        assert_eq!(
            compare(&s, &kp(&[[1.0, 1.0, 0.0]]), BBox::new(0.0, 0.0, 1.0, 1.0)),
            None
        );
    }

    #[test]
    fn faces_and_labels_compare_by_label() {
        let face = |male: f32, age: f32| {
            OutputValue::Tensors(vec![
                Tensor {
                    name: "age".into(),
                    dims: vec![1],
                    data: vec![age],
                },
                Tensor {
                    name: "male".into(),
                    dims: vec![1],
                    data: vec![male],
                },
            ])
        };
        let b = BBox::new(0.0, 0.0, 1.0, 1.0);
        assert_eq!(
            compare(&face(0.9, 30.0), &face(0.6, 33.5), b),
            Some(Comparison::AgeGender(true, Some(3.5)))
        );
        assert_eq!(
            compare(&face(0.4, 30.0), &face(0.6, 30.0), b),
            Some(Comparison::AgeGender(false, Some(0.0)))
        );
        // faceres without its age head (the default): gender alone.
        let gender = |male: f32| {
            OutputValue::Tensors(vec![Tensor {
                name: "male".into(),
                dims: vec![1],
                data: vec![male],
            }])
        };
        assert_eq!(
            compare(&gender(0.9), &gender(0.2), b),
            Some(Comparison::AgeGender(false, None))
        );
        let top = |l: &str| {
            OutputValue::TopK(vec![Label {
                label: l.into(),
                score: 1.0,
            }])
        };
        assert_eq!(
            compare(&top("a"), &top("a"), b),
            Some(Comparison::Label(true))
        );
        assert_eq!(compare(&top("a"), &face(0.5, 1.0), b), None);
        let mut a = Agreement::default();
        for c in [
            Some(Comparison::Pose(0.05)),
            Some(Comparison::Pose(0.3)),
            Some(Comparison::Label(true)),
            None,
        ] {
            a.add(c);
        }
        assert_eq!((a.compared(), a.unmatched), (3, 1));
        assert!((a.share().unwrap() - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(median_p90(&[3.0, 1.0, 2.0]), Some((2.0, 3.0)));
    }
}
