//! The frame path: frame -> detector -> per-object requests -> batcher and
//! dispatcher -> processor workers -> one result per frame. The server sees
//! it only through [`FrameProcessor`].

mod actor;
mod build;
pub mod clock;
pub mod config;
mod effects;
#[cfg(test)]
mod equivalence_tests;
mod frame_data;
pub mod health;
pub mod models;
mod onnx_meta;
mod outputs;
pub mod prep;
mod processors;
pub mod reuse;
pub mod reuse_value;
pub mod runtime;
pub mod stall;
pub mod stats;
mod step_thread;
pub mod units;
pub mod work;

pub use build::{check, drop_unfit_policy, real_engine, scheduler, start, start_with, Built};

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use camdnn_protocol::{Deadline, DropReason, Frame, FrameResult, RejectReason};
use tokio::sync::oneshot;

/// What became of one frame; every submitted frame gets exactly one.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Processed: detections and per-object outputs.
    Done(FrameResult),
    /// Accepted but not processed.
    Dropped(DropReason),
    /// Invalid for this pipeline (e.g. a pixel format it cannot decode).
    Rejected(RejectReason, String),
}

/// The frame path as the server drives it. Implementations never block the
/// caller: inference runs on the processors' own threads.
pub trait FrameProcessor: Send + Sync + 'static {
    /// Starts work on `frame`, received at `received`, to be answered by
    /// `deadline` (as the server read it from the frame); the outcome is
    /// sent on `reply` exactly once (a dropped receiver is ignored).
    fn submit(
        &self,
        frame: Frame,
        received: Instant,
        deadline: Option<Instant>,
        reply: oneshot::Sender<Outcome>,
    );

    /// Submits `frame` as received now (its deadline counted from now, as
    /// the server counts it); its outcome arrives on the receiver.
    fn submit_now(&self, frame: Frame) -> oneshot::Receiver<Outcome> {
        let (tx, rx) = oneshot::channel();
        let now = Instant::now();
        let deadline = deadline_instant(frame.deadline, now);
        self.submit(frame, now, deadline, tx);
        rx
    }

    /// As [`FrameProcessor::submit`], for a frame that came on connection `conn` (its
    /// streams are tracked apart from other connections'). The default forgets the
    /// connection; a processor that tracks streams keys them by it.
    fn submit_from(
        &self,
        conn: u64,
        frame: Frame,
        received: Instant,
        deadline: Option<Instant>,
        reply: oneshot::Sender<Outcome>,
    ) {
        let _ = conn;
        self.submit(frame, received, deadline, reply);
    }

    /// Connection `conn` ended and every frame of it was answered: what the processor keeps
    /// of its streams (their tracks) can go. The default keeps nothing.
    fn connection_closed(&self, _conn: u64) {}

    /// Frames the pipeline works on at once before the server should hold
    /// new ones back (the admission limit). It may grow without a frame
    /// finishing (frames stuck on a stalled unit stop counting); the server
    /// looks again while frames wait.
    fn max_in_flight(&self) -> usize;

    /// True once every model is loaded and warmed up, and while the
    /// pipeline can serve every model it needs.
    fn is_ready(&self) -> bool;

    /// Why the processor is not ready (`None`: ready).
    fn not_ready_reason(&self) -> Option<String> {
        (!self.is_ready()).then(|| "the frame processor is not ready".into())
    }

    /// True while the processor's own control thread runs and makes
    /// progress (feeds the systemd watchdog).
    fn is_alive(&self) -> bool {
        true
    }

    /// `Ok` while alive, else why not (see [`FrameProcessor::is_alive`]).
    fn liveness(&self) -> Result<(), String> {
        if self.is_alive() {
            Ok(())
        } else {
            Err("the frame processor is not alive".into())
        }
    }

    /// The server dropped a frame before submitting it (superseded by a
    /// newer one, overloaded, or its deadline passed while it waited): the
    /// pipeline is behind, and its scheduler may re-plan early
    /// (`policy::stepper`). No default: a wrapper must pass it on.
    fn frame_dropped(&self);

    /// The work `frame` is expected to cost the pipeline, in milliseconds of
    /// processor time (from the profile), for fair admission
    /// (`server::admission`); 1 per frame unless the processor knows better.
    fn expected_work_ms(&self, _frame: &Frame) -> f64 {
        1.0
    }
}

/// Starts the pipeline of `cfg` for the server: engines, workers, start-up
/// residency and warm-up; ready when this returns.
pub fn build(cfg: &config::PipelineConfig) -> anyhow::Result<std::sync::Arc<dyn FrameProcessor>> {
    Ok(std::sync::Arc::new(start(cfg)?))
}

/// A frame's deadline as an instant (`None`: no deadline). Absolute
/// deadlines are converted through the realtime clock now.
pub fn deadline_instant(d: Option<Deadline>, received: Instant) -> Option<Instant> {
    match d? {
        Deadline::RelativeUs(us) => Some(
            received
                .checked_add(Duration::from_micros(us))
                .unwrap_or(received + Duration::from_secs(86_400 * 365)),
        ),
        Deadline::AbsoluteUs(at) => {
            let now_us = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
            if at <= now_us {
                Some(received)
            } else {
                let left = Duration::from_micros(at - now_us);
                Some(
                    Instant::now()
                        .checked_add(left)
                        .unwrap_or(received + Duration::from_secs(86_400 * 365)),
                )
            }
        }
    }
}
