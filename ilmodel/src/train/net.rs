//! The network being trained: dense layers over normalised features, the
//! two heads over the slots, and the loss of a mini-batch.

use candle_core::{DType, Device, Tensor, Var};

use super::{TrainConfig, TrainError};
use crate::rng::SplitMix64;

/// The candle network during training.
pub(super) struct Net {
    pub(super) hidden: Vec<(Var, Var)>,
    pub(super) prob: (Var, Var),
    pub(super) count: (Var, Var),
    pub(super) mean: Tensor,
    pub(super) std: Tensor,
}

pub(crate) fn init_dense(
    rng: &mut SplitMix64,
    inputs: usize,
    outputs: usize,
    relu: bool,
) -> Result<(Var, Var), TrainError> {
    let bound = if relu {
        (6.0 / inputs as f64).sqrt()
    } else {
        (1.0 / inputs as f64).sqrt()
    };
    let w: Vec<f32> = (0..inputs * outputs)
        .map(|_| ((rng.next_f64() * 2.0 - 1.0) * bound) as f32)
        .collect();
    let w = Var::from_tensor(&Tensor::from_vec(w, (inputs, outputs), &Device::Cpu)?)?;
    let b = Var::from_tensor(&Tensor::zeros(outputs, DType::F32, &Device::Cpu)?)?;
    Ok((w, b))
}

pub(crate) fn dense(x: &Tensor, (w, b): &(Var, Var)) -> candle_core::Result<Tensor> {
    x.matmul(w.as_tensor())?.broadcast_add(b.as_tensor())
}

impl Net {
    pub(super) fn forward(&self, x: &Tensor) -> candle_core::Result<(Tensor, Tensor)> {
        let mut h = x.broadcast_sub(&self.mean)?.broadcast_div(&self.std)?;
        for layer in &self.hidden {
            h = dense(&h, layer)?.relu()?;
        }
        Ok((dense(&h, &self.prob)?, dense(&h, &self.count)?))
    }

    pub(super) fn vars(&self) -> Vec<Var> {
        let mut v = Vec::new();
        for (w, b) in self.hidden.iter().chain([&self.prob, &self.count]) {
            v.push(w.clone());
            v.push(b.clone());
        }
        v
    }
}

/// Slot-to-column weights of a batch's loss: `ks[s, m]` = k when slot s
/// belongs to request model m, `kp[s, p]` = k when it belongs to pair p.
pub(super) struct SlotWeights {
    pub(super) ks: Tensor,
    pub(super) kp: Tensor,
    /// `ke[s, j]` = exec_ms(i, j, k) / scale when slot s is on processor j.
    pub(super) ke: Tensor,
}

/// Mean |expected - ILP| over the columns of `k`: with `kp`, each pair's
/// requests sum_k k expected_k against n(i,j); with `ke`, each processor's
/// work. `expected` per slot against the ILP's counts `y`.
pub(super) fn column_error(
    expected: &Tensor,
    y: &Tensor,
    k: &Tensor,
) -> candle_core::Result<Tensor> {
    (expected.matmul(k)? - y.matmul(k)?)?.abs()?.mean_all()
}

/// Loss parts of a batch: (total, bce, mae, penalty).
pub(super) fn loss(
    logits: &Tensor,
    counts: &Tensor,
    y: &Tensor,
    r: &Tensor,
    w: &SlotWeights,
    config: &TrainConfig,
) -> candle_core::Result<(Tensor, Tensor, Tensor, Tensor)> {
    let nz = y.gt(0.0)?.to_dtype(DType::F32)?;
    // Stable BCE with logits: max(z,0) - z*t + log(1 + exp(-|z|)).
    let bce = (logits.relu()? - (logits * &nz)?)?
        .add(&(logits.abs()?.neg()?.exp()? + 1.0)?.log()?)?
        .mean_all()?;
    let mae = ((counts - y)?.abs()? * &nz)?.sum_all()?;
    let mae = (mae / nz.sum_all()?.to_scalar::<f32>()?.max(1.0) as f64)?;
    let expected = (candle_nn::ops::sigmoid(logits)? * counts)?;
    let served = expected.matmul(&w.ks)?;
    let penalty = (served - r)?.abs()?.mean_all()?;
    let mut total = ((&bce + &mae)? + (&penalty * config.penalty_weight)?)?;
    if config.share_weight > 0.0 {
        let share = column_error(&expected, y, &w.kp)?;
        total = (total + (share * config.share_weight)?)?;
    }
    if config.work_weight > 0.0 {
        let work = column_error(&expected, y, &w.ke)?;
        total = (total + (work * config.work_weight)?)?;
    }
    Ok((total, bce, mae, penalty))
}
