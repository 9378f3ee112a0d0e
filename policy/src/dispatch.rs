//! The local dispatcher of Algorithm 1: for `w` waiting requests of model i,
//! take on each processor the first preferred batch size k <= w and pick
//! `argmin_j rem_j + t_e(i,j,k)/k + t_l(i,j) (1 - a(i,j))`.
//! O(n_p) per decision, no heap allocation.
//!
//! With late binding (a dispatch horizon), a batch whose chosen host is too
//! far behind is held; [`idle_taker`] decides whether a host that is nearly
//! idle should take it instead.

use crate::{Cluster, ModelId, ProcId, System};

/// The cost a host is ranked by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum HostRule {
    /// The paper's rule: rem_j + t_e(i,j,k)/k + t_l(i,j)(1 - a(i,j)).
    #[default]
    PerRequest,
    /// Earliest finish time of the batch: rem_j + t_e(i,j,k) + t_l(i,j)(1 - a(i,j)).
    FinishTime,
}

/// One dispatch decision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    /// The host p_j.
    pub proc: ProcId,
    /// Batch size k.
    pub batch: usize,
    /// The cost it won with, ms.
    pub cost_ms: f64,
}

/// Chooses host and batch size for up to `waiting` requests of model i at
/// `now`; `None` when no processor can host the model.
#[inline]
pub fn choose_host(
    system: &System,
    cluster: &Cluster,
    rule: HostRule,
    now: f64,
    i: ModelId,
    waiting: usize,
) -> Option<Decision> {
    let mut best: Option<Decision> = None;
    for j in system.proc_ids() {
        if !cluster.can_host(system, i, j) {
            continue;
        }
        let k = preferred_fitting(system, i, j, waiting);
        let t = system.exec_ms(i, j, k);
        let run = match rule {
            HostRule::PerRequest => t / k as f64,
            HostRule::FinishTime => t,
        };
        let load = if cluster.is_resident(i, j) {
            0.0
        } else {
            system.load_ms(i, j)
        };
        let cost = cluster.rem_ms(j, now) + run + load;
        if best.is_none_or(|b| cost < b.cost_ms) {
            best = Some(Decision {
                proc: j,
                batch: k,
                cost_ms: cost,
            });
        }
    }
    best
}

/// The first batch size in (i, j)'s preferred list that is <= `waiting`
/// (1 when waiting is 0).
#[inline]
pub fn preferred_fitting(system: &System, i: ModelId, j: ProcId, waiting: usize) -> usize {
    system
        .preferred_batches(i, j)
        .iter()
        .map(|&k| k as usize)
        .find(|&k| k <= waiting)
        .unwrap_or(1)
}

