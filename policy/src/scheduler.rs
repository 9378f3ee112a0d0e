//! The one interface every online scheduler implements ([`Scheduler`]):
//! the frame flow asks it where each batch runs and how requests are
//! grouped, and hands it the global step's job to compute elsewhere. The
//! implementations live in [`crate::schedulers`].

use std::any::Any;

use crate::admission::FrameAdmission;
use crate::plan::{fastest_hosts, fill_free_slots};
use crate::{Cluster, ModelId, Plan, ProcId, System};

/// How a scheduler wants requests of one (frame, model) grouped before
/// [`Scheduler::place`] sees them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Batching {
    /// Each request is placed alone, as soon as it arrives.
    PerRequest,
    /// The sync-timer batcher with this WaitTime, ms.
    SyncTimer {
        /// WaitTime, ms.
        wait_ms: f64,
    },
    /// Wait for every request of the frame's level, then place them model
    /// by model in [`Scheduler::frame_order`].
    WholeFrame,
}

/// What a global step did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EpochOutcome {
    /// Models loaded by the re-plan.
    pub loads: u32,
}

/// A global step's work, packed by [`Scheduler::start_epoch`] with all it
/// decides on (its own copies of the board, the cluster and the planning
/// state), so a driver can compute it on another thread while the
/// dispatcher goes on: the daemon's step thread, or the simulator at once,
/// applying it [`crate::sim::SimConfig::step_cost_ms`] later. Handed back to
/// the same scheduler's [`Scheduler::finish_epoch`].
pub struct EpochJob {
    state: JobState,
}

type Work = Box<dyn FnOnce() -> Box<dyn Any + Send> + Send>;

enum JobState {
    Pending(Work),
    Done(Box<dyn Any + Send>),
    /// Its work panicked: no result.
    Lost,
}

impl EpochJob {
    /// A job whose result is what `work` returns.
    pub fn new<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Self {
        EpochJob {
            state: JobState::Pending(Box::new(move || Box::new(work()) as Box<dyn Any + Send>)),
        }
    }

    /// Computes the step, if not yet done. If the work panics, the job
    /// has no result ([`EpochJob::into_result`] is `None`).
    pub fn run(&mut self) {
        if !matches!(self.state, JobState::Pending(_)) {
            return;
        }
        if let JobState::Pending(work) = std::mem::replace(&mut self.state, JobState::Lost) {
            self.state = JobState::Done(work());
        }
    }

    /// The result, computed first if need be; `None` if the work panicked
    /// or its result is not a `T` (a job handed to a scheduler other than
    /// the one that started it).
    pub fn into_result<T: 'static>(mut self) -> Option<T> {
        self.run();
        match self.state {
            JobState::Done(r) => r.downcast::<T>().ok().map(|b| *b),
            JobState::Pending(_) | JobState::Lost => None,
        }
    }
}

impl std::fmt::Debug for EpochJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.state {
            JobState::Pending(_) => "pending",
            JobState::Done(_) => "done",
            JobState::Lost => "lost",
        };
        f.debug_struct("EpochJob").field("state", &state).finish()
    }
}

/// An online scheduler: places batches on processors one decision at a time.
pub trait Scheduler {
    /// Name for reports.
    fn name(&self) -> String;

    /// How requests are grouped before placement.
    fn batching(&self) -> Batching;

    /// Places up to `waiting` (>= 1) requests of model i at `now`: the host
    /// and the batch size (1..=waiting). `None` if no processor can host i.
    fn place(
        &mut self,
        system: &System,
        cluster: &Cluster,
        now: f64,
        i: ModelId,
        waiting: usize,
    ) -> Option<(ProcId, usize)>;

    /// The batch size the sync timer waits for (k*).
    fn batch_target(&self, system: &System, cluster: &Cluster, i: ModelId) -> usize {
        best_resident_batch(system, cluster, i)
    }

    /// Residency at start-up (loaded for free, as the paper ignores the
    /// initial load): the fastest hosts, free slots filled.
    fn initial_plan(&mut self, system: &System) -> Plan {
        fill_free_slots(system, &fastest_hosts(system))
    }

