//! The shipped TFLite face graph end to end on mediapipe's real models (BlazeFace
//! detector -> face mesh): the face in scikit-image's astronaut photo is found where
//! it is, and its 468 landmarks land on it, through the engine's TFLite loading pass
//! (float16 weights folded, PRELU expanded) and tract.

mod pipeline_real_common;

use camdnn_daemon::pipeline::Outcome;
use camdnn_protocol::{BBox, ClassRef, FrameResult, OutputValue, UpstreamDetection};
use pipeline_real_common::{config, frame, run, start, test_image};

/// The face in astronaut.png (512x512), checked by eye on the image: hairline to
/// chin, ear to ear (the box the MTCNN test checks; BlazeFace boxes the face tighter).
const FACE: [f32; 4] = [182.0, 59.0, 267.0, 173.0];
/// The nose tip, checked by eye (MediaPipe face mesh landmark 1).
const NOSE_TIP: [f32; 2] = [224.0, 128.0];

fn done(o: Outcome) -> FrameResult {
    match o {
        Outcome::Done(r) => r,
        other => panic!("frame not processed: {other:?}"),
    }
}

fn inside(b: &[f32; 4], x: f32, y: f32, margin: f32) -> bool {
    x >= b[0] - margin && x <= b[2] + margin && y >= b[1] - margin && y <= b[3] + margin
}

#[test]
fn the_astronaut_face_is_found_with_its_mesh() {
    let img = test_image("astronaut.ppm");
    let built = start("tflite", &config("camdnnd-tflite-faces.toml"));
    for seq in 1..=2 {
        let r = done(run(&built.pipeline, frame(seq, &img, None)));
        assert_eq!(r.objects.len(), 1, "one face: {r:#?}");
        let o = &r.objects[0];
        assert_eq!(o.class, ClassRef::Name("face".into()));
        assert!(o.score > 0.7, "detector score {}", o.score);
        let b = [o.bbox.x0, o.bbox.y0, o.bbox.x1, o.bbox.y1];
        // The detector's box lies within the face and covers most of its width.
        for (x, y) in [(b[0], b[1]), (b[2], b[3])] {
            assert!(
                inside(&FACE, x, y, 8.0),
                "box {b:?} is not on the face {FACE:?}"
            );
        }
        assert!(
            b[2] - b[0] > 0.6 * (FACE[2] - FACE[0]),
            "box {b:?} is too small"
        );
        assert_eq!(o.outputs.len(), 1, "{o:#?}");
        assert_eq!(o.outputs[0].model, "face_landmarks");
        let OutputValue::Tensors(t) = &o.outputs[0].value else {
            panic!("the landmark model gives tensors: {:?}", o.outputs[0].value)
        };
        assert_eq!(
            (t[0].name.as_str(), t[0].dims.as_slice()),
            ("landmarks", &[468u32, 3][..])
        );
        let pts: Vec<&[f32]> = t[0].data.chunks(3).collect();
        // The mesh covers the face: every point within the face box (small margin for
        // the chin and ears), and it is not collapsed.
        for p in &pts {
            assert!(
                inside(&FACE, p[0], p[1], 10.0),
                "landmark {p:?} off the face {FACE:?}"
            );
        }
        let xs = pts.iter().map(|p| p[0]);
        let spread = xs.clone().fold(f32::MIN, f32::max) - xs.fold(f32::MAX, f32::min);
        assert!(spread > 50.0, "mesh width {spread}");
        let nose = pts[1];
        let d = ((nose[0] - NOSE_TIP[0]).powi(2) + (nose[1] - NOSE_TIP[1]).powi(2)).sqrt();
        assert!(d <= 10.0, "nose tip {nose:?}, expected {NOSE_TIP:?}");
    }
}

#[test]
fn a_crop_without_a_face_is_rejected_by_the_landmark_model() {
    // Upstream boxes skip the detector: the face, and a patch of the space suit.
    let img = test_image("astronaut.ppm");
    let det = |x0, y0, x1, y1| UpstreamDetection {
        bbox: BBox { x0, y0, x1, y1 },
        class: ClassRef::Name("face".into()),
        score: 0.5,
    };
    let boxes = vec![
        det(190.0, 75.0, 260.0, 165.0),
        det(20.0, 380.0, 110.0, 470.0),
    ];
    let built = start("tflite", &config("camdnnd-tflite-faces.toml"));
    let r = done(run(&built.pipeline, frame(1, &img, Some(boxes))));
    assert_eq!(r.objects.len(), 1, "the suit is not a face: {r:#?}");
    let b = &r.objects[0].bbox;
    assert!(
        inside(&FACE, b.x0, b.y0, 1.0) && inside(&FACE, b.x1, b.y1, 1.0),
        "{b:?}"
    );
}
