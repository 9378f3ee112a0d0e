//! Imitation training of the global policy (paper Sec. 5.1.2) with candle:
//! an MLP from [`camdnn_policy::features::Encoding`] features to the batch
//! matrix b_k(i,j), as a zero-inflated multi-target problem.
//!
//! - Two heads over the slots (i, j, k): a classifier (b > 0, binary
//!   cross-entropy) and a regressor for the count (MAE over the non-zero
//!   targets only: the classifier decides zeros);
//! - a penalty for violating sum_j sum_k k b_k(i,j) = r_i, computed from the
//!   expected counts sigmoid(logit) * count, as mean |served - r_i| per model;
//! - optionally ([`TrainConfig::share_weight`]) a term on each pair's
//!   expected requests sum_k k sigmoid(logit) count against the ILP's
//!   n(i,j), mean |.| over pairs: the quantity the expected-shares decoding
//!   reads, which the per-slot terms only reach slot by slot;
//! - optionally ([`TrainConfig::work_weight`]) a term on each processor's
//!   expected execution time sum P(b > 0) count exec_ms(i,j,k) against the
//!   ILP plan's, in units of the training set's mean per-processor work:
//!   a request's error then costs what it costs the makespan, not one unit
//!   on a fast processor and on a slow one alike;
//! - input normalisation (x - mean) / std with training-set statistics
//!   (std < 1e-6 becomes 1), kept with the weights so export can put it in
//!   the graph;
//! - held-out split by scene (all demonstrations of a scene on one side),
//!   from the seed; initialisation and mini-batch order from the same seed
//!   (SplitMix64, not candle's unseedable CPU generator), so a run is
//!   deterministic for a seed on one machine.

pub mod augment;
mod curves;
mod data;
pub mod eval;
mod net;

pub use curves::{curves_csv, curves_svg};
pub use data::{examples, is_heldout, load_demos, DemoSet, Examples};
use net::{column_error, loss, Net, SlotWeights};
pub(crate) use net::{dense, init_dense};

use std::path::Path;

use camdnn_policy::features::{fnv1a64_hex, Encoding};
use camdnn_policy::mlp::slot_names;
use camdnn_policy::System;
use candle_core::{Device, Tensor, Var};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use serde::{Deserialize, Serialize};

use crate::demos::{Demo, DemoStatus};
use crate::rng::SplitMix64;

/// Why training failed.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A file did not parse.
    #[error("{path}: {reason}")]
    Parse {
        /// The file.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// The demonstrations do not fit the system or the options.
    #[error("{0}")]
    Invalid(String),
    /// candle failed.
    #[error("candle: {0}")]
    Candle(#[from] candle_core::Error),
}

/// Training options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Seed of split, initialisation and shuffling.
    pub seed: u64,
    /// Hidden layer widths (ReLU).
    pub hidden: Vec<usize>,
    /// Epochs.
    pub epochs: usize,
    /// Mini-batch size.
    pub batch_size: usize,
    /// Peak AdamW learning rate (cosine decay to 5% of it).
    pub learning_rate: f64,
    /// Weight of the served-requests penalty.
    pub penalty_weight: f64,
    /// Weight of the per-pair expected-requests term (0: off, as in models
    /// trained before it existed, whose files lack the field).
    #[serde(default)]
    pub share_weight: f64,
    /// Weight of the per-processor expected-work term (0: off, as in models
    /// trained before it existed, whose files lack the field).
    #[serde(default)]
    pub work_weight: f64,
    /// Fraction of scenes held out, in (0, 1).
    pub heldout_fraction: f64,
    /// Label-preserving copies per training demonstration
    /// ([`augment`]; 0: none, as in models trained before it existed).
    #[serde(default)]
    pub augment: usize,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            seed: 1,
            hidden: vec![128, 128],
            epochs: 150,
            batch_size: 128,
            learning_rate: 3e-3,
            penalty_weight: 0.05,
            share_weight: 1.0,
            work_weight: 1.0,
            heldout_fraction: 0.15,
            augment: 0,
        }
    }
}

