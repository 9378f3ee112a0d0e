use super::*;
use camdnn_protocol::{BBox, FrameResult, Output, RejectReason, Rejected, Timing};

/// A person facing the camera: nose and eyes seen, the rest not; a face classified female.
pub(crate) fn person_result() -> FrameResult {
    let mut k = vec![0.0f32; 51];
    for (i, (x, y)) in [(100.0, 60.0), (110.0, 50.0), (90.0, 50.0)]
        .into_iter()
        .enumerate()
    {
        k[3 * i..3 * i + 3].copy_from_slice(&[x, y, 0.9]);
    }
    let t = |name: &str, dims: Vec<u32>, data: Vec<f32>| Tensor {
        name: name.into(),
        dims,
        data,
    };
    FrameResult {
        stream_id: 0,
        seq: 3,
        timing: Timing {
            queue_us: 1000,
            detect_us: 30_000,
            classify_us: 20_000,
            total_us: 51_000,
        },
        objects: vec![ObjectResult {
            bbox: BBox {
                x0: 50.0,
                y0: 20.0,
                x1: 150.4,
                y1: 300.0,
            },
            class: ClassRef::Name("person".into()),
            score: 0.8712,
            track_id: 0,
            box_age: 0,
            outputs: vec![
                Output {
                    model: "movenet".into(),
                    value: OutputValue::Tensors(vec![
                        t("keypoints", vec![17, 3], k),
                        t("face_box", vec![4], vec![70.0, 20.0, 130.0, 90.0]),
                    ]),
                    age: 0,
                },
                Output {
                    model: "faceres".into(),
                    value: OutputValue::Tensors(vec![t("male", vec![1], vec![0.2304])]),
                    age: 0,
                },
            ],
        }],
        objects_dropped: 0,
    }
}

#[test]
fn json_names_the_source_the_keypoints_and_groups_outputs_by_model() {
    let v = json(&ServerMessage::Result(person_result()), "person.jpg");
    assert_eq!(v["source"], "person.jpg");
    assert_eq!(v["seq"], 3);
    assert_eq!(v["timing_ms"]["total"], 51.0);
    let o = &v["objects"][0];
    assert_eq!(o["class"], "person");
    assert_eq!(o["score"], 0.871);
    assert_eq!(o["bbox"], json!([50.0, 20.0, 150.4, 300.0]));
    assert_eq!(
        o["outputs"]["movenet"]["keypoints"]["nose"],
        json!([100.0, 60.0, 0.9])
    );
    assert_eq!(
        o["outputs"]["movenet"]["keypoints"]["right_ankle"],
        json!([0.0, 0.0, 0.0])
    );
    assert_eq!(
        o["outputs"]["movenet"]["face_box"],
        json!([70.0, 20.0, 130.0, 90.0])
    );
    assert_eq!(o["outputs"]["faceres"]["male"], 0.23);
    assert_eq!(o["track"], Value::Null);
    assert_eq!(o["reused"], json!({}));
}

#[test]
fn a_tracked_object_names_its_track_and_what_was_reused() {
    let mut r = person_result();
    let o = &mut r.objects[0];
    o.track_id = 12;
    o.box_age = 2;
    o.outputs[1].age = 3;
    let m = ServerMessage::Result(r);
    let v = json(&m, "cam0");
    assert_eq!(v["objects"][0]["track"], 12);
    assert_eq!(v["objects"][0]["box_age"], 2);
    assert_eq!(v["objects"][0]["reused"], json!({"faceres": 3}));
    assert_eq!(
        text(&m, "cam0"),
        "cam0: 1 object (51 ms)\n  #12 person 0.87 at (50,20)-(150,300): pose 3/17 keypoints seen, face (70,20)-(130,90) female 0.77 (box carried 2 frames); reused: faceres 3 frames old\n"
    );
}

#[test]
fn text_gives_one_short_line_per_object() {
    let s = text(&ServerMessage::Result(person_result()), "person.jpg");
    assert_eq!(
        s,
        "person.jpg: 1 object (51 ms)\n  person 0.87 at (50,20)-(150,300): pose 3/17 keypoints seen, face (70,20)-(130,90) female 0.77\n"
    );
    let refused = ServerMessage::Rejected(Rejected {
        stream_id: 0,
        seq: 4,
        reason: RejectReason::TooLarge,
        message: "JPEG frame 10000x1500 is larger than the 8192-pixel side limit".into(),
    });
    assert_eq!(
        text(&refused, "wide.jpg"),
        "wide.jpg: refused (too_large): JPEG frame 10000x1500 is larger than the 8192-pixel side limit\n"
    );
    assert_eq!(json(&refused, "wide.jpg")["reason"], "too_large");
}
