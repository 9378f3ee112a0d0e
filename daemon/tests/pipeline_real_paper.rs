//! The shipped paper-shaped config end to end on real models, as shipped
//! (tract + ONNX Runtime) and on each engine alone: the detector runs upstream, so frames
//! carry their boxes; each box gets top-k outputs from its class's classifier,
//! and a frame without boxes is rejected with the reason.

mod pipeline_real_common;

use camdnn_daemon::pipeline::Outcome;
use camdnn_protocol::{BBox, ClassRef, OutputValue, RejectReason, UpstreamDetection};
use pipeline_real_common::{frame, run, start, test_image, variants};

fn det(class: &str, x0: f32, y0: f32, x1: f32, y1: f32) -> UpstreamDetection {
    UpstreamDetection {
        bbox: BBox { x0, y0, x1, y1 },
        class: ClassRef::Name(class.into()),
        score: 0.9,
    }
}

#[test]
fn upstream_boxes_get_their_class_classifier() {
    let img = test_image("astronaut.ppm");
    let boxes = vec![
        det("person", 100.0, 20.0, 400.0, 500.0),
        det("car", 0.0, 300.0, 150.0, 500.0),
        det("bicycle", 350.0, 0.0, 510.0, 200.0),
        det("person", 150.0, 50.0, 300.0, 200.0),
        det("dog", 10.0, 10.0, 60.0, 60.0),
        det("car", 300.0, 300.0, 500.0, 510.0),
    ];
    for (label, cfg) in variants("camdnnd-paper.toml") {
        let built = start(label, &cfg);
        // Three frames: later ones reuse the resident models.
        for seq in 1..=3 {
            let Outcome::Done(r) = run(&built.pipeline, frame(seq, &img, Some(boxes.clone())))
            else {
                panic!("{label}: frame {seq} not processed")
            };
            assert_eq!(r.objects.len(), boxes.len());
            let want = [
                Some("inception_v1"),
                Some("squeezenet"),
                Some("shufflenet"),
                Some("inception_v1"),
                None,
                Some("squeezenet"),
            ];
            for (o, want) in r.objects.iter().zip(want) {
                let got: Vec<&str> = o.outputs.iter().map(|x| x.model.as_str()).collect();
                assert_eq!(
                    got,
                    want.into_iter().collect::<Vec<_>>(),
                    "{label}: {:?}",
                    o.class
                );
                for out in &o.outputs {
                    let OutputValue::TopK(labels) = &out.value else {
                        panic!("top-k expected")
                    };
                    assert_eq!(labels.len(), 3);
                    for l in labels {
                        let id: usize = l.label.parse().expect("unlabelled models give class ids");
                        assert!(id < 1000, "{l:?}");
                        assert!(l.score.is_finite());
                    }
                    assert!(
                        labels.windows(2).all(|w| w[0].score >= w[1].score),
                        "{labels:?}"
                    );
                    // The models end in a softmax: probabilities.
                    assert!(labels.iter().map(|l| l.score).sum::<f32>() <= 1.0 + 1e-4);
                }
            }
        }
    }
}

#[test]
fn a_frame_without_detections_is_rejected_with_the_reason() {
    let img = test_image("astronaut.ppm");
    let (label, cfg) = variants("camdnnd-paper.toml").swap_remove(0);
    let built = start(label, &cfg);
    match run(&built.pipeline, frame(1, &img, None)) {
        Outcome::Rejected(RejectReason::BadDetection, msg) => {
            assert!(msg.contains("upstream"), "{msg}");
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    // The pipeline still serves frames that carry detections.
    let ok = run(
        &built.pipeline,
        frame(2, &img, Some(vec![det("car", 0.0, 0.0, 100.0, 100.0)])),
    );
    assert!(matches!(ok, Outcome::Done(_)), "{ok:?}");
}
