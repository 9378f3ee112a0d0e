//! A scheduler that records what another one is told: every global step it
//! takes (when and with how many frames) and every scene it is shown. Tests
//! and diagnostics use it to check that the simulator and the daemon step as
//! `policy::stepper` says and plan for the work really offered.

use std::sync::{Arc, Mutex};

use crate::admission::FrameAdmission;
use crate::scheduler::{Batching, EpochJob, EpochOutcome, Scheduler};
use crate::{Cluster, ModelId, Plan, ProcId, System};

/// The global steps recorded: (now, ms; frames the step was given).
pub type StepLog = Arc<Mutex<Vec<(f64, f64)>>>;

/// The scenes a scheduler was shown, in order.
pub type SceneLog = Arc<Mutex<Vec<Vec<u32>>>>;

/// `inner` deciding everything, each of its global steps and scenes logged.
pub struct Recording {
    inner: Box<dyn Scheduler + Send>,
    steps: StepLog,
    scenes: SceneLog,
}

impl Recording {
    /// Wraps `inner`; the log is shared with the caller (the daemon runs the
    /// scheduler on its own thread).
    pub fn new(inner: Box<dyn Scheduler + Send>) -> (Self, StepLog) {
        let steps = StepLog::default();
        (
            Recording {
                inner,
                steps: Arc::clone(&steps),
                scenes: SceneLog::default(),
            },
            steps,
        )
    }

    /// The same recording, the scenes `inner` is shown logged to `scenes`
    /// (shared with the caller).
    pub fn logging_scenes_to(mut self, scenes: SceneLog) -> Self {
        self.scenes = scenes;
        self
    }
}

impl Scheduler for Recording {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn batching(&self) -> Batching {
        self.inner.batching()
    }
    fn place(
        &mut self,
        system: &System,
        cluster: &Cluster,
        now: f64,
        i: ModelId,
        waiting: usize,
    ) -> Option<(ProcId, usize)> {
        self.inner.place(system, cluster, now, i, waiting)
    }
    fn batch_target(&self, system: &System, cluster: &Cluster, i: ModelId) -> usize {
        self.inner.batch_target(system, cluster, i)
    }
    fn initial_plan(&mut self, system: &System) -> Plan {
        self.inner.initial_plan(system)
    }
    fn frame_order(&self, system: &System, models: &mut [ModelId]) {
        self.inner.frame_order(system, models)
    }
    fn system_override(&self, system: &System) -> Option<System> {
        self.inner.system_override(system)
    }
    fn set_admission(&mut self, admission: FrameAdmission) {
        self.inner.set_admission(admission)
    }
    fn observe_scene(&mut self, system: &System, cluster: &Cluster, now: f64, scene: &[u32]) {
        if let Ok(mut log) = self.scenes.lock() {
            log.push(scene.to_vec());
        }
        self.inner.observe_scene(system, cluster, now, scene)
    }
    fn frame_done(&mut self, now: f64, delay_ms: Option<f64>) {
        self.inner.frame_done(now, delay_ms)
    }
    fn start_epoch(
        &mut self,
        system: &System,
        cluster: &Cluster,
        now: f64,
        scene: &[u32],
        frames: f64,
        epoch_ms: f64,
    ) -> Option<EpochJob> {
        if let Ok(mut steps) = self.steps.lock() {
            steps.push((now, frames));
        }
        self.inner
            .start_epoch(system, cluster, now, scene, frames, epoch_ms)
    }
    fn finish_epoch(
        &mut self,
        system: &System,
        cluster: &mut Cluster,
        now: f64,
        job: EpochJob,
    ) -> EpochOutcome {
        self.inner.finish_epoch(system, cluster, now, job)
    }
}
