//! The demonstrations a policy is trained on: read, checked against the
//! system, split by scene and turned into feature and target matrices.

use std::path::Path;

use camdnn_policy::features::{fnv1a64_hex, Encoding};
use camdnn_policy::System;

use super::TrainError;
use crate::demos::{Demo, Manifest};
use crate::rng::SplitMix64;

/// The demonstrations of a run, read and checked against the system.
pub struct DemoSet {
    /// The run's manifest.
    pub manifest: Manifest,
    /// Every demonstration, in index order.
    pub demos: Vec<Demo>,
    /// FNV-1a 64 of demos.jsonl.
    pub fnv1a64: String,
}

/// Reads `manifest.json` and `demos.jsonl` from `dir`, checking that they
/// were made for the system file `system_text`.
pub fn load_demos(dir: &Path, system_text: &str) -> Result<DemoSet, TrainError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path).map_err(|source| TrainError::Io {
            path: path.display().to_string(),
            source,
        })
    };
    let manifest_text = read("manifest.json")?;
    let manifest: Manifest =
        serde_json::from_str(&manifest_text).map_err(|e| TrainError::Parse {
            path: dir.join("manifest.json").display().to_string(),
            reason: e.to_string(),
        })?;
    let hash = fnv1a64_hex(system_text.as_bytes());
    if manifest.system_fnv1a64 != hash {
        return Err(TrainError::Invalid(format!(
            "{} was generated for system file hash {} but the given system file hashes to {hash}",
            dir.display(),
            manifest.system_fnv1a64
        )));
    }
    let text = read("demos.jsonl")?;
    let mut demos = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let d: Demo = serde_json::from_str(line).map_err(|e| TrainError::Parse {
            path: format!("{}:{}", dir.join("demos.jsonl").display(), n + 1),
            reason: e.to_string(),
        })?;
        demos.push(d);
    }
    Ok(DemoSet {
        manifest,
        demos,
        fnv1a64: fnv1a64_hex(text.as_bytes()),
    })
}

/// Whether a demonstration is held out: a function of (seed, scene) only.
pub fn is_heldout(seed: u64, scene: &[u32], fraction: f64) -> bool {
    let mut key = 0u64;
    for &r in scene {
        key = key.wrapping_mul(1_000_003).wrapping_add(r as u64 + 1);
    }
    SplitMix64::for_item(seed ^ 0x05ee_d0f4_e1d0_u64, key).next_f64() < fraction
}

/// Feature and target matrices of a set of demonstrations.
pub struct Examples {
    /// Rows.
    pub n: usize,
    /// Features, row-major [n x features].
    pub x: Vec<f32>,
    /// Targets b_k(i,j) per slot, row-major [n x slots].
    pub y: Vec<f32>,
    /// r_i per request model, row-major [n x request models].
    pub r: Vec<f32>,
}

/// Builds the examples of the usable (not infeasible) demonstrations.
pub fn examples(system: &System, enc: &Encoding, demos: &[&Demo]) -> Result<Examples, TrainError> {
    let (nf, ns, nr) = (
        enc.num_features(),
        enc.slots().len(),
        enc.request_models().len(),
    );
    let np = system.num_processors();
    let mut ex = Examples {
        n: 0,
        x: Vec::with_capacity(demos.len() * nf),
        y: Vec::with_capacity(demos.len() * ns),
        r: Vec::with_capacity(demos.len() * nr),
    };
    let mut row = vec![0.0f32; nf];
    let mut a_old = vec![false; system.num_models() * np];
    for d in demos {
        let Some(b) = &d.batches else { continue };
        let input = d.input(system, &mut a_old).map_err(TrainError::Invalid)?;
        enc.write(system, &input, &mut row)
            .map_err(|e| TrainError::Invalid(format!("demonstration {}: {e}", d.index)))?;
        ex.x.extend_from_slice(&row);
        for s in enc.slots() {
            let v = b
                .get(s.model.0)
                .and_then(|p| p.get(s.proc.0))
                .and_then(|k| k.get(s.k - 1))
                .ok_or_else(|| {
                    TrainError::Invalid(format!(
                        "demonstration {} has a batches array of the wrong shape",
                        d.index
                    ))
                })?;
            ex.y.push(*v as f32);
        }
        for &i in enc.request_models() {
            ex.r.push(d.scene[i.0] as f32);
        }
        ex.n += 1;
    }
    Ok(ex)
}
