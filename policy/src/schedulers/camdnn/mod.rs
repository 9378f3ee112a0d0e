//! The full camdnn scheduler: Algorithm 1 between global steps, and a
//! global step every epoch (and at once after a dropped frame or a first
//! late answer, at most once a second). The step replays each of its
//! choices ([`Choice`]: the global policy's plan for the latest scene with
//! its loads, followed request by request; Algorithm 1 alone on the
//! residency as it is with the paper's or the earliest-finish rule; a
//! residency for the stream's bottleneck with the group-split rule) in the
//! simulator from the cluster's present state, on the last epoch's frames
//! and on the scene on camera held for two more epochs, and keeps the
//! incumbent unless another answers more of those frames on time, or as
//! many with less delay. Every constant is in [`Tuning`].

mod choice;
mod follow;
mod planner;
mod replay;
mod residency;
mod tuning;

#[cfg(test)]
mod tests;

pub use choice::Choice;
pub use follow::Mode;
pub use residency::{beats, keep_idle_residents, stay_plan, stream_residency, GreedyPlanner};
pub use tuning::Tuning;

use follow::Follow;
use planner::{Planner, StepChoice, StepInput};

use crate::admission::FrameAdmission;
use crate::plan::{fastest_hosts, fill_free_slots, start_plan};
use crate::scheduler::{Batching, EpochJob, EpochOutcome, Scheduler};
use crate::{Cluster, GlobalPolicy, HostRule, ModelId, Plan, ProcId, System};

/// Local dispatcher plus a [`GlobalPolicy`] every epoch.
pub struct Camdnn<G: GlobalPolicy> {
    name: String,
    follow: Follow,
    /// The scenes (request models only, in the system's order) of the frames
    /// seen since the last global step.
    window: Vec<Vec<u32>>,
    /// The mode before the first global step.
    start: Mode,
    /// How many global steps kept each kind of choice ([`Camdnn::choices`]).
    choices: [u32; Choice::COUNT],
    /// What the global step keeps between steps; away (`None`) while a
    /// step is computed elsewhere ([`Scheduler::start_epoch`]).
    planner: Option<Planner<G>>,
    /// How frames enter the pipeline, for the step's replays
    /// ([`Scheduler::set_admission`]).
    admission: FrameAdmission,
}

/// A computed step, handed back: the planner, its decision (none when no
/// choice was possible) and the dispatcher snapshot with the caches the
/// step filled (the re-split search).
struct Computed<G> {
    planner: Planner<G>,
    decision: Option<StepChoice>,
    follow: Follow,
}

impl<G: GlobalPolicy> Camdnn<G> {
    /// camdnn with `global` as its global step and a sync timer of `wait_ms`.
    pub fn new(global: G, wait_ms: f64) -> Self {
        Self::with_tuning(global, wait_ms, Tuning::default())
    }

    /// The same with the step's constants of `tuning` (an ablation).
    pub fn with_tuning(global: G, wait_ms: f64, tuning: Tuning) -> Self {
        let name = format!("camdnn-{}", global.name());
        Camdnn {
            name,
            follow: Follow::new(wait_ms),
            window: Vec::new(),
            start: Mode::Local(HostRule::FinishTime),
            choices: [0; Choice::COUNT],
            admission: FrameAdmission::Behind(None),
            planner: Some(Planner::new(global, tuning)),
        }
    }

    /// The same scheduler starting in `mode` until its first global step
    /// (default: Algorithm 1 alone with the earliest-finish rule, exactly
    /// `camdnn-local-eft`). [`Mode::Plan`] starts from the paper's
    /// initialisation, the global policy's plan for one request of each
    /// model on idle processors.
    pub fn starting_in(mut self, mode: Mode) -> Self {
        self.start = mode;
        self
    }

    /// The same scheduler under another report name.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The global policy (`None` while a step is computed elsewhere).
    pub fn global(&self) -> Option<&G> {
        self.planner.as_ref().map(|p| &p.global)
    }

    /// The plan the dispatcher follows (last global step, or its re-split
    /// for the latest scene), if any.
    pub fn plan(&self) -> Option<&Plan> {
        self.follow.plan.as_ref()
    }

    /// How the dispatcher places requests until the next global step.
    pub fn mode(&self) -> Mode {
        self.follow.mode
    }

    /// How many global steps kept each kind of choice, indexed by
    /// [`Choice::index`].
    pub fn choices(&self) -> [u32; Choice::COUNT] {
        self.choices
    }

    /// How many global steps kept `choice`.
    pub fn kept(&self, choice: Choice) -> u32 {
        self.choices[choice.index()]
    }
}

