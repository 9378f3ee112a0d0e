//! Finding a model's outputs among its tensors, and naming what they found.

use anyhow::Context;
use camdnn_engine::Tensor;
use camdnn_protocol::{Label, OutputValue};
use camdnn_vision::Detection;

use super::decoded::Found;

/// Output #`n` as f32 values.
pub(super) fn f32_at(outputs: &[Tensor], n: usize) -> anyhow::Result<&[f32]> {
    let t = outputs
        .get(n)
        .with_context(|| format!("the model has no output #{n}"))?;
    f32s(t)
}

/// A tensor's f32 values.
pub(super) fn f32s(t: &Tensor) -> anyhow::Result<&[f32]> {
    t.as_f32()
        .with_context(|| format!("output {:?} is not f32", t.name()))
}

/// Detections named by class id from `labels` (the id itself when out of range).
pub(super) fn named(dets: Vec<Detection>, labels: &[String]) -> Vec<Found> {
    dets.into_iter()
        .map(|d| Found {
            class: labels
                .get(d.class_id)
                .cloned()
                .unwrap_or_else(|| d.class_id.to_string()),
            detection: d,
        })
        .collect()
}

/// Detections all named `label`.
pub(super) fn named_as(dets: Vec<Detection>, label: &str) -> Vec<Found> {
    dets.into_iter()
        .map(|d| Found {
            detection: d,
            class: label.to_string(),
        })
        .collect()
}

/// The output whose last dim is `n` (MTCNN's outputs are told apart by their channels).
pub(super) fn by_last_dim<'a>(
    outputs: &'a [Tensor],
    n: usize,
    what: &str,
) -> anyhow::Result<&'a Tensor> {
    outputs
        .iter()
        .find(|t| t.shape().last() == Some(&n))
        .with_context(|| {
            let shapes: Vec<_> = outputs.iter().map(|t| t.shape().to_vec()).collect();
            format!("{what}: no output with last dim {n} among {shapes:?}")
        })
}

/// The output with `n` elements (BlazeFace's and the landmark model's outputs are told
/// apart by their sizes).
pub(super) fn by_len<'a>(
    outputs: &'a [Tensor],
    n: usize,
    what: &str,
) -> anyhow::Result<&'a Tensor> {
    outputs.iter().find(|t| t.len() == n).with_context(|| {
        let shapes: Vec<_> = outputs.iter().map(|t| t.shape().to_vec()).collect();
        format!("{what}: no output of {n} values among {shapes:?}")
    })
}

/// A face's score as a result (a face a stage rejected, or one without landmarks).
pub(super) fn face_label(score: f32) -> OutputValue {
    OutputValue::TopK(vec![Label {
        label: "face".into(),
        score,
    }])
}
