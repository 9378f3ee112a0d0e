//! The shipped PP-OCR config end to end on real models, as shipped (tract +
//! ONNX Runtime) and on each engine alone: a rendered line of text goes
//! through detection, orientation and recognition and its words come back.

mod pipeline_real_common;

use camdnn_daemon::pipeline::Outcome;
use camdnn_protocol::{BBox, ClassRef, FrameResult, OutputValue, UpstreamDetection};
use pipeline_real_common::{frame, run, start, test_image, variants};

/// What scripts/fetch_test_images.sh renders into testdata/ocr_line.ppm.
const TEXT: &str = "camdnn reads this line";

fn texts(r: &FrameResult) -> Vec<String> {
    r.objects
        .iter()
        .map(|o| {
            let rec = o
                .outputs
                .iter()
                .find(|x| x.model == "text_rec")
                .expect("every text box is recognised");
            match &rec.value {
                OutputValue::TopK(l) => l[0].label.clone(),
                other => panic!("CTC output expected, got {other:?}"),
            }
        })
        .collect()
}

fn words(r: &FrameResult) -> String {
    let read = texts(r).join(" ");
    read.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

#[test]
fn a_rendered_line_is_read_back() {
    let img = test_image("ocr_line.ppm");
    for (label, cfg) in variants("camdnnd-ocr.toml") {
        let built = start(label, &cfg);
        let Outcome::Done(r) = run(&built.pipeline, frame(1, &img, None)) else {
            panic!("{label}: frame not processed")
        };
        assert!(!r.objects.is_empty(), "{label}: no text found");
        for o in &r.objects {
            assert_eq!(o.class, ClassRef::Name("text".into()));
            let models: Vec<&str> = o.outputs.iter().map(|x| x.model.as_str()).collect();
            assert_eq!(models, ["text_cls", "text_rec"], "{label}");
            let OutputValue::TopK(orient) = &o.outputs[0].value else {
                panic!("orientation is a label")
            };
            assert_eq!(orient[0].label, "0", "{label}: upright text");
        }
        assert_eq!(words(&r), TEXT, "{label}: {r:#?}");
        // The line's glyphs span about x 30..480, y 40..80 of the 640x120 image.
        let b = &r.objects[0].bbox;
        assert!(b.y0 > 20.0 && b.y1 < 100.0, "{label}: {b:?}");
        assert!(b.x0 < 45.0 && b.x1 > 470.0, "{label}: {b:?}");
        assert!(r.timing.detect_us > 0);
    }
}

#[test]
fn a_turned_line_is_turned_back_and_read() {
    // The same image rotated 180 degrees, given as an upstream text box: the
    // orientation model must say "180" and recognition must still read it.
    let mut img = test_image("ocr_line.ppm");
    let px: Vec<[u8; 3]> = img
        .data
        .chunks(3)
        .rev()
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    img.data = px.concat();
    let det = UpstreamDetection {
        bbox: BBox {
            x0: 0.0,
            y0: 25.0,
            x1: 640.0,
            y1: 95.0,
        },
        class: ClassRef::Name("text".into()),
        score: 1.0,
    };
    for (label, cfg) in variants("camdnnd-ocr.toml") {
        let built = start(label, &cfg);
        let Outcome::Done(r) = run(&built.pipeline, frame(1, &img, Some(vec![det.clone()]))) else {
            panic!("{label}: frame not processed")
        };
        assert_eq!(r.objects.len(), 1);
        let OutputValue::TopK(orient) = &r.objects[0].outputs[0].value else {
            panic!("orientation is a label")
        };
        assert_eq!(orient[0].label, "180", "{label}: {r:#?}");
        assert_eq!(words(&r), TEXT, "{label}: {r:#?}");
    }
}