impl<G: GlobalPolicy + Send + 'static> Scheduler for Camdnn<G> {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn batching(&self) -> Batching {
        self.follow.batching()
    }

    /// Follows the plan's split of the current frame while it has quota
    /// left for model i, else Algorithm 1 (or Algorithm 1 alone when the
    /// global step chose a local rule).
    fn place(
        &mut self,
        system: &System,
        cluster: &Cluster,
        now: f64,
        i: ModelId,
        waiting: usize,
    ) -> Option<(ProcId, usize)> {
        self.follow.place(system, cluster, now, i, waiting)
    }

    /// The largest batch the plan still has for model i in this frame
    /// (the dispatcher's own target when the plan has none left).
    fn batch_target(&self, system: &System, cluster: &Cluster, i: ModelId) -> usize {
        self.follow.batch_target(system, cluster, i)
    }

    /// Until the first global step has a window to judge by, camdnn is in
    /// its starting mode: by default Algorithm 1 alone with the
    /// earliest-finish rule from its start-up residency (the fastest hosts,
    /// free slots filled), exactly `camdnn-local-eft`.
    fn initial_plan(&mut self, system: &System) -> Plan {
        self.follow.mode = self.start;
        self.follow.plan_residency.clear();
        if let (Mode::Plan, Some(planner)) = (self.start, &mut self.planner) {
            let global = &mut planner.global;
            let plan = start_plan(system, |input| global.plan(system, input));
            self.follow.plan = Some(plan.clone());
            return fill_free_slots(system, &plan);
        }
        self.follow.plan = None;
        fill_free_slots(system, &fastest_hosts(system))
    }

    /// The step replays its choices under the pipeline's admission, except
    /// the paper's no-drop mode ([`FrameAdmission::QueueAll`]): there every
    /// frame of an overloaded replay would be late and the choices could
    /// not be told apart by frames on time, so the replays keep real-time
    /// dropping at one frame period.
    fn set_admission(&mut self, admission: FrameAdmission) {
        self.admission = match admission {
            FrameAdmission::QueueAll => FrameAdmission::Behind(None),
            a => a,
        };
    }

    /// A frame whose scene differs from the plan's gets the plan re-split
    /// for it over the current residency (no loads), and the frame's quota
    /// per (model, host) is taken from the plan. The scene joins the window.
    fn observe_scene(&mut self, system: &System, cluster: &Cluster, now: f64, scene: &[u32]) {
        self.window
            .push(system.request_models().map(|i| scene[i.0]).collect());
        self.follow.observe_scene(system, cluster, now, scene);
    }

    /// Packs the global step with copies of the board, the cluster and the
    /// dispatcher at `now` and the frames since the last step; the planning
    /// state travels with it and comes back at [`Scheduler::finish_epoch`]
    /// (until then no other step starts).
    fn start_epoch(
        &mut self,
        system: &System,
        cluster: &Cluster,
        now: f64,
        scene: &[u32],
        frames_per_epoch: f64,
        epoch_ms: f64,
    ) -> Option<EpochJob> {
        let mut planner = self.planner.take()?;
        let mut input = StepInput {
            system: system.clone(),
            cluster: cluster.clone(),
            follow: self.follow.clone(),
            window: std::mem::take(&mut self.window),
            now,
            scene: scene.to_vec(),
            frames_per_epoch,
            epoch_ms,
            admission: self.admission,
        };
        Some(EpochJob::new(move || {
            let decision = planner.decide(&mut input);
            Computed {
                planner,
                decision,
                follow: input.follow,
            }
        }))
    }

    /// Applies a step [`Scheduler::start_epoch`] started: the chosen
    /// residency's loads start at `now`, the dispatcher takes the chosen
    /// mode and plan. A unit that left service since the step started is
    /// not loaded ([`Cluster::apply_residency`] loads only what it can host).
    fn finish_epoch(
        &mut self,
        system: &System,
        cluster: &mut Cluster,
        now: f64,
        job: EpochJob,
    ) -> EpochOutcome {
        let Some(done) = job.into_result::<Computed<G>>() else {
            return EpochOutcome::default();
        };
        self.planner = Some(done.planner);
        let f = &mut self.follow;
        if f.resplit.is_none() {
            f.resplit = done.follow.resplit;
        }
        let Some(d) = done.decision else {
            return EpochOutcome::default();
        };
        self.choices[d.choice.index()] += 1;
        let loads = d
            .load
            .map_or(0, |r| cluster.apply_residency(system, now, &r));
        f.mode = d.mode;
        if let Some((plan, makespan)) = d.plan {
            f.follow_plan(plan, makespan, cluster);
        }
        EpochOutcome { loads }
    }
}
