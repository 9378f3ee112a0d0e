//! The states a learned stream policy trains and is judged on: the global
//! step's problems while camdnn runs the suite's trace shapes (with the
//! oracle, then with the policy itself: DAgger), copies of them with other
//! queues and residencies, each labelled by the oracle.

use camdnn_policy::epoch::EpochScenes;
use camdnn_policy::gen::{self, Shape};
use camdnn_policy::schedulers::Camdnn;
use camdnn_policy::sim::{simulate, SimConfig, SimError};
use camdnn_policy::{GlobalPolicy, Plan, PlanInput, ProcId, System};

use super::oracle::{solve_fixed, solve_stream, StreamSolution};
use super::{Recorded, StreamOptions, StreamProblem};
use crate::rng::SplitMix64;
use crate::OracleError;

/// Trace seeds of a board's training and held-out runs are drawn from
/// seed + this + n, far from the board seeds the suite's own traces use.
pub const TRACE_SEED_OFFSET: u64 = 1_000_000;

/// A global policy that records every step's problem (its input and the
/// epoch's scenes) and plans with `inner`.
#[derive(Debug)]
pub struct StepRecorder<G> {
    inner: G,
    /// The problems, in the order they were planned (no plan recorded).
    pub problems: Vec<Recorded>,
}

impl<G: GlobalPolicy> StepRecorder<G> {
    /// Records the problems `inner` plans for.
    pub fn new(inner: G) -> Self {
        StepRecorder {
            inner,
            problems: Vec::new(),
        }
    }
}

impl<G: GlobalPolicy> GlobalPolicy for StepRecorder<G> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn plan(&mut self, system: &System, input: &PlanInput) -> Plan {
        self.inner.plan(system, input)
    }

    fn plan_epoch(&mut self, system: &System, input: &PlanInput, epoch: &EpochScenes) -> Plan {
        self.problems.push(Recorded {
            scene: input.scene.to_vec(),
            rem_ms: input.rem_ms.to_vec(),
            residency: input.residency.to_vec(),
            frames_per_epoch: input.frames_per_epoch,
            epoch: epoch.clone(),
            plan: None,
        });
        self.inner.plan_epoch(system, input, epoch)
    }
}

/// The trace seeds of a board's runs: `runs` of them from `first`.
pub fn trace_seeds(board_seed: u64, first: u64, runs: u64) -> Vec<u64> {
    (first..first + runs)
        .map(|n| board_seed.wrapping_add(TRACE_SEED_OFFSET + n))
        .collect()
}

/// The global steps' problems while camdnn with `policy()` (a fresh one per
/// run) runs each of `shapes` for each of `seeds` on `system`.
pub fn visit<G: GlobalPolicy + Send + 'static>(
    system: &System,
    mut policy: impl FnMut() -> G,
    seeds: &[u64],
    shapes: &[Shape],
) -> Result<Vec<Recorded>, SimError> {
    let cfg = SimConfig::default();
    let heavy = gen::heavy_count(system, cfg.fps);
    let mut out = Vec::new();
    for &seed in seeds {
        for shape in shapes {
            let trace = shape.trace(system, seed, heavy);
            let mut camdnn = Camdnn::new(StepRecorder::new(policy()), 5.0);
            simulate(system, &mut camdnn, &trace, &cfg)?;
            out.extend(camdnn.global().into_iter().flat_map(|g| g.problems.clone()));
        }
    }
    Ok(out)
}

/// `state` with other queues and another residency, drawn from `rng`: each
/// unit idle with probability 1/4, else queued uniformly up to 100 ms; each
/// supported pair resident with probability 1/2 while the unit has room,
/// every detector on one unit at least.
pub fn perturbed(system: &System, state: &Recorded, rng: &mut SplitMix64) -> Recorded {
    let np = system.num_processors();
    let rem_ms = (0..np)
        .map(|_| {
            if rng.chance(0.25) {
                0.0
            } else {
                rng.next_f64() * 100.0
            }
        })
        .collect();
    let mut plan = Plan::empty(system);
    for r in system.roots() {
        let hosts: Vec<ProcId> = system.supporting(r).collect();
        let j = hosts[rng.below(hosts.len() as u64) as usize];
        plan.set_resident(r, j, true);
    }
    for i in system.model_ids() {
        for j in system.supporting(i) {
            if !plan.resident(i, j)
                && rng.chance(0.5)
                && camdnn_policy::plan::fits(system, &plan, i, j)
            {
                plan.set_resident(i, j, true);
            }
        }
    }
    let residency = plan.residency().to_vec();
    Recorded {
        rem_ms,
        residency,
        plan: None,
        ..state.clone()
    }
}

/// The oracle's plan of `state`, or `None` when it has none: no residency
/// holds what the scenes need, or the solver found no plan within its time
/// limit (the caller skips such a state and counts it). Other errors stop.
pub fn label(
    system: &System,
    state: &Recorded,
    options: &StreamOptions,
) -> Result<Option<StreamSolution>, OracleError> {
    match solve_stream(system, &state.problem(), options) {
        Ok(s) => Ok(Some(s)),
        Err(OracleError::Infeasible(_) | OracleError::NoPlanInTime { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// J of a residency and detector unit a policy proposed for `state`, at its
/// best split, on the scenes the oracle's `solution` planned for (the
/// latest alone when it fell back to them). `None` when that residency
/// cannot serve them.
pub fn cost_of(
    system: &System,
    state: &Recorded,
    solution: &StreamSolution,
    residency: &Plan,
    detector: ProcId,
    options: &StreamOptions,
) -> Result<Option<f64>, OracleError> {
    let latest;
    let problem = if solution.scenes < state.epoch.scenes.len() {
        latest = EpochScenes::latest(&state.scene, state.epoch.period_ms);
        StreamProblem {
            input: state.problem().input,
            epoch: &latest,
        }
    } else {
        state.problem()
    };
    match solve_fixed(system, &problem, options, Some((residency, detector))) {
        Ok(s) => Ok(Some(s.cost.objective_ms)),
        Err(OracleError::Infeasible(_)) => Ok(None),
        Err(e) => Err(e),
    }
}
