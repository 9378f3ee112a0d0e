//! The global policy: what plans the next epoch at every global step.

use crate::epoch::EpochScenes;
use crate::{Plan, PlanInput, System};

/// A global scheduling policy: from the scene, rem and current residency to a
/// plan for the next epoch. Implementations need not be feasible; callers
/// pass their output through [`crate::repair`].
pub trait GlobalPolicy {
    /// A short name for reports.
    fn name(&self) -> &str;

    /// Plans the next epoch for the latest scene (`input.scene`).
    fn plan(&mut self, system: &System, input: &PlanInput) -> Plan;

    /// Plans the next epoch for the scenes `epoch` expects over it (the
    /// latest, `input.scene`, first) at its frame period: the plan's
    /// residency serves them all, its batches are the latest scene's. A
    /// policy that plans one frame ignores `epoch` ([`GlobalPolicy::plan`]).
    fn plan_epoch(&mut self, system: &System, input: &PlanInput, epoch: &EpochScenes) -> Plan {
        let _ = epoch;
        self.plan(system, input)
    }
}
