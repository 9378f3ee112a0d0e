//! The scenes a global step expects over the next epoch, weighted, and the
//! camera's period: what a policy that plans for the stream
//! ([`crate::GlobalPolicy::plan_epoch`]) plans for. camdnn's step passes
//! the latest scene alone ([`EpochScenes::latest`]); the stream oracle's
//! formulation takes any weighted set.

/// The scenes expected over the next epoch and the camera's frame period.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochScenes {
    /// (scene, weight): r_i per model (index = `ModelId`, detectors'
    /// entries as in the latest scene), the weights summing to 1.
    pub scenes: Vec<(Vec<u32>, f64)>,
    /// The camera's frame period, ms.
    pub period_ms: f64,
}

impl EpochScenes {
    /// The latest scene alone, every `period_ms`.
    pub fn latest(scene: &[u32], period_ms: f64) -> Self {
        EpochScenes {
            scenes: vec![(scene.to_vec(), 1.0)],
            period_ms,
        }
    }

    /// The mean wait a load of `load_ms` on a unit adds to the frames of an
    /// epoch of `frames` frames: the frames that arrive while it runs
    /// (`load_ms` / the period of them, at most the epoch's) wait `load_ms`
    /// / 2 on average, ms.
    pub fn load_delay_ms(&self, load_ms: f64, frames: f64) -> f64 {
        let f = frames.max(1.0);
        (load_ms / self.period_ms).min(f) * load_ms / (2.0 * f)
    }

    /// The weighted mean count of every model.
    pub fn mean_scene(&self) -> Vec<f64> {
        let n = self.scenes.first().map_or(0, |s| s.0.len());
        let mut out = vec![0.0; n];
        for (s, w) in &self.scenes {
            for (o, &r) in out.iter_mut().zip(s) {
                *o += w * f64::from(r);
            }
        }
        out
    }

    /// The largest count of every model over the scenes.
    pub fn max_scene(&self) -> Vec<u32> {
        let n = self.scenes.first().map_or(0, |s| s.0.len());
        let mut out = vec![0; n];
        for (s, _) in &self.scenes {
            for (o, &r) in out.iter_mut().zip(s) {
                *o = (*o).max(r);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::EpochScenes;

    #[test]
    fn the_mean_and_the_largest_scene_weigh_every_scene_of_the_epoch() {
        let e = EpochScenes {
            scenes: vec![
                (vec![0, 0, 0], 1.0 / 8.0),
                (vec![1, 2, 0], 3.0 / 8.0),
                (vec![5, 0, 1], 4.0 / 8.0),
            ],
            period_ms: 70.0,
        };
        let mean = e.mean_scene();
        assert!((mean[0] - (3.0 + 20.0) / 8.0).abs() < 1e-12, "{mean:?}");
        assert!((mean[1] - 6.0 / 8.0).abs() < 1e-12, "{mean:?}");
        assert_eq!(e.max_scene(), vec![5, 2, 1]);
        let latest = EpochScenes::latest(&[3, 3, 3], 70.0);
        assert_eq!(latest.scenes, vec![(vec![3, 3, 3], 1.0)]);
        assert_eq!(latest.max_scene(), vec![3, 3, 3]);
    }
}
