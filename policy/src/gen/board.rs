//! Seeded, plausible heterogeneous boards nobody tuned a scheduler to: the
//! suite's answer to "it only works on rb5".
//!
//! A board has a CPU (speed 1) and 1-4 other units (GPU, DSP or other) whose
//! speed relative to the CPU is log-uniform in 0.25x-8x, each model adding its
//! own +-40 % affinity; concave batch curves t(k) = t(1) k^alpha with alpha in
//! 0.45-1 (accelerators batch better than the CPU); load costs log-uniform in
//! 5 ms-1 s; N_j in 1-4 (2-4 on the CPU, so every model always has a slot
//! beside the detector); unsupported (model, unit) pairs off the CPU; one
//! detector, one to four classifiers under it and, on some boards, a second
//! level (a model fed by a classifier's outputs).

use std::collections::BTreeMap;

use crate::rng::Rng;
use crate::spec::{ModelSpec, PairSpec, ProcessorKind, ProcessorSpec, SystemSpec};

/// Smallest and largest speed of a non-CPU unit relative to the CPU.
pub const SPEED_RANGE: (f64, f64) = (0.25, 8.0);
/// Smallest and largest load cost, ms.
pub const LOAD_RANGE_MS: (f64, f64) = (5.0, 1000.0);

/// The board of `seed`, named `gen-SEED`; the same spec for the same seed on
/// every machine (SplitMix64, no floating-point library calls beyond
/// `powf`/`ln`/`exp`, which are correctly rounded enough for 0.1 ms rounding).
pub fn board(seed: u64) -> SystemSpec {
    let mut rng = Rng::new(seed.wrapping_mul(0x9e37_79b9).wrapping_add(0xb0a2d));
    let n_procs = 2 + rng.below(4) as usize;
    let max_batch = 4 + rng.below(2) as usize;
    let mut processors = vec![ProcessorSpec {
        utilisation_cap: None,
        name: "cpu".into(),
        kind: ProcessorKind::Cpu,
        max_resident: 2 + rng.below(3) as usize,
        memory_budget_mb: None,
    }];
    // (speed, batch exponent range) per unit; the CPU's first.
    let mut units = vec![(1.0, (0.85, 1.0))];
    let kinds = [ProcessorKind::Gpu, ProcessorKind::Dsp, ProcessorKind::Other];
    for j in 1..n_procs {
        let kind = kinds[rng.below(3) as usize];
        let name = match kind {
            ProcessorKind::Gpu => "gpu",
            ProcessorKind::Dsp => "dsp",
            _ => "npu",
        };
        processors.push(ProcessorSpec {
            utilisation_cap: None,
            name: format!("{name}{j}"),
            kind,
            max_resident: 1 + rng.below(4) as usize,
            memory_budget_mb: None,
        });
        let speed = log_uniform(&mut rng, SPEED_RANGE.0, SPEED_RANGE.1);
        let alpha = match kind {
            ProcessorKind::Gpu => (0.45, 0.75),
            _ => (0.55, 0.95),
        };
        units.push((speed, alpha));
    }

    let n_classifiers = 1 + rng.below(4) as usize;
    let mut models = vec![ModelSpec {
        name: "detector".into(),
        parent: None,
        classes: Vec::new(),
    }];
    for c in 0..n_classifiers {
        models.push(ModelSpec {
            name: format!("cls{c}"),
            parent: Some("detector".into()),
            classes: vec![format!("class{c}")],
        });
    }
    if rng.unit() < 0.35 {
        let parent = 1 + rng.below(n_classifiers as u64) as usize;
        let parent_name = models[parent].name.clone();
        models.push(ModelSpec {
            name: format!("{parent_name}_refine"),
            parent: Some(parent_name),
            classes: Vec::new(),
        });
    }

    let mut profile: BTreeMap<String, BTreeMap<String, PairSpec>> = BTreeMap::new();
    for (m, model) in models.iter().enumerate() {
        // Work on the CPU at k = 1: the detector is the heaviest model.
        let base = if m == 0 {
            log_uniform(&mut rng, 12.0, 40.0)
        } else {
            log_uniform(&mut rng, 2.0, 30.0)
        };
        let mut per_proc = BTreeMap::new();
        for (j, p) in processors.iter().enumerate() {
            let (speed, (alo, ahi)) = units[j];
            // Off the CPU, a quarter of the pairs are unsupported (a DSP
            // without the model's ops, say).
            if j > 0 && rng.unit() < 0.25 {
                continue;
            }
            let affinity = log_uniform(&mut rng, 0.6, 1.6);
            let t1 = base / speed * affinity;
            let alpha = alo + (ahi - alo) * rng.unit();
            let exec_ms = (1..=max_batch)
                .map(|k| round_ms(t1 * (k as f64).powf(alpha)))
                .collect();
            let load_ms = round_ms(log_uniform(&mut rng, LOAD_RANGE_MS.0, LOAD_RANGE_MS.1));
            per_proc.insert(
                p.name.clone(),
                PairSpec {
                    exec_ms,
                    load_ms,
                    size_mb: None,
                },
            );
        }
        profile.insert(model.name.clone(), per_proc);
    }
    SystemSpec {
        name: format!("gen-{seed}"),
        max_batch,
        processors,
        models,
        profile,
    }
}

/// Log-uniform in [lo, hi).
fn log_uniform(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    (lo.ln() + (hi.ln() - lo.ln()) * rng.unit()).exp()
}

/// Rounded to 0.1 ms, never below 0.1 ms (profiles are written to 0.1 ms).
fn round_ms(t: f64) -> f64 {
    ((t * 10.0).round() / 10.0).max(0.1)
}
