//! MediaPipe face-landmark decoding (`face_landmark.tflite`: 468 points and a face
//! flag) on the region cut around a detected face. The region is MediaPipe's
//! `DetectionsToRectsCalculator` + `RectTransformationCalculator` without the rotation:
//! the detection's box made square on its longer side and scaled by `roi_scale` (1.5).

use crate::{BBox, Result, VisionError};

/// The square region, in frame pixels, the landmark model sees for a face `bbox`.
pub fn landmark_roi(bbox: BBox, roi_scale: f32) -> BBox {
    let side = bbox.width().max(bbox.height()) * roi_scale;
    let (cx, cy) = ((bbox.x0 + bbox.x1) / 2.0, (bbox.y0 + bbox.y1) / 2.0);
    BBox::from_center(cx, cy, side, side)
}

/// One face's landmarks in frame pixels.
#[derive(Debug, Clone, PartialEq)]
pub struct FaceLandmarks {
    /// `(x, y, z)` per landmark; z in the same pixel scale as x (relative depth).
    pub points: Vec<[f32; 3]>,
    /// Face presence probability (sigmoid of the face flag logit).
    pub score: f32,
}

/// Decodes the landmark model's outputs for the crop `roi` (frame pixels) that was
/// stretched to `input_width` x `input_height`: `raw` holds `(x, y, z)` per landmark
/// in input pixels, `flag_logit` is the face flag. `None` when the face probability is
/// below `threshold` (the crop holds no face).
pub fn decode_face_landmarks(
    raw: &[f32],
    flag_logit: f32,
    roi: BBox,
    input_width: f32,
    input_height: f32,
    threshold: f32,
) -> Result<Option<FaceLandmarks>> {
    if raw.is_empty() || raw.len() % 3 != 0 {
        return Err(VisionError::tensor(
            "face landmarks",
            format!("{} values, expected (x, y, z) triples", raw.len()),
        ));
    }
    if !(input_width > 0.0 && input_height > 0.0) {
        return Err(VisionError::config("input_width", "must be positive"));
    }
    let score = 1.0 / (1.0 + (-flag_logit).exp());
    if score.is_nan() || score < threshold {
        return Ok(None);
    }
    let (sx, sy) = (roi.width() / input_width, roi.height() / input_height);
    let points = raw
        .chunks_exact(3)
        .map(|p| [roi.x0 + p[0] * sx, roi.y0 + p[1] * sy, p[2] * sx])
        .collect();
    Ok(Some(FaceLandmarks { points, score }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_roi_is_the_longer_side_squared_and_scaled_around_the_centre() {
        let r = landmark_roi(BBox::new(10.0, 20.0, 50.0, 40.0), 1.5);
        assert_eq!(r, BBox::new(0.0, 0.0, 60.0, 60.0));
    }

    #[test]
    fn landmarks_map_from_input_pixels_to_the_roi_and_a_low_flag_rejects() {
        let roi = BBox::new(100.0, 50.0, 196.0, 146.0); // 96 px, input 192: half scale
        let raw = [0.0, 0.0, 4.0, 192.0, 96.0, -2.0];
        let f = decode_face_landmarks(&raw, 3.0, roi, 192.0, 192.0, 0.5)
            .unwrap()
            .unwrap();
        assert_eq!(f.points, vec![[100.0, 50.0, 2.0], [196.0, 98.0, -1.0]]);
        assert!((f.score - 1.0 / (1.0 + (-3.0f32).exp())).abs() < 1e-6);
        assert_eq!(
            decode_face_landmarks(&raw, -3.0, roi, 192.0, 192.0, 0.5).unwrap(),
            None
        );
        assert!(decode_face_landmarks(&raw[..4], 3.0, roi, 192.0, 192.0, 0.5).is_err());
        assert!(
            decode_face_landmarks(&raw, f32::NAN, roi, 192.0, 192.0, 0.5)
                .unwrap()
                .is_none()
        );
    }
}
