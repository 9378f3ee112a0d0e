//! Detectors of lasting change that trigger a global step before the epoch
//! timer: a processor's speed ([`SpeedDrift`], a two-sided CUSUM on
//! ln(measured / expected) per processor) and the scene mix ([`SceneShift`],
//! a one-sided CUSUM on the scene's distance from the one last planned for).
//! Each sample's step is clipped, so one outlier alone never fires.

use crate::{ProcId, System};

/// Knobs of [`SpeedDrift`].
#[derive(Clone, Debug, PartialEq)]
pub struct DriftConfig {
    /// Slack per sample, in ln(ratio): changes smaller than this drift back.
    pub slack: f64,
    /// Decision threshold, in ln(ratio) accumulated.
    pub threshold: f64,
    /// Each sample's |ln(ratio)| is clipped to this, so that one outlier
    /// cannot reach the threshold alone.
    pub clip: f64,
}

impl Default for DriftConfig {
    /// Ignores changes under ~10 %; a 2x step fires after 3 batches.
    fn default() -> Self {
        DriftConfig {
            slack: 0.1,
            threshold: 1.4,
            clip: 1.0,
        }
    }
}

/// A lasting change in a processor's speed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Drift {
    /// The processor.
    pub proc: ProcId,
    /// Measured / expected since the change began (geometric mean).
    pub ratio: f64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Side {
    g: f64,
    sum: f64,
    n: u32,
}

impl Side {
    fn step(&mut self, z: f64, slack: f64) {
        self.g = (self.g + z - slack).max(0.0);
        if self.g == 0.0 {
            self.sum = 0.0;
            self.n = 0;
        } else {
            self.sum += z;
            self.n += 1;
        }
    }
}

/// Per-processor two-sided CUSUM on ln(measured / expected batch time).
#[derive(Clone, Debug)]
pub struct SpeedDrift {
    cfg: DriftConfig,
    up: Vec<Side>,
    down: Vec<Side>,
}

impl SpeedDrift {
    /// A detector for every processor of `system`.
    pub fn new(system: &System, cfg: DriftConfig) -> Self {
        let np = system.num_processors();
        SpeedDrift {
            cfg,
            up: vec![Side::default(); np],
            down: vec![Side::default(); np],
        }
    }

    /// A batch on p_j took `measured_ms` where `expected_ms` was estimated.
    /// Returns the change when one is detected (and starts over on p_j).
    pub fn observe(&mut self, j: ProcId, measured_ms: f64, expected_ms: f64) -> Option<Drift> {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if j.0 >= self.up.len() || !ok(measured_ms) || !ok(expected_ms) {
            return None;
        }
        let c = self.cfg.clip;
        let z = (measured_ms / expected_ms).ln().clamp(-c, c);
        self.up[j.0].step(z, self.cfg.slack);
        self.down[j.0].step(-z, self.cfg.slack);
        let fired = if self.up[j.0].g > self.cfg.threshold {
            Some(self.up[j.0])
        } else if self.down[j.0].g > self.cfg.threshold {
            let s = self.down[j.0];
            Some(Side { sum: -s.sum, ..s })
        } else {
            None
        }?;
        self.reset(j);
        Some(Drift {
            proc: j,
            ratio: (fired.sum / f64::from(fired.n.max(1))).exp(),
        })
    }

    /// Forgets the evidence gathered on p_j.
    pub fn reset(&mut self, j: ProcId) {
        self.up[j.0] = Side::default();
        self.down[j.0] = Side::default();
    }
}

/// Knobs of [`SceneShift`].
#[derive(Clone, Debug, PartialEq)]
pub struct SceneShiftConfig {
    /// Relative distance per frame tolerated (frame-to-frame variation).
    pub slack: f64,
    /// Accumulated relative distance that fires.
    pub threshold: f64,
}

impl Default for SceneShiftConfig {
    /// A scene that differs by half its requests fires after ~7 frames; one
    /// odd frame never does.
    fn default() -> Self {
        SceneShiftConfig {
            slack: 0.2,
            threshold: 2.0,
        }
    }
}

