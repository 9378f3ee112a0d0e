//! Per-object models' outputs read as results, with what each does to its
//! object ([`Verdict`]).

use anyhow::{bail, Context};
use camdnn_engine::Tensor;
use camdnn_protocol::{Label, OutputValue};
use camdnn_vision::age_gender::decode_age_gender;
use camdnn_vision::ctc::CtcDecoder;
use camdnn_vision::face_landmarks;
use camdnn_vision::mtcnn;
use camdnn_vision::pose::decode_movenet;
use camdnn_vision::pose_face::{face_from_pose, FaceRule};
use camdnn_vision::{BBox, Placement, Transform};

use super::decoded::{Decoded, Verdict};
use super::tensors::{by_last_dim, by_len, f32_at, f32s, face_label};

/// A result that keeps its object as it is and leaves the crop unturned.
fn kept(value: OutputValue) -> Decoded {
    Decoded::Output {
        value,
        rotate: false,
        verdict: Verdict::Keep,
    }
}

/// Named tensors as a protocol result.
fn tensor(name: &str, dims: Vec<u32>, data: Vec<f32>) -> camdnn_protocol::Tensor {
    camdnn_protocol::Tensor {
        name: name.into(),
        dims,
        data,
    }
}

/// MoveNet on a person's fit crop (`input`: its size and placement):
/// keypoints in frame pixels and, with a face rule, the face box its
/// children crop.
pub(super) fn movenet(
    outputs: &[Tensor],
    transform: &Transform,
    bbox: Option<BBox>,
    input: (u32, u32, Placement),
    face: Option<&FaceRule>,
) -> anyhow::Result<Decoded> {
    let (w, h, placement) = input;
    let bbox = bbox.context("MoveNet runs on a person's crop")?;
    let (fw, fh) = (transform.frame_width, transform.frame_height);
    let crop = camdnn_vision::crop_fit_transform(fw as u32, fh as u32, bbox, w, h, placement)?;
    let t = outputs.first().context("MoveNet has no output")?;
    let points = decode_movenet(f32s(t)?, t.shape(), &crop)?;
    let mut tensors = vec![tensor(
        "keypoints",
        vec![points.len() as u32, 3],
        points.iter().flat_map(|k| [k.x, k.y, k.score]).collect(),
    )];
    let verdict = match face {
        None => Verdict::Keep,
        Some(f) => {
            let b = face_from_pose(&points, f, fw, fh).ok();
            if let Some(b) = b {
                tensors.push(tensor("face_box", vec![4], vec![b.x0, b.y0, b.x1, b.y1]));
            }
            Verdict::Part(b)
        }
    };
    Ok(Decoded::Output {
        value: OutputValue::Tensors(tensors),
        rotate: false,
        verdict,
    })
}

/// A face's gender (`male`) and, when `with_age`, its age; the heads are
/// told apart by size.
pub(super) fn age_gender(outputs: &[Tensor], with_age: bool) -> anyhow::Result<Decoded> {
    let age = f32s(by_last_dim(outputs, 100, "age head [1, 100]")?)?;
    let male = f32s(by_last_dim(outputs, 1, "gender head [1, 1]")?)?;
    let a = decode_age_gender(age, male[0])?;
    let mut tensors = vec![tensor("male", vec![1], vec![male[0]])];
    if with_age {
        tensors.insert(0, tensor("age", vec![1], vec![a.age]));
    }
    Ok(kept(OutputValue::Tensors(tensors)))
}

/// MTCNN R-Net on a candidate's crop: reject it, or refine its box.
pub(super) fn rnet(
    outputs: &[Tensor],
    bbox: Option<BBox>,
    threshold: f32,
) -> anyhow::Result<Decoded> {
    let bbox = bbox.context("R-Net runs on an object's crop")?;
    let prob = f32s(by_last_dim(outputs, 2, "R-Net scores")?)?;
    let reg = f32s(by_last_dim(outputs, 4, "R-Net box regression")?)?;
    let (value, verdict) = match mtcnn::refine_rnet(bbox, reg, prob, threshold)? {
        Some((bbox, score)) => (face_label(score), Verdict::Refine { bbox, score }),
        None => (face_label(prob[1]), Verdict::Reject),
    };
    Ok(Decoded::Output {
        value,
        rotate: false,
        verdict,
    })
}

