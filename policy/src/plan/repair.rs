//! [`repair`]: any plan made feasible for a scene (supported pairs, batch
//! limits, N_j and memory budgets, every request served exactly once).

use super::{Detector, Plan, PlanInput};
use crate::{ModelId, ProcId, System};

/// Why no feasible plan exists for a scene.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("no feasible plan: {reason}")]
pub struct Infeasible {
    /// What could not be satisfied.
    pub reason: String,
}

/// Turns any plan into a feasible one for `input`: unsupported pairs and
/// oversize batches are removed, residency follows the batches and respects
/// N_j and memory budgets, and every request is served exactly once (surplus
/// trimmed, shortfall placed greedily by earliest planned finish).
pub fn repair(system: &System, input: &PlanInput, plan: &Plan) -> Result<Plan, Infeasible> {
    let mut out = Plan::empty(system);
    // 1. Keep what is possible.
    for i in system.model_ids() {
        for j in system.supporting(i) {
            for k in 1..=system.max_batch_on(i, j) {
                out.set_batches(i, j, k, plan.batches(i, j, k));
            }
            let wanted = plan.resident(i, j) || out.served_on(i, j) > 0;
            out.set_resident(i, j, wanted);
        }
        if system.models[i.0].parent.is_none() {
            for j in system.proc_ids() {
                for k in 1..=system.max_batch {
                    out.set_batches(i, j, k, 0);
                }
            }
        }
    }
    // 2. Trim surplus requests, dropping the costliest per-request batches first.
    for i in system.request_models() {
        let want = input.scene[i.0];
        while out.served(i) > want {
            let excess = out.served(i) - want;
            let (j, k) = costliest_batch(system, &out, i).expect("served > 0 implies a batch");
            out.set_batches(i, j, k, out.batches(i, j, k) - 1);
            if (k as u32) > excess {
                // Replace by a smaller batch that keeps exactly `want` served.
                let keep = k - excess as usize;
                out.set_batches(i, j, keep, out.batches(i, j, keep) + 1);
            }
        }
    }
    // 3. Residency limits: evict the model whose requests here cost least
    // to serve elsewhere (`eviction_cost`), preferring idle and new models.
    for j in system.proc_ids() {
        while over_limit(system, &out, j) {
            // Each candidate's key once: (root, eviction cost, served here,
            // was resident), the least evicted; the first of equals.
            let (_, victim) = system
                .model_ids()
                .filter(|&i| out.resident(i, j))
                .map(|i| {
                    let key = (
                        system.models[i.0].parent.is_none(),
                        eviction_cost(system, input, &out, i, j),
                        out.served_on(i, j),
                        input.was_resident(system, i, j),
                    );
                    (key, i)
                })
                .min_by(|(a, _), (b, _)| {
                    a.0.cmp(&b.0)
                        .then(a.1.total_cmp(&b.1))
                        .then(a.2.cmp(&b.2))
                        .then(a.3.cmp(&b.3))
                })
                .expect("over the limit implies a resident model");
            unplace(system, &mut out, victim, j);
        }
    }
    // 4. Every model the scene needs gets a host: greedily where there is
    // room, else by re-matching models to slots.
    let needed: Vec<ModelId> = system
        .roots()
        .chain(system.request_models().filter(|i| input.scene[i.0] > 0))
        .collect();
    for &i in &needed {
        if !system.proc_ids().any(|j| out.resident(i, j))
            && host_for(system, input, &mut out, i).is_err()
        {
            rehost_by_matching(system, input, &mut out, &needed)?;
            break;
        }
    }
    // 5. Serve the shortfall greedily on resident hosts by earliest planned finish.
    let detector = Detector::fastest(system);
    let d_ready = input.rem_ms[detector.proc.0] + detector.exec_ms;
    for i in system.request_models() {
        let want = input.scene[i.0];
        while out.served(i) < want {
            let missing = (want - out.served(i)) as usize;
            let (j, k) = system
                .proc_ids()
                .filter(|&j| out.resident(i, j))
                .map(|j| {
                    let k = crate::preferred_fitting(system, i, j, missing);
                    let start = (input.rem_ms[j.0] + out.work_ms(system, input, j)).max(d_ready);
                    (j, k, start + system.exec_ms(i, j, k))
                })
                .min_by(|a, b| a.2.total_cmp(&b.2))
                .map(|(j, k, _)| (j, k))
                .expect("step 4 gave every needed model a host");
            out.set_batches(i, j, k, out.batches(i, j, k) + 1);
        }
    }
    // Memory budgets are packed greedily above; say so if that fell short.
    match out.infeasibility(system, input) {
        None => Ok(out),
        Some(reason) => Err(Infeasible { reason }),
    }
}

