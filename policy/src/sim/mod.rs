//! A discrete-event simulator of the whole pipeline: a camera at F fps
//! offers a scene trace's frames, an admission rule lets them in, the frame
//! flow ([`crate::flow`], the code the daemon runs) decides every step of
//! their life, and the simulator supplies what the board does: each
//! processor's loads and batches at the profile's times (slowed by
//! throttles the scheduler is not told of), crop time, the global step's
//! time. Deterministic: the same system, trace, config and scheduler give
//! the same report.

mod agenda;
mod config;
mod driver;
mod measure;
mod physics;
mod rate;
mod report;
mod throttle;
mod trace;

pub use agenda::Agenda;
pub use config::SimConfig;
pub use driver::frame_scenes;
pub use measure::{default_deadline_ms, fmt_delay, Accounting, BoundRatio, OfferedDelay};
pub use physics::{SceneObjects, Span, Units};
pub use rate::{mean_scene, rate_bound, RateBound, OVERLOAD};
pub use report::{FrameOutcome, SimError, SimReport};
pub use throttle::{throttled_board, windowed_goodput, Throttle};
pub use trace::{frame_scene, full_scene, Segment, Trace};

use crate::flow::Decision;
use crate::scheduler::Scheduler;
use crate::{Cluster, System};

/// Runs `scheduler` over `trace` on `system`.
pub fn simulate(
    system: &System,
    scheduler: &mut dyn Scheduler,
    trace: &Trace,
    cfg: &SimConfig,
) -> Result<SimReport, SimError> {
    run(system, scheduler, trace, cfg, None, false).map(|(r, _)| r)
}

/// [`simulate`], with every decision the flow took, in order.
pub fn simulate_logged(
    system: &System,
    scheduler: &mut dyn Scheduler,
    trace: &Trace,
    cfg: &SimConfig,
) -> Result<(SimReport, Vec<Decision>), SimError> {
    run(system, scheduler, trace, cfg, None, true)
}

/// Runs `scheduler` over `trace` from a cluster already in use at
/// `start_ms` (its residency and queued work), the first frame arriving at
/// `start_ms`: a look-ahead from the present state, as a global step
/// evaluates a choice. The scheduler's initial plan is not asked for.
pub fn simulate_from(
    system: &System,
    scheduler: &mut dyn Scheduler,
    trace: &Trace,
    cfg: &SimConfig,
    cluster: Cluster,
    start_ms: f64,
) -> Result<SimReport, SimError> {
    run(
        system,
        scheduler,
        trace,
        cfg,
        Some((cluster, start_ms)),
        false,
    )
    .map(|(r, _)| r)
}

fn run(
    system: &System,
    scheduler: &mut dyn Scheduler,
    trace: &Trace,
    cfg: &SimConfig,
    start: Option<(Cluster, f64)>,
    log: bool,
) -> Result<(SimReport, Vec<Decision>), SimError> {
    scheduler.set_admission(cfg.admission);
    let adapted = scheduler.system_override(system);
    let system = adapted.as_ref().unwrap_or(system);
    trace.validate(system)?;
    cfg.validate(system)?;
    let (cluster, t0) = match start {
        Some(start) => start,
        None => {
            let mut cluster = Cluster::new(system);
            let initial = scheduler.initial_plan(system);
            cluster.preload(system, &initial);
            (cluster, 0.0)
        }
    };
    let scenes = driver::frame_scenes(system, trace, cfg.root_items);
    driver::Driver::new(system, scheduler, scenes, cfg, cluster, t0, log)?.run(t0)
}
