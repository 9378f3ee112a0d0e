//! Scene-trace shapes for the suite: the situations a global step must not
//! lose in, seeded and sized to the board's capacity so a weak board is
//! loaded as hard as a strong one.

use crate::rng::Rng;
use crate::sim::{Segment, Trace};
use crate::{ModelId, ProcId, System};

/// A kind of scene trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    /// The paper's Fig. 11 experiment: 16 scenes of 50 frames (its mixes
    /// taken column by column for boards with other than three classifiers).
    Paper,
    /// 10 empty frames then 10 frames at the heavy count of every type, repeated.
    Bursts,
    /// One type dominates (heavy), the others light; the dominant type
    /// changes every 100 frames.
    DominanceShift,
    /// Moderate mixes, but each type in turn is absent for 200 frames.
    AbsentType,
    /// Stretches of empty scenes (nothing detected) between moderate ones.
    EmptyScenes,
    /// Every type's count takes a +-1 step every 5 frames (a crowd drifting).
    RandomWalk,
}

impl Shape {
    /// Every shape, in report order.
    pub const ALL: [Shape; 6] = [
        Shape::Paper,
        Shape::Bursts,
        Shape::DominanceShift,
        Shape::AbsentType,
        Shape::EmptyScenes,
        Shape::RandomWalk,
    ];

    /// The name used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Paper => "paper",
            Shape::Bursts => "bursts",
            Shape::DominanceShift => "dominance",
            Shape::AbsentType => "absent",
            Shape::EmptyScenes => "empty",
            Shape::RandomWalk => "walk",
        }
    }

    /// The shape called `name`, if any.
    pub fn by_name(name: &str) -> Option<Shape> {
        Shape::ALL.into_iter().find(|s| s.name() == name)
    }

    /// This shape's trace on `system` for `seed` (800 frames): counts per
    /// classifier (models fed by the detector) up to `heavy`; a deeper model
    /// gets half its parent's count, rounded up.
    pub fn trace(self, system: &System, seed: u64, heavy: u32) -> Trace {
        let mut rng = Rng::new(seed ^ (self as u64).wrapping_mul(0x51_7cc1_b727_220a));
        let heavy = heavy.max(1);
        let light = (heavy / 4).max(1);
        let moderate = (heavy / 2).max(1);
        let classifiers: Vec<ModelId> = system
            .request_models()
            .filter(|&i| {
                system.models[i.0]
                    .parent
                    .is_some_and(|p| system.models[p.0].parent.is_none())
            })
            .collect();
        let n = classifiers.len();
        let mut rows: Vec<(usize, Vec<u32>)> = Vec::new();
        let uniform = |rng: &mut Rng, hi: u32| rng.below(hi as u64 + 1) as u32;
        match self {
            Shape::Paper => {
                let paper = Trace::paper_fig11();
                for seg in &paper.segments {
                    let counts = (0..n)
                        .map(|c| (seg.scene[c % 3] * heavy).div_ceil(20))
                        .collect();
                    rows.push((seg.frames, counts));
                }
            }
            Shape::Bursts => {
                for _ in 0..40 {
                    rows.push((10, vec![0; n]));
                    rows.push((10, vec![heavy; n]));
                }
            }
            Shape::DominanceShift => {
                for s in 0..8 {
                    let dominant = (s + rng.below(n as u64) as usize) % n;
                    let counts = (0..n)
                        .map(|c| {
                            if c == dominant {
                                heavy
                            } else {
                                uniform(&mut rng, light)
                            }
                        })
                        .collect();
                    rows.push((100, counts));
                }
            }
            Shape::AbsentType => {
                for s in 0..16 {
                    let absent = (s / 4) % n;
                    let counts = (0..n)
                        .map(|c| {
                            if c == absent {
                                0
                            } else {
                                light + uniform(&mut rng, moderate)
                            }
                        })
                        .collect();
                    rows.push((50, counts));
                }
            }
            Shape::EmptyScenes => {
                for _ in 0..8 {
                    rows.push((40 + rng.below(41) as usize, vec![0; n]));
                    let counts = (0..n)
                        .map(|_| uniform(&mut rng, moderate + light))
                        .collect();
                    rows.push((20 + rng.below(41) as usize, counts));
                }
            }
            Shape::RandomWalk => {
                let mut counts: Vec<u32> = (0..n).map(|_| uniform(&mut rng, moderate)).collect();
                for _ in 0..160 {
                    rows.push((5, counts.clone()));
                    for c in counts.iter_mut() {
                        match rng.below(3) {
                            0 => *c = c.saturating_sub(1),
                            1 => *c = (*c + 1).min(heavy),
                            _ => {}
                        }
                    }
                }
            }
        }
        let segments = rows
            .into_iter()
            .map(|(frames, counts)| Segment {
                frames,
                scene: expand(system, &classifiers, &counts),
            })
            .collect();
        Trace { segments }
    }
}

/// Counts for every request model (system order) from the classifiers'
/// counts: deeper models get half their parent's count, rounded up.
fn expand(system: &System, classifiers: &[ModelId], counts: &[u32]) -> Vec<u32> {
    let mut full = vec![0u32; system.num_models()];
    for (i, &c) in classifiers.iter().zip(counts) {
        full[i.0] = c;
    }
    // Models are in file order, so a parent may come after its child: repeat
    // until nothing changes (the graph depth bounds the passes).
    for _ in 0..system.num_models() {
        for i in system.request_models() {
            if classifiers.contains(&i) {
                continue;
            }
            let parent = system.models[i.0]
                .parent
                .expect("request models have parents");
            full[i.0] = full[parent.0].div_ceil(2);
        }
    }
    system.request_models().map(|i| full[i.0]).collect()
}

/// The heavy per-type count for a board: the number n of objects of every
/// classifier type the units together get through in about 1.2 frame
/// periods at `fps` (each unit at its best per-request times; a model a unit
/// cannot run costs it three times the model's best elsewhere), so heavy
/// scenes overload the board a little and light ones do not; 2 to 20.
pub fn heavy_count(system: &System, fps: f64) -> u32 {
    let period = 1000.0 / fps;
    let best_on = |i: ModelId, j: ProcId| {
        (1..=system.max_batch_on(i, j))
            .map(|k| system.exec_ms(i, j, k) / k as f64)
            .fold(f64::INFINITY, f64::min)
    };
    let best = |i: ModelId| {
        system
            .proc_ids()
            .map(|j| best_on(i, j))
            .fold(f64::INFINITY, f64::min)
    };
    // Sets of one object per type each unit finishes per ms.
    let rate: f64 = system
        .proc_ids()
        .map(|j| {
            let w: f64 = system
                .request_models()
                .map(|i| best_on(i, j).min(3.0 * best(i)))
                .sum();
            1.0 / w.max(1e-9)
        })
        .sum();
    let det: f64 = system.roots().map(best).sum();
    let n = (1.2 * (period - det).max(0.0) * rate).round();
    n.clamp(2.0, 20.0) as u32
}
