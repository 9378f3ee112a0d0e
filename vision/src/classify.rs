//! Classifier post-processing: softmax, top-k classes, and PP-OCR's text orientation check
//! (0 or 180 degrees) that flips upside-down crops before recognition.

use crate::{Result, RgbImage, VisionError};

/// Numerically stable softmax of `logits` into `out` (same length).
pub(crate) fn softmax_into(logits: &[f32], out: &mut [f32]) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for (o, &l) in out.iter_mut().zip(logits) {
        *o = (l - max).exp();
        sum += *o;
    }
    for o in out.iter_mut() {
        *o /= sum;
    }
}

/// Softmax of `logits` (stable: the maximum is subtracted first).
pub fn softmax(logits: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0; logits.len()];
    softmax_into(logits, &mut out);
    out
}

/// One class and its score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassScore {
    /// Class index in the classifier's label list.
    pub class_id: usize,
    /// Score (a probability after softmax).
    pub score: f32,
}

impl ClassScore {
    /// This class's name in `labels`, if there is one.
    pub fn label<'a>(&self, labels: &'a [String]) -> Option<&'a str> {
        labels.get(self.class_id).map(String::as_str)
    }
}

/// The `k` best classes of one score vector, best first (NaN scores rank last, ties keep
/// index order), softmax-ed first when `apply_softmax`.
pub fn top_k(scores: &[f32], k: usize, apply_softmax: bool) -> Vec<ClassScore> {
    let probs;
    let s = if apply_softmax {
        probs = softmax(scores);
        &probs
    } else {
        scores
    };
    let mut idx: Vec<usize> = (0..s.len()).collect();
    let key = |i: usize| {
        if s[i].is_nan() {
            f32::NEG_INFINITY
        } else {
            s[i]
        }
    };
    idx.sort_by(|&a, &b| key(b).total_cmp(&key(a)));
    idx.into_iter()
        .take(k)
        .map(|i| ClassScore {
            class_id: i,
            score: s[i],
        })
        .collect()
}

/// [`top_k`] for each of the `batch` rows of a `[batch, classes]` output (trailing 1-sized
/// dimensions of e.g. `[batch, classes, 1, 1]` are the same data).
pub fn batch_top_k(
    output: &[f32],
    batch: usize,
    k: usize,
    apply_softmax: bool,
) -> Result<Vec<Vec<ClassScore>>> {
    if batch == 0 || output.is_empty() || output.len() % batch != 0 {
        return Err(VisionError::tensor(
            "classifier output",
            format!(
                "{} values do not split into {batch} non-empty rows",
                output.len()
            ),
        ));
    }
    let classes = output.len() / batch;
    Ok(output
        .chunks_exact(classes)
        .map(|row| top_k(row, k, apply_softmax))
        .collect())
}

/// Reads a PP-OCR orientation classifier output (`[k, 2]` probabilities for labels "0" and
/// "180") and rotates by 180 degrees each crop classified "180" with a score above `thresh`
/// (PP-OCR's `cls_thresh`, 0.9). Returns which crops were rotated.
pub fn apply_orientation(crops: &mut [RgbImage], output: &[f32], thresh: f32) -> Result<Vec<bool>> {
    if output.len() != crops.len() * 2 {
        return Err(VisionError::tensor(
            "orientation classifier output",
            format!(
                "{} crops need {} values ([k, 2]), got {}",
                crops.len(),
                crops.len() * 2,
                output.len()
            ),
        ));
    }
    let mut flipped = Vec::with_capacity(crops.len());
    for (crop, p) in crops.iter_mut().zip(output.chunks_exact(2)) {
        let flip = p[1] > p[0] && p[1] > thresh;
        if flip {
            crop.rotate_180();
        }
        flipped.push(flip);
    }
    Ok(flipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_is_stable_and_sums_to_one() {
        let p = softmax(&[1000.0, 1000.0, 999.0]);
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!((p[0] - p[1]).abs() < 1e-7 && p[2] < p[0]);
        let p = softmax(&[0.0, 2f32.ln()]);
        assert!((p[0] - 1.0 / 3.0).abs() < 1e-6 && (p[1] - 2.0 / 3.0).abs() < 1e-6);
        assert!(softmax(&[]).is_empty());
    }

    #[test]
    fn top_k_orders_and_labels() {
        let labels: Vec<String> = ["cat", "dog", "car", "bus"].map(String::from).to_vec();
        let t = top_k(&[0.1, 0.5, f32::NAN, 0.4], 3, false);
        assert_eq!(
            t.iter().map(|c| c.class_id).collect::<Vec<_>>(),
            vec![1, 3, 0]
        );
        assert_eq!(t[0].label(&labels), Some("dog"));
        assert_eq!(top_k(&[1.0, 2.0], 5, false).len(), 2);
        let t = top_k(&[0.0, 2f32.ln()], 1, true);
        assert_eq!(t[0].class_id, 1);
        assert!((t[0].score - 2.0 / 3.0).abs() < 1e-6);
        let b = batch_top_k(&[0.1, 0.9, 0.8, 0.2], 2, 1, false).unwrap();
        assert_eq!((b[0][0].class_id, b[1][0].class_id), (1, 0));
        assert!(batch_top_k(&[0.0; 5], 2, 1, false).is_err());
        assert!(batch_top_k(&[], 0, 1, false).is_err());
    }

    #[test]
    fn orientation_flips_only_confident_180() {
        let mk = || RgbImage::new(2, 1, vec![1, 1, 1, 2, 2, 2]).unwrap();
        let mut crops = vec![mk(), mk(), mk()];
        let out = [0.99, 0.01, 0.05, 0.95, 0.3, 0.7];
        let flipped = apply_orientation(&mut crops, &out, 0.9).unwrap();
        assert_eq!(flipped, vec![false, true, false]);
        assert_eq!(crops[1].pixel(0, 0), Some([2, 2, 2]));
        assert_eq!(crops[2].pixel(0, 0), Some([1, 1, 1]));
        assert!(apply_orientation(&mut crops, &out[..5], 0.9).is_err());
    }
}
