//! A scheduler that records every global step another one takes: when and
//! with how many frames. Tests and diagnostics use it to check that the
//! simulator and the daemon step as `policy::stepper` says.

use std::sync::{Arc, Mutex};

use crate::admission::FrameAdmission;
use crate::scheduler::{Batching, EpochJob, EpochOutcome, Scheduler};
use crate::{Cluster, ModelId, Plan, ProcId, System};

/// The global steps recorded: (now, ms; frames the step was given).
pub type StepLog = Arc<Mutex<Vec<(f64, f64)>>>;

/// `inner` deciding everything, each of its global steps logged.
pub struct Recording {
    inner: Box<dyn Scheduler + Send>,
    steps: StepLog,
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
            },
            steps,
        )
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
