//! Deadline admission: before a frame's requests are placed, whether it can
//! still be answered by its deadline; one that cannot is answered at once as
//! dropped instead of taking processor time from frames that can.
//!
//! A frame's earliest answer is the earliest moment any unit is free (after
//! the work already queued on it) plus its makespan lower bound on idle units
//! with the current residency ([`crate::bound::frame_bound`]), with every
//! t_e taken at mean + z standard deviations of the live estimates
//! ([`tail_view`]): z = 0 drops only frames that would miss even at the
//! estimates' mean; a larger z admits a frame only when it makes its deadline
//! although its batches run at the slow end of what they have been running at.

use crate::bound::frame_bound;
use crate::estimate::LiveEstimates;
use crate::{Cluster, System};

/// How camera frames enter the pipeline: the daemon's admission rules.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FrameAdmission {
    /// Real-time dropping, the daemon's `pipeline.drop_behind_ms`, ms
    /// (`None`: one frame period): a frame whose detector could not start
    /// within this long is dropped at its arrival
    /// ([`detector_behind`]); one whose detector ran is
    /// dropped before its objects start when the pipeline is further behind
    /// than this less the frame's age ([`behind_at_fan_out`]).
    Behind(Option<f64>),
    /// The daemon's `pipeline.max_in_flight` alone (no `drop_behind_ms`):
    /// at most this many frames are in the pipeline; a frame arriving while
    /// it is full waits, and a newer frame supersedes it (the older one is
    /// dropped, newest wins, as the server's pending table does). A waiting
    /// frame enters when a frame in the pipeline is answered, its delay
    /// counted from its arrival.
    InFlight(usize),
    /// Every frame enters at its arrival however far behind the pipeline is:
    /// the paper's no-drop mode ([`crate::sim::SimConfig::no_drop`]).
    QueueAll,
}

/// Knobs of deadline admission.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeadlineAdmission {
    /// Every t_e is taken at the live estimates' mean + this many standard
    /// deviations (without adaptation there is no spread: the profile's t_e).
    pub tail_z: f64,
    /// The deadline from a frame's arrival, ms (`None`: two frame periods).
    pub deadline_ms: Option<f64>,
}

/// The earliest a frame with `scene[i]` requests of every model i (roots
/// included when they still have to run) can be answered, ms after `now`,
/// planned with `view`'s timings.
pub fn earliest_answer_ms(view: &System, cluster: &Cluster, scene: &[u32], now: f64) -> f64 {
    let free = view
        .proc_ids()
        .map(|j| cluster.rem_ms(j, now))
        .fold(f64::INFINITY, f64::min);
    let bound = frame_bound(view, scene, |i, j| cluster.is_resident(i, j)).bound_ms();
    free.max(0.0) + bound
}

/// Whether that frame can be answered within `time_left_ms`.
pub fn reachable(
    view: &System,
    cluster: &Cluster,
    scene: &[u32],
    now: f64,
    time_left_ms: f64,
) -> bool {
    earliest_answer_ms(view, cluster, scene, now) <= time_left_ms
}

/// Real-time dropping's first stage, at a frame's arrival: whether its
/// detector could not start within `limit_ms` of `now` on any unit that
/// runs it (the unit's queued work, plus `held_ms` of work placed requests
/// still wait for ([`crate::late_binding::Placer::held_work_ms`]), plus the
/// detector's load there when it is not resident). Such a frame is dropped
/// before it costs any work. A load counts only while some unit holds the
/// detector: when none does, a load is the only way to answer any frame,
/// and dropping every frame for it would never start it. Any other frame is
/// detected, and [`behind_at_fan_out`] decides whether its objects are worth
/// the pipeline's time: a frame with no objects is answered whatever the
/// classifiers' backlog.
pub fn detector_behind(
    system: &System,
    cluster: &Cluster,
    held_ms: f64,
    now: f64,
    limit_ms: f64,
) -> bool {
    system.roots().all(|i| {
        let resident_somewhere = system.supporting(i).any(|j| cluster.is_resident(i, j));
        system.supporting(i).all(|j| {
            let load = if cluster.is_resident(i, j) || !resident_somewhere {
                0.0
            } else {
                system.load_ms(i, j)
            };
            cluster.rem_ms(j, now) + held_ms + load > limit_ms
        })
    })
}

/// Real-time dropping's second stage, once a frame's detector ran and
/// before any of its objects starts: whether the frame, `waited_ms` after
/// its arrival, finds some unit's queued work
/// ([`Cluster::queued_work_ms`]), plus `held_ms` of held work
/// ([`crate::late_binding::Placer::held_work_ms`]), over what is left of
/// `limit_ms`. Such a
/// frame is dropped with its detections instead of making the frames
/// already in the pipeline late. The age counts: a frame that waited for
/// its detector has that much less slack. The rest a utilisation cap adds
/// does not: the rest after the frame's own detector would count against
/// it.
pub fn behind_at_fan_out(
    system: &System,
    cluster: &Cluster,
    held_ms: f64,
    now: f64,
    waited_ms: f64,
    limit_ms: f64,
) -> bool {
    system
        .proc_ids()
        .any(|j| cluster.queued_work_ms(j, now) + held_ms > limit_ms - waited_ms)
}

