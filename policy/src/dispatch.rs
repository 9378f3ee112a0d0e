//! The local dispatcher of Algorithm 1: for `w` waiting requests of model i,
//! take on each processor the first preferred batch size k <= w and pick
//! `argmin_j rem_j + t_e(i,j,k)/k + t_l(i,j) (1 - a(i,j))`.
//! O(n_p) per decision, no heap allocation.

use crate::{Cluster, ModelId, ProcId, System};

/// The cost a host is ranked by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum HostRule {
    /// The paper's rule: rem_j + t_e(i,j,k)/k + t_l(i,j)(1 - a(i,j)).
    #[default]
    PerRequest,
    /// Earliest finish time of the batch: rem_j + t_e(i,j,k) + t_l(i,j)(1 - a(i,j)).
    FinishTime,
}

/// One dispatch decision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    /// The host p_j.
    pub proc: ProcId,
    /// Batch size k.
    pub batch: usize,
    /// The cost it won with, ms.
    pub cost_ms: f64,
}

/// Chooses host and batch size for up to `waiting` requests of model i at
/// `now`; `None` when no processor can host the model.
#[inline]
pub fn choose_host(
    system: &System,
    cluster: &Cluster,
    rule: HostRule,
    now: f64,
    i: ModelId,
    waiting: usize,
) -> Option<Decision> {
    let mut best: Option<Decision> = None;
    for j in system.proc_ids() {
        if !cluster.can_host(system, i, j) {
            continue;
        }
        let k = preferred_fitting(system, i, j, waiting);
        let t = system.exec_ms(i, j, k);
        let run = match rule {
            HostRule::PerRequest => t / k as f64,
            HostRule::FinishTime => t,
        };
        let load = if cluster.is_resident(i, j) {
            0.0
        } else {
            system.load_ms(i, j)
        };
        let cost = cluster.rem_ms(j, now) + run + load;
        if best.is_none_or(|b| cost < b.cost_ms) {
            best = Some(Decision {
                proc: j,
                batch: k,
                cost_ms: cost,
            });
        }
    }
    best
}

/// The first batch size in (i, j)'s preferred list that is <= `waiting`
/// (1 when waiting is 0).
#[inline]
pub fn preferred_fitting(system: &System, i: ModelId, j: ProcId, waiting: usize) -> usize {
    system
        .preferred_batches(i, j)
        .iter()
        .map(|&k| k as usize)
        .find(|&k| k <= waiting)
        .unwrap_or(1)
}
