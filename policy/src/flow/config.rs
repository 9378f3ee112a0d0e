//! What the frame flow is told at start: the knobs the simulator and the
//! daemon share (the daemon's `[pipeline]` section maps onto it one to one).

use crate::adapt::AdaptConfig;
use crate::stepper::DROP_STEP_GAP_MS;

/// Real-time dropping's limit: a frame is dropped when the pipeline is this
/// far behind ([`crate::admission::detector_behind`] at its entry,
/// [`crate::admission::behind_at_fan_out`] once its detector ran).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Behind {
    /// A fixed limit, ms.
    Ms(f64),
    /// This many of the frame's own stream period, as
    /// [`crate::frame_period::FramePeriods`] estimates it (no limit until
    /// the stream's period is known).
    Periods(f64),
}

/// The frame flow's knobs.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowConfig {
    /// Interval between global steps, ms (0: no timer; adaptation's triggers
    /// and drops still step).
    pub epoch_ms: f64,
    /// A dropped frame brings the global step forward when none has run yet
    /// or the last one ran at least this long ago, ms (0: never).
    pub drop_step_gap_ms: f64,
    /// Whether an answer past its frame's deadline, after one within it,
    /// brings the global step forward as a drop does (off in the paper's
    /// no-drop mode, which steps on the timer alone).
    pub late_steps: bool,
    /// Real-time dropping (`None`: off).
    pub behind: Option<Behind>,
    /// Late binding: a batch whose chosen host has more queued work than
    /// this waits for a host to catch up, ms (`None`: every batch placed at
    /// once; [`crate::late_binding`]).
    pub dispatch_ahead_ms: Option<f64>,
    /// Deadline admission at fan-out with this many standard deviations over
    /// the live estimates' mean (`None`: off; [`crate::admission`]).
    pub deadline_admission_z: Option<f64>,
    /// Whether a frame still in the pipeline at its deadline is answered
    /// dropped then (the daemon: a client's deadline is a promise), or left
    /// to finish late (the simulator's accounting counts it late).
    pub expire_at_deadline: bool,
    /// Live estimates and early global steps (`None`: the profile as given,
    /// re-planning on the timer and on drops only).
    pub adapt: Option<AdaptConfig>,
    /// Keep the decision log ([`crate::flow::Decision`]).
    pub log: bool,
}

impl Default for FlowConfig {
    /// The paper's epoch, real-time dropping off, the default drop-step gap.
    fn default() -> Self {
        FlowConfig {
            epoch_ms: 5000.0,
            drop_step_gap_ms: DROP_STEP_GAP_MS,
            late_steps: true,
            behind: None,
            dispatch_ahead_ms: None,
            deadline_admission_z: None,
            expire_at_deadline: false,
            adapt: None,
            log: false,
        }
    }
}

/// A knob out of range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("flow config {field} = {value}: {reason}")]
pub struct FlowConfigError {
    /// The field.
    pub field: &'static str,
    /// Its value.
    pub value: f64,
    /// What it must be.
    pub reason: &'static str,
}

impl FlowConfig {
    /// Checks every number is in range.
    pub fn validate(&self) -> Result<(), FlowConfigError> {
        let at_least_zero = |field, value: f64| {
            if value.is_finite() && value >= 0.0 {
                Ok(())
            } else {
                Err(FlowConfigError {
                    field,
                    value,
                    reason: "must be a number >= 0",
                })
            }
        };
        at_least_zero("epoch_ms", self.epoch_ms)?;
        at_least_zero("drop_step_gap_ms", self.drop_step_gap_ms)?;
        if let Some(h) = self.dispatch_ahead_ms {
            at_least_zero("dispatch_ahead_ms", h)?;
        }
        if let Some(z) = self.deadline_admission_z {
            if !z.is_finite() {
                return Err(FlowConfigError {
                    field: "deadline_admission_z",
                    value: z,
                    reason: "must be a finite number",
                });
            }
        }
        match self.behind {
            Some(Behind::Ms(ms)) => at_least_zero("behind (ms)", ms)?,
            Some(Behind::Periods(n)) if !(n.is_finite() && n > 0.0) => {
                return Err(FlowConfigError {
                    field: "behind (periods)",
                    value: n,
                    reason: "must be a positive number",
                })
            }
            _ => {}
        }
        Ok(())
    }
}
