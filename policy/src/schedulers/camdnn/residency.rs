//! The residencies a global step offers beside the global policy's plan:
//! the current one searched for a better split, the start-up one, the
//! detector back on its fastest unit, and one for the stream's bottleneck;
//! and the greedy planner, the step's planner when no learned policy is at
//! hand.

use crate::mlp::search::Search;
use crate::{repair, Detector, GlobalPolicy, ModelId, Plan, PlanInput, ProcId, System};

/// Whether `new` beats `stay` for a stream of frames every `period_ms`:
/// first on the bottleneck unit's work per frame where it exceeds the period
/// (a plan the stream cannot sustain queues without bound, whatever one
/// frame's makespan), then on the makespan. Both plans must have been
/// searched alike, so the test compares like with like.
pub fn beats(system: &System, input: &PlanInput, new: &Plan, stay: &Plan, period_ms: f64) -> bool {
    let det = Detector::fastest(system);
    let sustained = |p: &Plan| p.cycle_ms(system, input, det).max(period_ms);
    let (cn, cs) = (sustained(new), sustained(stay));
    if cn < cs * (1.0 - 1e-6) {
        return true;
    }
    cn <= cs * (1.0 + 1e-6)
        && new.makespan_ms(system, input, det) < stay.makespan_ms(system, input, det) - 1e-9
}

/// The plan that keeps the current residency: every request placed greedily
/// on models already resident (repair of an empty plan with that residency).
pub fn stay_plan(system: &System, input: &PlanInput) -> Option<Plan> {
    repair(system, input, &residency_as_is(system, input)).ok()
}

/// A plan with no requests whose residency is the input's.
fn residency_as_is(system: &System, input: &PlanInput) -> Plan {
    let mut plan = Plan::empty(system);
    for i in system.model_ids() {
        for j in system.proc_ids() {
            plan.set_resident(i, j, input.was_resident(system, i, j));
        }
    }
    plan
}

/// The residency to apply for an adopted plan: the plan's residents, plus
/// every model already resident that still fits beside them (N_j and the
/// memory budget), so adoption evicts only to make room.
pub fn keep_idle_residents(system: &System, input: &PlanInput, plan: &Plan) -> Plan {
    let mut out = plan.clone();
    for j in system.proc_ids() {
        for i in system.model_ids() {
            if !out.resident(i, j)
                && input.was_resident(system, i, j)
                && crate::plan::fits(system, &out, i, j)
            {
                out.set_resident(i, j, true);
            }
        }
    }
    out
}

/// A residency for the stream of `input`'s scene rather than for one frame:
/// the models the scene needs, the most work first, each on the unit with
/// room whose per-frame work it raises least, then replicas that take a
/// share of a model's requests off the most loaded unit into a free slot
/// while that lowers the most loaded unit's work; what is already resident keeps a slot still free before the
/// replicas take theirs ([`keep_idle_residents`]). Under load the stream's
/// bottleneck decides, and a detector on the unit a heavy classifier runs
/// best can hold its only slot. Loads are not counted here; the step's
/// replay charges them. With fewer slots than the models the scene needs,
/// those with the least work are left to load on demand.
pub fn stream_residency(system: &System, input: &PlanInput) -> Plan {
    let np = system.num_processors();
    // Per-frame work of model i on unit j, its requests in batches as
    // large as the unit takes.
    let work = |i: ModelId, j: ProcId| {
        let n = input.scene[i.0] as usize;
        let k = n.min(system.max_batch_on(i, j)).max(1);
        n as f64 * system.exec_ms(i, j, k) / k as f64
    };
    let least_work = |i: ModelId| {
        system
            .supporting(i)
            .map(|j| work(i, j))
            .fold(f64::INFINITY, f64::min)
    };
    let mut needed: Vec<ModelId> = system
        .model_ids()
        .filter(|i| input.scene[i.0] > 0)
        .collect();
    needed.sort_by(|&a, &b| least_work(b).total_cmp(&least_work(a)));
    let mut out = Plan::empty(system);
    let mut load = vec![0.0; np];
    // Share of model i's requests on unit j, indexed i * np + j.
    let mut share = vec![0.0; system.num_models() * np];
    for &i in &needed {
        let Some(j) = system
            .supporting(i)
            .filter(|&j| crate::plan::fits(system, &out, i, j))
            .min_by(|&a, &b| (load[a.0] + work(i, a)).total_cmp(&(load[b.0] + work(i, b))))
        else {
            continue;
        };
        out.set_resident(i, j, true);
        load[j.0] += work(i, j);
        share[i.0 * np + j.0] = 1.0;
    }
    // What is resident stays where it still fits: replicas take only the
    // slots left free, not a model the scene may bring back.
    let mut out = keep_idle_residents(system, input, &out);
    loop {
        let peak = load.iter().copied().fold(0.0, f64::max);
        let Some(b) = system.proc_ids().find(|j| load[j.0] == peak) else {
            break;
        };
        match best_replica(system, &out, &needed, &load, &share, &work, b) {
            Some((after, i, q, s)) if after < peak => {
                out.set_resident(i, q, true);
                load[b.0] -= s * work(i, b);
                load[q.0] += s * work(i, q);
                share[i.0 * np + b.0] -= s;
                share[i.0 * np + q.0] += s;
            }
            _ => break,
        }
    }
    out
}

