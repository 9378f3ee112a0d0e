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
}

impl Default for AdaptConfig {
    /// Band's smoothing, a 2x step detected within 3 batches, scene changes
    /// detected, at most one triggered step per second.
    fn default() -> Self {
        AdaptConfig {
            estimates: EstimateConfig::default(),
            drift: DriftConfig::default(),
            scene: Some(SceneShiftConfig::default()),
            min_gap_ms: 1000.0,
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
}

/// Live estimates plus the triggers of an early global step.
#[derive(Clone, Debug)]
pub struct Adapt {
    estimates: LiveEstimates,
    drift: SpeedDrift,
    scene: Option<SceneShift>,
    min_gap_ms: f64,
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
        let expected = self.estimates.exec_ms(i, j, k);
        match self.estimates.observe_exec(i, j, k, exec_ms) {
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
            self.estimates.rescale(j, d.ratio);
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