/// One dense layer, row-major weights [inputs x outputs].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dense {
    /// Input width.
    pub inputs: usize,
    /// Output width.
    pub outputs: usize,
    /// Weights, `w[r * outputs + c]`.
    pub weights: Vec<f32>,
    /// Biases.
    pub bias: Vec<f32>,
}

/// A trained network with everything export needs (`model.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainedModel {
    /// Format tag, [`MODEL_FORMAT`].
    pub format: String,
    /// System name.
    pub system_name: String,
    /// FNV-1a 64 of the system file.
    pub system_file_fnv1a64: String,
    /// Fingerprint of the validated system.
    pub system_fingerprint: String,
    /// Feature names.
    pub features: Vec<String>,
    /// Slot names.
    pub slots: Vec<String>,
    /// Training-set mean per feature.
    pub mean: Vec<f32>,
    /// Training-set std per feature (1 where constant).
    pub std: Vec<f32>,
    /// Hidden layers (ReLU).
    pub hidden: Vec<Dense>,
    /// Classifier head (logits of b > 0).
    pub prob_head: Dense,
    /// Regressor head (counts).
    pub count_head: Dense,
    /// Options used.
    pub config: TrainConfig,
    /// FNV-1a 64 of demos.jsonl.
    pub demos_fnv1a64: String,
    /// Training demonstrations.
    pub train_samples: usize,
    /// Held-out demonstrations.
    pub heldout_samples: usize,
    /// Held-out metrics after the last epoch.
    pub metrics: camdnn_policy::mlp::HeldoutMetrics,
}

/// Format tag of `model.json`.
pub const MODEL_FORMAT: &str = "camdnn-mlp-weights/1";

/// Loss values of one epoch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EpochLoss {
    /// Epoch, 1-based.
    pub epoch: usize,
    /// Mean mini-batch loss.
    pub train: f64,
    /// Held-out total loss.
    pub heldout: f64,
    /// Held-out BCE.
    pub heldout_bce: f64,
    /// Held-out masked MAE.
    pub heldout_mae: f64,
    /// Held-out penalty.
    pub heldout_penalty: f64,
}

/// What a training run produced.
pub struct TrainOutcome {
    /// The model (weights, normalisation, metadata).
    pub model: TrainedModel,
    /// Loss curves.
    pub curves: Vec<EpochLoss>,
}

