//! Exhaustive enumeration of every plan of a tiny instance: the independent
//! check of the ILP oracle. It shares the oracle's conventions (see
//! [`crate::oracle`]) but none of its code: every b_k(i,j) vector that serves
//! each classifier exactly is enumerated, residency is derived from it (a
//! model is resident where it has batches, the detector on p_d, every other
//! root on one chosen processor), the residency limits are checked and T is
//! computed from its definition.
//!
//! Deriving a(i,j) loses nothing: a resident model without batches only adds
//! its load (or nothing, when it was resident before) and takes a slot, so
//! it can never lower T.

use camdnn_policy::{Detector, ModelId, Plan, PlanInput, ProcId, System};

use crate::oracle::first_root;
use crate::BruteError;

/// Default cap on the number of candidate plans.
pub const DEFAULT_LIMIT: u64 = 5_000_000;

/// The best plan found by enumeration.
#[derive(Clone, Debug, PartialEq)]
pub struct BruteSolution {
    /// The first plan of minimum T in enumeration order.
    pub plan: Plan,
    /// Its T, ms.
    pub makespan_ms: f64,
    /// How many candidate plans were enumerated.
    pub candidates: u64,
}

/// One placement of a model: (processor, batch size, count) entries; a
/// batch size of 0 means "resident only" (used for roots).
type Placement = Vec<(ProcId, usize, u32)>;

/// Enumerates every plan; `Ok(None)` when no plan respects the limits.
pub fn brute_force(
    system: &System,
    input: &PlanInput,
    detector: Detector,
    limit: u64,
) -> Result<Option<BruteSolution>, BruteError> {
    input.validate(system)?;
    let root = first_root(system);
    let mut choices: Vec<(ModelId, Vec<Placement>)> = Vec::new();
    for r in system.roots().filter(|&r| r != root) {
        let hosts = system.supporting(r).map(|j| vec![(j, 0, 0)]).collect();
        choices.push((r, hosts));
    }
    for i in system.request_models() {
        let r = input.scene[i.0];
        if r > 0 {
            choices.push((i, placements(system, i, r)));
        }
    }
    let candidates = choices
        .iter()
        .fold(1u64, |acc, (_, o)| acc.saturating_mul(o.len() as u64));
    if candidates > limit {
        return Err(BruteError::TooLarge { candidates, limit });
    }

    let np = system.num_processors();
    let f = input.frames_per_epoch.max(1.0);
    let d = input.rem_ms[detector.proc.0] + detector.exec_ms;
    let mut index = vec![0usize; choices.len()];
    let mut best: Option<(Vec<usize>, f64)> = None;
    'odometer: loop {
        // Evaluate the candidate `index`.
        let mut resident = vec![false; system.num_models() * np];
        resident[root.0 * np + detector.proc.0] = true;
        let mut exec = vec![0.0; np];
        for ((m, opts), &o) in choices.iter().zip(&index) {
            for &(j, k, n) in &opts[o] {
                resident[m.0 * np + j.0] = true;
                if k > 0 {
                    exec[j.0] += n as f64 * system.exec_ms(*m, j, k);
                }
            }
        }
        if let Some(t) = makespan(system, input, &resident, &exec, f, d) {
            if best.as_ref().is_none_or(|(_, b)| t < *b) {
                best = Some((index.clone(), t));
            }
        }
        // Next candidate.
        for p in 0..index.len() {
            index[p] += 1;
            if index[p] < choices[p].1.len() {
                continue 'odometer;
            }
            index[p] = 0;
        }
        break;
    }

    Ok(best.map(|(index, t)| {
        let mut plan = Plan::empty(system);
        plan.set_resident(root, detector.proc, true);
        for ((m, opts), &o) in choices.iter().zip(&index) {
            for &(j, k, n) in &opts[o] {
                plan.set_resident(*m, j, true);
                if k > 0 {
                    plan.set_batches(*m, j, k, n);
                }
            }
        }
        BruteSolution {
            plan,
            makespan_ms: t,
            candidates,
        }
    }))
}

/// T of a candidate, or `None` when it breaks N_j or a memory budget.
fn makespan(
    system: &System,
    input: &PlanInput,
    resident: &[bool],
    exec: &[f64],
    f: f64,
    d: f64,
) -> Option<f64> {
    let np = system.num_processors();
    let mut t = d;
    for j in system.proc_ids() {
        let p = &system.processors[j.0];
        let mut count = 0;
        let mut mb = 0.0;
        let mut w = exec[j.0];
        for i in system.model_ids() {
            if resident[i.0 * np + j.0] {
                count += 1;
                mb += system.size_mb(i, j);
                if !input.residency[i.0 * np + j.0] {
                    w += system.load_ms(i, j) / f;
                }
            }
        }
        if count > p.max_resident || p.memory_budget_mb.is_some_and(|b| mb > b + 1e-9) {
            return None;
        }
        t = t.max(input.rem_ms[j.0].max(d) + w);
    }
    Some(t)
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
    let mut current = Vec::new();
    fill(&slots, r, &mut current, &mut out);
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

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: &str = include_str!("../tests/fixtures/tiny.toml");

    #[test]
    fn placements_cover_every_batch_vector() {
        let system = System::from_toml(TINY).unwrap();
        let a = system.model_by_name("a").unwrap();
        // a runs on cpu and gpu with k = 1..3: vectors (b1,b2,b3) per proc
        // with b1 + 2 b2 + 3 b3 summed over both procs = 2:
        // {cpu:1x2}, {cpu:2x1}, {gpu:1x2}, {gpu:2x1}, {cpu:1x1, gpu:1x1}.
        assert_eq!(placements(&system, a, 2).len(), 5);
        assert_eq!(placements(&system, a, 0).len(), 1);
    }

    #[test]
    fn empty_scene_costs_the_detector_only() {
        let system = System::from_toml(TINY).unwrap();
        let det = Detector::fastest(&system);
        let nm = system.num_models();
        let np = system.num_processors();
        let mut residency = vec![false; nm * np];
        residency[det.proc.0] = true; // detector (model 0) already resident
        let input = PlanInput {
            scene: &[0, 0, 0],
            rem_ms: &[3.0, 20.0],
            residency: &residency,
            frames_per_epoch: 70.0,
        };
        let s = brute_force(&system, &input, det, DEFAULT_LIMIT)
            .unwrap()
            .unwrap();
        // D = 3 + 10; the gpu is busy until 20 but has no work: T = max(13, 20).
        assert_eq!(s.makespan_ms, 20.0);
        assert_eq!(s.plan.makespan_ms(&system, &input, det), 20.0);
    }

    #[test]
    fn refuses_instances_over_the_limit() {
        let system = System::from_toml(TINY).unwrap();
        let det = Detector::fastest(&system);
        let residency = vec![false; 6];
        let input = PlanInput {
            scene: &[0, 30, 30],
            rem_ms: &[0.0, 0.0],
            residency: &residency,
            frames_per_epoch: 70.0,
        };
        assert!(matches!(
            brute_force(&system, &input, det, 1000),
            Err(BruteError::TooLarge { .. })
        ));
    }
}
