//! Runtime HEFT as the paper compares against: one request at a time to the
//! processor with the earliest finish time; no batching, and model load
//! times are ignored when choosing (they are still paid).

use super::cheapest_host;

use crate::scheduler::{Batching, Scheduler};
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
        cheapest_host(system, cluster, i, |j| {
            (cluster.rem_ms(j, now) + system.exec_ms(i, j, 1), 0.0)
        })
        .map(|j| (j, 1))
    }
}
