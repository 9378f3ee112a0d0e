//! The dispatching half of camdnn: between two global steps, how each batch
//! is placed under the mode the last step kept.

use super::residency::stay_split;
use crate::mlp::search::Search;
use crate::scheduler::{Batching, Scheduler};
use crate::schedulers::LocalDispatcher;
use crate::{choose_host, Cluster, Detector, HostRule, ModelId, Plan, PlanInput, ProcId, System};

/// How the dispatcher places requests between two global steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Follow the plan's split of each frame (re-split over the current
    /// residency when the scene changes), Algorithm 1 past it.
    Plan,
    /// Algorithm 1 alone with this host rule.
    Local(HostRule),
}

/// The dispatching half of [`super::Camdnn`]: the plan it follows (or the
/// local rule it uses instead) and the current frame's quota. Cloned to
/// replay a choice.
#[derive(Clone, Debug)]
pub(super) struct Follow {
    pub(super) local: LocalDispatcher,
    pub(super) mode: Mode,
    pub(super) plan: Option<Plan>,
    pub(super) resplit: Option<Search>,
    /// Requests of the current frame the plan still puts on each (i, j),
    /// indexed `i * n_p + j`.
    quota: Vec<u32>,
    /// The cluster's residency when the plan was made (a dispatcher load
    /// since then makes the plan stale).
    pub(super) plan_residency: Vec<bool>,
    /// The plan's makespan when it was made, ms: a planned host whose queue
    /// alone is longer has fallen behind the plan.
    plan_makespan: f64,
}

impl Follow {
    /// A dispatcher with sync timer `wait_ms` that has no plan yet.
    pub(super) fn new(wait_ms: f64) -> Self {
        Follow {
            local: LocalDispatcher::new(HostRule::PerRequest, wait_ms),
            mode: Mode::Plan,
            plan: None,
            resplit: None,
            quota: Vec::new(),
            plan_residency: Vec::new(),
            plan_makespan: f64::INFINITY,
        }
    }

    /// Re-splits the work of `scene` over the current residency (no loads).
    fn resplit_for(&mut self, system: &System, cluster: &Cluster, now: f64, scene: &[u32]) {
        let rem = cluster.rem_all(now);
        let input = PlanInput {
            scene,
            rem_ms: &rem,
            residency: cluster.residency(),
            frames_per_epoch: 1.0,
        };
        if input.validate(system).is_err() {
            return;
        }
        let search = self.resplit.get_or_insert_with(|| Search::new(system));
        if let Some(plan) = stay_split(system, &input, search) {
            self.set_plan(system, cluster, &input, plan);
        }
    }

    /// Follows `plan`, made for `input` over the cluster's current residency.
    pub(super) fn set_plan(
        &mut self,
        system: &System,
        cluster: &Cluster,
        input: &PlanInput,
        plan: Plan,
    ) {
        let makespan = plan.makespan_ms(system, input, Detector::fastest(system));
        self.follow_plan(plan, makespan, cluster);
    }

    /// Follows `plan`, whose makespan was `makespan_ms` when it was made,
    /// over the cluster's current residency.
    pub(super) fn follow_plan(&mut self, plan: Plan, makespan_ms: f64, cluster: &Cluster) {
        self.plan_makespan = makespan_ms;
        self.plan = Some(plan);
        self.plan_residency.clear();
        self.plan_residency.extend_from_slice(cluster.residency());
    }
}

impl Scheduler for Follow {
    fn name(&self) -> String {
        "camdnn-follow".into()
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
        if let Mode::Local(rule) = self.mode {
            let d = choose_host(system, cluster, rule, now, i, waiting)?;
            return Some((d.proc, d.batch));
        }
        let behind = self.plan_makespan;
        if let Some((j, k)) = planned_host(system, cluster, &self.quota, now, i, waiting, behind) {
            let q = &mut self.quota[i.0 * system.num_processors() + j.0];
            *q = q.saturating_sub(k as u32);
            return Some((j, k));
        }
        self.local.place(system, cluster, now, i, waiting)
    }

    fn batch_target(&self, system: &System, cluster: &Cluster, i: ModelId) -> usize {
        if let Mode::Local(_) = self.mode {
            return crate::scheduler::best_resident_batch(system, cluster, i);
        }
        let np = system.num_processors();
        system
            .proc_ids()
            .filter(|&j| cluster.is_resident(i, j))
            .filter_map(|j| {
                let q = *self.quota.get(i.0 * np + j.0)? as usize;
                (q > 0).then(|| crate::preferred_fitting(system, i, j, q))
            })
            .max()
            .unwrap_or_else(|| crate::scheduler::best_resident_batch(system, cluster, i))
    }

    fn observe_scene(&mut self, system: &System, cluster: &Cluster, now: f64, scene: &[u32]) {
        if self.mode != Mode::Plan {
            return;
        }
        let matches = self
            .plan
            .as_ref()
            .is_some_and(|p| system.request_models().all(|i| p.served(i) == scene[i.0]))
            && self.plan_residency == cluster.residency();
        if !matches {
            self.resplit_for(system, cluster, now, scene);
        }
        let np = system.num_processors();
        self.quota.clear();
        self.quota.resize(system.num_models() * np, 0);
        if let Some(plan) = &self.plan {
            for i in system.request_models() {
                if plan.served(i) == scene[i.0] {
                    for j in system.proc_ids() {
                        self.quota[i.0 * np + j.0] = plan.served_on(i, j);
                    }
                }
            }
        }
    }
}

/// Algorithm 1's rule restricted to the hosts where the plan still has
/// requests of model i for the current frame (`quota`, indexed
/// `i * n_p + j`) and where i is resident, with batches no larger than that
/// quota: the dispatcher follows the global step's split of the work.
/// Hosts whose queue is already longer than `behind_ms` (the plan's
/// makespan) have fallen behind the plan and are skipped. `None` when no
/// quota is left.
#[allow(clippy::too_many_arguments)]
fn planned_host(
    system: &System,
    cluster: &Cluster,
    quota: &[u32],
    now: f64,
    i: ModelId,
    waiting: usize,
    behind_ms: f64,
) -> Option<(ProcId, usize)> {
    let np = system.num_processors();
    let mut best: Option<(ProcId, usize, f64)> = None;
    for j in system.proc_ids() {
        let q = quota.get(i.0 * np + j.0).copied().unwrap_or(0) as usize;
        if q == 0 || !cluster.is_resident(i, j) || cluster.rem_ms(j, now) > behind_ms {
            continue;
        }
        let k = crate::preferred_fitting(system, i, j, waiting.min(q));
        let cost = cluster.rem_ms(j, now) + system.exec_ms(i, j, k) / k as f64;
        if best.is_none_or(|b| cost < b.2) {
            best = Some((j, k, cost));
        }
    }
    best.map(|(j, k, _)| (j, k))
}
