//! One answer as a JSON object (for programs) or as short lines (for people), each named by its
//! source. Per-object outputs are grouped by model; pose keypoints are named, boxes are
//! `[x0, y0, x1, y1]` frame pixels. A tracked object carries its track id, and results reused
//! from earlier frames say how many frames old they are.

use std::fmt::Write as _;

use camdnn_protocol::{ClassRef, ObjectResult, OutputValue, ServerMessage, Tensor};
use camdnn_vision::pose::KEYPOINT_NAMES;
use serde_json::{json, Map, Value};

use crate::telemetry::{drop_label, error_label, reject_label};

/// Keypoint confidence from which a keypoint counts as seen (MoveNet's and the Human library's
/// threshold).
pub const KEYPOINT_SEEN: f32 = 0.3;

/// Rounds to `digits` decimals, for output a person can read (pixels to 0.1, scores to 0.001).
fn round(v: f32, digits: i32) -> f64 {
    let k = 10f64.powi(digits);
    (f64::from(v) * k).round() / k
}

/// A class as a person reads it: its name, or `class N` for an id without a label.
pub fn class_name(c: &ClassRef) -> String {
    match c {
        ClassRef::Id(i) => format!("class {i}"),
        ClassRef::Name(n) => n.clone(),
    }
}

fn bbox_json(b: [f32; 4]) -> Value {
    json!(b.map(|v| round(v, 1)))
}

/// A tensor as JSON: named keypoints for a `[17, 3]` `keypoints` tensor, a box for a
/// `face_box`, a number for a one-value tensor, else its dims and data.
fn tensor_json(t: &Tensor) -> Value {
    match (t.name.as_str(), t.dims.as_slice()) {
        ("keypoints", [17, 3]) => {
            let named: Map<String, Value> = KEYPOINT_NAMES
                .iter()
                .zip(t.data.chunks_exact(3))
                .map(|(n, k)| {
                    (
                        (*n).to_owned(),
                        json!([round(k[0], 1), round(k[1], 1), round(k[2], 3)]),
                    )
                })
                .collect();
            Value::Object(named)
        }
        ("face_box", [4]) => bbox_json([t.data[0], t.data[1], t.data[2], t.data[3]]),
        (_, [1]) => json!(round(t.data[0], 3)),
        _ => json!({"dims": t.dims, "data": t.data}),
    }
}

/// An object's outputs keyed by model, then by tensor name (or `topk`).
fn outputs_json(o: &ObjectResult) -> Value {
    let mut by_model = Map::new();
    for out in &o.outputs {
        let v = match &out.value {
            OutputValue::TopK(labels) => json!({
                "topk": labels.iter().map(|l| json!([l.label, round(l.score, 3)])).collect::<Vec<_>>(),
            }),
            OutputValue::Tensors(ts) => Value::Object(
                ts.iter()
                    .map(|t| (t.name.clone(), tensor_json(t)))
                    .collect(),
            ),
        };
        by_model.insert(out.model.clone(), v);
    }
    Value::Object(by_model)
}

/// Per model whose result was reused from an earlier frame: how many frames old it is.
fn reused_json(o: &ObjectResult) -> Value {
    Value::Object(
        o.outputs
            .iter()
            .filter(|out| out.age > 0)
            .map(|out| (out.model.clone(), json!(out.age)))
            .collect(),
    )
}

/// One answer as JSON, named by `source`.
pub fn json(m: &ServerMessage, source: &str) -> Value {
    match m {
        ServerMessage::Result(r) => json!({
            "type": "result",
            "source": source,
            "stream": r.stream_id,
            "seq": r.seq,
            "timing_ms": {
                "queue": r.timing.queue_us as f64 / 1000.0,
                "detect": r.timing.detect_us as f64 / 1000.0,
                "classify": r.timing.classify_us as f64 / 1000.0,
                "total": r.timing.total_us as f64 / 1000.0,
            },
            "objects": r.objects.iter().map(|o| json!({
                "class": class_name(&o.class),
                "score": round(o.score, 3),
                "bbox": bbox_json([o.bbox.x0, o.bbox.y0, o.bbox.x1, o.bbox.y1]),
                "track": (o.track_id != 0).then_some(o.track_id),
                "box_age": o.box_age,
                "outputs": outputs_json(o),
                "reused": reused_json(o),
            })).collect::<Vec<_>>(),
            "objects_dropped": r.objects_dropped,
        }),
        ServerMessage::Dropped(d) => json!({
            "type": "dropped", "source": source, "stream": d.stream_id, "seq": d.seq,
            "reason": drop_label(d.reason),
        }),
        ServerMessage::Rejected(r) => json!({
            "type": "rejected", "source": source, "stream": r.stream_id, "seq": r.seq,
            "reason": reject_label(r.reason), "message": r.message,
        }),
        ServerMessage::Error(e) => json!({
            "type": "error", "code": error_label(e.code), "message": e.message,
        }),
        ServerMessage::Welcome(w) => json!({
            "type": "welcome", "version": w.version, "window": w.window,
        }),
    }
}