/// MTCNN O-Net on a candidate's crop: reject it, or its final box and five
/// landmarks.
pub(super) fn onet(
    outputs: &[Tensor],
    bbox: Option<BBox>,
    threshold: f32,
) -> anyhow::Result<Decoded> {
    let bbox = bbox.context("O-Net runs on an object's crop")?;
    let prob = f32s(by_last_dim(outputs, 2, "O-Net scores")?)?;
    let reg = f32s(by_last_dim(outputs, 4, "O-Net box regression")?)?;
    let points = f32s(by_last_dim(outputs, 10, "O-Net landmarks")?)?;
    Ok(
        match mtcnn::decode_onet(bbox, reg, points, prob, threshold)? {
            Some(face) => Decoded::Output {
                value: OutputValue::Tensors(vec![tensor(
                    "landmarks",
                    vec![5, 2],
                    face.landmarks.iter().flatten().copied().collect(),
                )]),
                rotate: false,
                verdict: Verdict::Refine {
                    bbox: face.bbox,
                    score: face.score,
                },
            },
            None => Decoded::Output {
                value: face_label(prob[1]),
                rotate: false,
                verdict: Verdict::Reject,
            },
        },
    )
}

/// What the face-landmark model needs to map its points back to the frame.
#[derive(Debug, Clone, Copy)]
pub(super) struct LandmarkInput {
    /// Face flag under which the face is rejected.
    pub threshold: f32,
    /// The square region around the face the input is cut from.
    pub roi_scale: f32,
    /// The network's input width, pixels.
    pub width: f32,
    /// The network's input height, pixels.
    pub height: f32,
}

/// MediaPipe face landmarks on the region around a face: its (x, y, z)
/// points in frame pixels, or a rejection when the face flag is low.
pub(super) fn face_landmarks(
    outputs: &[Tensor],
    bbox: Option<BBox>,
    input: LandmarkInput,
) -> anyhow::Result<Decoded> {
    let bbox = bbox.context("face landmarks run on a face's crop")?;
    let flag = f32s(by_len(outputs, 1, "face flag")?)?[0];
    let raw = outputs
        .iter()
        .find(|t| t.len() > 3 && t.len() % 3 == 0)
        .context("face landmarks: no output of (x, y, z) triples")?;
    let roi = face_landmarks::landmark_roi(bbox, input.roi_scale);
    Ok(
        match face_landmarks::decode_face_landmarks(
            f32s(raw)?,
            flag,
            roi,
            input.width,
            input.height,
            input.threshold,
        )? {
            Some(face) => kept(OutputValue::Tensors(vec![tensor(
                "landmarks",
                vec![face.points.len() as u32, 3],
                face.points.iter().flatten().copied().collect(),
            )])),
            None => Decoded::Output {
                value: face_label(1.0 / (1.0 + (-flag).exp())),
                rotate: false,
                verdict: Verdict::Reject,
            },
        },
    )
}

/// A classifier's `k` best classes, named from `labels`.
pub(super) fn top_k(
    outputs: &[Tensor],
    k: usize,
    labels: &[String],
    softmax: bool,
) -> anyhow::Result<Decoded> {
    let scores = camdnn_vision::classify::top_k(f32_at(outputs, 0)?, k, softmax);
    Ok(kept(OutputValue::TopK(
        scores
            .iter()
            .map(|s| Label {
                label: s
                    .label(labels)
                    .map_or_else(|| s.class_id.to_string(), str::to_string),
                score: s.score,
            })
            .collect(),
    )))
}

/// A text line's orientation, 0 or 180 degrees; above `threshold` the
/// children see the crop turned.
pub(super) fn orientation(outputs: &[Tensor], threshold: f32) -> anyhow::Result<Decoded> {
    let p = f32_at(outputs, 0)?;
    if p.len() < 2 {
        bail!(
            "orientation output has {} scores, needs 2 (0 and 180 degrees)",
            p.len()
        );
    }
    let (label, score) = if p[1] > p[0] {
        ("180", p[1])
    } else {
        ("0", p[0])
    };
    Ok(Decoded::Output {
        value: OutputValue::TopK(vec![Label {
            label: label.into(),
            score,
        }]),
        rotate: p[1] > threshold,
        verdict: Verdict::Keep,
    })
}

/// A CTC recogniser's text and its score.
pub(super) fn ctc(outputs: &[Tensor], decoder: &CtcDecoder) -> anyhow::Result<Decoded> {
    let text = decoder.decode(f32_at(outputs, 0)?)?;
    Ok(kept(OutputValue::TopK(vec![Label {
        label: text.text,
        score: text.score,
    }])))
}

/// Every output as it is (non-f32 outputs as empty data).
pub(super) fn raw_tensors(outputs: &[Tensor]) -> Decoded {
    kept(OutputValue::Tensors(
        outputs
            .iter()
            .map(|t| {
                tensor(
                    t.name(),
                    t.shape().iter().map(|&d| d as u32).collect(),
                    t.as_f32().map(<[f32]>::to_vec).unwrap_or_default(),
                )
            })
            .collect(),
    ))
}
