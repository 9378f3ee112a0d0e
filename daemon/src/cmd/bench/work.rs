//! The work check of `camdnnd bench`: what a contender did over a run
//! (detector runs, crops per model, a digest of its answers), so that a
//! ratio is only printed between contenders that did the same work.
//!
//! The digest is FNV-1a 64 over one canonical line per answered object,
//! `class|x0,y0,x1,y1|model=answer;...` (box corners rounded to whole pixels,
//! outputs sorted by model, an answer the top-1 label or each tensor's
//! argmax); a frame's digest is the wrapping sum of its objects' (order
//! independent); a run's is FNV-1a over its frames' digests in frame order.
//! `scripts/bench_python.py` computes the same. A registry package's Python
//! (`scripts/bench_python_graph.py`) reports its items per model, counted at
//! onnxruntime's `run`, but not comparable answers: its pre- and
//! post-processing are the package's, so only its counts are checked.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use camdnn_protocol::{ClassRef, FrameResult, OutputValue};

/// What one contender did over one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Work {
    /// Detector items run (pyramid scales included; 0 for upstream boxes).
    pub detector_runs: u64,
    /// Crops run, per model name (models that ran none are absent).
    pub crops: BTreeMap<String, u64>,
    /// What is known of the answers.
    pub answers: Answers,
}

/// What a contender reports of its answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Answers {
    /// Nothing: its work is not reported, the counts mean nothing.
    #[default]
    Unreported,
    /// Its counts are reported, its answers are not comparable (a registry
    /// package with its own pre- and post-processing).
    CountsOnly,
    /// The digest of the answers of every frame, in frame order.
    Digest(u64),
}

impl Work {
    /// What differs between `self` (contender `a`) and `other` (`b`), one
    /// sentence per difference; empty when they did the same work.
    pub fn differences(&self, a: &str, other: &Work, b: &str) -> Vec<String> {
        match (self.answers, other.answers) {
            (Answers::Unreported, Answers::Unreported) => {}
            (Answers::Unreported, _) => return vec![format!("{a} does not report its work")],
            (_, Answers::Unreported) => return vec![format!("{b} does not report its work")],
            _ => {}
        }
        let mut out = Vec::new();
        if self.detector_runs != other.detector_runs {
            out.push(format!(
                "detector runs: {a} {}, {b} {}",
                self.detector_runs, other.detector_runs
            ));
        }
        let models: std::collections::BTreeSet<&String> =
            self.crops.keys().chain(other.crops.keys()).collect();
        for m in models {
            let (x, y) = (
                self.crops.get(m).copied().unwrap_or(0),
                other.crops.get(m).copied().unwrap_or(0),
            );
            if x != y {
                out.push(format!("crops of {m}: {a} {x}, {b} {y}"));
            }
        }
        if let (Answers::Digest(x), Answers::Digest(y)) = (self.answers, other.answers) {
            if x != y {
                out.push(format!("answers: digest {x:016x} ({a}) != {y:016x} ({b})"));
            }
        }
        out
    }

    /// One line: detector runs, crops per model, digest.
    pub fn describe(&self) -> String {
        let answers = match self.answers {
            Answers::Unreported => return "not reported".to_string(),
            Answers::CountsOnly => "answers not compared (the package's own processing)".into(),
            Answers::Digest(d) => format!("digest {d:016x}"),
        };
        let crops: Vec<String> = self.crops.iter().map(|(m, n)| format!("{m} {n}")).collect();
        format!(
            "detector runs {}, crops [{}], {answers}",
            self.detector_runs,
            crops.join(", "),
        )
    }

    /// Whether the answers were compared, not only the counts.
    pub fn digested(&self) -> bool {
        matches!(self.answers, Answers::Digest(_))
    }
}

/// FNV-1a 64 of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One object's answer line hashed: `class`, its box, and `(model, answer)`
/// pairs in any order.
pub fn object_digest(class: &str, bbox: [f32; 4], answers: &[(String, String)]) -> u64 {
    let mut sorted: Vec<&(String, String)> = answers.iter().collect();
    sorted.sort();
    let mut line = format!(
        "{class}|{},{},{},{}|",
        bbox[0].round() as i64,
        bbox[1].round() as i64,
        bbox[2].round() as i64,
        bbox[3].round() as i64
    );
    for (m, v) in sorted {
        let _ = write!(line, "{m}={v};");
    }
    fnv1a(line.as_bytes())
}

/// A frame's digest from its objects' (order independent).
pub fn frame_digest(objects: impl IntoIterator<Item = u64>) -> u64 {
    objects.into_iter().fold(0, u64::wrapping_add)
}

/// A run's digest from its frames' digests in frame order.
pub fn run_digest(frames: &[u64]) -> u64 {
    let text: String = frames.iter().map(|d| format!("{d:016x}\n")).collect();
    fnv1a(text.as_bytes())
}

