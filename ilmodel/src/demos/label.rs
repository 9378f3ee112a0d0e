//! One demonstration: its random instance, drawn from the seed and its
//! index alone, and its label, the ILP oracle's plan.

use super::*;

/// The random instance of demonstration `index`: (scene, rem_ms, a_old
/// flattened `i * n_p + j`). Depends on the seed, the index and the
/// parameters only.
pub fn instance(
    system: &System,
    detector: Detector,
    seed: u64,
    index: u64,
    max_objects: u32,
    samples: u64,
    rem_max_ms: f64,
) -> (Vec<u32>, Vec<f64>, Vec<bool>) {
    let (nm, np) = (system.num_models(), system.num_processors());
    let mut rng = SplitMix64::for_item(seed, index);
    let classifiers: Vec<ModelId> = system.request_models().collect();
    let base = max_objects as u64 + 1;
    let grid = base.checked_pow(classifiers.len() as u32);
    let mut scene = vec![0u32; nm];
    match grid {
        Some(g) if g <= samples => {
            // Nested-loop order: the first classifier varies slowest.
            let mut n = index % g;
            for m in classifiers.iter().rev() {
                scene[m.0] = (n % base) as u32;
                n /= base;
            }
        }
        _ => {
            for m in &classifiers {
                scene[m.0] = rng.below(base) as u32;
            }
        }
    }
    let rem: Vec<f64> = (0..np)
        .map(|_| {
            if rng.chance(IDLE_PROBABILITY) {
                0.0
            } else {
                (rng.next_f64() * rem_max_ms * 1000.0).floor() / 1000.0
            }
        })
        .collect();
    let root = first_root(system);
    let mut a_old = vec![false; nm * np];
    a_old[root.0 * np + detector.proc.0] = true;
    for j in system.proc_ids() {
        let p = &system.processors[j.0];
        let mut count = usize::from(j == detector.proc);
        let mut mb = if j == detector.proc {
            system.size_mb(root, j)
        } else {
            0.0
        };
        let mut candidates: Vec<ModelId> = system
            .model_ids()
            .filter(|&i| i != root && system.supports(i, j))
            .collect();
        rng.shuffle(&mut candidates);
        for i in candidates {
            let wanted = rng.chance(RESIDENT_PROBABILITY);
            let size = system.size_mb(i, j);
            let fits =
                count < p.max_resident && p.memory_budget_mb.is_none_or(|b| mb + size <= b + 1e-9);
            if wanted && fits {
                a_old[i.0 * np + j.0] = true;
                count += 1;
                mb += size;
            }
        }
    }
    (scene, rem, a_old)
}

/// The demonstration of one input: the ILP's optimal (or time-limited) plan,
/// or `Infeasible`. Any other oracle error is returned.
pub fn label(
    system: &System,
    index: u64,
    input: &PlanInput,
    detector: Detector,
    options: &OracleOptions,
) -> Result<Demo, OracleError> {
    let (np, nb) = (system.num_processors(), system.max_batch);
    let matrix = |v: &[bool]| -> Vec<Vec<bool>> { v.chunks(np).map(|r| r.to_vec()).collect() };
    let mut demo = Demo {
        index,
        scene: input.scene.to_vec(),
        rem_ms: input.rem_ms.to_vec(),
        a_old: matrix(input.residency),
        frames_per_epoch: input.frames_per_epoch,
        status: DemoStatus::Infeasible,
        t_ms: None,
        resident: None,
        batches: None,
    };
    match solve(system, input, detector, options) {
        Ok(s) => {
            demo.status = match s.status {
                SolveStatus::Optimal => DemoStatus::Optimal,
                SolveStatus::TimeLimit => DemoStatus::TimeLimit,
            };
            demo.t_ms = Some(s.makespan_ms);
            demo.resident = Some(matrix(s.plan.residency()));
            demo.batches = Some(
                system
                    .model_ids()
                    .map(|i| {
                        system
                            .proc_ids()
                            .map(|j| (1..=nb).map(|k| s.plan.batches(i, j, k)).collect())
                            .collect()
                    })
                    .collect(),
            );
        }
        Err(OracleError::Infeasible(_)) => {}
        Err(e) => return Err(e),
    }
    Ok(demo)
}