/// Deadline admission as the simulator and the daemon run it: the tail
/// view is rebuilt only when the scheduler's view changed since the last
/// decision (every estimate update goes through `System::set_pair_timings`,
/// which bumps `System::generation`), not for every frame.
#[derive(Clone, Debug)]
pub struct Admission {
    /// Standard deviations over the mean taken for every t_e.
    tail_z: f64,
    /// The tail view and the generation of the view it was built from.
    cached: Option<(u64, System)>,
}

impl Admission {
    /// Admission at mean + `tail_z` standard deviations.
    pub fn new(tail_z: f64) -> Self {
        Admission {
            tail_z,
            cached: None,
        }
    }

    /// Whether a frame with `scene` can be answered within `time_left_ms`
    /// of `now`, planned with `view` (the scheduler's view of the profile),
    /// its t_e at the tail of `estimates` when there are any (without
    /// adaptation, the view's own times).
    pub fn admits(
        &mut self,
        view: &System,
        estimates: Option<&LiveEstimates>,
        cluster: &Cluster,
        scene: &[u32],
        now: f64,
        time_left_ms: f64,
    ) -> bool {
        let planned = match estimates {
            Some(est) if self.tail_z != 0.0 => {
                let fresh = matches!(&self.cached, Some((g, _)) if *g == view.generation());
                if !fresh {
                    self.cached = Some((view.generation(), tail_view(view, est, self.tail_z)));
                }
                &self.cached.as_ref().expect("built above").1
            }
            _ => view,
        };
        reachable(planned, cluster, scene, now, time_left_ms)
    }
}

/// `view` with every supported t_e(i,j,k) at the estimates' mean + `z`
/// standard deviations (its load times as they are).
pub fn tail_view(view: &System, estimates: &LiveEstimates, z: f64) -> System {
    let mut tail = view.clone();
    for i in view.model_ids() {
        for j in view.supporting(i) {
            let exec: Vec<f64> = (1..=view.max_batch_on(i, j))
                .map(|k| view.exec_ms(i, j, k) + z * estimates.exec_sd_ms(i, j, k))
                .collect();
            tail.set_pair_timings(i, j, &exec, view.load_ms(i, j));
        }
    }
    tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::tests::board;
    use crate::estimate::EstimateConfig;
    use crate::{ModelId, ProcId};

    const A: ModelId = ModelId(1);

    #[test]
    fn the_earliest_answer_waits_for_the_first_free_unit_and_counts_loads() {
        let system = board();
        let mut cluster = Cluster::new(&system);
        // Nothing resident: the detector's load (100 ms) and run (20 ms) on
        // the CPU, then model a's 4 whole requests, whose loads started at
        // arrival and are over by then: the GPU runs them as one batch in
        // 10 ms, and no split with the CPU (one request 10 ms) ends sooner.
        // That is above the fractional split at the best per-request times
        // (8.5 ms on the CPU, 2.5 on the GPU): 4 / (1/8.5 + 1/2.5) = 7.7.
        let scene = [1, 4];
        let idle = earliest_answer_ms(&system, &cluster, &scene, 0.0);
        assert!((idle - 130.0).abs() < 1e-9, "{idle}");
        // Both units busy: the answer moves by the earliest free one's wait.
        cluster.run(&system, 0.0, A, ProcId(0), 4); // CPU: load 50 + 34
        cluster.run(&system, 0.0, A, ProcId(1), 4); // GPU: load 80 + 10
        let busy = earliest_answer_ms(&system, &cluster, &scene, 0.0);
        assert!(busy >= 84.0 + 20.0, "{busy}");
        assert!(reachable(&system, &cluster, &scene, 0.0, busy));
        assert!(!reachable(&system, &cluster, &scene, 0.0, busy - 1.0));
    }

    #[test]
    fn the_tail_view_adds_z_spreads_and_only_where_observed() {
        let system = board();
        let mut est = LiveEstimates::new(&system, EstimateConfig::default());
        for x in [4.0, 6.0, 4.0, 6.0, 4.0, 6.0] {
            est.observe_exec(A, ProcId(1), 1, x);
        }
        let sd = est.exec_sd_ms(A, ProcId(1), 1);
        assert!(sd > 0.5, "{sd}");
        let tail = tail_view(&system, &est, 2.0);
        let t = tail.exec_ms(A, ProcId(1), 1);
        assert!((t - (system.exec_ms(A, ProcId(1), 1) + 2.0 * sd)).abs() < 1e-9);
        // z = 0 is the view itself.
        let same = tail_view(&system, &est, 0.0);
        assert_eq!(
            same.exec_ms(A, ProcId(1), 1),
            system.exec_ms(A, ProcId(1), 1)
        );
    }
}
