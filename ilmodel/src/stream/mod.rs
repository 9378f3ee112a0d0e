//! The oracle that plans an epoch of the stream, not one frame: which
//! models are resident where (the detector free to go to any unit that runs
//! it), how each scene expected over the epoch splits its requests over
//! them, and in which batches, loads paid once. [`oracle`] solves it with
//! HiGHS; [`brute`] enumerates every plan of a tiny instance, its
//! independent check; [`StreamPolicy`] is the [`GlobalPolicy`] backed by
//! the ILP, what the learned policy imitates.
//!
//! # Formulation
//!
//! Given the scenes s of the epoch with weights w_s (summing to 1; camdnn's
//! step passes the latest scene alone, [`EpochScenes::latest`]), r_{s,i}
//! requests of each classifier i, the camera's period P, the epoch's F
//! frames, the units' queues rem_j and the residency a_old; in ms
//! throughout:
//! - a(m,j) binary for every model m that is a detector or has requests in
//!   some scene, and every unit j that runs it; new(m,j) = a(m,j) where m
//!   is not resident on j yet, else 0;
//! - δ(ρ,j) binary for every detector ρ: its frames run on j; sum_j δ = 1,
//!   δ(ρ,j) <= a(ρ,j). D = sum_j δ(d,j) t_e(d,j,1) for the first detector d;
//! - y(s,i,j,n) binary: in scene s, unit j serves exactly n requests of i,
//!   at c_ij(n), the cheapest batching of n (as in [`crate::oracle`]);
//!   sum_n y(s,i,j,n) <= a(i,j); sum_j sum_n n y(s,i,j,n) = r_{s,i};
//! - W_{s,j} = sum c_ij(n) y(s,i,j,n), scene s's classifier work on j;
//! - each load delays the frames that arrive while it runs (about t_l / P
//!   of them, at most F) by t_l / 2 on average: the mean wait it adds to the
//!   epoch's frames is λ(m,j) = min(t_l(m,j) / P, F) t_l(m,j) / (2F), and
//!   Λ_j = sum_m new(m,j) λ(m,j);
//! - T_s >= D + W_{s,j} + Λ_j for every j, T_s >= D: scene s's makespan on
//!   units that start the epoch's frames idle (classifiers wait for the
//!   detector);
//! - C_j = sum_s w_s W_{s,j} + sum_ρ δ(ρ,j) t_e(ρ,j,1) + (rem_j + sum_m
//!   new(m,j) t_l(m,j)) / F: unit j's work per frame over the epoch, its
//!   present queue and its loads paid once;
//! - e >= C_j - P for every j, e >= 0: how far the bottleneck unit falls
//!   behind the camera per frame;
//! - sum_m a(m,j) <= N_j; sum_m size(m,j) a(m,j) <= budget_j where given;
//! - minimise J = sum_s w_s T_s + (F - 1) e / 2, plus 1e-4 ms per resident
//!   pair (among plans of equal J, none keeps an idle model).
//!
//! J is the mean delay of the epoch's frames under a simple model: each
//! frame's own makespan, plus, when the bottleneck unit's work per frame C
//! exceeds the period, the queue that grows by C - P a frame, which the
//! k-th frame waits k (C - P) for, (F - 1)(C - P) / 2 on average. When the
//! camera offers more than the units sustain, the second term dominates
//! (it is 34.5 times the excess at 70 frames an epoch) and minimising it
//! maximises the frames the stream answers (about P / C of them), which is
//! what the on-time share counts under overload; when it offers less, J is
//! the mean makespan, and a frame is on time when its delay, mostly its
//! makespan, is within the deadline. One objective covers both without a
//! switch, and the loads count where they cost: once in the bottleneck's
//! work, and in the delay of the frames they hold up.
//!
//! The plan handed to the step is the residency (the detector on its δ
//! unit) with the latest scene's batches; later scenes are re-split by the
//! dispatcher over that residency.

