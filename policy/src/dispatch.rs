//! The local dispatcher of Algorithm 1: for `w` waiting requests of model i,
//! take on each processor the first preferred batch size k <= w and pick
//! `argmin_j rem_j + t_e(i,j,k)/k + t_l(i,j) (1 - a(i,j))`.
//! O(n_p) per decision, no heap allocation. Another rule ranks hosts by the
//! batch's finish time, the same way; a third splits the `w` requests over
//! the hosts so the last finishes soonest, in O(w n_p) with one small
//! vector per decision ([`HostRule`]).
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
    /// Earliest finish of the whole group: the `waiting` requests are split
    /// over the hosts where the model is resident so that the last of them
    /// finishes soonest, and the piece that ends last is placed (the next
    /// call places the rest the same way). A frame's requests of one model then
    /// run side by side on every unit that speeds them up, instead of as
    /// one batch on the unit with the best time per request.
    GroupFinish,
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
    if rule == HostRule::GroupFinish {
        return group_split(system, cluster, now, i, waiting);
    }
    let mut best: Option<Decision> = None;
    for j in system.proc_ids() {
        if !cluster.can_host(system, i, j) {
            continue;
        }
        let k = preferred_fitting(system, i, j, waiting);
        let t = system.exec_ms(i, j, k);
        let run = match rule {
            HostRule::PerRequest => t / k as f64,
            // GroupFinish returned above.
            HostRule::FinishTime | HostRule::GroupFinish => t,
        };
        let load = cluster.load_cost_ms(system, i, j);
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

/// Time for `n` requests of model i on p_j run back to back in batches of
/// at most its largest profiled batch, ms.
fn group_exec_ms(system: &System, i: ModelId, j: ProcId, n: usize) -> f64 {
    let b = system.max_batch_on(i, j).max(1);
    let full = (n / b) as f64 * system.exec_ms(i, j, b);
    match n % b {
        0 => full,
        r => full + system.exec_ms(i, j, r),
    }
}

/// [`HostRule::GroupFinish`]: splits `waiting` requests of model i over the
/// hosts where i is resident, each starting after its queue, so that the
/// last finishes soonest, and returns the piece of the host that finishes
/// last (the one the group waits for), its batch capped at the largest
/// profiled. When i is resident nowhere usable, every host that can take it
/// is a candidate, starting after its load. Adding requests one at a time
/// to the host whose finish grows least is optimal for this min-max, since
/// each host's finish is non-decreasing in its count.
fn group_split(
    system: &System,
    cluster: &Cluster,
    now: f64,
    i: ModelId,
    waiting: usize,
) -> Option<Decision> {
    // Residency is the global step's: the split loads a model only where
    // it is resident nowhere the cluster can use.
    let resident_only = system
        .proc_ids()
        .any(|j| cluster.is_resident(i, j) && cluster.can_host(system, i, j));
    // (host, start, requests): each host starts after its queue and load.
    let mut hosts: Vec<(ProcId, f64, usize)> = system
        .proc_ids()
        .filter(|&j| cluster.can_host(system, i, j))
        .filter(|&j| !resident_only || cluster.is_resident(i, j))
        .map(|j| {
            (
                j,
                cluster.rem_ms(j, now) + cluster.load_cost_ms(system, i, j),
                0,
            )
        })
        .collect();
    // When host (j, start) would finish n requests.
    let finish = |j, start: f64, n| start + group_exec_ms(system, i, j, n);
    for _ in 0..waiting.max(1) {
        let next = hosts
            .iter_mut()
            .min_by(|a, b| finish(a.0, a.1, a.2 + 1).total_cmp(&finish(b.0, b.1, b.2 + 1)))?;
        next.2 += 1;
    }
    let &(proc, start, n) = hosts
        .iter()
        .filter(|h| h.2 > 0)
        .max_by(|a, b| finish(a.0, a.1, a.2).total_cmp(&finish(b.0, b.1, b.2)))?;
    Some(Decision {
        proc,
        batch: n.min(system.max_batch_on(i, proc).max(1)),
        cost_ms: finish(proc, start, n),
    })
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
        let load = cluster.load_cost_ms(system, i, j);
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
    fn the_group_split_spreads_a_group_so_its_last_request_finishes_soonest() {
        let system = pair();
        let mut cluster = Cluster::new(&system);
        cluster.run(&system, 0.0, A, SLOW, 1); // slow resident, idle from 45
        cluster.run(&system, 0.0, A, FAST, 1); // fast resident: 5 + 10
        cluster.run(&system, 0.0, A, FAST, 2); // 35
        cluster.run(&system, 0.0, A, FAST, 2); // 55
        cluster.run(&system, 0.0, A, FAST, 1); // 65: 20 ms behind at 45
        let now = 45.0;
        // Four requests, one at a time to the host whose finish grows least
        // (from now): fast 30, fast 40 (slow 40 ties, the first wins), fast
        // 50 (two batches: 20 + 20 + 10), slow 40. The group ends at 50 ms;
        // on the fast host alone it would end at 20 + 2 x 20 = 60.
        let mut placed = Vec::new();
        let mut waiting = 4;
        while waiting > 0 {
            let d = choose_host(&system, &cluster, HostRule::GroupFinish, now, A, waiting)
                .expect("a host");
            placed.push((d.proc, d.batch, d.cost_ms));
            cluster.run(&system, now, A, d.proc, d.batch);
            waiting -= d.batch;
        }
        // The host that ends the group first (its largest batch), then the
        // rest split again the same way.
        assert_eq!(
            placed,
            vec![(FAST, 2, 50.0), (FAST, 1, 50.0), (SLOW, 1, 40.0)],
            "{placed:?}"
        );
        // One request goes where it finishes first.
        let mut idle = Cluster::new(&system);
        idle.run(&system, 0.0, A, FAST, 1);
        idle.run(&system, 0.0, A, SLOW, 1);
        let d = choose_host(&system, &idle, HostRule::GroupFinish, 100.0, A, 1).expect("a host");
        assert_eq!((d.proc, d.batch, d.cost_ms), (FAST, 1, 10.0));
        // The split does not load: with the slow host free but not holding
        // the model, four requests stay on the fast one (30 ms behind: 30 +
        // 2 x 20), though a load there (5 + 40) would end the group at 60.
        let mut one = Cluster::new(&system);
        one.run(&system, 0.0, A, FAST, 1); // resident, busy until 15
        one.run(&system, 0.0, A, FAST, 1); // 25
        one.run(&system, 0.0, A, FAST, 1); // 35
        let d = choose_host(&system, &one, HostRule::GroupFinish, 5.0, A, 4).expect("a host");
        assert_eq!((d.proc, d.batch, d.cost_ms), (FAST, 2, 70.0));
        // Resident nowhere: every host that can take it, loads counted.
        let d = choose_host(
            &system,
            &Cluster::new(&system),
            HostRule::GroupFinish,
            0.0,
            A,
            1,
        )
        .expect("a host");
        assert_eq!((d.proc, d.batch, d.cost_ms), (FAST, 1, 15.0));
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
