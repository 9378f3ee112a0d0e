//! The simulator's knobs: what the camera, the board and the admission rule are.

use crate::adapt::AdaptConfig;
use crate::admission::{DeadlineAdmission, FrameAdmission};
use crate::flow::{Behind, FlowConfig};

use super::{default_deadline_ms, SimError, Throttle};

/// Simulation knobs.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// Camera frame rate.
    pub fps: f64,
    /// Interval between global steps, ms (0: no timer; adaptation's
    /// triggers and drops still step).
    pub epoch_ms: f64,
    /// A dropped frame brings the global step forward when none has run yet
    /// or the last one ran at least this long ago, ms (0: the timer alone;
    /// [`crate::stepper::DROP_STEP_GAP_MS`] by default).
    pub drop_step_gap_ms: f64,
    /// Time to prepare one object's crop after its parent model ran, ms.
    pub crop_ms: f64,
    /// Crops prepared in parallel.
    pub crop_threads: usize,
    /// Which frames enter the pipeline and when.
    pub admission: FrameAdmission,
    /// Late binding as the daemon's `pipeline.dispatch_ahead_ms`: a batch
    /// whose chosen host has more queued work than this waits and is placed
    /// when a host catches up, or taken by a nearly idle host that finishes
    /// it sooner (`None`: every batch placed at once).
    pub dispatch_ahead_ms: Option<f64>,
    /// Requests each root model runs per frame, all released at arrival (a
    /// detector on an image pyramid runs one per scale; 1 for most graphs).
    pub root_items: u32,
    /// Time from a frame's arrival to its root requests' release: decoding
    /// the frame and preparing the detector's input, ms (0: frames arrive
    /// ready, as on the paper's boards where the camera pipeline does it).
    pub frame_prep_ms: f64,
    /// Time each batch costs its processor beyond t_e: handing it to the
    /// processor's thread and its results back, ms (0 on an ideal board).
    pub batch_overhead_ms: f64,
    /// Processors slowed by a factor over a time window (DVFS, thermal
    /// throttling): batches starting inside it take that much longer than
    /// the profile says, and the scheduler is not told.
    pub throttles: Vec<Throttle>,
    /// Live estimates and early global steps ([`crate::adapt`]); `None`:
    /// the scheduler plans with the profile as given, re-planning on the
    /// epoch timer only.
    pub adapt: Option<AdaptConfig>,
    /// Deadline admission ([`crate::admission`]): a frame whose earliest
    /// answer is later than its deadline is dropped at arrival (`None`: off).
    pub deadline_admission: Option<DeadlineAdmission>,
    /// Time a global step takes to compute, ms: it decides on the state at
    /// its start and its choice applies (loads start, the dispatcher
    /// switches) this much later, while the dispatcher goes on as it was,
    /// as on the daemon's step thread (0: applied at once; the daemon
    /// reports its steps' time as `camdnn_global_step_seconds`).
    pub step_cost_ms: f64,
}

impl Default for SimConfig {
    /// The paper's setting: 14 fps, 5 s epochs; crops at 0.5 ms on 4 cores.
    fn default() -> Self {
        SimConfig {
            fps: 14.0,
            epoch_ms: 5000.0,
            drop_step_gap_ms: crate::stepper::DROP_STEP_GAP_MS,
            crop_ms: 0.5,
            crop_threads: 4,
            admission: FrameAdmission::Behind(None),
            dispatch_ahead_ms: None,
            root_items: 1,
            frame_prep_ms: 0.0,
            batch_overhead_ms: 0.0,
            throttles: Vec::new(),
            adapt: None,
            deadline_admission: None,
            step_cost_ms: 0.0,
        }
    }
}

impl SimConfig {
    /// The no-drop mode, as the paper measured: every frame is queued,
    /// however far behind the pipeline is.
    pub fn no_drop(self) -> SimConfig {
        SimConfig {
            admission: FrameAdmission::QueueAll,
            deadline_admission: None,
            ..self
        }
    }

    /// The default deadline for these knobs: two frame periods, ms.
    pub fn default_deadline_ms(&self) -> f64 {
        default_deadline_ms(self.fps)
    }

    /// The deadline the run holds a frame to, ms: deadline admission's
    /// when it has one, else the default.
    pub fn frame_deadline_ms(&self) -> f64 {
        self.deadline_admission
            .and_then(|d| d.deadline_ms)
            .unwrap_or(self.default_deadline_ms())
    }
}

impl SimConfig {
    /// The frame flow's knobs these settings mean (the daemon's config maps
    /// onto the same).
    pub fn flow_config(&self) -> FlowConfig {
        FlowConfig {
            epoch_ms: self.epoch_ms,
            drop_step_gap_ms: self.drop_step_gap_ms,
            late_steps: self.admission != FrameAdmission::QueueAll,
            behind: match self.admission {
                FrameAdmission::Behind(limit) => {
                    Some(Behind::Ms(limit.unwrap_or(1000.0 / self.fps)))
                }
                _ => None,
            },
            dispatch_ahead_ms: self.dispatch_ahead_ms,
            deadline_admission_z: self.deadline_admission.map(|d| d.tail_z),
            expire_at_deadline: false,
            adapt: self.adapt.clone(),
            log: false,
        }
    }

    /// Checks every knob is in range for `system`.
    pub(super) fn validate(&self, system: &crate::System) -> Result<(), SimError> {
        let bad = |field, value, reason| {
            Err(SimError::Config {
                field,
                value,
                reason,
            })
        };
        if !(self.fps.is_finite() && self.fps > 0.0) {
            return bad("fps", self.fps, "must be a positive number");
        }
        for (field, value) in [
            ("epoch_ms", self.epoch_ms),
            ("drop_step_gap_ms", self.drop_step_gap_ms),
            ("crop_ms", self.crop_ms),
            ("frame_prep_ms", self.frame_prep_ms),
            ("batch_overhead_ms", self.batch_overhead_ms),
            ("step_cost_ms", self.step_cost_ms),
            ("dispatch_ahead_ms", self.dispatch_ahead_ms.unwrap_or(0.0)),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return bad(field, value, "must be >= 0");
            }
        }
        if self.admission == FrameAdmission::InFlight(0) {
            return bad(
                "max_in_flight (FrameAdmission::InFlight)",
                0.0,
                "must be at least 1",
            );
        }
        if self.root_items == 0 {
            return bad("root_items", 0.0, "must be at least 1");
        }
        if self.crop_threads == 0 {
            return bad("crop_threads", 0.0, "must be at least 1");
        }
        for t in &self.throttles {
            t.validate(system)?;
        }
        Ok(())
    }
}