/// Trains on the demonstrations of `set` for `system` (whose file text is
/// `system_text`).
pub fn train(
    system: &System,
    system_text: &str,
    set: &DemoSet,
    config: &TrainConfig,
    mut progress: impl FnMut(&EpochLoss),
) -> Result<TrainOutcome, TrainError> {
    if !(config.heldout_fraction > 0.0 && config.heldout_fraction < 1.0) {
        return Err(TrainError::Invalid(format!(
            "heldout fraction {} must be in (0, 1)",
            config.heldout_fraction
        )));
    }
    for (what, w) in [
        ("penalty weight", config.penalty_weight),
        ("share weight", config.share_weight),
        ("work weight", config.work_weight),
    ] {
        if !(w.is_finite() && w >= 0.0) {
            return Err(TrainError::Invalid(format!(
                "{what} {w} must be a non-negative number"
            )));
        }
    }
    if config.epochs == 0 || config.batch_size == 0 || config.hidden.contains(&0) {
        return Err(TrainError::Invalid(
            "epochs, batch size and hidden widths must be at least 1".into(),
        ));
    }
    if !(config.learning_rate > 0.0 && config.learning_rate.is_finite()) {
        return Err(TrainError::Invalid(format!(
            "learning rate {} must be positive",
            config.learning_rate
        )));
    }
    let enc = Encoding::new(system);
    let usable: Vec<&Demo> = set
        .demos
        .iter()
        .filter(|d| d.status != DemoStatus::Infeasible)
        .collect();
    let (held, tr): (Vec<&Demo>, Vec<&Demo>) = usable
        .into_iter()
        .partition(|d| is_heldout(config.seed, &d.scene, config.heldout_fraction));
    let copies = augment::label_preserving_copies(
        system,
        &tr,
        config.augment,
        config.seed,
        set.manifest.rem_max_ms,
    );
    let tr: Vec<&Demo> = tr.into_iter().chain(&copies).collect();
    let train_ex = examples(system, &enc, &tr)?;
    let held_ex = examples(system, &enc, &held)?;
    if train_ex.n == 0 || held_ex.n == 0 {
        return Err(TrainError::Invalid(format!(
            "the split left {} training and {} held-out demonstrations; both must be non-empty",
            train_ex.n, held_ex.n
        )));
    }
    let (nf, ns, nr) = (
        enc.num_features(),
        enc.slots().len(),
        enc.request_models().len(),
    );
    // Normalisation from the training set.
    let mut mean = vec![0.0f64; nf];
    let mut var = vec![0.0f64; nf];
    for row in train_ex.x.chunks(nf) {
        for (m, &v) in mean.iter_mut().zip(row) {
            *m += v as f64;
        }
    }
    mean.iter_mut().for_each(|m| *m /= train_ex.n as f64);
    for row in train_ex.x.chunks(nf) {
        for ((s, &v), m) in var.iter_mut().zip(row).zip(&mean) {
            *s += (v as f64 - m).powi(2);
        }
    }
    let std: Vec<f32> = var
        .iter()
        .map(|s| {
            let sd = (s / train_ex.n as f64).sqrt();
            if sd < 1e-6 {
                1.0
            } else {
                sd as f32
            }
        })
        .collect();
    let mean: Vec<f32> = mean.iter().map(|&m| m as f32).collect();

    let dev = Device::Cpu;
    let mut rng = SplitMix64::new(config.seed);
    let mut hidden = Vec::new();
    let mut width = nf;
    for &h in &config.hidden {
        hidden.push(init_dense(&mut rng, width, h, true)?);
        width = h;
    }
    let net = Net {
        hidden,
        prob: init_dense(&mut rng, width, ns, false)?,
        count: init_dense(&mut rng, width, ns, false)?,
        mean: Tensor::from_vec(mean.clone(), nf, &dev)?,
        std: Tensor::from_vec(std.clone(), nf, &dev)?,
    };
    // ks[s, m] = k when slot s belongs to request model m.
    let mut ks = vec![0.0f32; ns * nr];
    for (s, slot) in enc.slots().iter().enumerate() {
        let m = enc
            .request_models()
            .iter()
            .position(|&i| i == slot.model)
            .expect("slots are over request models");
        ks[s * nr + m] = slot.k as f32;
    }
    let ks = Tensor::from_vec(ks, (ns, nr), &dev)?;
    // kp[s, p] = k when slot s belongs to pair p (the slots' pairs in order).
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for slot in enc.slots() {
        if !pairs.contains(&(slot.model.0, slot.proc.0)) {
            pairs.push((slot.model.0, slot.proc.0));
        }
    }
    let npairs = pairs.len();
    let mut kp = vec![0.0f32; ns * npairs];
    for (s, slot) in enc.slots().iter().enumerate() {
        let p = pairs
            .iter()
            .position(|&q| q == (slot.model.0, slot.proc.0))
            .expect("every slot's pair was listed");
        kp[s * npairs + p] = slot.k as f32;
    }
    let kp = Tensor::from_vec(kp, (ns, npairs), &dev)?;
    // ke[s, j] = exec_ms(i, j, k), in units of the training set's mean
    // per-processor ILP work, so the term is a relative error.
    let np = system.num_processors();
    let mut ke = vec![0.0f32; ns * np];
    for (s, slot) in enc.slots().iter().enumerate() {
        ke[s * np + slot.proc.0] = system.exec_ms(slot.model, slot.proc, slot.k) as f32;
    }
    let mut work_sum = 0.0f64;
    for row in train_ex.y.chunks(ns) {
        for (s, &v) in row.iter().enumerate() {
            work_sum += v as f64 * ke[s * np + enc.slots()[s].proc.0] as f64;
        }
    }
    let scale = (work_sum / (train_ex.n * np) as f64).max(1e-6) as f32;
    ke.iter_mut().for_each(|v| *v /= scale);
    let ke = Tensor::from_vec(ke, (ns, np), &dev)?;
    let weights = SlotWeights { ks, kp, ke };
    let mut opt = AdamW::new(
        net.vars(),
        ParamsAdamW {
            lr: config.learning_rate,
            weight_decay: 0.0,
            ..Default::default()
        },
    )?;
    let hx = Tensor::from_vec(held_ex.x.clone(), (held_ex.n, nf), &dev)?;
    let hy = Tensor::from_vec(held_ex.y.clone(), (held_ex.n, ns), &dev)?;
    let hr = Tensor::from_vec(held_ex.r.clone(), (held_ex.n, nr), &dev)?;
    let mut order: Vec<usize> = (0..train_ex.n).collect();
    let mut curves = Vec::with_capacity(config.epochs);
    let (mut bx, mut by, mut br) = (Vec::new(), Vec::new(), Vec::new());
    for epoch in 1..=config.epochs {
        let progress_frac = (epoch - 1) as f64 / config.epochs as f64;
        let lr = config.learning_rate
            * (0.05 + 0.95 * 0.5 * (1.0 + (std::f64::consts::PI * progress_frac).cos()));
        opt.set_learning_rate(lr);
        rng.shuffle(&mut order);
        let (mut sum, mut batches) = (0.0f64, 0usize);
        for chunk in order.chunks(config.batch_size) {
            bx.clear();
            by.clear();
            br.clear();
            for &n in chunk {
                bx.extend_from_slice(&train_ex.x[n * nf..(n + 1) * nf]);
                by.extend_from_slice(&train_ex.y[n * ns..(n + 1) * ns]);
                br.extend_from_slice(&train_ex.r[n * nr..(n + 1) * nr]);
            }
            let x = Tensor::from_slice(&bx, (chunk.len(), nf), &dev)?;
            let y = Tensor::from_slice(&by, (chunk.len(), ns), &dev)?;
            let r = Tensor::from_slice(&br, (chunk.len(), nr), &dev)?;
            let (logits, counts) = net.forward(&x)?;
            let (total, ..) = loss(&logits, &counts, &y, &r, &weights, config)?;
            opt.backward_step(&total)?;
            sum += total.to_scalar::<f32>()? as f64;
            batches += 1;
        }
        let (logits, counts) = net.forward(&hx)?;
        let (total, bce, mae, pen) = loss(&logits, &counts, &hy, &hr, &weights, config)?;
        let e = EpochLoss {
            epoch,
            train: sum / batches as f64,
            heldout: total.to_scalar::<f32>()? as f64,
            heldout_bce: bce.to_scalar::<f32>()? as f64,
            heldout_mae: mae.to_scalar::<f32>()? as f64,
            heldout_penalty: pen.to_scalar::<f32>()? as f64,
        };
        progress(&e);
        curves.push(e);
    }
    // Held-out decoded metrics.
    let (logits, counts) = net.forward(&hx)?;
    let probs = candle_nn::ops::sigmoid(&logits)?;
    let expected = (&probs * &counts)?;
    let pair_err = column_error(&expected, &hy, &weights.kp)?.to_scalar::<f32>()? as f64;
    let work_err = column_error(&expected, &hy, &weights.ke)?.to_scalar::<f32>()? as f64;
    let probs = probs.to_vec2::<f32>()?;
    let counts = counts.to_vec2::<f32>()?;
    let (mut abs_err, mut right, mut exact) = (0.0f64, 0usize, 0usize);
    for n in 0..held_ex.n {
        let mut all = true;
        for (s, slot) in enc.slots().iter().enumerate() {
            let r = held_ex.r[n * nr
                + enc
                    .request_models()
                    .iter()
                    .position(|&i| i == slot.model)
                    .expect("request model")];
            let b = decode_count(probs[n][s], counts[n][s], 0.5, r as u32, slot.k);
            let t = held_ex.y[n * ns + s];
            abs_err += (b as f64 - t as f64).abs();
            if b as f32 == t {
                right += 1;
            } else {
                all = false;
            }
        }
        exact += all as usize;
    }
    let last = curves.last().expect("epochs >= 1");
    let metrics = camdnn_policy::mlp::HeldoutMetrics {
        loss: last.heldout,
        bce: last.heldout_bce,
        mae: abs_err / (held_ex.n * ns) as f64,
        slot_accuracy: right as f64 / (held_ex.n * ns) as f64,
        exact_plans: exact as f64 / held_ex.n as f64,
        pair_requests_mae: Some(pair_err),
        processor_work_mae: Some(work_err),
    };
    let to_dense = |(w, b): &(Var, Var)| -> Result<Dense, TrainError> {
        let (i, o) = w.as_tensor().dims2()?;
        Ok(Dense {
            inputs: i,
            outputs: o,
            weights: w.as_tensor().flatten_all()?.to_vec1::<f32>()?,
            bias: b.as_tensor().to_vec1::<f32>()?,
        })
    };
    let model = TrainedModel {
        format: MODEL_FORMAT.to_string(),
        system_name: system.name.clone(),
        system_file_fnv1a64: fnv1a64_hex(system_text.as_bytes()),
        system_fingerprint: camdnn_policy::features::fingerprint(system),
        features: enc.feature_names().to_vec(),
        slots: slot_names(system, &enc),
        mean,
        std,
        hidden: net.hidden.iter().map(to_dense).collect::<Result<_, _>>()?,
        prob_head: to_dense(&net.prob)?,
        count_head: to_dense(&net.count)?,
        config: config.clone(),
        demos_fnv1a64: set.fnv1a64.clone(),
        train_samples: train_ex.n,
        heldout_samples: held_ex.n,
        metrics,
    };
    Ok(TrainOutcome { model, curves })
}