fn no_room(system: &System, i: ModelId) -> String {
    format!(
        "{} finds no slot: every processor that runs it is full of models the scene also needs",
        system.models[i.0].name
    )
}

/// Assigns every needed model a slot (N_j) by augmenting paths, keeping
/// current hosts where possible, then refills spare slots with the plan's
/// other residents. Batches on pairs that lose residency are dropped (step 5
/// re-places them).
fn rehost_by_matching(
    system: &System,
    input: &PlanInput,
    plan: &mut Plan,
    needed: &[ModelId],
) -> Result<(), Infeasible> {
    let np = system.num_processors();
    let cost = |i: ModelId, j: ProcId| {
        let resident = plan.resident(i, j) || input.was_resident(system, i, j);
        (!resident, system.exec_ms(i, j, 1))
    };
    let candidates: Vec<Vec<ProcId>> = needed
        .iter()
        .map(|&i| {
            let mut c: Vec<ProcId> = system.supporting(i).collect();
            c.sort_by(|&a, &b| {
                let (ra, ta) = cost(i, a);
                let (rb, tb) = cost(i, b);
                ra.cmp(&rb).then(ta.total_cmp(&tb))
            });
            c
        })
        .collect();
    let mut host: Vec<Option<ProcId>> = vec![None; needed.len()];
    fn augment(
        m: usize,
        cands: &[Vec<ProcId>],
        caps: &[usize],
        host: &mut [Option<ProcId>],
        seen: &mut [bool],
    ) -> bool {
        for &j in &cands[m] {
            if seen[j.0] {
                continue;
            }
            seen[j.0] = true;
            let users: Vec<usize> = (0..host.len()).filter(|&o| host[o] == Some(j)).collect();
            if users.len() < caps[j.0] {
                host[m] = Some(j);
                return true;
            }
            for o in users {
                host[o] = None;
                if augment(o, cands, caps, host, seen) {
                    host[m] = Some(j);
                    return true;
                }
                host[o] = Some(j);
            }
        }
        false
    }
    let caps: Vec<usize> = system.processors.iter().map(|p| p.max_resident).collect();
    for (m, &i) in needed.iter().enumerate() {
        let mut seen = vec![false; np];
        if !augment(m, &candidates, &caps, &mut host, &mut seen) {
            return Err(Infeasible {
                reason: no_room(system, i),
            });
        }
    }
    let mut rebuilt = plan.clone();
    for i in system.model_ids() {
        for j in system.proc_ids() {
            rebuilt.set_resident(i, j, false);
        }
    }
    for (m, &i) in needed.iter().enumerate() {
        rebuilt.set_resident(i, host[m].expect("matched above"), true);
    }
    for i in system.model_ids() {
        for j in system.proc_ids() {
            if plan.resident(i, j) && !rebuilt.resident(i, j) && fits(system, &rebuilt, i, j) {
                rebuilt.set_resident(i, j, true);
            }
            if !rebuilt.resident(i, j) {
                for k in 1..=system.max_batch {
                    rebuilt.set_batches(i, j, k, 0);
                }
            }
        }
    }
    *plan = rebuilt;
    Ok(())
}

fn costliest_batch(system: &System, plan: &Plan, i: ModelId) -> Option<(ProcId, usize)> {
    let mut best: Option<(ProcId, usize, f64)> = None;
    for j in system.proc_ids() {
        for k in 1..=system.max_batch {
            if plan.batches(i, j, k) > 0 {
                let per = system.exec_ms(i, j, k) / k as f64;
                if best.is_none_or(|(_, _, b)| per > b) {
                    best = Some((j, k, per));
                }
            }
        }
    }
    best.map(|(j, k, _)| (j, k))
}