/// The replica that lowers the most loaded unit `b`'s work most: a share s
/// of a needed model's requests moved from b to a unit q with room,
/// evening out the two units' work. (peak after, model, q, s).
fn best_replica(
    system: &System,
    out: &Plan,
    needed: &[ModelId],
    load: &[f64],
    share: &[f64],
    work: &dyn Fn(ModelId, ProcId) -> f64,
    b: ProcId,
) -> Option<(f64, ModelId, ProcId, f64)> {
    let np = system.num_processors();
    let mut best: Option<(f64, ModelId, ProcId, f64)> = None;
    for &i in needed {
        let on_b = share[i.0 * np + b.0];
        if on_b <= 0.0 {
            continue;
        }
        for q in system.supporting(i) {
            if q == b || out.resident(i, q) || !crate::plan::fits(system, out, i, q) {
                continue;
            }
            let (wb, wq) = (work(i, b), work(i, q));
            let s = ((load[b.0] - load[q.0]) / (wb + wq)).clamp(0.0, on_b);
            let others = system
                .proc_ids()
                .filter(|&j| j != b && j != q)
                .map(|j| load[j.0])
                .fold(0.0, f64::max);
            let after = (load[b.0] - s * wb).max(load[q.0] + s * wq).max(others);
            if best.is_none_or(|x| after < x.0) {
                best = Some((after, i, q, s));
            }
        }
    }
    best
}

/// A cheap content-aware global policy: the plan that keeps the current
/// residency, improved by the local search over request splits (moving
/// requests to other hosts, new replicas included, within N_j). A baseline
/// for the learned policy and the global step of `camdnn-greedy`.
#[derive(Clone, Debug, Default)]
pub struct GreedyPlanner {
    search: Option<Search>,
}

impl GlobalPolicy for GreedyPlanner {
    fn name(&self) -> &str {
        "greedy"
    }

    fn plan(&mut self, system: &System, input: &PlanInput) -> Plan {
        let search = self.search.get_or_insert_with(|| Search::new(system));
        stay_split(system, input, search)
            .or_else(|| repair(system, input, &Plan::empty(system)).ok())
            .unwrap_or_else(|| Plan::empty(system))
    }
}

/// The plan that keeps the current residency, improved by `search` (request
/// splits, new replicas within N_j when they pay for their load).
pub(super) fn stay_split(system: &System, input: &PlanInput, search: &mut Search) -> Option<Plan> {
    let start = stay_plan(system, input)?;
    let det = Detector::fastest(system);
    Some(match search.improve(system, input, &start) {
        Some(better)
            if better.infeasibility(system, input).is_none()
                && better.makespan_ms(system, input, det)
                    < start.makespan_ms(system, input, det) =>
        {
            better
        }
        _ => start,
    })
}