/// A lasting change of the scene mix away from the scene last planned for.
#[derive(Clone, Debug)]
pub struct SceneShift {
    cfg: SceneShiftConfig,
    planned: Vec<u32>,
    g: f64,
}

impl SceneShift {
    /// A detector with no planned scene yet (the first scene sets it).
    pub fn new(cfg: SceneShiftConfig) -> Self {
        SceneShift {
            cfg,
            planned: Vec::new(),
            g: 0.0,
        }
    }

    /// The scene a global step just planned for.
    pub fn planned(&mut self, scene: &[u32]) {
        self.planned.clear();
        self.planned.extend_from_slice(scene);
        self.g = 0.0;
    }

    /// A frame's scene; true when the mix has lastingly moved away from
    /// the planned one (the detector then waits for the next plan).
    pub fn observe(&mut self, scene: &[u32]) -> bool {
        if self.planned.len() != scene.len() {
            self.planned(scene);
            return false;
        }
        let (mut diff, mut total) = (0u64, 0u64);
        for (&a, &b) in scene.iter().zip(&self.planned) {
            diff += u64::from(a.abs_diff(b));
            total += u64::from(b.max(a));
        }
        let d = diff as f64 / total.max(1) as f64;
        self.g = (self.g + d.min(1.0) - self.cfg.slack).max(0.0);
        self.g > self.cfg.threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn one_proc() -> System {
        System::from_toml(
            r#"
max_batch = 1
[[processor]]
name = "cpu"
kind = "cpu"
max_resident = 1
[[model]]
name = "detector"
[profile.detector.cpu]
exec_ms = [10.0]
load_ms = 1.0
"#,
        )
        .expect("valid")
    }

    #[test]
    fn fires_on_a_step_not_on_noise() {
        let mut d = SpeedDrift::new(&one_proc(), DriftConfig::default());
        let mut rng = Rng::new(3);
        // 10 000 batches at +-20 % uniform noise around the estimate.
        for n in 0..10_000 {
            let x = 10.0 * (0.8 + 0.4 * rng.unit());
            assert_eq!(d.observe(ProcId(0), x, 10.0), None, "false alarm at {n}");
        }
        // The unit slows 2x (DVFS): detected within 3 batches, ratio ~2.
        let mut fired = None;
        for n in 0..3 {
            let x = 20.0 * (0.9 + 0.2 * rng.unit());
            if let Some(f) = d.observe(ProcId(0), x, 10.0) {
                fired = Some((n, f));
                break;
            }
        }
        let (_, f) = fired.expect("a 2x step is detected within 3 batches");
        assert!((f.ratio - 2.0).abs() < 0.25, "{f:?}");
        // And a recovery (measured half the expected) too.
        let back = (0..3).find_map(|_| d.observe(ProcId(0), 10.0, 20.0));
        assert!(
            back.is_some_and(|f| (f.ratio - 0.5).abs() < 0.05),
            "{back:?}"
        );
    }

    #[test]
    fn single_outliers_never_fire() {
        let mut d = SpeedDrift::new(&one_proc(), DriftConfig::default());
        for n in 0..1000 {
            let x = if n % 10 == 0 { 1000.0 } else { 10.0 };
            assert_eq!(d.observe(ProcId(0), x, 10.0), None, "at {n}");
        }
        assert_eq!(d.observe(ProcId(7), 100.0, 10.0), None);
        assert_eq!(d.observe(ProcId(0), f64::NAN, 10.0), None);
    }

    #[test]
    fn scene_shift_fires_on_a_lasting_change_only() {
        let mut s = SceneShift::new(SceneShiftConfig::default());
        s.planned(&[1, 2, 1]);
        // One odd frame in between steady ones.
        for n in 0..100 {
            let scene = if n % 10 == 0 { [1, 8, 4] } else { [1, 2, 1] };
            assert!(!s.observe(&scene), "at {n}");
        }
        let n = (0..20).position(|_| s.observe(&[1, 6, 4]));
        assert!(n.is_some_and(|n| n < 8), "{n:?}");
    }
}
