//! Online schedulers the simulator (and the daemon) can run: camdnn's local
//! dispatcher and the baselines it is measured against.

mod camdnn;
mod cq;
mod fixed;
mod heft;
mod local;
mod ltf;
mod recording;

pub use camdnn::{
    beats, keep_idle_residents, stay_plan, stream_residency, Camdnn, Choice, GreedyPlanner, Mode,
    Tuning,
};
pub use cq::CentralQueue;
pub use fixed::Fixed;
pub use heft::Heft;
pub use local::LocalDispatcher;
pub use ltf::LongestTaskFirst;
pub use recording::{Recording, SceneLog, StepLog};

use crate::scheduler::Scheduler;
use crate::{Cluster, ModelId, ProcId, System};

/// The processor that can host model i with the smallest `cost` (compared
/// lexicographically), for the one-request-at-a-time baselines.
pub fn cheapest_host(
    system: &System,
    cluster: &Cluster,
    i: ModelId,
    cost: impl Fn(ProcId) -> (f64, f64),
) -> Option<ProcId> {
    system
        .supporting(i)
        .filter(|&j| cluster.can_host(system, i, j))
        .map(|j| (j, cost(j)))
        .min_by(|a, b| a.1 .0.total_cmp(&b.1 .0).then(a.1 .1.total_cmp(&b.1 .1)))
        .map(|(j, _)| j)
}

/// The names [`by_name`] accepts, in report order.
pub const BASELINES: &[&str] = &[
    "camdnn-greedy",
    "camdnn-local",
    "camdnn-local-eft",
    "camdnn-local-split",
    "heft",
    "cq",
    "static-dist",
    "cpu-only",
    "gpu-only",
    "ltf",
];

/// Builds a scheduler from its report name; `wait_ms` is the sync-timer
/// WaitTime for those that batch.
pub fn by_name(system: &System, name: &str, wait_ms: f64) -> Option<Box<dyn Scheduler + Send>> {
    use crate::spec::ProcessorKind;
    use crate::HostRule;
    Some(match name {
        "camdnn-greedy" => Box::new(Camdnn::new(GreedyPlanner::default(), wait_ms)),
        "camdnn-local" => Box::new(LocalDispatcher::new(HostRule::PerRequest, wait_ms)),
        "camdnn-local-eft" => Box::new(LocalDispatcher::new(HostRule::FinishTime, wait_ms)),
        "camdnn-local-split" => Box::new(LocalDispatcher::new(HostRule::GroupFinish, wait_ms)),
        "heft" => Box::new(Heft),
        "cq" => Box::new(CentralQueue),
        "static-dist" => Box::new(Fixed::static_dist(system, wait_ms)),
        "cpu-only" => Box::new(Fixed::only(system, ProcessorKind::Cpu, wait_ms)),
        "gpu-only" => Box::new(Fixed::only(system, ProcessorKind::Gpu, wait_ms)),
        "ltf" => Box::new(LongestTaskFirst),
        _ => return None,
    })
}
