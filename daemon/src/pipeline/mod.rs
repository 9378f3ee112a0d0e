//! The frame path: frame -> detector -> per-object requests -> batcher and
//! dispatcher -> processor workers -> one result per frame. The server sees
//! it only through [`FrameProcessor`].

mod build;
pub mod config;
pub mod health;
pub mod models;
mod onnx_meta;
pub mod prep;
pub mod reuse_value;
pub mod runtime;
mod step_thread;
pub mod track_config;
pub mod work;

pub use build::{check, drop_unfit_policy, real_engine, scheduler, start, start_with, Built};

use std::time::Instant;

use camdnn_protocol::{DropReason, Frame, FrameResult, RejectReason};
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
    /// Starts work on `frame`, received at `received`; the outcome is sent on
    /// `reply` exactly once (a dropped receiver is ignored).
    fn submit(&self, frame: Frame, received: Instant, reply: oneshot::Sender<Outcome>);

    /// Frames the pipeline works on at once before the server should hold
    /// new ones back (the admission limit).
    fn max_in_flight(&self) -> usize;

    /// True once every model is loaded and warmed up, and while the
    /// pipeline can serve every model it needs.
    fn is_ready(&self) -> bool;

    /// Why the processor is not ready (`None`: ready).
    fn not_ready_reason(&self) -> Option<String> {
        (!self.is_ready()).then(|| "the frame processor is not ready".into())
    }

    /// True while the processor's own control thread runs (feeds the systemd
    /// watchdog).
    fn is_alive(&self) -> bool {
        true
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
pub fn build(
    cfg: &crate::config::DaemonConfig,
) -> anyhow::Result<std::sync::Arc<dyn FrameProcessor>> {
    Ok(std::sync::Arc::new(start(cfg)?))
}
