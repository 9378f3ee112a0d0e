//! Central Queue: requests wait in one FIFO and each goes to the fastest unit
//! that is idle; when none is, to the first to become idle. No batching, no
//! load awareness.

use super::cheapest_host;

use crate::scheduler::{Batching, Scheduler};
use crate::{Cluster, ModelId, ProcId, System};

/// Fastest idle unit.
#[derive(Clone, Copy, Debug, Default)]
pub struct CentralQueue;

impl Scheduler for CentralQueue {
    fn name(&self) -> String {
        "cq".into()
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
            (cluster.rem_ms(j, now), system.exec_ms(i, j, 1))
        })
        .map(|j| (j, 1))
    }
}
