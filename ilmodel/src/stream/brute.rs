//! Every plan of a tiny stream instance enumerated: the stream ILP's
//! independent check. It shares [`super::evaluate`] (J from its definition)
//! but none of the ILP's code: every detector's unit and, per scene and
//! classifier, every b_k(i,j) vector that serves the scene exactly is
//! enumerated; the residency is derived (a model is resident where some
//! scene runs batches of it, a detector where it runs), and J computed. A
//! resident model without batches only adds a load and takes a slot, so
//! deriving the residency loses nothing.

use camdnn_policy::{ModelId, Plan, ProcId, System};

use super::{evaluate, StreamCost, StreamProblem, RESIDENT_EPSILON_MS};
use crate::BruteError;

/// The best plan found by enumeration.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamBrute {
    /// The residency and the latest scene's batches.
    pub plan: Plan,
    /// The first detector's unit.
    pub detector: ProcId,
    /// J and its parts.
    pub cost: StreamCost,
    /// Candidate plans enumerated.
    pub candidates: u64,
}

/// (unit, batch size, batches) entries serving one model in one scene.
type Placement = Vec<(ProcId, usize, u32)>;

/// Enumerates every plan; `Ok(None)` when none respects the limits.
pub fn brute_force_stream(
    system: &System,
    problem: &StreamProblem,
    limit: u64,
) -> Result<Option<StreamBrute>, BruteError> {
    problem.input.validate(system)?;
    let np = system.num_processors();
    // Dimensions: every detector's unit, then (scene, classifier) placements.
    let roots: Vec<ModelId> = system.roots().collect();
    let mut dims: Vec<usize> = roots
        .iter()
        .map(|&r| system.supporting(r).count())
        .collect();
    let mut served: Vec<(usize, ModelId, Vec<Placement>)> = Vec::new();
    for (s, (scene, _)) in problem.epoch.scenes.iter().enumerate() {
        for i in system.request_models().filter(|i| scene[i.0] > 0) {
            let options = placements(system, i, scene[i.0]);
            dims.push(options.len());
            served.push((s, i, options));
        }
    }
    let candidates = dims
        .iter()
        .fold(1u64, |acc, &d| acc.saturating_mul(d as u64));
    if candidates > limit {
        return Err(BruteError::TooLarge { candidates, limit });
    }
    let hosts: Vec<Vec<ProcId>> = roots
        .iter()
        .map(|&r| system.supporting(r).collect())
        .collect();
    let mut index = vec![0usize; dims.len()];
    let mut best: Option<(Vec<usize>, StreamCost, f64)> = None;
    'odometer: loop {
        let units: Vec<ProcId> = roots
            .iter()
            .enumerate()
            .map(|(k, _)| hosts[k][index[k]])
            .collect();
        let mut resident = vec![false; system.num_models() * np];
        for (r, j) in roots.iter().zip(&units) {
            resident[r.0 * np + j.0] = true;
        }
        let mut work = vec![vec![0.0; np]; problem.epoch.scenes.len()];
        for ((s, i, options), &o) in served.iter().zip(&index[roots.len()..]) {
            for &(j, k, n) in &options[o] {
                resident[i.0 * np + j.0] = true;
                work[*s][j.0] += f64::from(n) * system.exec_ms(*i, j, k);
            }
        }
        if let Some(cost) = evaluate(system, problem, &resident, units[0], &units[1..], &work) {
            let residents = resident.iter().filter(|&&r| r).count() as f64;
            let key = cost.objective_ms + RESIDENT_EPSILON_MS * residents;
            if best.as_ref().is_none_or(|b| key < b.2) {
                best = Some((index.clone(), cost, key));
            }
        }
        for p in 0..index.len() {
            index[p] += 1;
            if index[p] < dims[p] {
                continue 'odometer;
            }
            index[p] = 0;
        }
        break;
    }
    Ok(best.map(|(index, cost, _)| {
        let mut plan = Plan::empty(system);
        for (k, r) in roots.iter().enumerate() {
            plan.set_resident(*r, hosts[k][index[k]], true);
        }
        for ((s, i, options), &o) in served.iter().zip(&index[roots.len()..]) {
            for &(j, k, n) in &options[o] {
                plan.set_resident(*i, j, true);
                if *s == 0 {
                    plan.set_batches(*i, j, k, plan.batches(*i, j, k) + n);
                }
            }
        }
        StreamBrute {
            plan,
            detector: hosts[0][index[0]],
            cost,
            candidates,
        }
    }))
}

/// Every way to serve exactly `r` requests of model i: all b_k(i,j) vectors
/// over the supported (j, k) with sum k * b_k(i,j) = r.
fn placements(system: &System, i: ModelId, r: u32) -> Vec<Placement> {
    let slots: Vec<(ProcId, usize)> = system
        .supporting(i)
        .flat_map(|j| {
            (1..=system.max_batch_on(i, j))
                .filter(move |&k| system.exec_ms(i, j, k).is_finite())
                .map(move |k| (j, k))
        })
        .collect();
    let mut out = Vec::new();
    fill(&slots, r, &mut Vec::new(), &mut out);
    out
}

fn fill(slots: &[(ProcId, usize)], left: u32, current: &mut Placement, out: &mut Vec<Placement>) {
    let Some((&(j, k), rest)) = slots.split_first() else {
        if left == 0 {
            out.push(current.clone());
        }
        return;
    };
    for n in 0..=left / k as u32 {
        if n > 0 {
            current.push((j, k, n));
        }
        fill(rest, left - n * k as u32, current, out);
        if n > 0 {
            current.pop();
        }
    }
}
