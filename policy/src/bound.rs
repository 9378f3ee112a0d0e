//! Lower bounds: how fast could *any* schedule be? A frame's makespan and a
//! stream's sustainable frame rate, from the profile alone, so every
//! scheduler can be reported as a distance to the bound.
//!
//! - [`frame_bound`]: a frame's makespan is at least the longer of
//!   1. its **critical path**: each model's earliest finish on the best
//!      supporting processor for it, counting that processor's load cost
//!      when the model is not resident there (a load may start at the
//!      frame's arrival, before the parent finishes), after its parent's
//!      earliest finish;
//!   2. the **work split relaxation**: from the earliest moment a level of
//!      the graph can start, the work of that level and below, split
//!      fractionally over the processors at each one's best per-request time
//!      for batches that fit the frame (loads excluded), cannot end sooner
//!      than the optimum of that split (a small linear program);
//!   3. the **whole-request split**: a model's requests cannot all be done
//!      before its earliest start plus the best split of them, as whole
//!      requests, over the units that support it, each unit running its
//!      share in the fastest batches back to back (after its load when the
//!      model is not resident there) and the units side by side. The
//!      fractional split lets two requests share a unit's best per-request
//!      time; here a unit runs n requests in no less than the best
//!      partition of n into its profiled batches, so a frame with two
//!      requests for a model that one unit runs far faster than any other
//!      waits for both there, or for the slower unit.
//!
//!   All three ignore queued work, crops and hand-over costs, so the bound
//!   holds for idle units and any dispatcher.
//! - [`sustainable_fps`]: in steady state (loads excluded) the per-frame
//!   work, split fractionally over the processors at their best
//!   per-request time for any batch size (batches may mix frames), takes at
//!   least the split's optimum per frame: no schedule sustains more frames
//!   per second than 1000 / that.
//!
//! The split's linear program is `min T` s.t. `sum_j x_ij = 1`,
//! `sum_i x_ij w_ij <= T`, `x >= 0`, where `w_ij` is model i's whole work on
//! p_j. It is solved exactly through its dual, `max sum_i u_i` s.t.
//! `u_i <= w_ij y_j`, `sum_j y_j <= 1`, `u, y >= 0`, whose origin is
//! feasible (no phase one), by a dense simplex with Bland's rule; n_m x n_p
//! rows is at most a few dozen.

use crate::{ModelId, ProcId, System};

/// A frame's makespan lower bound and its two parts, ms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameBound {
    /// The critical path with the best processor per model and its load.
    pub critical_path_ms: f64,
    /// The work split relaxation (per level, after the level's earliest start).
    pub work_split_ms: f64,
    /// The whole-request split (per model, after its earliest start).
    pub whole_split_ms: f64,
}

impl FrameBound {
    /// The bound: the largest of the three parts, ms.
    pub fn bound_ms(&self) -> f64 {
        self.critical_path_ms
            .max(self.work_split_ms)
            .max(self.whole_split_ms)
    }
}

/// The lower bound on the makespan of one frame with `scene[i]` requests of
/// every model i (roots included, as [`crate::sim::full_scene`] gives),
/// started on idle units where `resident(i, j)` tells which models are
/// loaded. `f64::INFINITY` when a model with requests has no supporting
/// processor.
pub fn frame_bound(
    system: &System,
    scene: &[u32],
    resident: impl Fn(ModelId, ProcId) -> bool,
) -> FrameBound {
    let Paths {
        order,
        start,
        critical,
        whole,
    } = paths(system, scene, resident);
    let levels = order
        .iter()
        .map(|i| system.models[i.0].level)
        .max()
        .map_or(0, |l| l + 1);
    let mut split = 0.0f64;
    for level in 0..levels {
        let at_or_below: Vec<ModelId> = order
            .iter()
            .copied()
            .filter(|i| system.models[i.0].level >= level)
            .collect();
        let begin = at_or_below
            .iter()
            .filter(|i| system.models[i.0].level == level)
            .map(|i| start[i.0])
            .fold(f64::INFINITY, f64::min);
        if !begin.is_finite() {
            continue;
        }
        let work: Vec<Vec<f64>> = at_or_below
            .iter()
            .map(|&i| {
                let r = scene[i.0] as usize;
                system
                    .proc_ids()
                    .map(|j| r as f64 * per_request_ms(system, i, j, r))
                    .collect()
            })
            .collect();
        split = split.max(begin + min_split_ms(&work));
    }
    FrameBound {
        critical_path_ms: critical,
        work_split_ms: split,
        whole_split_ms: whole,
    }
}

