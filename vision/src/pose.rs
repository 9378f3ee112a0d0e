//! Single-person pose (MoveNet): 17 COCO keypoints read from the model's `[1, 1, 17, 3]` output
//! (each `y, x, score`, coordinates as fractions of the square input), mapped back to frame
//! pixels (the face they show: [`crate::pose_face`]).

use crate::{Result, Transform, VisionError};

/// The 17 COCO keypoints in MoveNet's order.
pub const KEYPOINT_NAMES: [&str; 17] = [
    "nose",
    "left_eye",
    "right_eye",
    "left_ear",
    "right_ear",
    "left_shoulder",
    "right_shoulder",
    "left_elbow",
    "right_elbow",
    "left_wrist",
    "right_wrist",
    "left_hip",
    "right_hip",
    "left_knee",
    "right_knee",
    "left_ankle",
    "right_ankle",
];

/// One keypoint in frame pixels with the model's confidence.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Keypoint {
    /// Horizontal position, frame pixels.
    pub x: f32,
    /// Vertical position, frame pixels.
    pub y: f32,
    /// Confidence in `0..=1`.
    pub score: f32,
}

/// Reads MoveNet's output for one crop. `transform` maps the crop's input pixels to frame
/// pixels ([`crate::crop_fit_transform`] of the person box). Keypoints keep MoveNet's order
/// ([`KEYPOINT_NAMES`]); positions are not clamped (a wrist may leave the box).
pub fn decode_movenet(
    output: &[f32],
    shape: &[usize],
    transform: &Transform,
) -> Result<Vec<Keypoint>> {
    const WHAT: &str = "MoveNet keypoints";
    let n = KEYPOINT_NAMES.len();
    if !matches!(shape, [1, 1, k, 3] | [1, k, 3] | [k, 3] if *k == n) {
        return Err(VisionError::tensor(
            WHAT,
            format!("shape {shape:?} is not [1, 1, {n}, 3]"),
        ));
    }
    if output.len() != n * 3 {
        return Err(VisionError::tensor(
            WHAT,
            format!("needs {} values, got {}", n * 3, output.len()),
        ));
    }
    output
        .chunks_exact(3)
        .enumerate()
        .map(|(i, v)| {
            let (y, x, score) = (v[0], v[1], v[2]);
            if !(x.is_finite() && y.is_finite() && score.is_finite()) {
                return Err(VisionError::tensor(
                    WHAT,
                    format!("keypoint {} is not finite: {v:?}", KEYPOINT_NAMES[i]),
                ));
            }
            Ok(Keypoint {
                x: (x * transform.input_width - transform.pad_x) / transform.scale_x,
                y: (y * transform.input_height - transform.pad_y) / transform.scale_y,
                score,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{crop_fit_transform, BBox, Placement};

    #[test]
    fn keypoints_map_back_through_the_fit_crop() {
        // A 100x200 person box at (50, 20) in a 640x480 frame, fit into 192x192: scale 0.96,
        // drawn 96 px wide, centred (left 48).
        let t = crop_fit_transform(
            640,
            480,
            BBox::new(50.0, 20.0, 150.0, 220.0),
            192,
            192,
            Placement::Center,
        )
        .unwrap();
        let mut out = vec![0.0f32; 17 * 3];
        // nose at the top centre of the drawn box, left ankle at its bottom-left corner.
        out[0..3].copy_from_slice(&[0.0, 0.5, 0.9]);
        out[15 * 3..15 * 3 + 3].copy_from_slice(&[1.0, 48.0 / 192.0, 0.8]);
        let k = decode_movenet(&out, &[1, 1, 17, 3], &t).unwrap();
        assert_eq!(k.len(), 17);
        assert!(
            (k[0].x - 100.0).abs() < 1e-3 && (k[0].y - 20.0).abs() < 1e-3,
            "{:?}",
            k[0]
        );
        assert!(
            (k[15].x - 50.0).abs() < 1e-3 && (k[15].y - 220.0).abs() < 1e-3,
            "{:?}",
            k[15]
        );
        assert_eq!(k[0].score, 0.9);
    }

    #[test]
    fn bad_outputs_are_named_errors() {
        let t = Transform::identity(192, 192);
        let e = decode_movenet(&[0.0; 51], &[1, 17, 2], &t).unwrap_err();
        assert!(e.to_string().contains("is not [1, 1, 17, 3]"), "{e}");
        let e = decode_movenet(&[0.0; 50], &[1, 1, 17, 3], &t).unwrap_err();
        assert!(e.to_string().contains("needs 51 values"), "{e}");
        let mut v = vec![0.0; 51];
        v[4] = f32::NAN;
        let e = decode_movenet(&v, &[1, 1, 17, 3], &t).unwrap_err();
        assert!(e.to_string().contains("left_eye is not finite"), "{e}");
    }
}