pub mod brute;
pub mod cli;
pub mod learn;
pub mod oracle;
pub mod states;

use std::time::Duration;

use camdnn_policy::epoch::EpochScenes;
use camdnn_policy::{repair, GlobalPolicy, Plan, PlanInput, ProcId, System};

pub use oracle::{solve_stream, StreamOptions};

/// The weight of one resident pair in the objective: a tie-break among
/// plans of equal J, far below any timing.
pub const RESIDENT_EPSILON_MS: f64 = 1e-4;

/// One epoch's planning problem: the step's input (the latest scene, the
/// queues, the residency, F) and the scenes expected over the epoch.
#[derive(Clone, Copy, Debug)]
pub struct StreamProblem<'a> {
    /// The latest scene, the queues, a_old and F.
    pub input: PlanInput<'a>,
    /// The scenes of the epoch (the latest first) and the period.
    pub epoch: &'a EpochScenes,
}

impl StreamProblem<'_> {
    /// F, at least 1.
    pub fn frames(&self) -> f64 {
        self.input.frames_per_epoch.max(1.0)
    }

    /// λ(m,j): the mean wait a load of `load_ms` adds to the epoch's frames
    /// ([`EpochScenes::load_delay_ms`]).
    pub fn load_delay_ms(&self, load_ms: f64) -> f64 {
        self.epoch.load_delay_ms(load_ms, self.frames())
    }
}

/// J and its parts for one plan of the epoch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StreamCost {
    /// sum_s w_s T_s, ms.
    pub mean_makespan_ms: f64,
    /// max_j C_j, ms per frame.
    pub bottleneck_ms: f64,
    /// e = max(0, max_j C_j - P), ms per frame.
    pub excess_ms: f64,
    /// J = mean makespan + (F - 1) e / 2, ms (without the tie-break).
    pub objective_ms: f64,
}

/// J of a plan given by its residency (`resident[m * n_p + j]`), the first
/// detector's unit and every scene's classifier work per unit
/// (`work[s][j]`, ms, W_{s,j}); the other detectors' units are `roots`
/// (one per root after the first, in [`System::roots`] order). `None` when
/// the residency breaks N_j or a memory budget.
pub fn evaluate(
    system: &System,
    problem: &StreamProblem,
    resident: &[bool],
    detector: ProcId,
    roots: &[ProcId],
    work: &[Vec<f64>],
) -> Option<StreamCost> {
    let np = system.num_processors();
    let input = &problem.input;
    let f = problem.frames();
    let period = problem.epoch.period_ms;
    let first = system.roots().next()?;
    let t_det = system.exec_ms(first, detector, 1);
    let mut per_frame = vec![0.0; np];
    per_frame[detector.0] += t_det;
    for (r, &j) in system.roots().skip(1).zip(roots) {
        per_frame[j.0] += system.exec_ms(r, j, 1);
    }
    let mut wait = vec![0.0; np];
    for j in system.proc_ids() {
        let p = &system.processors[j.0];
        let (mut count, mut mb) = (0, 0.0);
        per_frame[j.0] += input.rem_ms[j.0] / f;
        for m in system.model_ids().filter(|m| resident[m.0 * np + j.0]) {
            count += 1;
            mb += system.size_mb(m, j);
            if !input.was_resident(system, m, j) {
                let load = system.load_ms(m, j);
                per_frame[j.0] += load / f;
                wait[j.0] += problem.load_delay_ms(load);
            }
        }
        if count > p.max_resident || p.memory_budget_mb.is_some_and(|b| mb > b + 1e-9) {
            return None;
        }
    }
    let mut mean_makespan = 0.0;
    for ((_, w), scene_work) in problem.epoch.scenes.iter().zip(work) {
        let t = system
            .proc_ids()
            .map(|j| t_det + scene_work[j.0] + wait[j.0])
            .fold(t_det, f64::max);
        mean_makespan += w * t;
        for j in system.proc_ids() {
            per_frame[j.0] += w * scene_work[j.0];
        }
    }
    let bottleneck = per_frame.iter().copied().fold(0.0, f64::max);
    let excess = (bottleneck - period).max(0.0);
    Some(StreamCost {
        mean_makespan_ms: mean_makespan,
        bottleneck_ms: bottleneck,
        excess_ms: excess,
        objective_ms: mean_makespan + (f - 1.0) * excess / 2.0,
    })
}