/// The tensor `name` of `model`'s output on `o`, if any.
pub fn tensor<'a>(o: &'a ObjectResult, model: Option<&str>, name: &str) -> Option<&'a Tensor> {
    o.outputs
        .iter()
        .filter(|out| model.is_none_or(|m| out.model == m))
        .find_map(|out| match &out.value {
            OutputValue::Tensors(ts) => ts.iter().find(|t| t.name == name),
            OutputValue::TopK(_) => None,
        })
}

/// A face's gender as a person reads it: "female 0.77" (how sure, from the `male` sigmoid),
/// with the age when the model reports one.
pub fn face_words(o: &ObjectResult) -> Option<String> {
    let male = tensor(o, None, "male")?.data.first().copied()?;
    let (word, sure) = if male > 0.5 {
        ("male", male)
    } else {
        ("female", 1.0 - male)
    };
    let mut s = format!("{word} {sure:.2}");
    if let Some(age) = tensor(o, None, "age").and_then(|t| t.data.first()) {
        let _ = write!(s, ", age {age:.0}");
    }
    Some(s)
}

/// One object in a few words: its track, class, score, box, then what its models said and
/// which of that was reused from earlier frames.
fn object_line(o: &ObjectResult) -> String {
    let b = o.bbox;
    let track = if o.track_id == 0 {
        String::new()
    } else {
        format!("#{} ", o.track_id)
    };
    let mut s = format!(
        "  {track}{} {:.2} at ({:.0},{:.0})-({:.0},{:.0})",
        class_name(&o.class),
        o.score,
        b.x0,
        b.y0,
        b.x1,
        b.y1
    );
    if let Some(k) = tensor(o, None, "keypoints") {
        let seen = k
            .data
            .chunks_exact(3)
            .filter(|k| k[2] >= KEYPOINT_SEEN)
            .count();
        let _ = write!(s, ": pose {seen}/{} keypoints seen", k.data.len() / 3);
        match tensor(o, None, "face_box") {
            Some(f) => {
                let _ = write!(
                    s,
                    ", face ({:.0},{:.0})-({:.0},{:.0})",
                    f.data[0], f.data[1], f.data[2], f.data[3]
                );
                if let Some(words) = face_words(o) {
                    let _ = write!(s, " {words}");
                }
            }
            None => s.push_str(", no face seen"),
        }
    }
    for out in &o.outputs {
        if let OutputValue::TopK(labels) = &out.value {
            let top: Vec<String> = labels
                .iter()
                .map(|l| format!("{} {:.2}", l.label, l.score))
                .collect();
            let _ = write!(s, ", {}: {}", out.model, top.join(", "));
        }
    }
    if o.box_age > 0 {
        let _ = write!(s, " (box carried {} frames)", o.box_age);
    }
    let reused: Vec<String> = o
        .outputs
        .iter()
        .filter(|out| out.age > 0)
        .map(|out| format!("{} {} frames old", out.model, out.age))
        .collect();
    if !reused.is_empty() {
        let _ = write!(s, "; reused: {}", reused.join(", "));
    }
    s
}

/// One answer as lines a person reads: a header naming the source, then one line per object.
pub fn text(m: &ServerMessage, source: &str) -> String {
    match m {
        ServerMessage::Result(r) => {
            let mut s = format!(
                "{source}: {} object{} ({:.0} ms)\n",
                r.objects.len(),
                if r.objects.len() == 1 { "" } else { "s" },
                r.timing.total_us as f64 / 1000.0
            );
            for o in &r.objects {
                s.push_str(&object_line(o));
                s.push('\n');
            }
            if r.objects_dropped > 0 {
                let _ = writeln!(s, "  ({} more objects over the limit)", r.objects_dropped);
            }
            s
        }
        ServerMessage::Dropped(d) => format!("{source}: dropped ({})\n", drop_label(d.reason)),
        ServerMessage::Rejected(r) => format!(
            "{source}: refused ({}): {}\n",
            reject_label(r.reason),
            r.message
        ),
        ServerMessage::Error(e) => format!("error ({}): {}\n", error_label(e.code), e.message),
        ServerMessage::Welcome(_) => String::new(),
    }
}

#[cfg(test)]
#[path = "answer_tests.rs"]
pub(crate) mod tests;