/// The parts of [`frame_bound`] that depend on the residency: the models
/// with requests (parents first), each one's earliest start, the critical
/// path and the whole-request split.
struct Paths {
    order: Vec<ModelId>,
    start: Vec<f64>,
    critical: f64,
    whole: f64,
}

fn paths(system: &System, scene: &[u32], resident: impl Fn(ModelId, ProcId) -> bool) -> Paths {
    // Earliest finish of each model's first batch, parents before children
    // (a parent's level is lower than its children's).
    let mut order: Vec<ModelId> = system.model_ids().filter(|i| scene[i.0] > 0).collect();
    order.sort_by_key(|i| system.models[i.0].level);
    let mut finish = vec![0.0f64; system.num_models()];
    let mut start = vec![0.0f64; system.num_models()];
    let mut critical = 0.0f64;
    let mut whole = 0.0f64;
    for &i in &order {
        let ready = system.models[i.0].parent.map_or(0.0, |p| finish[p.0]);
        start[i.0] = ready;
        let r = scene[i.0] as usize;
        finish[i.0] = system
            .supporting(i)
            .map(|j| {
                let load = if resident(i, j) {
                    0.0
                } else {
                    system.load_ms(i, j)
                };
                let run = (1..=r.min(system.max_batch))
                    .map(|k| system.exec_ms(i, j, k))
                    .fold(f64::INFINITY, f64::min);
                ready.max(load) + run
            })
            .fold(f64::INFINITY, f64::min);
        critical = critical.max(finish[i.0]);
        whole = whole.max(whole_split_finish_ms(system, i, r, ready, &resident));
    }
    Paths {
        order,
        start,
        critical,
        whole,
    }
}

/// Most residencies [`frame_bound_within_slots`] looks at for one frame;
/// beyond it, it takes every model resident everywhere (a weaker bound).
pub const MAX_LAYOUTS: usize = 1 << 14;

/// A frame's makespan bound whatever the residency it is met with, as long
/// as no unit holds more than its N_j models: the least [`frame_bound`]
/// over every residency the units can hold at once (loads counted for the
/// models not resident). [`frame_bound`] with every model resident on every
/// unit is lower and ignores N_j; on a board whose units hold few models a
/// frame that needs more of them pays loads or slower units, and this
/// counts it. Only models with requests matter, and a unit holding more of
/// them never raises the bound, so each unit that supports more of the
/// frame's models than it holds takes each set of N_j of them in turn. The
/// work split relaxation is taken once, from the levels' earliest starts
/// with everything resident (lower than under any residency). More than
/// [`MAX_LAYOUTS`] residencies, or more than 64 models: every model
/// resident everywhere.
pub fn frame_bound_within_slots(system: &System, scene: &[u32]) -> f64 {
    let free = frame_bound(system, scene, |i, j| system.supports(i, j));
    let floor = free.bound_ms();
    if system.num_models() > 64 || !floor.is_finite() {
        return floor;
    }
    // Per unit, the sets of the frame's models it may hold (bit i: model i).
    let mut layouts: Vec<Vec<u64>> = Vec::with_capacity(system.num_processors());
    let mut count = 1usize;
    for j in system.proc_ids() {
        let wanted: Vec<usize> = system
            .model_ids()
            .filter(|i| scene[i.0] > 0 && system.supports(*i, j))
            .map(|i| i.0)
            .collect();
        let slots = system.processors[j.0].max_resident.max(1);
        let sets = if wanted.len() <= slots {
            vec![wanted.iter().fold(0u64, |m, &i| m | 1 << i)]
        } else {
            subsets_of_size(&wanted, slots)
        };
        count = count.saturating_mul(sets.len());
        if count > MAX_LAYOUTS {
            return floor;
        }
        layouts.push(sets);
    }
    let mut pick = vec![0usize; layouts.len()];
    let mut best = f64::INFINITY;
    loop {
        let p = paths(system, scene, |i, j| {
            layouts[j.0][pick[j.0]] >> i.0 & 1 == 1
        });
        best = best.min(p.critical.max(p.whole).max(free.work_split_ms));
        if best <= floor {
            return floor;
        }
        // Next residency (an odometer over the units' sets).
        let mut u = 0;
        loop {
            if u == pick.len() {
                return best;
            }
            pick[u] += 1;
            if pick[u] < layouts[u].len() {
                break;
            }
            pick[u] = 0;
            u += 1;
        }
    }
}