/// What evicting model i from j adds elsewhere, ms: its requests there
/// served in full batches on its cheapest other host. Without another host,
/// on the cheapest processor with room, counting the amortised load when i
/// is not resident there already (as `host_for` does); with
/// no room anywhere, infinite, since re-hosting it would displace another
/// model.
fn eviction_cost(system: &System, input: &PlanInput, plan: &Plan, i: ModelId, j: ProcId) -> f64 {
    let n = plan.served_on(i, j) as usize;
    let serve = |q: ProcId| {
        if n == 0 {
            return 0.0;
        }
        let k = n.min(system.max_batch_on(i, q)).max(1);
        system.exec_ms(i, q, k) * n as f64 / k as f64
    };
    let kept = system
        .proc_ids()
        .filter(|&q| q != j && plan.resident(i, q))
        .map(serve)
        .min_by(f64::total_cmp);
    kept.unwrap_or_else(|| {
        system
            .supporting(i)
            .filter(|&q| q != j && fits(system, plan, i, q))
            .map(|q| serve(q) + input.amortised_load_ms(system, i, q))
            .min_by(f64::total_cmp)
            .unwrap_or(f64::INFINITY)
    })
}

fn over_limit(system: &System, plan: &Plan, j: ProcId) -> bool {
    let p = &system.processors[j.0];
    plan.resident_count(j) > p.max_resident
        || p.memory_budget_mb
            .is_some_and(|b| plan.resident_mb(system, j) > b + 1e-9)
}

fn unplace(system: &System, plan: &mut Plan, i: ModelId, j: ProcId) {
    plan.set_resident(i, j, false);
    for k in 1..=system.max_batch {
        plan.set_batches(i, j, k, 0);
    }
}

/// Whether model i fits on processor j beside `plan`'s residents (N_j and
/// the memory budget).
pub fn fits(system: &System, plan: &Plan, i: ModelId, j: ProcId) -> bool {
    let p = &system.processors[j.0];
    plan.resident_count(j) < p.max_resident
        && p.memory_budget_mb
            .is_none_or(|b| plan.resident_mb(system, j) + system.size_mb(i, j) <= b + 1e-9)
}

/// Makes model i resident somewhere: a free slot first (cheapest load, then
/// fastest), else by evicting a model the scene does not need, else a
/// redundant copy of one that is resident elsewhere too.
fn host_for(
    system: &System,
    input: &PlanInput,
    plan: &mut Plan,
    i: ModelId,
) -> Result<ProcId, Infeasible> {
    let cost = |j: ProcId| input.amortised_load_ms(system, i, j) + system.exec_ms(i, j, 1);
    let mut candidates: Vec<ProcId> = system.supporting(i).collect();
    candidates.sort_by(|&a, &b| cost(a).total_cmp(&cost(b)));
    if let Some(&j) = candidates.iter().find(|&&j| fits(system, plan, i, j)) {
        plan.set_resident(i, j, true);
        return Ok(j);
    }
    let needed = |m: ModelId| system.models[m.0].parent.is_none() || input.scene[m.0] > 0;
    let copies =
        |plan: &Plan, m: ModelId| system.proc_ids().filter(|&q| plan.resident(m, q)).count();
    for pass in 0..2 {
        for &j in &candidates {
            let victims: Vec<ModelId> = system
                .model_ids()
                .filter(|&m| m != i && plan.resident(m, j))
                .filter(|&m| {
                    if pass == 0 {
                        !needed(m)
                    } else {
                        copies(plan, m) > 1
                    }
                })
                .collect();
            for m in victims {
                // Requests the victim had here are re-placed by the shortfall pass.
                unplace(system, plan, m, j);
                if fits(system, plan, i, j) {
                    plan.set_resident(i, j, true);
                    return Ok(j);
                }
            }
        }
    }
    Err(Infeasible {
        reason: no_room(system, i),
    })
}
