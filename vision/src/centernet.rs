//! CenterNet detections as the TF.js CenterNet (MobileNetV3, COCO-80) decodes them inside its
//! graph: `tower_0/detections` `[1, N, 6]`, each row `x0, y0, x1, y1` in network-input pixels,
//! then the score and the class index (a float). The graph already keeps the top N peaks of a
//! 3x3 max-pool filtered heatmap; what is left to do is the score threshold and suppression
//! ([`crate::nms()`], class-agnostic at IoU 0.4 as the model's authors run it).

use crate::{Detection, Result, Transform, VisionError};

/// The 80 COCO class names in the order CenterNet's class index counts them.
pub const COCO_LABELS: [&str; 80] = [
    "person",
    "bicycle",
    "car",
    "motorcycle",
    "airplane",
    "bus",
    "train",
    "truck",
    "boat",
    "traffic light",
    "fire hydrant",
    "stop sign",
    "parking meter",
    "bench",
    "bird",
    "cat",
    "dog",
    "horse",
    "sheep",
    "cow",
    "elephant",
    "bear",
    "zebra",
    "giraffe",
    "backpack",
    "umbrella",
    "handbag",
    "tie",
    "suitcase",
    "frisbee",
    "skis",
    "snowboard",
    "sports ball",
    "kite",
    "baseball bat",
    "baseball glove",
    "skateboard",
    "surfboard",
    "tennis racket",
    "bottle",
    "wine glass",
    "cup",
    "fork",
    "knife",
    "spoon",
    "bowl",
    "banana",
    "apple",
    "sandwich",
    "orange",
    "broccoli",
    "carrot",
    "hot dog",
    "pizza",
    "donut",
    "cake",
    "chair",
    "couch",
    "potted plant",
    "bed",
    "dining table",
    "toilet",
    "tv",
    "laptop",
    "mouse",
    "remote",
    "keyboard",
    "cell phone",
    "microwave",
    "oven",
    "toaster",
    "sink",
    "refrigerator",
    "book",
    "clock",
    "vase",
    "scissors",
    "teddy bear",
    "hair drier",
    "toothbrush",
];

/// Decodes the rows scoring at least `score_threshold` into frame-pixel detections (through
/// `transform`, clamped to the frame). `shape` is `[1, N, 6]` or `[N, 6]`; a row whose class
/// index is not a whole number in `0..num_classes` or whose numbers are not finite is an error
/// (a wrong output was wired), not a detection.
pub fn decode_centernet(
    output: &[f32],
    shape: &[usize],
    num_classes: usize,
    score_threshold: f32,
    transform: &Transform,
) -> Result<Vec<Detection>> {
    const WHAT: &str = "CenterNet detections";
    let n = match shape {
        [1, n, 6] | [n, 6] => *n,
        _ => {
            return Err(VisionError::tensor(
                WHAT,
                format!("shape {shape:?} is not [1, N, 6]"),
            ))
        }
    };
    if output.len() != n * 6 {
        return Err(VisionError::tensor(
            WHAT,
            format!(
                "shape {shape:?} needs {} values, got {}",
                n * 6,
                output.len()
            ),
        ));
    }
    let mut out = Vec::new();
    for (i, row) in output.chunks_exact(6).enumerate() {
        let score = row[4];
        if score.is_nan() || score < score_threshold {
            continue;
        }
        let class = row[5];
        if !(class >= 0.0 && class.fract() == 0.0 && (class as usize) < num_classes) {
            return Err(VisionError::tensor(
                WHAT,
                format!("row {i} has class index {class}, not one of 0..{num_classes}"),
            ));
        }
        let bbox = crate::BBox::new(row[0], row[1], row[2], row[3]);
        if !bbox.is_finite() {
            return Err(VisionError::tensor(
                WHAT,
                format!("row {i} has a box that is not finite: {bbox:?}"),
            ));
        }
        out.push(Detection {
            bbox: transform.to_frame(bbox),
            class_id: class as usize,
            score,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{nms, BBox, NmsConfig};

    fn stretch_512_to(w: u32, h: u32) -> Transform {
        Transform {
            scale_x: 512.0 / w as f32,
            scale_y: 512.0 / h as f32,
            input_width: 512.0,
            input_height: 512.0,
            ..Transform::identity(w, h)
        }
    }

    #[test]
    fn rows_above_the_threshold_map_to_frame_pixels() {
        let rows = [
            [100.0, 50.0, 300.0, 250.0, 0.9, 2.0],
            [0.0, 0.0, 10.0, 10.0, 0.1, 0.0],
            [-8.0, 10.0, 40.0, 520.0, 0.5, 0.0],
        ];
        let data: Vec<f32> = rows.iter().flatten().copied().collect();
        let t = stretch_512_to(1024, 256);
        let d = decode_centernet(&data, &[1, 3, 6], 80, 0.2, &t).unwrap();
        assert_eq!(d.len(), 2, "the 0.1 row is below the threshold");
        assert_eq!(d[0].class_id, 2);
        assert_eq!(COCO_LABELS[d[0].class_id], "car");
        assert_eq!(d[0].bbox, BBox::new(200.0, 25.0, 600.0, 125.0));
        // Clamped to the frame.
        assert_eq!(d[1].bbox, BBox::new(0.0, 5.0, 80.0, 256.0));
    }

    #[test]
    fn class_agnostic_suppression_keeps_one_box_per_object() {
        // The same horse found as "horse" and "sheep" (CenterNet's peaks are per class).
        let data = [
            10.0, 10.0, 110.0, 110.0, 0.6, 17.0, //
            12.0, 10.0, 112.0, 110.0, 0.3, 18.0,
        ];
        let d = decode_centernet(&data, &[2, 6], 80, 0.2, &Transform::identity(512, 512)).unwrap();
        let cfg = NmsConfig {
            iou_threshold: 0.4,
            score_threshold: 0.2,
            max_detections: 100,
            class_agnostic: true,
        };
        let kept = nms(&d, &cfg);
        assert_eq!(kept.len(), 1);
        assert_eq!(COCO_LABELS[kept[0].class_id], "horse");
    }

    #[test]
    fn bad_tensors_are_named_errors() {
        let t = Transform::identity(512, 512);
        let e = decode_centernet(&[0.0; 12], &[1, 2, 5], 80, 0.2, &t).unwrap_err();
        assert!(e.to_string().contains("not [1, N, 6]"), "{e}");
        let e = decode_centernet(&[0.0; 11], &[1, 2, 6], 80, 0.2, &t).unwrap_err();
        assert!(e.to_string().contains("needs 12 values"), "{e}");
        let e = decode_centernet(&[0.0, 0.0, 1.0, 1.0, 0.9, 80.0], &[1, 1, 6], 80, 0.2, &t)
            .unwrap_err();
        assert!(e.to_string().contains("class index 80"), "{e}");
        let e = decode_centernet(
            &[0.0, 0.0, f32::NAN, 1.0, 0.9, 1.0],
            &[1, 1, 6],
            80,
            0.2,
            &t,
        )
        .unwrap_err();
        assert!(e.to_string().contains("not finite"), "{e}");
        // A NaN score is not a detection.
        let d = decode_centernet(
            &[0.0, 0.0, 1.0, 1.0, f32::NAN, 1.0],
            &[1, 1, 6],
            80,
            0.2,
            &t,
        );
        assert!(d.unwrap().is_empty());
    }
}