/// Every set of `size` of `items` (bit positions), as bit masks.
fn subsets_of_size(items: &[usize], size: usize) -> Vec<u64> {
    let mut out = Vec::new();
    let mut idx: Vec<usize> = (0..size).collect();
    loop {
        out.push(idx.iter().fold(0u64, |m, &k| m | 1 << items[k]));
        // Next combination in lexicographic order.
        let Some(p) = (0..size).rev().find(|&p| idx[p] < items.len() - size + p) else {
            return out;
        };
        idx[p] += 1;
        for q in p + 1..size {
            idx[q] = idx[q - 1] + 1;
        }
    }
}

/// The earliest all `r` requests of model i can be done when none can start
/// before `ready` (and none on a unit before its load when i is not resident
/// there, a load starting at the frame's arrival): the least, over splits of
/// the requests into whole shares n_j, of the latest unit's finish, a unit
/// running its share in batches back to back ([`least_run_ms`]).
///
/// With f_j(n) the finish of n requests on p_j, non-decreasing in n, a
/// split's latest finish is at least the r-th smallest of all the f_j(n)
/// (its r requests each bring one value no later than it), and taking the r
/// smallest is a split: the r-th smallest is the optimum. `f64::INFINITY`
/// when no unit supports i.
fn whole_split_finish_ms(
    system: &System,
    i: ModelId,
    r: usize,
    ready: f64,
    resident: impl Fn(ModelId, ProcId) -> bool,
) -> f64 {
    if r == 0 {
        return 0.0;
    }
    let mut finishes: Vec<f64> = Vec::with_capacity(r * system.num_processors());
    for j in system.supporting(i) {
        let start = if resident(i, j) {
            ready
        } else {
            ready.max(system.load_ms(i, j))
        };
        finishes.extend(least_run_ms(system, i, j, r).into_iter().map(|t| start + t));
    }
    if finishes.len() < r {
        return f64::INFINITY;
    }
    *finishes.select_nth_unstable_by(r - 1, f64::total_cmp).1
}

/// The least time p_j needs to run n requests of model i, for n = 1..=r:
/// the best partition of n into profiled batch sizes (exact for any batch
/// curve, concave or not), then lowered to the least over n..=r so that it
/// never falls as n grows (a lower value keeps it a bound).
fn least_run_ms(system: &System, i: ModelId, j: ProcId, r: usize) -> Vec<f64> {
    let b = system.max_batch_on(i, j);
    let mut t = vec![f64::INFINITY; r + 1];
    t[0] = 0.0;
    for n in 1..=r {
        t[n] = (1..=b.min(n))
            .map(|k| t[n - k] + system.exec_ms(i, j, k))
            .fold(f64::INFINITY, f64::min);
    }
    for n in (1..r).rev() {
        t[n] = t[n].min(t[n + 1]);
    }
    t.remove(0);
    t
}

/// The highest frame rate any schedule could sustain on a stream whose
/// frames bring `mean_scene[i]` requests of every model i on average (roots
/// included; fractional means allowed), in frames per second: 1000 / the
/// per-frame work split at each processor's best per-request time, loads
/// excluded (steady state). `f64::INFINITY` for a stream with no work, 0
/// when a model with requests has no supporting processor.
pub fn sustainable_fps(system: &System, mean_scene: &[f64]) -> f64 {
    let work: Vec<Vec<f64>> = system
        .model_ids()
        .filter(|i| mean_scene[i.0] > 0.0)
        .map(|i| {
            system
                .proc_ids()
                .map(|j| mean_scene[i.0] * per_request_ms(system, i, j, system.max_batch))
                .collect()
        })
        .collect();
    1000.0 / min_split_ms(&work)
}

/// The best time per request of model i on p_j over batch sizes up to
/// `max_k`: min t_e(i,j,k)/k, ms (`f64::INFINITY` when unsupported).
pub fn per_request_ms(system: &System, i: ModelId, j: ProcId, max_k: usize) -> f64 {
    (1..=max_k.min(system.max_batch))
        .map(|k| system.exec_ms(i, j, k) / k as f64)
        .fold(f64::INFINITY, f64::min)
}

