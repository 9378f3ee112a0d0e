//! The scene r the scheduler plans a frame for, known only in part when it
//! plans: once the detector has run, the level-1 requests are counted, but a
//! deeper model's requests depend on its parent's verdicts (R-Net rejects
//! most MTCNN candidates before O-Net). They are estimated from the share of
//! requests each parent passed on in recent frames.

use crate::System;

/// Per model below level 1, its requests per request of its parent in recent
/// frames, learnt from finished frames.
#[derive(Clone, Debug)]
pub struct SceneEstimator {
    /// `None` until a finished frame showed the model's share.
    pass_ratio: Vec<Option<f64>>,
}

/// How much a new frame moves the average share.
const WEIGHT: f64 = 0.25;

impl SceneEstimator {
    /// Nothing learnt: every deeper model counts all of its parent's requests.
    pub fn new(system: &System) -> Self {
        SceneEstimator {
            pass_ratio: vec![None; system.num_models()],
        }
    }

    /// Learns from the requests each model got in a finished frame
    /// (index = `ModelId`).
    pub fn learn(&mut self, system: &System, requests: &[u32]) {
        for m in system.model_ids() {
            let model = &system.models[m.0];
            let Some(p) = model.parent.filter(|_| model.level > 1) else {
                continue;
            };
            if requests[p.0] == 0 {
                continue;
            }
            let ratio = f64::from(requests[m.0]) / f64::from(requests[p.0]);
            let r = &mut self.pass_ratio[m.0];
            *r = Some(r.map_or(ratio, |old| old + WEIGHT * (ratio - old)));
        }
    }

    /// The scene of a frame whose detector ran `root_items` items (one per
    /// pyramid scale; 1 for most) and whose level-1 requests are `level1`
    /// (index = `ModelId`; other entries ignored): level-1 models their
    /// count, deeper models their parent's estimate times its share.
    pub fn scene(&self, system: &System, level1: &[u32], root_items: u32) -> Vec<u32> {
        let mut scene = vec![0; system.num_models()];
        let mut by_level: Vec<_> = system.model_ids().collect();
        by_level.sort_by_key(|m| system.models[m.0].level);
        for m in by_level {
            let model = &system.models[m.0];
            scene[m.0] = match model.parent {
                None => root_items,
                Some(_) if model.level == 1 => level1[m.0],
                Some(p) => {
                    let share = self.pass_ratio[m.0].unwrap_or(1.0);
                    (f64::from(scene[p.0]) * share).round() as u32
                }
            };
        }
        scene
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// detector -> a -> b -> c, made-up timings.
    fn chain() -> System {
        let mut toml = String::from("name = \"chain\"\nmax_batch = 2\n");
        toml += "[[processor]]\nname = \"cpu\"\nkind = \"cpu\"\nmax_resident = 4\n";
        toml += "[[model]]\nname = \"det\"\n";
        toml += "[[model]]\nname = \"a\"\nparent = \"det\"\nclasses = [\"face\"]\n";
        toml += "[[model]]\nname = \"b\"\nparent = \"a\"\n";
        toml += "[[model]]\nname = \"c\"\nparent = \"b\"\n";
        for m in ["det", "a", "b", "c"] {
            toml += &format!("[profile.{m}.cpu]\nexec_ms = [1.0, 1.5]\nload_ms = 1.0\n");
        }
        System::from_toml(&toml).unwrap()
    }

    #[test]
    fn deeper_models_count_their_parents_requests_until_a_frame_shows_the_share() {
        let system = chain();
        let mut est = SceneEstimator::new(&system);
        assert_eq!(est.scene(&system, &[0, 40, 0, 0], 1), vec![1, 40, 40, 40]);
        // 40 candidates, 4 pass a, 2 of those pass b.
        est.learn(&system, &[8, 40, 4, 2]);
        assert_eq!(est.scene(&system, &[0, 40, 0, 0], 1), vec![1, 40, 4, 2]);
        assert_eq!(est.scene(&system, &[0, 20, 0, 0], 1), vec![1, 20, 2, 1]);
        assert_eq!(
            est.scene(&system, &[0, 20, 0, 0], 8)[0],
            8,
            "pyramid scales"
        );
    }

    #[test]
    fn the_share_follows_recent_frames_and_ignores_frames_without_parents() {
        let system = chain();
        let mut est = SceneEstimator::new(&system);
        est.learn(&system, &[8, 40, 4, 2]);
        est.learn(&system, &[8, 0, 0, 0]);
        assert_eq!(est.scene(&system, &[0, 40, 0, 0], 1)[2], 4);
        for _ in 0..20 {
            est.learn(&system, &[8, 40, 40, 40]);
        }
        assert_eq!(est.scene(&system, &[0, 40, 0, 0], 1), vec![1, 40, 40, 40]);
    }
}
