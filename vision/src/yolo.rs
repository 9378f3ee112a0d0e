//! YOLOv8 (Ultralytics export) output decoding: `[1, 4 + nc, N]`, each column `cx, cy, w, h`
//! in network-input pixels followed by `nc` class scores (already sigmoid-ed, no objectness).

use crate::{BBox, Detection, Result, Transform, VisionError};

/// Decodes the candidates scoring at least `score_threshold` (best class per anchor), mapped to
/// frame pixels through `transform`; run [`crate::nms()`] on the result.
///
/// `shape` is `[1, 4 + nc, N]` or `[4 + nc, N]`; transposed exports (`[1, N, 4 + nc]`) must be
/// transposed first.
pub fn decode_yolov8(
    output: &[f32],
    shape: &[usize],
    score_threshold: f32,
    transform: &Transform,
) -> Result<Vec<Detection>> {
    const WHAT: &str = "YOLOv8 output";
    let (rows, n) = match shape {
        [1, rows, n] | [rows, n] => (*rows, *n),
        _ => {
            return Err(VisionError::tensor(
                WHAT,
                format!("shape {shape:?} is not [1, 4+nc, N]"),
            ))
        }
    };
    if rows < 5 {
        return Err(VisionError::tensor(
            WHAT,
            format!("shape {shape:?} has no class rows (needs 4+nc, nc >= 1)"),
        ));
    }
    let expected = rows
        .checked_mul(n)
        .ok_or_else(|| VisionError::tensor(WHAT, "shape overflows"))?;
    if output.len() != expected {
        return Err(VisionError::tensor(
            WHAT,
            format!(
                "shape {shape:?} needs {expected} values, got {}",
                output.len()
            ),
        ));
    }
    let row = |r: usize| &output[r * n..(r + 1) * n];
    let mut out = Vec::new();
    for i in 0..n {
        let mut best = (0usize, f32::NEG_INFINITY);
        for c in 0..rows - 4 {
            let s = row(4 + c)[i];
            if s > best.1 {
                best = (c, s);
            }
        }
        if !best.1.is_finite() || best.1 < score_threshold {
            continue;
        }
        let b = BBox::from_center(row(0)[i], row(1)[i], row(2)[i], row(3)[i]);
        if !b.is_finite() {
            continue;
        }
        out.push(Detection {
            bbox: transform.to_frame(b),
            class_id: best.0,
            score: best.1,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{nms, NmsConfig};

    /// Builds a `[1, 4+nc, N]` tensor from per-anchor (cx, cy, w, h, scores).
    fn tensor(anchors: &[([f32; 4], Vec<f32>)]) -> (Vec<f32>, Vec<usize>) {
        let nc = anchors[0].1.len();
        let n = anchors.len();
        let mut out = vec![0.0; (4 + nc) * n];
        for (i, (b, s)) in anchors.iter().enumerate() {
            for r in 0..4 {
                out[r * n + i] = b[r];
            }
            for c in 0..nc {
                out[(4 + c) * n + i] = s[c];
            }
        }
        (out, vec![1, 4 + nc, n])
    }

    #[test]
    fn known_boxes_through_letterbox() {
        // 640x640 input letterboxed from a 1280x720 frame: scale 0.5, pad_y 140.
        let t = Transform {
            scale_x: 0.5,
            scale_y: 0.5,
            pad_x: 0.0,
            pad_y: 140.0,
            frame_width: 1280.0,
            frame_height: 720.0,
            input_width: 640.0,
            input_height: 640.0,
        };
        let (out, shape) = tensor(&[
            ([100.0, 240.0, 40.0, 80.0], vec![0.1, 0.9, 0.0]), // class 1 at frame (160,120)-(240,280)
            ([102.0, 240.0, 40.0, 80.0], vec![0.1, 0.8, 0.0]), // duplicate, suppressed by NMS
            ([300.0, 300.0, 20.0, 20.0], vec![0.05, 0.1, 0.2]), // below threshold
            ([500.0, 400.0, 60.0, 60.0], vec![0.0, 0.0, 0.7]), // class 2
        ]);
        let cands = decode_yolov8(&out, &shape, 0.25, &t).unwrap();
        assert_eq!(cands.len(), 3);
        let dets = nms(&cands, &NmsConfig::default());
        assert_eq!(dets.len(), 2);
        assert_eq!(dets[0].class_id, 1);
        assert_eq!(dets[0].bbox, BBox::new(160.0, 120.0, 240.0, 280.0));
        assert_eq!(dets[1].class_id, 2);
        assert_eq!(dets[1].bbox, BBox::new(940.0, 460.0, 1060.0, 580.0));
        assert!((dets[1].score - 0.7).abs() < 1e-6);
    }

    #[test]
    fn bad_shapes_are_errors() {
        let t = Transform::identity(10, 10);
        assert!(decode_yolov8(&[0.0; 10], &[1, 5, 3], 0.1, &t)
            .unwrap_err()
            .to_string()
            .contains("needs 15 values, got 10"));
        assert!(decode_yolov8(&[0.0; 8], &[1, 4, 2], 0.1, &t).is_err());
        assert!(decode_yolov8(&[0.0; 8], &[2, 4, 1, 1], 0.1, &t).is_err());
        assert!(decode_yolov8(&[], &[1, usize::MAX, 2], 0.1, &t).is_err());
        let nan = [f32::NAN, 0.0, 1.0, 1.0, 0.9];
        assert!(decode_yolov8(&nan, &[5, 1], 0.1, &t).unwrap().is_empty());
    }
}
