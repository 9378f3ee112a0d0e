//! Adapting while running: every finished batch refines the live estimates
//! ([`crate::estimate`]) that the dispatcher, the batcher and the global
//! step read (written into the scheduler's view of the [`System`]), and a
//! lasting change of a processor's speed or of the scene mix
//! ([`crate::drift`]) asks for a global step at once instead of at the next
//! epoch, at most once per `min_gap_ms` (a guard against thrashing).
//! The simulator and the daemon's scheduler thread drive the same code.

use crate::drift::{Drift, DriftConfig, SceneShift, SceneShiftConfig, SpeedDrift};
use crate::estimate::{EstimateConfig, LiveEstimates, Sample};
use crate::{ModelId, ProcId, System};

/// Knobs of [`Adapt`].
#[derive(Clone, Debug, PartialEq)]
pub struct AdaptConfig {
    /// The live estimates.
    pub estimates: EstimateConfig,
    /// The speed-change detector.
    pub drift: DriftConfig,
    /// The scene-change detector (`None`: the epoch timer alone re-plans
    /// for new scenes).
    pub scene: Option<SceneShiftConfig>,
    /// Least time between two global steps when a detector asks for one, ms.
    pub min_gap_ms: f64,
    /// Re-probing (`None`: off): a processor estimated slower than its
    /// profile none of whose batches showed it for this long (it ran none,
    /// or ran them at its profile's speed) gets its profile's speed back
    /// at the next global step, so the plan tries it again; if it is still
    /// slow, its next batches show it and the drift detector moves it back.
    /// Without this, a unit that sped up again after a slow spell keeps too
    /// little work to ever show it.
    pub reprobe_ms: Option<f64>,
}

/// A processor is re-probed only when estimated at least this much slower
/// than its profile (smaller gaps are noise the estimates follow anyway).
const REPROBE_RATIO: f64 = 1.25;

impl Default for AdaptConfig {
    /// Band's smoothing, a 2x step detected within 3 batches, scene changes
    /// detected, at most one triggered step per second, a slow unit idle for
    /// 3 s re-probed.
    fn default() -> Self {
        AdaptConfig {
            estimates: EstimateConfig::default(),
            drift: DriftConfig::default(),
            scene: Some(SceneShiftConfig::default()),
            min_gap_ms: 1000.0,
            reprobe_ms: Some(3000.0),
        }
    }
}

/// Why a global step is due before the epoch timer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Trigger {
    /// A processor's speed changed lastingly.
    Drift(Drift),
    /// The scene mix moved away from the one planned for.
    Scene,
}

/// Counters for reports and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdaptCounts {
    /// Batches learned from.
    pub samples: u64,
    /// Samples held as possible outliers.
    pub held: u64,
    /// Speed changes detected.
    pub drifts: u32,
    /// Scene changes detected.
    pub scene_shifts: u32,
    /// Global steps triggered (after the guard).
    pub triggered: u32,
    /// Processors given their profile's speed back after an idle slow spell.
    pub reprobes: u32,
}

/// Live estimates plus the triggers of an early global step.
#[derive(Clone, Debug)]
pub struct Adapt {
    estimates: LiveEstimates,
    drift: SpeedDrift,
    scene: Option<SceneShift>,
    min_gap_ms: f64,
    reprobe_ms: Option<f64>,
    /// When each processor last finished a batch at least
    /// [`REPROBE_RATIO`] slower than its profile, ms.
    last_slow_ms: Vec<f64>,
    last_step_ms: f64,
    pending: Option<Trigger>,
    counts: AdaptCounts,
}

impl Adapt {
    /// Adaptation over `system`'s profile.
    pub fn new(system: &System, cfg: &AdaptConfig) -> Self {
        Adapt {
            estimates: LiveEstimates::new(system, cfg.estimates.clone()),
            drift: SpeedDrift::new(system, cfg.drift.clone()),
            scene: cfg.scene.clone().map(SceneShift::new),
            min_gap_ms: cfg.min_gap_ms.max(0.0),
            reprobe_ms: cfg.reprobe_ms.filter(|t| t.is_finite() && *t >= 0.0),
            last_slow_ms: vec![f64::NEG_INFINITY; system.num_processors()],
            last_step_ms: f64::NEG_INFINITY,
            pending: None,
            counts: AdaptCounts::default(),
        }
    }