/// The answer of one output as the digest sees it: the top-1 label, or each
/// tensor's argmax joined by `/`.
pub fn answer(value: &OutputValue) -> String {
    match value {
        OutputValue::TopK(labels) => labels.first().map_or_else(String::new, |l| l.label.clone()),
        OutputValue::Tensors(ts) => ts
            .iter()
            .map(|t| {
                t.data
                    .iter()
                    .enumerate()
                    .max_by(|a, b| a.1.total_cmp(b.1))
                    .map_or_else(String::new, |(k, _)| k.to_string())
            })
            .collect::<Vec<_>>()
            .join("/"),
    }
}

/// A class as the digest writes it.
pub fn class_name(c: &ClassRef) -> String {
    match c {
        ClassRef::Name(s) => s.clone(),
        ClassRef::Id(i) => i.to_string(),
    }
}

/// The digest of one pipeline answer.
pub fn result_digest(r: &FrameResult) -> u64 {
    frame_digest(r.objects.iter().map(|o| {
        let answers: Vec<(String, String)> = o
            .outputs
            .iter()
            .map(|out| (out.model.clone(), answer(&out.value)))
            .collect();
        object_digest(
            &class_name(&o.class),
            [o.bbox.x0, o.bbox.y0, o.bbox.x1, o.bbox.y1],
            &answers,
        )
    }))
}

/// The contenders' names whose work differs from the reference's, with
/// what differs; a ratio to the reference is printed only for the others.
pub fn check<'a>(
    reference: (&str, &Work),
    others: &[(&'a str, &Work)],
) -> Vec<(&'a str, Vec<String>)> {
    others
        .iter()
        .filter_map(|&(name, w)| {
            let d = reference.1.differences(reference.0, w, name);
            (!d.is_empty()).then_some((name, d))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(runs: u64, crops: &[(&str, u64)], answers: Answers) -> Work {
        Work {
            detector_runs: runs,
            crops: crops.iter().map(|&(m, n)| (m.to_string(), n)).collect(),
            answers,
        }
    }

    #[test]
    fn the_check_refuses_contenders_whose_work_differs_and_says_what() {
        let pipe = work(
            0,
            &[("inception", 40), ("squeezenet", 12)],
            Answers::Digest(7),
        );
        let same = work(
            0,
            &[("inception", 40), ("squeezenet", 12)],
            Answers::Digest(7),
        );
        // A Python loop that skipped the boxes of a class it had no model for.
        let skipped = work(0, &[("inception", 40)], Answers::Digest(7));
        let other_answers = work(
            0,
            &[("inception", 40), ("squeezenet", 12)],
            Answers::Digest(8),
        );
        let silent = work(
            0,
            &[("inception", 40), ("squeezenet", 12)],
            Answers::Unreported,
        );
        // A registry package: counts compared, answers not.
        let counted = work(
            0,
            &[("inception", 40), ("squeezenet", 12)],
            Answers::CountsOnly,
        );
        let miscounted = work(
            1,
            &[("inception", 40), ("squeezenet", 12)],
            Answers::CountsOnly,
        );
        let refused = check(
            ("pipeline", &pipe),
            &[
                ("same", &same),
                ("skipped", &skipped),
                ("answers", &other_answers),
                ("silent", &silent),
                ("counted", &counted),
                ("miscounted", &miscounted),
            ],
        );
        let names: Vec<&str> = refused.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["skipped", "answers", "silent", "miscounted"]);
        assert_eq!(refused[3].1, ["detector runs: pipeline 0, miscounted 1"]);
        assert_eq!(
            refused[0].1,
            ["crops of squeezenet: pipeline 12, skipped 0"]
        );
        assert!(
            refused[1].1[0].starts_with("answers: digest"),
            "{:?}",
            refused[1]
        );
        assert_eq!(refused[2].1, ["silent does not report its work"]);
    }

    #[test]
    fn a_frame_digest_ignores_object_order_but_not_answers_or_boxes() {
        let a = object_digest(
            "person",
            [1.2, 2.0, 30.0, 40.4],
            &[("m".into(), "3".into())],
        );
        let b = object_digest(
            "car",
            [5.0, 5.0, 9.0, 9.0],
            &[("n".into(), "1".into()), ("m".into(), "2".into())],
        );
        let b2 = object_digest(
            "car",
            [5.0, 5.0, 9.0, 9.0],
            &[("m".into(), "2".into()), ("n".into(), "1".into())],
        );
        assert_eq!(b, b2);
        assert_eq!(frame_digest([a, b]), frame_digest([b, a]));
        assert_ne!(
            a,
            object_digest(
                "person",
                [1.2, 2.0, 30.0, 40.4],
                &[("m".into(), "4".into())]
            )
        );
        assert_ne!(
            a,
            object_digest(
                "person",
                [1.2, 2.0, 31.0, 40.4],
                &[("m".into(), "3".into())]
            )
        );
        assert_ne!(run_digest(&[1, 2]), run_digest(&[2, 1]));
    }

    #[test]
    fn fnv1a_matches_the_reference_values() {
        // Published FNV-1a 64 test vectors (the Python script uses the same).
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
