//! How far the pipeline is from the limit: its frame rate against the rate no schedule can beat
//! on its profile (`policy::bound::sustainable_fps`), the same work on copies of the fastest
//! unit, and whether its batches ran at the profile's speed.

use camdnn_policy::bound::{per_request_ms, sustainable_fps};
use camdnn_policy::sim::Trace;
use camdnn_policy::System;

use super::contenders::{Contender, Kind};
use super::internals::DRIFT_OK;
use super::stream::mean_scene;
use super::{Args, ClosedRun};
use crate::config::DaemonConfig;

/// Each pipeline contender's frame rate against the bound on its profile,
/// and the bound of the same work on `workers` copies of the fastest unit.
pub(super) fn print_limits(
    args: &Args,
    contenders: &[Contender],
    system: &System,
    ort_system: Option<&System>,
    trace: &Trace,
    root_items: u32,
    workers: usize,
) {
    println!();
    let first = (
        &contenders[0],
        system,
        if args.profile_now {
            "this host's profile, measured now"
        } else {
            "the config's profile"
        },
    );
    let ort = contenders
        .iter()
        .skip(1)
        .find(|c| matches!(c.kind, Kind::Pipeline { .. }))
        .zip(ort_system)
        .map(|(c, s)| {
            let which = if args.profile_now {
                "its own all-ORT profile"
            } else {
                "the config's profile, measured with the config's engines"
            };
            (c, s, which)
        });
    for (c, sys, name) in std::iter::once(first).chain(ort) {
        let scene = mean_scene(sys, trace, root_items);
        let bound = sustainable_fps(sys, &scene);
        if let Some(f) = c.fps() {
            println!(
                "limit ({name}, loads excluded): {bound:.2} frames/s; {} achieves {:.2} = {:.0}% of it",
                c.name,
                f.median,
                100.0 * f.median / bound
            );
        }
        if let Some((proc, fps)) = copies_of_fastest(sys, &scene, workers) {
            println!(
                "  the same work on {workers} copies of {proc} (what {workers} single-engine workers approach): {fps:.2} frames/s; the limit above is {:.0}% of it",
                100.0 * bound / fps
            );
        }
    }
}

/// Whether the closed loop's batches ran at the profile's speed.
pub(super) fn print_drift(cfg: &DaemonConfig, closed: &ClosedRun) {
    let Some(drift) = closed.stats.exec_vs_profile() else {
        return;
    };
    let profile = cfg.resolve(&cfg.pipeline.profile);
    if !(DRIFT_OK.0..=DRIFT_OK.1).contains(&drift) {
        println!(
            "warning: batches ran {drift:.2}x their profiled time on average: this host is not running at the speed {} was measured at, so the bound and the simulator describe another machine (re-measure with `camdnnd profile`, or pass --profile-now)",
            profile.display()
        );
    } else {
        println!(
            "batches ran {drift:.2}x their profiled time on average ({})",
            profile.display()
        );
    }
}

/// The frame rate of `n` copies of the processor that does a frame's work
/// fastest alone (each request at its best per-request time, loads
/// excluded), and that processor's name: the compute bound of `n` workers on
/// equal cores, next to which a mix of unequal processors is judged.
pub(super) fn copies_of_fastest(system: &System, scene: &[f64], n: usize) -> Option<(String, f64)> {
    system
        .proc_ids()
        .map(|j| {
            let ms: f64 = system
                .model_ids()
                .filter(|i| scene[i.0] > 0.0)
                .map(|i| scene[i.0] * per_request_ms(system, i, j, system.max_batch))
                .sum();
            (j, ms)
        })
        .filter(|(_, ms)| ms.is_finite() && *ms > 0.0)
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(j, ms)| (system.processors[j.0].name.clone(), n as f64 * 1000.0 / ms))
}