/// The runtime's decoding of one slot (see [`camdnn_policy::mlp`]).
pub fn decode_count(prob: f32, count: f32, threshold: f32, r: u32, k: usize) -> u32 {
    if prob >= threshold {
        let cap = ((r as usize / k) as f32).max(1.0);
        count.round().clamp(1.0, cap) as u32
    } else {
        0
    }
}

impl TrainedModel {
    /// Runs the network in candle on rows of features: (sigmoid probs, counts).
    pub fn forward(&self, x: &[f32], rows: usize) -> Result<(Vec<f32>, Vec<f32>), TrainError> {
        let dev = Device::Cpu;
        let nf = self.mean.len();
        let t = |d: &Dense| -> candle_core::Result<(Var, Var)> {
            Ok((
                Var::from_tensor(&Tensor::from_slice(
                    &d.weights,
                    (d.inputs, d.outputs),
                    &dev,
                )?)?,
                Var::from_tensor(&Tensor::from_slice(&d.bias, d.outputs, &dev)?)?,
            ))
        };
        let net = Net {
            hidden: self.hidden.iter().map(t).collect::<Result<_, _>>()?,
            prob: t(&self.prob_head)?,
            count: t(&self.count_head)?,
            mean: Tensor::from_slice(&self.mean, nf, &dev)?,
            std: Tensor::from_slice(&self.std, nf, &dev)?,
        };
        let x = Tensor::from_slice(x, (rows, nf), &dev)?;
        let (logits, counts) = net.forward(&x)?;
        let p = candle_nn::ops::sigmoid(&logits)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let c = counts.flatten_all()?.to_vec1::<f32>()?;
        Ok((p, c))
    }
}

/// Reads a `model.json`.
pub fn read_model(path: &Path) -> Result<TrainedModel, TrainError> {
    let text = std::fs::read_to_string(path).map_err(|source| TrainError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let m: TrainedModel = serde_json::from_str(&text).map_err(|e| TrainError::Parse {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    if m.format != MODEL_FORMAT {
        return Err(TrainError::Parse {
            path: path.display().to_string(),
            reason: format!("format {:?}, expected {MODEL_FORMAT:?}", m.format),
        });
    }
    Ok(m)
}