/// What the last solve of a [`StreamPolicy`] gave: J and the solve time,
/// or why it failed.
pub type StreamOutcome = Result<(StreamCost, Duration), crate::OracleError>;

/// A [`GlobalPolicy`] that solves the stream ILP at every global step.
/// Offline use only (simulator and evaluation): a solve takes milliseconds
/// to seconds.
#[derive(Debug, Default)]
pub struct StreamPolicy {
    options: StreamOptions,
    last: Option<StreamOutcome>,
    /// Every problem planned for, when recording ([`StreamPolicy::recording`]).
    recorded: Option<Vec<Recorded>>,
}

/// One global step's problem, owned, with the oracle's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    /// r_i by model id of the latest scene.
    pub scene: Vec<u32>,
    /// rem_j, ms.
    pub rem_ms: Vec<f64>,
    /// a_old, model by processor.
    pub residency: Vec<bool>,
    /// F.
    pub frames_per_epoch: f64,
    /// The scenes of the epoch and the period.
    pub epoch: EpochScenes,
    /// The oracle's plan (residency and the latest scene's batches), when
    /// it had one.
    pub plan: Option<Plan>,
}

impl Recorded {
    /// The problem, borrowed.
    pub fn problem(&self) -> StreamProblem<'_> {
        StreamProblem {
            input: PlanInput {
                scene: &self.scene,
                rem_ms: &self.rem_ms,
                residency: &self.residency,
                frames_per_epoch: self.frames_per_epoch,
            },
            epoch: &self.epoch,
        }
    }
}

impl StreamPolicy {
    /// A policy with the given solver options.
    pub fn new(options: StreamOptions) -> Self {
        StreamPolicy {
            options,
            last: None,
            recorded: None,
        }
    }

    /// The same policy keeping every problem it plans for and its answer.
    pub fn recording(mut self) -> Self {
        self.recorded = Some(Vec::new());
        self
    }

    /// The problems recorded so far.
    pub fn recorded(&self) -> &[Recorded] {
        self.recorded.as_deref().unwrap_or(&[])
    }

    /// The last step's outcome.
    pub fn last_outcome(&self) -> Option<&StreamOutcome> {
        self.last.as_ref()
    }
}

impl GlobalPolicy for StreamPolicy {
    fn name(&self) -> &str {
        "stream-ilp"
    }

    fn plan(&mut self, system: &System, input: &PlanInput) -> Plan {
        let epoch = EpochScenes::latest(input.scene, 1000.0 / 14.0);
        self.plan_epoch(system, input, &epoch)
    }

    fn plan_epoch(&mut self, system: &System, input: &PlanInput, epoch: &EpochScenes) -> Plan {
        let problem = StreamProblem {
            input: *input,
            epoch,
        };
        let solved = solve_stream(system, &problem, &self.options);
        let plan = solved.as_ref().ok().map(|s| s.plan.clone());
        if let Some(rec) = &mut self.recorded {
            rec.push(Recorded {
                scene: input.scene.to_vec(),
                rem_ms: input.rem_ms.to_vec(),
                residency: input.residency.to_vec(),
                frames_per_epoch: input.frames_per_epoch,
                epoch: epoch.clone(),
                plan: plan.clone(),
            });
        }
        self.last = Some(solved.map(|s| (s.cost, s.solve_time)));
        plan.unwrap_or_else(|| {
            repair(system, input, &Plan::empty(system)).unwrap_or_else(|_| Plan::empty(system))
        })
    }
}
