//! Runtime HEFT as the paper compares against: one request at a time to the
//! processor with the earliest finish time; no batching, and model load
//! times are ignored when choosing (they are still paid).

use super::{Batching, Scheduler};
use crate::{Cluster, ModelId, ProcId, System};

/// Earliest-finish-time, unbatched, load-unaware.
#[derive(Clone, Copy, Debug, Default)]
pub struct Heft;

impl Scheduler for Heft {
    fn name(&self) -> String {
        "heft".into()
    }

    fn batching(&self) -> Batching {
        Batching::PerRequest
    }

    fn place(
        &mut self,
        system: &System,
        cluster: &Cluster,
        now: f64,
        i: ModelId,
        _waiting: usize,
    ) -> Option<(ProcId, usize)> {
        system
            .supporting(i)
            .filter(|&j| cluster.can_host(system, i, j))
            .map(|j| (j, cluster.rem_ms(j, now) + system.exec_ms(i, j, 1)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(j, _)| (j, 1))
    }
}
