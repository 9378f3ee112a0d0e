//! A scheduler's sustained frame rate against the highest rate any schedule
//! could sustain ([`crate::bound::sustainable_fps`]) on the same scenes.
//!
//! The achieved rate is measured under overload: the trace's frames are
//! offered faster than any schedule could serve them (`OVERLOAD` x the
//! bound) in the no-drop mode, so every processor's queue stays full and
//! the frames answered per second are what the scheduler sustains:
//! frames / (last result - first arrival).

use super::{frame_scene, simulate, SimConfig, SimError, Trace};
use crate::bound::sustainable_fps;
use crate::scheduler::Scheduler;
use crate::System;

/// How much faster than the bound frames are offered in the overload run.
pub const OVERLOAD: f64 = 1.5;

/// Achieved and sustainable frame rates of one scheduler on one trace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateBound {
    /// Frames per second the scheduler answered under overload.
    pub achieved_fps: f64,
    /// The highest rate any schedule could sustain on the trace's scenes.
    pub sustainable_fps: f64,
}

impl RateBound {
    /// achieved / sustainable (at most 1 up to rounding).
    pub fn ratio(&self) -> f64 {
        self.achieved_fps / self.sustainable_fps
    }
}

/// The mean requests per frame of every model over `trace` (roots at
/// `root_items`), the scene [`sustainable_fps`] takes.
pub fn mean_scene(system: &System, trace: &Trace, root_items: u32) -> Vec<f64> {
    let mut sum = vec![0.0; system.num_models()];
    for seg in &trace.segments {
        let scene = frame_scene(system, &seg.scene, root_items);
        for (s, r) in sum.iter_mut().zip(scene) {
            *s += r as f64 * seg.frames as f64;
        }
    }
    let n = trace.frames().max(1) as f64;
    sum.iter().map(|s| s / n).collect()
}

/// Runs `scheduler` over `trace` offered at [`OVERLOAD`] x the sustainable
/// rate (no drops; the other knobs from `cfg`) and returns both rates.
pub fn rate_bound(
    system: &System,
    scheduler: &mut dyn Scheduler,
    trace: &Trace,
    cfg: &SimConfig,
) -> Result<RateBound, SimError> {
    trace.validate(system)?;
    let bound = sustainable_fps(system, &mean_scene(system, trace, cfg.root_items));
    if !(bound.is_finite() && bound > 0.0) {
        return Err(SimError::Config {
            field: "trace",
            value: bound,
            reason: "has no work any processor can do, so no rate bound",
        });
    }
    let overload = SimConfig {
        fps: OVERLOAD * bound,
        ..cfg.clone()
    }
    .no_drop();
    let r = simulate(system, scheduler, trace, &overload)?;
    let first = r.frames.first().map_or(0.0, |f| f.arrival_ms);
    let span = (r.duration_ms - first).max(1e-9);
    // Answered frames only: a frame dropped anyway is no throughput.
    let answered = r.frames.iter().filter(|f| f.delay_ms.is_some()).count();
    Ok(RateBound {
        achieved_fps: answered as f64 * 1000.0 / span,
        sustainable_fps: bound,
    })
}
