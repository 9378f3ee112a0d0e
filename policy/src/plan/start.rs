//! Start-up residency: the plans a scheduler begins from, before any
//! global step, when loads are free.

use super::{fits, repair, Plan, PlanInput};
use crate::{ModelId, ProcId, System};

/// Every model resident on its fastest processors, within N_j: the repaired
/// plan for one request of each model.
pub fn fastest_hosts(system: &System) -> Plan {
    start_plan(system, |_| Plan::empty(system))
}

/// The repaired output of `planner` for the start-up situation: one request
/// of each model, idle processors, nothing resident, loads free (the paper's
/// initialisation step). An empty plan if no feasible one exists.
pub fn start_plan(system: &System, planner: impl FnOnce(&PlanInput) -> Plan) -> Plan {
    let scene: Vec<u32> = system
        .model_ids()
        .map(|m| u32::from(system.models[m.0].parent.is_some()))
        .collect();
    let rem = vec![0.0; system.num_processors()];
    let residency = vec![false; system.num_models() * system.num_processors()];
    let input = PlanInput {
        scene: &scene,
        rem_ms: &rem,
        residency: &residency,
        frames_per_epoch: 1e9,
    };
    let planned = planner(&input);
    repair(system, &input, &planned).unwrap_or_else(|_| Plan::empty(system))
}

/// `plan` with every free slot filled, since start-up loads are free: on
/// each processor that hosts no detector (the detector's unit is kept for
/// it, as in the paper's initial allocation), the classifiers it runs
/// fastest are added while N_j and the memory budget allow, then, in a slot
/// still free, a replica of the detector. A detector with several items per
/// frame (an image pyramid) can then spread them over both units instead of
/// queueing them all on one while the other idles. Once every detector on
/// a unit also has a replica elsewhere, that unit no longer carries the
/// detector alone, and its free slots take classifiers too: otherwise, on
/// two equal units, one runs the detector and every classifier and the
/// other only its share of the detector.
pub fn fill_free_slots(system: &System, plan: &Plan) -> Plan {
    let mut out = plan.clone();
    let classifiers_fastest_first = |out: &Plan, j: ProcId| {
        let mut c: Vec<ModelId> = system
            .request_models()
            .filter(|&i| system.supports(i, j) && !out.resident(i, j))
            .collect();
        c.sort_by(|&a, &b| system.exec_ms(a, j, 1).total_cmp(&system.exec_ms(b, j, 1)));
        c
    };
    let add = |out: &mut Plan, j: ProcId, candidates: Vec<ModelId>| {
        for i in candidates {
            if fits(system, out, i, j) {
                out.set_resident(i, j, true);
            }
        }
    };
    for j in system.proc_ids() {
        if system.roots().any(|r| out.resident(r, j)) {
            continue;
        }
        let mut candidates = classifiers_fastest_first(&out, j);
        candidates.extend(system.roots().filter(|&r| system.supports(r, j)));
        add(&mut out, j, candidates);
    }
    for j in system.proc_ids() {
        let detectors_here: Vec<ModelId> = system.roots().filter(|&r| out.resident(r, j)).collect();
        let replicated = |r: ModelId| system.proc_ids().any(|k| k != j && out.resident(r, k));
        if !detectors_here.is_empty() && detectors_here.into_iter().all(replicated) {
            let candidates = classifiers_fastest_first(&out, j);
            add(&mut out, j, candidates);
        }
    }
    out
}
