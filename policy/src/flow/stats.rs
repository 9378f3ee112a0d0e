//! What the flow has done: a typed snapshot for reports, benches and metrics.

use super::DropCause;
use crate::{ModelId, System};

/// Counts of the flow's decisions since it started.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowStats {
    /// Batches placed.
    pub batches: u64,
    /// Requests placed per model (detector items included; index = `ModelId`).
    pub served: Vec<u64>,
    /// Loads a placement started (a batch whose model was not resident).
    pub placement_loads: u32,
    /// Loads global steps started.
    pub step_loads: u32,
    /// Models evicted to make room for a placement.
    pub evictions: u32,
    /// Groups the batcher released: full, complete, timer.
    pub flushes: [u64; 3],
    /// Global steps applied.
    pub steps: u32,
    /// Of which adaptation brought forward.
    pub triggered_steps: u32,
    /// Of which a drop or a late answer brought forward.
    pub drop_steps: u32,
    /// Frames answered.
    pub answered: u64,
    /// Frames dropped, per cause ([`FlowStats::dropped`]).
    drops: [u64; 6],
    /// Frames the driver found unreadable.
    pub invalid: u64,
    /// Loads that failed.
    pub load_failures: u32,
    /// The last model no processor could host, if any.
    pub no_host: Option<ModelId>,
}

fn slot(cause: DropCause) -> usize {
    match cause {
        DropCause::BehindAtEntry => 0,
        DropCause::BehindAtFanOut => 1,
        DropCause::CannotMeetDeadline => 2,
        DropCause::DeadlinePassed => 3,
        DropCause::Failed => 4,
        DropCause::NoHost => 5,
    }
}

impl FlowStats {
    /// Nothing done yet.
    pub fn new(system: &System) -> Self {
        FlowStats {
            served: vec![0; system.num_models()],
            ..FlowStats::default()
        }
    }

    /// Frames dropped for `cause`.
    pub fn dropped(&self, cause: DropCause) -> u64 {
        self.drops[slot(cause)]
    }

    pub(super) fn count_drop(&mut self, cause: DropCause) {
        self.drops[slot(cause)] += 1;
    }

    pub(super) fn placed(&mut self, model: ModelId, size: usize, loads: bool, evictions: u32) {
        self.batches += 1;
        self.served[model.0] += size as u64;
        self.placement_loads += u32::from(loads);
        self.evictions += evictions;
    }
}
