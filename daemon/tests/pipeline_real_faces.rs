//! The shipped MTCNN config end to end on real models, as shipped (tract +
//! ONNX Runtime) and on each engine alone: the face in scikit-image's astronaut photo is
//! found at its place with five landmarks, through the P-Net pyramid, R-Net
//! refinement and O-Net; R-Net rejects a candidate that is not a face.

mod pipeline_real_common;

use camdnn_daemon::pipeline::Outcome;
use camdnn_protocol::{BBox, ClassRef, FrameResult, ObjectResult, OutputValue, UpstreamDetection};
use pipeline_real_common::{frame, run, start, test_image, variants};

/// The face in astronaut.png (512x512), checked by eye on the image: hairline
/// to chin, ear to ear, as MTCNN boxes it.
const FACE: [f32; 4] = [182.0, 59.0, 267.0, 173.0];
/// Allowed error of each box side, pixels.
const TOL: f32 = 12.0;
/// Left eye, right eye, nose tip, left and right mouth corner.
const LANDMARKS: [[f32; 2]; 5] = [
    [203.0, 100.0],
    [247.0, 103.0],
    [224.0, 128.0],
    [200.0, 139.0],
    [245.0, 141.0],
];

fn assert_is_the_face(label: &str, o: &ObjectResult) {
    assert_eq!(o.class, ClassRef::Name("face".into()));
    let b = [o.bbox.x0, o.bbox.y0, o.bbox.x1, o.bbox.y1];
    for (got, want) in b.iter().zip(FACE) {
        assert!(
            (got - want).abs() <= TOL,
            "{label}: box {b:?}, expected {FACE:?} +- {TOL}"
        );
    }
    assert!(o.score > 0.9, "{label}: score {}", o.score);
    let models: Vec<&str> = o.outputs.iter().map(|x| x.model.as_str()).collect();
    assert_eq!(models, ["rnet", "onet"], "{label}");
    let OutputValue::Tensors(t) = &o.outputs[1].value else {
        panic!("onet gives landmarks")
    };
    assert_eq!(
        (t[0].name.as_str(), t[0].dims.as_slice()),
        ("landmarks", &[5u32, 2][..])
    );
    for (got, want) in t[0].data.chunks(2).zip(LANDMARKS) {
        let d = ((got[0] - want[0]).powi(2) + (got[1] - want[1]).powi(2)).sqrt();
        assert!(
            d <= 8.0,
            "{label}: landmark {got:?}, expected {want:?} (all: {:?})",
            t[0].data
        );
    }
}

fn done(o: Outcome) -> FrameResult {
    match o {
        Outcome::Done(r) => r,
        other => panic!("frame not processed: {other:?}"),
    }
}

#[test]
fn the_astronaut_face_is_found_with_landmarks() {
    let img = test_image("astronaut.ppm");
    assert_eq!((img.width, img.height), (512, 512));
    for (label, cfg) in variants("camdnnd-faces.toml") {
        let built = start(label, &cfg);
        for seq in 1..=2 {
            let r = done(run(&built.pipeline, frame(seq, &img, None)));
            // One face: the pyramid's duplicates are merged, the other candidates rejected.
            assert_eq!(r.objects.len(), 1, "{label}: {r:#?}");
            assert_is_the_face(label, &r.objects[0]);
            // The stages are wall spans within the frame's: the pyramid's scales may run
            // side by side on both processors, so their summed run times would not be.
            let t = &r.timing;
            assert!(t.detect_us > 0);
            assert!(
                t.queue_us + t.detect_us <= t.total_us && t.classify_us <= t.total_us,
                "{label}: {t:?}"
            );
        }
    }
}

#[test]
fn a_non_face_candidate_is_rejected_and_a_rough_face_box_refined() {
    // Upstream "face" boxes skip P-Net: a loose square around the face and a
    // patch of the space suit's sleeve, which R-Net or O-Net must reject.
    let img = test_image("astronaut.ppm");
    let det = |x0, y0, x1, y1| UpstreamDetection {
        bbox: BBox { x0, y0, x1, y1 },
        class: ClassRef::Name("face".into()),
        score: 0.5,
    };
    let boxes = vec![
        det(170.0, 55.0, 280.0, 165.0),
        det(20.0, 380.0, 110.0, 470.0),
    ];
    for (label, cfg) in variants("camdnnd-faces.toml") {
        let built = start(label, &cfg);
        let r = done(run(&built.pipeline, frame(1, &img, Some(boxes.clone()))));
        assert_eq!(
            r.objects.len(),
            1,
            "{label}: the sleeve is not reported: {r:#?}"
        );
        assert_is_the_face(label, &r.objects[0]);
    }
}

#[test]
fn packing_the_pyramid_on_fewer_canvases_finds_the_same_faces() {
    // P-Net's cells each look at one 12-pixel window through valid convolutions, so a scale
    // packed beside others on a canvas gives the cells it gives alone: every box, score and
    // landmark downstream must match the one-scale-per-canvas run.
    let (_, packed_cfg) = variants("camdnnd-faces.toml")
        .into_iter()
        .find(|(l, _)| *l == "ort")
        .expect("an ort variant");
    let mut alone_cfg = packed_cfg.clone();
    for m in &mut alone_cfg.pipeline.models {
        if let Some(p) = m.input.pyramid.as_mut() {
            assert!(p.pack, "the shipped config packs its pyramid");
            p.pack = false;
        }
    }
    let (packed, alone) = (start("packed", &packed_cfg), start("alone", &alone_cfg));
    let mut faces = 0;
    for name in ["astronaut.ppm", "person.ppm", "kite.ppm", "dog.ppm"] {
        let img = test_image(name);
        let a = done(run(&packed.pipeline, frame(1, &img, None)));
        let b = done(run(&alone.pipeline, frame(1, &img, None)));
        assert_eq!(a.objects.len(), b.objects.len(), "{name}: {a:#?} {b:#?}");
        for (x, y) in a.objects.iter().zip(&b.objects) {
            let (p, q) = (x.bbox, y.bbox);
            let d = [p.x0 - q.x0, p.y0 - q.y0, p.x1 - q.x1, p.y1 - q.y1];
            assert!(d.iter().all(|d| d.abs() < 1e-3), "{name}: {p:?} {q:?}");
            assert!((x.score - y.score).abs() < 1e-4, "{name}: {x:?} {y:?}");
        }
        faces += a.objects.len();
    }
    assert!(faces >= 1, "the photos hold at least the astronaut's face");
}