/// The optimum of the fractional work split: `work[i][j]` is item i's whole
/// work if p_j did all of it (`f64::INFINITY`: p_j cannot); returns the least
/// T such that the items can be split over the processors with none busy
/// longer than T, ms. 0 for no items; `f64::INFINITY` when an item has no
/// processor.
pub fn min_split_ms(work: &[Vec<f64>]) -> f64 {
    let items: Vec<&Vec<f64>> = work.iter().filter(|w| w.iter().any(|&x| x > 0.0)).collect();
    if items.is_empty() {
        return 0.0;
    }
    if items.iter().any(|w| w.iter().all(|x| !x.is_finite())) {
        return f64::INFINITY;
    }
    let n = items.len();
    let p = items[0].len();
    // Dual: variables u_0..u_{n-1}, y_0..y_{p-1}; rows u_i - w_ij y_j <= 0
    // for every finite w_ij, and sum_j y_j <= 1.
    let mut rows: Vec<(Vec<f64>, f64)> = Vec::new();
    for (i, w) in items.iter().enumerate() {
        for (j, &wij) in w.iter().enumerate() {
            if wij.is_finite() {
                let mut a = vec![0.0; n + p];
                a[i] = 1.0;
                a[n + j] = -wij;
                rows.push((a, 0.0));
            }
        }
    }
    let mut a = vec![0.0; n + p];
    a[n..].fill(1.0);
    rows.push((a, 1.0));
    let mut c = vec![0.0; n + p];
    c[..n].fill(1.0);
    maximise(&c, &rows)
}

/// `max c.z` s.t. `a_r.z <= b_r` (every b_r >= 0), `z >= 0`, by a dense
/// tableau simplex with Bland's rule (no cycling on these degenerate rows).
/// The problems here are bounded; an unbounded one returns infinity.
fn maximise(c: &[f64], rows: &[(Vec<f64>, f64)]) -> f64 {
    const EPS: f64 = 1e-12;
    let (m, nv) = (rows.len(), c.len());
    let width = nv + m + 1;
    // Row r: a_r, slack e_r, rhs. Objective row: -c, 0, value.
    let mut t: Vec<Vec<f64>> = rows
        .iter()
        .enumerate()
        .map(|(r, (a, b))| {
            let mut row = vec![0.0; width];
            row[..nv].copy_from_slice(a);
            row[nv + r] = 1.0;
            row[width - 1] = *b;
            row
        })
        .collect();
    let mut obj = vec![0.0; width];
    for (o, &cv) in obj.iter_mut().zip(c) {
        *o = -cv;
    }
    let mut basis: Vec<usize> = (nv..nv + m).collect();
    let scale = rows
        .iter()
        .flat_map(|(a, _)| a.iter())
        .fold(1.0f64, |s, x| s.max(x.abs()));
    let tol = EPS * scale;
    loop {
        let Some(col) = (0..width - 1).find(|&k| obj[k] < -tol) else {
            return obj[width - 1];
        };
        let mut pick: Option<(usize, f64)> = None;
        for (r, row) in t.iter().enumerate() {
            if row[col] > tol {
                let ratio = row[width - 1] / row[col];
                let better = match pick {
                    None => true,
                    Some((pr, best)) => {
                        ratio < best - tol || (ratio <= best + tol && basis[r] < basis[pr])
                    }
                };
                if better {
                    pick = Some((r, ratio));
                }
            }
        }
        let Some((r, _)) = pick else {
            return f64::INFINITY;
        };
        let pivot = t[r][col];
        for x in t[r].iter_mut() {
            *x /= pivot;
        }
        let prow = t[r].clone();
        for (q, row) in t.iter_mut().enumerate() {
            if q != r && row[col].abs() > 0.0 {
                let f = row[col];
                for (x, &pv) in row.iter_mut().zip(&prow) {
                    *x -= f * pv;
                }
            }
        }
        let f = obj[col];
        for (x, &pv) in obj.iter_mut().zip(&prow) {
            *x -= f * pv;
        }
        basis[r] = col;
    }
}

#[cfg(test)]
#[path = "bound_tests.rs"]
mod tests;