/// Late binding: the chosen host `chosen` of `waiting` held requests of
/// model i is more than `horizon_ms` behind, and `ahead_ms` of held work will
/// reach it before them. Returns the host within `horizon_ms` of idle that
/// finishes a batch of them soonest, if it finishes no later than `chosen`
/// would finish all of them; `None` leaves them held for `chosen`.
///
/// This is what keeps a slow processor busy without making it the tail of a
/// frame: it takes work only when the fast one would reach that work later.
#[allow(clippy::too_many_arguments)]
pub fn idle_taker(
    system: &System,
    cluster: &Cluster,
    now: f64,
    i: ModelId,
    waiting: usize,
    chosen: ProcId,
    ahead_ms: f64,
    horizon_ms: f64,
) -> Option<Decision> {
    let finish_on = |j: ProcId| {
        let k = preferred_fitting(system, i, j, waiting);
        let load = if cluster.is_resident(i, j) {
            0.0
        } else {
            system.load_ms(i, j)
        };
        (k, cluster.rem_ms(j, now) + load + system.exec_ms(i, j, k))
    };
    let (k, first) = finish_on(chosen);
    // The group's later batches follow its first on `chosen`.
    let rest = (waiting.saturating_sub(k)) as f64 * system.exec_ms(i, chosen, k) / k as f64;
    let chosen_finish = first + rest + ahead_ms;
    let mut best: Option<Decision> = None;
    for j in system.proc_ids() {
        if j == chosen || cluster.rem_ms(j, now) > horizon_ms || !cluster.can_host(system, i, j) {
            continue;
        }
        let (k, finish) = finish_on(j);
        if finish <= chosen_finish && best.is_none_or(|b| finish < b.cost_ms) {
            best = Some(Decision {
                proc: j,
                batch: k,
                cost_ms: finish,
            });
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fast and a slow processor, one classifier 4x slower on the slow one.
    fn pair() -> System {
        System::from_toml(
            r#"
name = "pair"
max_batch = 2
[[processor]]
name = "fast"
kind = "cpu"
max_resident = 2
[[processor]]
name = "slow"
kind = "cpu"
max_resident = 2
[[model]]
name = "detector"
[[model]]
name = "a"
parent = "detector"
classes = ["person"]
[profile.detector.fast]
exec_ms = [1.0]
load_ms = 1.0
[profile.a.fast]
exec_ms = [10.0, 20.0]
load_ms = 5.0
[profile.a.slow]
exec_ms = [40.0, 80.0]
load_ms = 5.0
"#,
        )
        .expect("valid system")
    }

    const A: ModelId = ModelId(1);
    const FAST: ProcId = ProcId(0);
    const SLOW: ProcId = ProcId(1);

    #[test]
    fn idle_slow_host_takes_work_the_fast_one_would_reach_later() {
        let system = pair();
        let mut cluster = Cluster::new(&system);
        cluster.run(&system, 0.0, A, FAST, 2); // fast busy until 25 (load + 20)
        cluster.run(&system, 0.0, A, SLOW, 1); // slow loaded, busy until 45
                                               // At 45 the slow host is idle, the fast one too: nothing to take.
        assert_eq!(
            idle_taker(&system, &cluster, 20.0, A, 1, FAST, 0.0, 5.0),
            None
        );
        // At 45 the fast host is 10 ms behind with 100 ms of held work
        // ahead: the idle slow one finishes one request in 40 ms, the fast
        // one would in 10 + 100 + 10.
        cluster.run(&system, 0.0, A, FAST, 2);
        cluster.run(&system, 0.0, A, FAST, 1);
        let d = idle_taker(&system, &cluster, 45.0, A, 1, FAST, 100.0, 5.0).expect("slow takes it");
        assert_eq!((d.proc, d.batch), (SLOW, 1));
        assert!((d.cost_ms - 40.0).abs() < 1e-9, "{d:?}");
    }

    #[test]
    fn slow_host_takes_a_batch_when_the_fast_one_would_finish_the_group_later() {
        let system = pair();
        let mut cluster = Cluster::new(&system);
        cluster.run(&system, 0.0, A, SLOW, 1); // slow resident, idle from 45
        cluster.run(&system, 0.0, A, FAST, 1); // fast resident, busy until 15
                                               // At 5 the fast host (10 behind) would finish 8 requests at
                                               // 10 + 4 x 20 = 90; the slow one finishes a batch of 2 at 40 + 80
                                               // = 120: no. At 45 (fast idle too, so 0 + 80 vs 0 + 80): yes.
        assert_eq!(
            idle_taker(&system, &cluster, 5.0, A, 8, FAST, 0.0, 50.0),
            None
        );
        let d = idle_taker(&system, &cluster, 45.0, A, 8, FAST, 0.0, 50.0).expect("slow takes 2");
        assert_eq!((d.proc, d.batch), (SLOW, 2));
        // Two requests: the fast host finishes both in 20, the slow one needs 80.
        assert_eq!(
            idle_taker(&system, &cluster, 45.0, A, 2, FAST, 0.0, 50.0),
            None
        );
    }

    #[test]
    fn slow_host_leaves_the_tail_to_the_fast_one() {
        let system = pair();
        let mut cluster = Cluster::new(&system);
        cluster.run(&system, 0.0, A, SLOW, 1); // slow resident, idle from 45
        cluster.run(&system, 0.0, A, FAST, 1); // fast busy until 15
                                               // At 5, nothing held ahead: the fast host finishes in 10 + 10 ms,
                                               // the slow one (40 ms behind, within the horizon) in 40 + 40: it
                                               // leaves the batch alone.
        assert_eq!(
            idle_taker(&system, &cluster, 5.0, A, 1, FAST, 0.0, 50.0),
            None
        );
        // A host further behind than the horizon never takes work.
        assert_eq!(
            idle_taker(&system, &cluster, 0.0, A, 1, FAST, 1000.0, 10.0),
            None
        );
    }
}
