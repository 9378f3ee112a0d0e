//! Whether a pose shows a face, and the square face box a face model of the next level runs
//! on. A face is used only when it is seen from the front and large enough for the model: the
//! nose and both eyes are confident, in a front view's order (not the back of a head, where
//! MoveNet still places head keypoints), and the box is at least `min_side` pixels.

use crate::pose::Keypoint;
use crate::BBox;

/// When pose keypoints give a face crop, and how large it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaceRule {
    /// Confidence the nose and both eyes need.
    pub min_score: f32,
    /// How much larger than the keypoints' extent the box is (0.2 = 20 %).
    pub margin: f32,
    /// Smallest side in frame pixels: a face model sees a smaller face upsampled to its input
    /// and answers its prior (faceres's gender drifts to ~0.63 below 48 px).
    pub min_side: f32,
}

/// Why a pose gives no face crop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NoFace {
    /// The nose or an eye is missing or below `min_score`.
    NotSeen,
    /// The eyes and nose are in the order of a head seen from behind (or mirrored).
    FacingAway,
    /// The face box would be `side` pixels, under `min_side`.
    TooSmall {
        /// The side the box would have, frame pixels.
        side: f32,
    },
}

/// Eye-distance multiple of the box side before the margin: with the default 20 % margin the
/// box is 3.5 eye distances, the crop the Human library cuts for faceres around the same face
/// (its BlazeFace box enlarged 1.4x, squared).
const EYE_SPAN: f32 = 2.9;
/// Ear-to-ear multiple of the side before the margin (ears seen: a face turned sideways).
const EAR_SPAN: f32 = 1.25;
/// Nose-to-eye-line multiple of the side before the margin (a face tilted up or down).
const NOSE_DROP: f32 = 3.0;
/// How far below the eyes' and nose's mean the box centre is, as a share of its side.
const CENTRE_DROP: f32 = 0.125;

/// The square face box the head keypoints (nose, eyes, ears, COCO order) imply, clamped to the
/// frame, or why there is none ([`NoFace`]).
///
/// Facing: MoveNet names eyes by the person's own left and right, so seen from the front the
/// left eye is on the image's right, and the nose lies on the side of the eye line that turning
/// `left_eye - right_eye` clockwise (image y down) points to; a head seen from behind has them
/// the other way round whatever its tilt.
pub fn face_from_pose(
    keypoints: &[Keypoint],
    rule: &FaceRule,
    frame_width: f32,
    frame_height: f32,
) -> Result<BBox, NoFace> {
    if keypoints.len() < 5 {
        return Err(NoFace::NotSeen);
    }
    let seen = |i: usize| (keypoints[i].score >= rule.min_score).then_some(keypoints[i]);
    let (nose, le, re) = match (seen(0), seen(1), seen(2)) {
        (Some(n), Some(l), Some(r)) => (n, l, r),
        _ => return Err(NoFace::NotSeen),
    };
    let (ex, ey) = (le.x - re.x, le.y - re.y);
    let (nx, ny) = (nose.x - re.x, nose.y - re.y);
    if ex * ny - ey * nx <= 0.0 {
        return Err(NoFace::FacingAway);
    }
    let eye_dist = ex.hypot(ey);
    let eye_mid = ((le.x + re.x) / 2.0, (le.y + re.y) / 2.0);
    let nose_drop = (nose.x - eye_mid.0).hypot(nose.y - eye_mid.1);
    let mut side = (EYE_SPAN * eye_dist).max(NOSE_DROP * nose_drop);
    if let (Some(la), Some(ra)) = (seen(3), seen(4)) {
        side = side.max(EAR_SPAN * (la.x - ra.x).hypot(la.y - ra.y));
    }
    side *= 1.0 + rule.margin.max(0.0);
    if side.is_nan() || side < rule.min_side.max(1.0) {
        return Err(NoFace::TooSmall { side });
    }
    let cx = (nose.x + le.x + re.x) / 3.0;
    let cy = (nose.y + le.y + re.y) / 3.0 + CENTRE_DROP * side;
    let b = BBox::from_center(cx, cy, side, side).clamp(frame_width, frame_height);
    if b.width() < rule.min_side.max(1.0) || b.height() < rule.min_side.max(1.0) {
        return Err(NoFace::TooSmall {
            side: b.width().min(b.height()),
        });
    }
    Ok(b)
}

#[cfg(test)]
#[path = "pose_face_tests.rs"]
mod tests;