    /// The live estimates.
    pub fn estimates(&self) -> &LiveEstimates {
        &self.estimates
    }

    /// Counters so far.
    pub fn counts(&self) -> AdaptCounts {
        self.counts
    }

    /// A batch of k requests of model i finished on p_j at `now`: its
    /// execution took `exec_ms` and, if it loaded the model first, the load
    /// took `load_ms`. Updates the estimates and `view` (the system the
    /// scheduler reads); returns a trigger when a global step is due now.
    #[allow(clippy::too_many_arguments)]
    pub fn observe_batch(
        &mut self,
        view: &mut System,
        now: f64,
        i: ModelId,
        j: ProcId,
        k: usize,
        exec_ms: f64,
        load_ms: Option<f64>,
    ) -> Option<Trigger> {
        if exec_ms >= self.estimates.profile_exec_ms(i, j, k) * REPROBE_RATIO {
            if let Some(t) = self.last_slow_ms.get_mut(j.0) {
                *t = now;
            }
        }
        let expected = self.estimates.exec_ms(i, j, k);
        let sample = self.estimates.observe_exec(i, j, k, exec_ms);
        match sample {
            Sample::Refused => {}
            Sample::Held => self.counts.held += 1,
            Sample::Taken | Sample::Confirmed => self.counts.samples += 1,
        }
        if let Some(l) = load_ms {
            self.estimates.observe_load(i, j, l);
        }
        let drift = self.drift.observe(j, exec_ms, expected);
        if let Some(d) = drift {
            self.counts.drifts += 1;
            // The whole processor changed: every estimate on it moves now.
            let learned = (sample == Sample::Confirmed).then_some((i, k));
            self.estimates.rescale(j, d.ratio, learned);
            for m in view.model_ids() {
                self.estimates.apply_pair(view, m, j);
            }
            self.pending = Some(Trigger::Drift(d));
        } else {
            self.estimates.apply_pair(view, i, j);
        }
        self.due(now)
    }

    /// The scene of a frame about to be planned; returns a trigger when a
    /// global step is due now.
    pub fn observe_scene(&mut self, now: f64, scene: &[u32]) -> Option<Trigger> {
        if let Some(s) = &mut self.scene {
            if s.observe(scene) && self.pending.is_none() {
                self.counts.scene_shifts += 1;
                self.pending = Some(Trigger::Scene);
            }
        }
        self.due(now)
    }

    /// Before a global step at `now`: every processor estimated at least
    /// [`REPROBE_RATIO`] slower than its profile none of whose batches
    /// showed that slow-down for `reprobe_ms` (it ran none, or ran them at
    /// about its profile's speed, which its other models' estimates do not
    /// learn) gets its profile's speed back in the estimates and in
    /// `view`, so the step plans with it again (Band re-probes slow units
    /// the same way). Returns the processors re-probed.
    pub fn reprobe(&mut self, view: &mut System, now: f64) -> Vec<ProcId> {
        let Some(idle) = self.reprobe_ms else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for j in view.proc_ids() {
            let ratio = self.estimates.speed_ratio(j);
            if now - self.last_slow_ms[j.0] < idle || ratio < REPROBE_RATIO {
                continue;
            }
            self.estimates.reset_to_profile(j);
            self.drift.reset(j);
            for m in view.model_ids() {
                self.estimates.apply_pair(view, m, j);
            }
            self.counts.reprobes += 1;
            out.push(j);
        }
        out
    }

    /// A global step ran at `now` for `scene` (by the epoch timer or a trigger).
    pub fn stepped(&mut self, now: f64, scene: &[u32]) {
        self.last_step_ms = now;
        self.pending = None;
        if let Some(s) = &mut self.scene {
            s.planned(scene);
        }
    }

