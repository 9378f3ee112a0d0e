//! camdnn's local dispatcher (Algorithm 1) as an online scheduler: sync-timer
//! batching and the greedy host rule, with no global step.

use crate::scheduler::{Batching, Scheduler};
use crate::{choose_host, Cluster, HostRule, ModelId, ProcId, System};

/// Algorithm 1 alone.
#[derive(Clone, Debug)]
pub struct LocalDispatcher {
    rule: HostRule,
    wait_ms: f64,
}

impl LocalDispatcher {
    /// A dispatcher ranking hosts by `rule` with a sync timer of `wait_ms`.
    pub fn new(rule: HostRule, wait_ms: f64) -> Self {
        LocalDispatcher { rule, wait_ms }
    }

    /// The sync timer's WaitTime, ms.
    pub fn wait_ms(&self) -> f64 {
        self.wait_ms
    }
}

impl Scheduler for LocalDispatcher {
    fn name(&self) -> String {
        match self.rule {
            HostRule::PerRequest => "camdnn-local".into(),
            HostRule::FinishTime => "camdnn-local-eft".into(),
            HostRule::GroupFinish => "camdnn-local-split".into(),
        }
    }

    fn batching(&self) -> Batching {
        Batching::SyncTimer {
            wait_ms: self.wait_ms,
        }
    }

    fn place(
        &mut self,
        system: &System,
        cluster: &Cluster,
        now: f64,
        i: ModelId,
        waiting: usize,
    ) -> Option<(ProcId, usize)> {
        choose_host(system, cluster, self.rule, now, i, waiting).map(|d| (d.proc, d.batch))
    }
}
