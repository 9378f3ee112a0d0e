//! Longest-task-first greedy (the Mobile-I baseline): once a frame's requests
//! are all known, the models are taken longest mean execution time first and
//! each request goes to the processor that finishes it earliest, loads
//! included. No batching.

use super::cheapest_host;

use crate::scheduler::{Batching, Scheduler};
use crate::{Cluster, ModelId, ProcId, System};

/// Longest task first, earliest finish.
#[derive(Clone, Copy, Debug, Default)]
pub struct LongestTaskFirst;

impl Scheduler for LongestTaskFirst {
    fn name(&self) -> String {
        "ltf".into()
    }

    fn batching(&self) -> Batching {
        Batching::WholeFrame
    }

    fn frame_order(&self, system: &System, models: &mut [ModelId]) {
        models.sort_by(|a, b| {
            system
                .mean_exec1_ms(*b)
                .total_cmp(&system.mean_exec1_ms(*a))
        });
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
            let load = cluster.load_cost_ms(system, i, j);
            (cluster.rem_ms(j, now) + load + system.exec_ms(i, j, 1), 0.0)
        })
        .map(|j| (j, 1))
    }
}