    /// The pending trigger, if the guard lets it through at `now`.
    fn due(&mut self, now: f64) -> Option<Trigger> {
        if now - self.last_step_ms < self.min_gap_ms {
            return None;
        }
        let t = self.pending?;
        self.counts.triggered += 1;
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::tests::board;

    const A: ModelId = ModelId(1);
    const GPU: ProcId = ProcId(1);

    /// The GPU runs at its profile's speed, then 2x slow until the drift
    /// detector moves its estimates; returns the time of the last batch.
    fn slow_down(adapt: &mut Adapt, view: &mut System) -> f64 {
        let mut now = 0.0;
        for _ in 0..5 {
            for (k, ms) in [(1, 4.0), (2, 6.0)] {
                now += 100.0;
                adapt.observe_batch(view, now, A, GPU, k, ms, None);
            }
        }
        assert_eq!(adapt.counts().drifts, 0, "{:?}", adapt.counts());
        'slow: for _ in 0..20 {
            for (k, ms) in [(1, 8.0), (2, 12.0)] {
                now += 100.0;
                adapt.observe_batch(view, now, A, GPU, k, ms, None);
                if adapt.counts().drifts > 0 {
                    break 'slow;
                }
            }
        }
        assert_eq!(adapt.counts().drifts, 1, "{:?}", adapt.counts());
        now
    }

    #[test]
    fn a_slow_unit_that_idled_gets_its_profile_back_at_the_next_step() {
        let system = board();
        let mut view = system.clone();
        let mut adapt = Adapt::new(&system, &AdaptConfig::default());
        let last = slow_down(&mut adapt, &mut view);
        let slow = view.exec_ms(A, GPU, 1);
        assert!((slow - 8.0).abs() < 0.5, "estimated 2x slow: {slow} ms");
        assert!((view.exec_ms(A, GPU, 2) - 12.0).abs() < 0.5);
        // Busy lately: nothing to re-probe.
        assert!(adapt.reprobe(&mut view, last + 1000.0).is_empty());
        assert_eq!(view.exec_ms(A, GPU, 1), slow);
        // Idle for the re-probe time: the profile's speed is back, in the
        // estimates and in the scheduler's view, the other unit untouched.
        let cpu_before = view.exec_ms(A, ProcId(0), 1);
        assert_eq!(adapt.reprobe(&mut view, last + 3000.0), vec![GPU]);
        let back = view.exec_ms(A, GPU, 1);
        assert!((back - 4.0).abs() < 0.5, "re-probed at {back} ms");
        assert!((view.exec_ms(A, GPU, 2) - 6.0).abs() < 0.5);
        assert_eq!(view.exec_ms(A, ProcId(0), 1), cpu_before);
        assert_eq!(adapt.counts().reprobes, 1);
        // Back at its profile, it is not re-probed again.
        assert!(adapt.reprobe(&mut view, last + 9000.0).is_empty());
    }

    #[test]
    fn a_slow_unit_whose_batches_run_at_its_profile_again_is_re_probed() {
        let system = board();
        let mut view = system.clone();
        let mut adapt = Adapt::new(&system, &AdaptConfig::default());
        let mut now = slow_down(&mut adapt, &mut view);
        // Still slow: its batches keep showing it, nothing is re-probed.
        for _ in 0..20 {
            for (k, ms) in [(1, 8.0), (2, 12.0)] {
                now += 100.0;
                adapt.observe_batch(&mut view, now, A, GPU, k, ms, None);
            }
        }
        assert!(adapt.reprobe(&mut view, now).is_empty());
        // Back at its profile's speed for batches of one only: that size's
        // estimate follows, the unit's other estimates stay slow until the
        // re-probe gives them back.
        for _ in 0..35 {
            now += 100.0;
            adapt.observe_batch(&mut view, now, A, GPU, 1, 4.0, None);
        }
        assert!((view.exec_ms(A, GPU, 1) - 4.0).abs() < 0.5);
        assert!((view.exec_ms(A, GPU, 2) - 12.0).abs() < 1.0);
        assert_eq!(adapt.reprobe(&mut view, now), vec![GPU]);
        assert!((view.exec_ms(A, GPU, 2) - 6.0).abs() < 0.5);
    }

    #[test]
    fn re_probing_can_be_turned_off() {
        let system = board();
        let mut view = system.clone();
        let cfg = AdaptConfig {
            reprobe_ms: None,
            ..AdaptConfig::default()
        };
        let mut adapt = Adapt::new(&system, &cfg);
        let last = slow_down(&mut adapt, &mut view);
        let slow = view.exec_ms(A, GPU, 1);
        assert!(adapt.reprobe(&mut view, last + 60_000.0).is_empty());
        assert_eq!(view.exec_ms(A, GPU, 1), slow);
    }
}
