//! What a simulation reports: every frame's outcome and the run's totals.

use super::{Accounting, BoundRatio};
use crate::adapt::AdaptCounts;
use crate::stats::Summary;
use crate::InputError;

/// What happened to one frame.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameOutcome {
    /// When the camera produced it, ms.
    pub arrival_ms: f64,
    /// Processing delay (last result minus arrival), ms; `None` if dropped.
    pub delay_ms: Option<f64>,
    /// Model loads its requests triggered.
    pub loads: u32,
    /// Busy time (loads + execution) its work took on each processor, ms.
    pub busy_ms: Vec<f64>,
    /// rem_j of every processor when the frame arrived, ms (the backlog it
    /// found).
    pub rem_at_arrival_ms: Vec<f64>,
    /// Lower bound on its makespan on idle units with the residency it
    /// found at arrival ([`crate::bound::frame_bound`]), ms.
    pub bound_ms: f64,
}

/// A simulation's results.
#[derive(Clone, Debug, PartialEq)]
pub struct SimReport {
    /// The scheduler's name.
    pub scheduler: String,
    /// Every frame, in order.
    pub frames: Vec<FrameOutcome>,
    /// Busy time (loads + execution) per processor, ms.
    pub busy_ms: Vec<f64>,
    /// Model loads (by the dispatcher and by global steps).
    pub loads: u32,
    /// Time spent loading, ms.
    pub load_ms: f64,
    /// Models evicted to make room for another.
    pub evictions: u32,
    /// Dispatch decisions taken.
    pub decisions: u64,
    /// Requests executed per model (detector runs included).
    pub served: Vec<u64>,
    /// Batches flushed by the sync timer, by reason (full, complete, timer).
    pub flushes: [u64; 3],
    /// Global steps taken.
    pub epochs: u32,
    /// Loads started by global steps (included in `loads`).
    pub epoch_loads: u32,
    /// Simulated time from the first frame to the last result (or the last
    /// detector of a frame dropped after it), ms.
    pub duration_ms: f64,
    /// Global steps a detector triggered before the epoch timer (included
    /// in `epochs`).
    pub triggered_epochs: u32,
    /// Global steps a dropped frame brought forward (included in `epochs`).
    pub drop_epochs: u32,
    /// Frames deadline admission dropped at arrival (among the dropped).
    pub admission_drops: u32,
    /// What adaptation did, when it was on.
    pub adapt: Option<AdaptCounts>,
}

impl SimReport {
    /// Every offered frame accounted as on time, late or dropped against
    /// `deadline_ms`, with delay percentiles over all of them (the headline
    /// measure: [`Accounting`]).
    pub fn accounting(&self, deadline_ms: f64) -> Accounting {
        Accounting::of(&self.frames, deadline_ms)
    }

    /// Every offered frame's makespan over its lower bound (a dropped frame
    /// is a miss).
    pub fn bound_ratio(&self) -> BoundRatio {
        BoundRatio::of(&self.frames)
    }

    /// On-time share of offered frames against `deadline_ms`.
    pub fn goodput(&self, deadline_ms: f64) -> f64 {
        self.accounting(deadline_ms).goodput()
    }

    /// Delay statistics over the frames that were processed only. A
    /// scheduler that drops slow frames looks better here: not a ranking
    /// measure (see [`SimReport::accounting`]); it is the paper's figure in
    /// no-drop runs, where every frame is processed.
    pub fn delay(&self) -> Summary {
        let d: Vec<f64> = self.frames.iter().filter_map(|f| f.delay_ms).collect();
        Summary::of(&d)
    }

    /// Frames dropped.
    pub fn dropped(&self) -> usize {
        self.frames.iter().filter(|f| f.delay_ms.is_none()).count()
    }

    /// Busy fraction of each processor over the run.
    pub fn utilisation(&self) -> Vec<f64> {
        self.busy_ms
            .iter()
            .map(|b| b / self.duration_ms.max(1e-9))
            .collect()
    }
}

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SimError {
    /// The trace does not fit the system.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A knob is out of range.
    #[error("sim config {field} = {value}: {reason}")]
    Config {
        /// The field.
        field: &'static str,
        /// Its value.
        value: f64,
        /// What it must be.
        reason: &'static str,
    },
    /// The scheduler found no processor able to host a model.
    #[error("scheduler {scheduler} found no processor that can host {model}")]
    NoHost {
        /// The scheduler.
        scheduler: String,
        /// The model.
        model: String,
    },
}

impl SimReport {
    /// A report of `scheduler` on `system` with nothing done yet, room for
    /// `frames` frames.
    pub(super) fn empty(scheduler: String, system: &crate::System, frames: usize) -> Self {
        SimReport {
            scheduler,
            frames: Vec::with_capacity(frames),
            busy_ms: vec![0.0; system.num_processors()],
            loads: 0,
            load_ms: 0.0,
            evictions: 0,
            decisions: 0,
            served: vec![0; system.num_models()],
            flushes: [0; 3],
            epochs: 0,
            epoch_loads: 0,
            duration_ms: 0.0,
            triggered_epochs: 0,
            drop_epochs: 0,
            admission_drops: 0,
            adapt: None,
        }
    }
}
