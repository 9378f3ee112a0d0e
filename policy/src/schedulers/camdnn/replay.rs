//! A choice replayed with the simulator from the cluster's present state on
//! the frames a step judges it by, and how two replays compare.

use super::follow::Follow;
use super::tuning::Tuning;
use crate::admission::FrameAdmission;
use crate::sim::{default_deadline_ms, simulate_from, Segment, SimConfig, Trace};
use crate::{Cluster, System};

/// How a choice did on the replayed frames: frames on time (more is
/// better), then the sum of delays with a miss counted as twice the
/// deadline (less is better).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Score {
    pub(super) on_time: usize,
    pub(super) cost_ms: f64,
}

impl std::ops::AddAssign for Score {
    fn add_assign(&mut self, other: Score) {
        self.on_time += other.on_time;
        self.cost_ms += other.cost_ms;
    }
}

impl Score {
    /// Better than `other`: more frames on time, or as many and less
    /// delay.
    pub(super) fn beats(&self, other: &Score) -> bool {
        self.on_time > other.on_time
            || (self.on_time == other.on_time && self.cost_ms < other.cost_ms)
    }
}

/// Replays `window` (scenes, one per frame) from the cluster's present state
/// with `follow` dispatching under `cfg`.
pub(super) fn replay(
    system: &System,
    follow: &mut Follow,
    cluster: Cluster,
    now: f64,
    window: &[Vec<u32>],
    cfg: &SimConfig,
) -> Option<Score> {
    let mut segments: Vec<Segment> = Vec::new();
    for scene in window {
        match segments.last_mut() {
            Some(seg) if &seg.scene == scene => seg.frames += 1,
            _ => segments.push(Segment {
                frames: 1,
                scene: scene.clone(),
            }),
        }
    }
    let trace = Trace { segments };
    let report = simulate_from(system, follow, &trace, cfg, cluster, now).ok()?;
    let deadline = default_deadline_ms(cfg.fps);
    let mut score = Score {
        on_time: 0,
        cost_ms: 0.0,
    };
    for f in &report.frames {
        match f.delay_ms {
            Some(d) if d <= deadline => {
                score.on_time += 1;
                score.cost_ms += d;
            }
            Some(d) => score.cost_ms += d.min(2.0 * deadline),
            None => score.cost_ms += 2.0 * deadline,
        }
    }
    Some(score)
}

/// How the replays run: frames every `period_ms`, entering the pipeline
/// under `admission` (the pipeline's own), the choice as it stands (no
/// global step within).
pub(super) fn replay_config(period_ms: f64, admission: FrameAdmission) -> SimConfig {
    SimConfig {
        fps: 1000.0 / period_ms,
        epoch_ms: 0.0,
        drop_step_gap_ms: 0.0,
        admission,
        ..SimConfig::default()
    }
}

/// How a choice (`follow` from `cluster`) does on the past `window` and
/// then, from the same present state, on `ahead` (the latest scene held):
/// the two replays' scores added.
pub(super) fn score_choice(
    system: &System,
    follow: &Follow,
    cluster: &Cluster,
    now: f64,
    window: &[Vec<u32>],
    ahead: &[Vec<u32>],
    cfg: &SimConfig,
) -> Option<Score> {
    let run = |frames: &[Vec<u32>]| {
        let mut follow = follow.clone();
        replay(system, &mut follow, cluster.clone(), now, frames, cfg)
    };
    let mut score = run(window)?;
    if !ahead.is_empty() {
        score += run(ahead)?;
    }
    Some(score)
}

/// The step timer's epoch, ms, or `None` without a timer (0 or not finite,
/// as the stepper passes it then).
pub(super) fn timer_epoch(epoch_ms: f64) -> Option<f64> {
    (epoch_ms.is_finite() && epoch_ms > 0.0).then_some(epoch_ms)
}

/// The mean of `frames` (request models only, as the replays take them),
/// rounded, as a scene of every model (detectors' entries 1, as in
/// `latest`); `latest` itself when there are no frames.
pub(super) fn mean_scene<'a>(
    system: &System,
    latest: &[u32],
    frames: impl Iterator<Item = &'a Vec<u32>>,
) -> Vec<u32> {
    let mut sum = vec![0.0; system.num_models()];
    let mut n = 0.0;
    for f in frames {
        for (i, &c) in system.request_models().zip(f) {
            sum[i.0] += f64::from(c);
        }
        n += 1.0;
    }
    if n == 0.0 {
        return latest.to_vec();
    }
    let mut out = latest.to_vec();
    for i in system.request_models() {
        let mean = sum[i.0] / n;
        // A type seen at all keeps a place, however rare.
        out[i.0] = if mean > 0.0 {
            mean.round().max(1.0) as u32
        } else {
            0
        };
    }
    out
}

/// The latest scene (request models only) held for the tuning's lookahead
/// epochs of frames at `period_ms`, capped at its replay frames; without a
/// timer an epoch is the `frames_per_epoch` offered since the last step.
pub(super) fn lookahead(
    system: &System,
    scene: &[u32],
    epoch_ms: f64,
    period_ms: f64,
    frames_per_epoch: f64,
    t: &Tuning,
) -> Vec<Vec<u32>> {
    let epoch_frames = timer_epoch(epoch_ms).map_or(frames_per_epoch, |e| e / period_ms);
    let n = (t.lookahead_epochs * epoch_frames).round();
    let n = if n.is_nan() {
        0
    } else {
        n.clamp(0.0, t.replay_frames as f64) as usize
    };
    let latest: Vec<u32> = system.request_models().map(|i| scene[i.0]).collect();
    vec![latest; n]
}