    /// Order in which a whole frame's models are placed ([`Batching::WholeFrame`]).
    fn frame_order(&self, system: &System, models: &mut [ModelId]) {
        models.sort_by(|a, b| system.priority(*b).total_cmp(&system.priority(*a)));
    }

    /// A variant of the system this scheduler needs, if any. The single-unit
    /// baselines (CPU-only, GPU-only) leave the other units idle, so their
    /// one unit may hold every model: they raise that unit's N_j.
    fn system_override(&self, _system: &System) -> Option<System> {
        None
    }

    /// How frames enter the pipeline this scheduler serves (the simulator's
    /// `SimConfig::admission`, the daemon's `max_in_flight` and
    /// `drop_behind_*`), so a global step can judge its choices under the
    /// same rule. Ignored by default.
    fn set_admission(&mut self, _admission: FrameAdmission) {}

    /// The scene r of the frame whose requests are about to be released,
    /// once its detector has run (detectors' entries are 1).
    fn observe_scene(&mut self, _system: &System, _cluster: &Cluster, _now: f64, _scene: &[u32]) {}

    /// A frame left the pipeline at `now`: answered `delay_ms` after its
    /// arrival, or dropped (`None`): what a scheduler that learns from
    /// outcomes would read. Ignored by default.
    fn frame_done(&mut self, _now: f64, _delay_ms: Option<f64>) {}

    /// Starts the global step, due every epoch, for the most recent scene
    /// with the frames offered since the last step and the epoch, ms (the
    /// longest time between two steps; infinite without a timer): the job
    /// that computes it from a snapshot of `cluster` at `now`, to run
    /// anywhere and hand back to [`Scheduler::finish_epoch`]; the scheduler
    /// keeps placing meanwhile as it did. `None`: no global step (or one
    /// still away).
    fn start_epoch(
        &mut self,
        _system: &System,
        _cluster: &Cluster,
        _now: f64,
        _scene: &[u32],
        _frames_per_epoch: f64,
        _epoch_ms: f64,
    ) -> Option<EpochJob> {
        None
    }

    /// Applies the step `job` computed, at `now` (its loads start then).
    fn finish_epoch(
        &mut self,
        _system: &System,
        _cluster: &mut Cluster,
        _now: f64,
        _job: EpochJob,
    ) -> EpochOutcome {
        EpochOutcome::default()
    }

    /// The whole global step at `now`: started, computed and applied at
    /// once.
    fn on_epoch(
        &mut self,
        system: &System,
        cluster: &mut Cluster,
        now: f64,
        scene: &[u32],
        frames_per_epoch: f64,
        epoch_ms: f64,
    ) -> EpochOutcome {
        match self.start_epoch(system, cluster, now, scene, frames_per_epoch, epoch_ms) {
            Some(job) => self.finish_epoch(system, cluster, now, job),
            None => EpochOutcome::default(),
        }
    }
}

/// The best preferred batch size among processors where i is resident (all
/// supporting processors if it is resident nowhere).
pub fn best_resident_batch(system: &System, cluster: &Cluster, i: ModelId) -> usize {
    let first = |j: ProcId| {
        system
            .preferred_batches(i, j)
            .first()
            .map_or(1, |&k| k as usize)
    };
    system
        .supporting(i)
        .filter(|&j| cluster.is_resident(i, j))
        .map(first)
        .max()
        .or_else(|| system.supporting(i).map(first).max())
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::EpochJob;

    #[test]
    fn a_job_runs_once_and_hands_back_its_result_of_its_type_only() {
        let runs = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counted = std::sync::Arc::clone(&runs);
        let mut job = EpochJob::new(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            7u32
        });
        job.run();
        job.run();
        assert_eq!(job.into_result::<u32>(), Some(7));
        assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(EpochJob::new(|| 7u32).into_result::<f64>(), None);
    }

    #[test]
    fn a_job_whose_work_panicked_has_no_result() {
        let mut job = EpochJob::new(|| -> u32 { panic!("a bug in the step") });
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run()));
        assert!(caught.is_err());
        assert_eq!(format!("{job:?}"), r#"EpochJob { state: "lost" }"#);
        assert_eq!(job.into_result::<u32>(), None);
    }
}
