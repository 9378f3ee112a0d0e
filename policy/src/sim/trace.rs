//! Scene traces: how many objects of each kind the camera sees, scene by
//! scene. From a file, from the paper's Fig. 11 shape, or seeded at random.

use crate::rng::Rng;
use crate::{InputError, System};

/// One scene held for a number of frames.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    /// Frames the scene lasts.
    pub frames: usize,
    /// r_i for each request model, in the system's model order (detectors excluded).
    pub scene: Vec<u32>,
}

/// A sequence of scenes.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// The scenes in order.
    pub segments: Vec<Segment>,
}

impl Trace {
    /// Parses the text format: one scene per line, `FRAMES R1 R2 ...` with one
    /// count per request model in the system's order; `#` starts a comment.
    pub fn parse(text: &str, request_models: usize) -> Result<Trace, InputError> {
        let mut segments = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |reason: String| InputError::Trace {
                line: n + 1,
                reason,
            };
            let nums: Vec<u32> = line
                .split_whitespace()
                .map(|w| {
                    w.parse::<u32>()
                        .map_err(|_| err(format!("{w:?} is not a whole number >= 0")))
                })
                .collect::<Result<_, _>>()?;
            if nums.len() != request_models + 1 {
                return Err(err(format!(
                    "expected FRAMES and {request_models} object counts, got {} numbers",
                    nums.len()
                )));
            }
            if nums[0] == 0 {
                return Err(err("FRAMES must be at least 1".into()));
            }
            segments.push(Segment {
                frames: nums[0] as usize,
                scene: nums[1..].to_vec(),
            });
        }
        if segments.is_empty() {
            return Err(InputError::Trace {
                line: 0,
                reason: "the trace has no scenes".into(),
            });
        }
        Ok(Trace { segments })
    }

    /// The text format of [`Trace::parse`].
    pub fn to_text(&self) -> String {
        let mut s = String::from("# frames  objects per request model\n");
        for seg in &self.segments {
            let r: Vec<String> = seg.scene.iter().map(u32::to_string).collect();
            s.push_str(&format!("{} {}\n", seg.frames, r.join(" ")));
        }
        s
    }

    /// The shape of the paper's Fig. 11 / Table 5 experiment for a
    /// three-classifier system: 16 scenes of 50 frames (800 frames). The
    /// paper names (1,1,1), (20,5,5), (5,20,5) and (5,5,20); the other
    /// scenes are our choice, spread over light and heavy mixes.
    pub fn paper_fig11() -> Trace {
        const SCENES: [[u32; 3]; 16] = [
            [1, 1, 1],
            [5, 5, 5],
            [20, 5, 5],
            [5, 5, 20],
            [10, 2, 3],
            [5, 20, 5],
            [5, 5, 20],
            [2, 12, 6],
            [13, 11, 2],
            [7, 7, 7],
            [3, 3, 14],
            [14, 3, 3],
            [0, 10, 10],
            [8, 0, 4],
            [12, 6, 9],
            [1, 1, 1],
        ];
        Trace {
            segments: SCENES
                .iter()
                .map(|s| Segment {
                    frames: 50,
                    scene: s.to_vec(),
                })
                .collect(),
        }
    }

    /// `segments` scenes of `frames` frames each, every count uniform in
    /// 0..=max_objects, for `request_models` models; the same for a seed.
    pub fn random(
        seed: u64,
        request_models: usize,
        segments: usize,
        frames: usize,
        max_objects: u32,
    ) -> Trace {
        let mut rng = Rng::new(seed);
        Trace {
            segments: (0..segments)
                .map(|_| Segment {
                    frames: frames.max(1),
                    scene: (0..request_models)
                        .map(|_| rng.below(max_objects as u64 + 1) as u32)
                        .collect(),
                })
                .collect(),
        }
    }

    /// Total frames.
    pub fn frames(&self) -> usize {
        self.segments.iter().map(|s| s.frames).sum()
    }

    /// Checks that the trace has a frame and that every scene fits the
    /// system: one count per request model, and no requests for a model
    /// whose parent has none.
    pub fn validate(&self, system: &System) -> Result<(), InputError> {
        if self.frames() == 0 {
            return Err(InputError::Trace {
                line: 0,
                reason: "the trace has no frames".into(),
            });
        }
        let want = system.request_models().count();
        for (n, seg) in self.segments.iter().enumerate() {
            if seg.scene.len() != want {
                return Err(InputError::Length {
                    what: "trace scene",
                    got: seg.scene.len(),
                    want,
                });
            }
            let full = full_scene(system, &seg.scene);
            for i in system.request_models() {
                let parent = system.models[i.0]
                    .parent
                    .expect("request models have parents");
                if full[i.0] > 0 && full[parent.0] == 0 {
                    return Err(InputError::Trace {
                        line: n + 1,
                        reason: format!(
                            "{} has {} requests but its parent {} has none",
                            system.models[i.0].name, full[i.0], system.models[parent.0].name
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}

/// Expands a trace scene (request models only) to r for every model, with
/// one run of each detector.
pub fn full_scene(system: &System, scene: &[u32]) -> Vec<u32> {
    let mut full = vec![1; system.num_models()];
    for (i, &r) in system.request_models().zip(scene) {
        full[i.0] = r;
    }
    full
}

/// A simulated frame's scene: [`full_scene`] with every detector run
/// `root_items` times (one per pyramid scale), as the simulator, the rate
/// bound and the suite's median bound all take it.
pub fn frame_scene(system: &System, scene: &[u32], root_items: u32) -> Vec<u32> {
    let mut full = full_scene(system, scene);
    for root in system.roots() {
        full[root.0] = root_items;
    }
    full
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_round_trip() {
        let t = Trace::parse("# c\n50 1 2 3\n\n10 0 0 4 # tail\n", 3).unwrap();
        assert_eq!(t.frames(), 60);
        assert_eq!(Trace::parse(&t.to_text(), 3).unwrap(), t);
    }

    #[test]
    fn bad_lines_name_the_line() {
        let e = Trace::parse("50 1 2\n5 1 x 3\n", 3).unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        let e = Trace::parse("50 1 2 3\n5 1 x 3\n", 3).unwrap_err();
        assert!(
            e.to_string().contains("line 2") && e.to_string().contains("\"x\""),
            "{e}"
        );
        assert!(Trace::parse("0 1 1 1\n", 3).is_err());
        assert!(Trace::parse("# nothing\n", 3).is_err());
    }

    /// A trace built in code may have no frames (the parser refuses an
    /// empty file); the simulator refuses it instead of indexing its first
    /// scene.
    #[test]
    fn a_trace_without_frames_is_refused() {
        let system =
            crate::System::from_toml(include_str!("../../tests/fixtures/tiny.toml")).unwrap();
        let none = Trace {
            segments: Vec::new(),
        };
        let zero = Trace {
            segments: vec![Segment {
                frames: 0,
                scene: vec![0; system.request_models().count()],
            }],
        };
        for trace in [none, zero] {
            let e = trace.validate(&system).unwrap_err();
            assert!(e.to_string().contains("no frames"), "{e}");
            let mut s = crate::schedulers::by_name(&system, "camdnn-local", 5.0).unwrap();
            let e = crate::sim::simulate(&system, s.as_mut(), &trace, &Default::default());
            assert!(e.is_err());
        }
    }

    #[test]
    fn random_is_deterministic_for_a_seed() {
        assert_eq!(
            Trace::random(7, 3, 10, 5, 14),
            Trace::random(7, 3, 10, 5, 14)
        );
        assert_ne!(
            Trace::random(7, 3, 10, 5, 14),
            Trace::random(8, 3, 10, 5, 14)
        );
        assert!(Trace::random(1, 3, 50, 1, 14)
            .segments
            .iter()
            .all(|s| s.scene.iter().all(|&r| r <= 14)));
    }

    #[test]
    fn paper_trace_is_800_frames_of_50() {
        let t = Trace::paper_fig11();
        assert_eq!((t.frames(), t.segments.len()), (800, 16));
    }
}
