//! The full camdnn scheduler: Algorithm 1 between epochs, and every epoch a
//! global step that re-plans residency and batching for the latest scene,
//! adopting the new residency only when it pays for its loads.

use super::{Batching, EpochOutcome, LocalDispatcher, Scheduler};
use crate::{
    repair, Cluster, Detector, GlobalPolicy, HostRule, ModelId, Plan, PlanInput, ProcId, System,
};

/// Local dispatcher plus a [`GlobalPolicy`] every epoch.
pub struct Camdnn<G: GlobalPolicy> {
    local: LocalDispatcher,
    global: G,
    name: String,
    plan: Option<Plan>,
}

impl<G: GlobalPolicy> Camdnn<G> {
    /// camdnn with `global` as its global step and a sync timer of `wait_ms`.
    pub fn new(global: G, wait_ms: f64) -> Self {
        let name = format!("camdnn-{}", global.name());
        Camdnn {
            local: LocalDispatcher::new(HostRule::PerRequest, wait_ms),
            global,
            name,
            plan: None,
        }
    }
}

/// The plan that keeps the current residency: every request placed greedily
/// on models already resident (repair of an empty plan with that residency).
pub fn stay_plan(system: &System, input: &PlanInput) -> Option<Plan> {
    let mut keep = Plan::empty(system);
    for i in system.model_ids() {
        for j in system.proc_ids() {
            keep.set_resident(i, j, input.was_resident(system, i, j));
        }
    }
    repair(system, input, &keep).ok()
}

impl<G: GlobalPolicy> Scheduler for Camdnn<G> {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn batching(&self) -> Batching {
        self.local.batching()
    }

    fn place(
        &mut self,
        system: &System,
        cluster: &Cluster,
        now: f64,
        i: ModelId,
        waiting: usize,
    ) -> Option<(ProcId, usize)> {
        self.local.place(system, cluster, now, i, waiting)
    }

    /// The largest batch the current plan runs model i in, when it has one.
    fn batch_target(&self, system: &System, cluster: &Cluster, i: ModelId) -> usize {
        self.plan
            .as_ref()
            .and_then(|p| {
                (1..=system.max_batch).rev().find(|&k| {
                    system
                        .proc_ids()
                        .any(|j| p.batches(i, j, k) > 0 && cluster.is_resident(i, j))
                })
            })
            .unwrap_or_else(|| super::best_resident_batch(system, cluster, i))
    }

    /// The paper's initialisation: the global step's plan for one request of
    /// each model on idle processors, loaded for free.
    fn initial_plan(&mut self, system: &System) -> Plan {
        let global = &mut self.global;
        let plan = super::start_plan(system, |input| global.plan(system, input));
        self.plan = Some(plan.clone());
        plan
    }

    fn on_epoch(
        &mut self,
        system: &System,
        cluster: &mut Cluster,
        now: f64,
        scene: &[u32],
        frames_per_epoch: f64,
    ) -> EpochOutcome {
        let rem = cluster.rem_all(now);
        let residency = cluster.residency().to_vec();
        let input = PlanInput {
            scene,
            rem_ms: &rem,
            residency: &residency,
            frames_per_epoch,
        };
        let Ok(new) = repair(system, &input, &self.global.plan(system, &input)) else {
            return EpochOutcome::default();
        };
        let detector = Detector::fastest(system);
        // Loads are in the new plan's makespan amortised over the epoch, so a
        // lower makespan means the gain over the epoch exceeds the load cost.
        let adopt = match stay_plan(system, &input) {
            Some(stay) => {
                new.makespan_ms(system, &input, detector)
                    < stay.makespan_ms(system, &input, detector) - 1e-9
            }
            None => true,
        };
        let loads = if adopt {
            cluster.apply_residency(system, now, &new)
        } else {
            0
        };
        self.plan = Some(if adopt {
            new
        } else {
            stay_plan(system, &input).unwrap_or(new)
        });
        EpochOutcome {
            loads,
            step_ms: 0.0,
        }
    }
}

/// A cheap content-aware global policy: the repaired empty plan, i.e. each
/// needed model on its best host and requests spread by earliest planned
/// finish. A baseline for the learned policy and the global step of
/// `camdnn-greedy` when no trained policy is at hand.
#[derive(Clone, Copy, Debug, Default)]
pub struct GreedyPlanner;

impl GlobalPolicy for GreedyPlanner {
    fn name(&self) -> &str {
        "greedy"
    }

    fn plan(&mut self, system: &System, input: &PlanInput) -> Plan {
        repair(system, input, &Plan::empty(system)).unwrap_or_else(|_| Plan::empty(system))
    }
}
