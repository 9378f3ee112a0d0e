//! The scenes a global step expects over the next epoch, weighted: what a
//! policy that plans for the stream ([`crate::GlobalPolicy::plan_epoch`])
//! plans for, rather than the one latest scene.

/// The scenes expected over the next epoch and the camera's frame period.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochScenes {
    /// (scene, weight): r_i per model (index = `ModelId`, detectors'
    /// entries as in the latest scene), the weights summing to
    /// 1; the latest scene is the first (weighing 0 when no frame had it).
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

    /// The scenes of `frames` (each a full scene, model-indexed), at most
    /// `max_scenes` of them: `latest` first, then the most frequent others
    /// (the first seen on a tie); every other frame counts for the kept
    /// scene nearest to it (least sum of absolute count differences, the
    /// first kept on a tie). Each kept scene weighs its frames' share.
    /// `latest` alone when there are no frames.
    pub fn from_frames<'a>(
        latest: &[u32],
        frames: impl IntoIterator<Item = &'a [u32]>,
        max_scenes: usize,
        period_ms: f64,
    ) -> Self {
        let mut distinct: Vec<(&[u32], usize)> = Vec::new();
        let mut total = 0usize;
        for f in frames {
            total += 1;
            match distinct.iter_mut().find(|(s, _)| *s == f) {
                Some((_, n)) => *n += 1,
                None => distinct.push((f, 1)),
            }
        }
        if total == 0 {
            return Self::latest(latest, period_ms);
        }
        let mut kept: Vec<(Vec<u32>, usize)> = vec![(latest.to_vec(), 0)];
        let mut others: Vec<&(&[u32], usize)> =
            distinct.iter().filter(|(s, _)| *s != latest).collect();
        // Stable: the first seen stays first among equals.
        others.sort_by_key(|o| std::cmp::Reverse(o.1));
        for (s, _) in others.iter().take(max_scenes.max(1) - 1) {
            kept.push((s.to_vec(), 0));
        }
        for (s, n) in &distinct {
            let nearest = kept
                .iter()
                .enumerate()
                .min_by_key(|(k, (c, _))| (distance(c, s), *k))
                .map(|(k, _)| k)
                .expect("the latest scene is kept");
            kept[nearest].1 += n;
        }
        EpochScenes {
            scenes: kept
                .into_iter()
                .filter(|(s, n)| *n > 0 || s == latest)
                .map(|(s, n)| (s, n as f64 / total as f64))
                .collect(),
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

fn distance(a: &[u32], b: &[u32]) -> u64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| u64::from(x.abs_diff(y)))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::EpochScenes;

    #[test]
    fn frames_reduce_to_the_latest_and_the_most_frequent_scenes() {
        let f = |v: &[u32]| v.to_vec();
        let frames = [
            f(&[1, 2, 0]),
            f(&[1, 2, 0]),
            f(&[5, 0, 0]),
            f(&[5, 0, 1]),
            f(&[5, 0, 0]),
            f(&[9, 9, 9]),
            f(&[1, 2, 0]),
            f(&[0, 0, 0]),
        ];
        let e = EpochScenes::from_frames(&[0, 0, 0], frames.iter().map(|v| v.as_slice()), 3, 70.0);
        // The latest, then [1, 2, 0] (3 frames) and [5, 0, 0] (2); [5, 0, 1]
        // counts for [5, 0, 0]; [9, 9, 9] is nearest [5, 0, 0] (22 against
        // 24 and 27).
        let scenes: Vec<(Vec<u32>, f64)> = vec![
            (f(&[0, 0, 0]), 1.0 / 8.0),
            (f(&[1, 2, 0]), 3.0 / 8.0),
            (f(&[5, 0, 0]), 4.0 / 8.0),
        ];
        assert_eq!(e.scenes, scenes);
        let mean = e.mean_scene();
        assert!((mean[0] - (3.0 + 20.0) / 8.0).abs() < 1e-12, "{mean:?}");
        assert_eq!(e.max_scene(), vec![5, 2, 0]);
        // One scene at most: everything counts for the latest.
        let one =
            EpochScenes::from_frames(&[0, 0, 0], frames.iter().map(|v| v.as_slice()), 1, 70.0);
        assert_eq!(one.scenes, vec![(f(&[0, 0, 0]), 1.0)]);
        // No frames: the latest alone.
        let none = EpochScenes::from_frames(&[3, 3, 3], std::iter::empty(), 3, 70.0);
        assert_eq!(none, EpochScenes::latest(&[3, 3, 3], 70.0));
    }
}
