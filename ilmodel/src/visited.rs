//! The states the learned policy itself visits. The demonstrations draw
//! scenes, queues and previous residency at random; the global step sees
//! what the scheduler's own earlier choices left behind. This module records
//! the global step's inputs while camdnn with the policy runs the simulator
//! over the suite's scene shapes ([`camdnn_policy::gen::Shape`]) and
//! measures the MLP alone (repaired, no local search) against the ILP on
//! exactly those states: the on-policy fidelity, and the states DAgger would
//! label next.

use camdnn_policy::gen::{self, Shape};
use camdnn_policy::mlp::MlpPolicy;
use camdnn_policy::schedulers::Camdnn;
use camdnn_policy::sim::{simulate, SimConfig};
use camdnn_policy::stats::Summary;
use camdnn_policy::{Detector, GlobalPolicy, Plan, PlanInput, System};

use crate::oracle::{solve, OracleOptions};
use crate::OracleError;

/// One global step's input, owned.
#[derive(Clone, Debug, PartialEq)]
pub struct Visited {
    /// r_i by model id.
    pub scene: Vec<u32>,
    /// rem_j by processor, ms.
    pub rem_ms: Vec<f64>,
    /// a_old, model by processor.
    pub residency: Vec<bool>,
    /// F, the frames the step was given.
    pub frames_per_epoch: f64,
}

impl Visited {
    /// The input as the policy and the oracle take it.
    pub fn input(&self) -> PlanInput<'_> {
        PlanInput {
            scene: &self.scene,
            rem_ms: &self.rem_ms,
            residency: &self.residency,
            frames_per_epoch: self.frames_per_epoch,
        }
    }
}

/// A global policy that records every input it is asked to plan for.
#[derive(Debug)]
pub struct Recorder<G> {
    inner: G,
    /// The inputs, in the order they were planned.
    pub inputs: Vec<Visited>,
}

impl<G: GlobalPolicy> Recorder<G> {
    /// Records the inputs `inner` plans for.
    pub fn new(inner: G) -> Self {
        Recorder {
            inner,
            inputs: Vec::new(),
        }
    }
}

impl<G: GlobalPolicy> GlobalPolicy for Recorder<G> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn plan(&mut self, system: &System, input: &PlanInput) -> Plan {
        self.inputs.push(Visited {
            scene: input.scene.to_vec(),
            rem_ms: input.rem_ms.to_vec(),
            residency: input.residency.to_vec(),
            frames_per_epoch: input.frames_per_epoch,
        });
        self.inner.plan(system, input)
    }
}

/// The global step's inputs while camdnn with a policy from `policy` (as
/// configured: its sidecar's local search; a fresh one per run) runs every
/// shape of [`Shape::ALL`] for every trace seed of `seeds` on `system` with
/// `cfg`.
pub fn visit(
    system: &System,
    mut policy: impl FnMut() -> MlpPolicy,
    seeds: std::ops::RangeInclusive<u64>,
    cfg: &SimConfig,
    wait_ms: f64,
) -> Result<Vec<Visited>, camdnn_policy::sim::SimError> {
    let heavy = gen::heavy_count(system, cfg.fps);
    let mut out = Vec::new();
    for seed in seeds {
        for shape in Shape::ALL {
            let trace = shape.trace(system, seed, heavy);
            let mut camdnn = Camdnn::new(Recorder::new(policy()), wait_ms);
            simulate(system, &mut camdnn, &trace, cfg)?;
            // Every step a simulation starts is applied before it returns.
            let global = camdnn.global().into_iter();
            out.extend(global.flat_map(|g| g.inputs.iter().cloned()));
        }
    }
    Ok(out)
}

/// The extra makespan over the ILP, T(plan) / T(ILP) - 1, of each of
/// `policies` (with its own decoding and search settings) on `states`; one
/// ILP solve per state.
pub fn fidelity_on(
    system: &System,
    policies: &mut [MlpPolicy],
    states: &[Visited],
) -> Result<Vec<Summary>, OracleError> {
    let det = Detector::fastest(system);
    let mut extra = vec![Vec::with_capacity(states.len()); policies.len()];
    for s in states {
        let input = s.input();
        let opt = solve(system, &input, det, &OracleOptions::default())?;
        for (p, e) in policies.iter_mut().zip(&mut extra) {
            let t = p.plan(system, &input).makespan_ms(system, &input, det);
            e.push(t / opt.makespan_ms - 1.0);
        }
    }
    Ok(extra.iter().map(|e| Summary::of(e)).collect())
}
