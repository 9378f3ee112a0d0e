//! Local search over a feasible plan: per (model, processor) request counts
//! n(i,j), each batched by an exact min-cost composition, improved by moving
//! 1..=n_b requests of one model between hosts while the makespan (then the
//! total finish time, to cross plateaus) strictly improves.
//!
//! With the split n(i,j) fixed, the cheapest batching of each pair is optimal
//! for the makespan, so the ILP optimum is a split plus that batching; the
//! search walks splits. Buffers are allocated once per system.

use crate::{Detector, ModelId, Plan, PlanInput, ProcId, System};

/// Largest n(i,j) the batching tables cover; scenes beyond it skip the search.
pub const MAX_REQUESTS: usize = 64;

/// Most improving moves applied per plan (each is O(n_m n_p^2 n_b)).
const MAX_MOVES: usize = 200;

/// The default share floor of [`Search::by_weights`]: a host given less
/// than half a request is dropped.
pub const DEFAULT_MIN_SHARE: f64 = 0.5;

/// Precomputed batching tables and reusable state for one system.
#[derive(Clone, Debug)]
pub struct Search {
    nm: usize,
    np: usize,
    /// cost[(i*np+j)*(C+1)+n]: least t_e sum for n requests of i on j.
    cost: Vec<f64>,
    /// last[...]: the batch size of one batch of an optimal composition.
    last: Vec<u8>,
    n: Vec<u32>,
    res: Vec<bool>,
    work: Vec<f64>,
    ready: Vec<f64>,
    count: Vec<usize>,
    mem: Vec<f64>,
    /// [`System::generation`] the tables were built from.
    generation: u64,
    /// Share floor of [`Search::by_weights`], requests.
    min_share: f64,
    /// How [`Search::by_weights`] gives out the requests its floor shares leave.
    rounding: Rounding,
}

/// How [`Search::by_weights`] gives out the requests left after each host's
/// whole share (the floor of r_i w(i,j) / sum w).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rounding {
    /// To the hosts with the largest fractional shares.
    #[default]
    LargestRemainder,
    /// One by one, to the host whose processor would finish first with it,
    /// the request whose earliest finish is latest first (the max-min
    /// heuristic): a fraction of a request never costs a slow unit a batch
    /// and a load the model's other host takes for a few ms.
    LeastFinish,
}

impl Search {
    /// Builds the batching tables of `system`.
    pub fn new(system: &System) -> Self {
        let (nm, np) = (system.num_models(), system.num_processors());
        let c = MAX_REQUESTS + 1;
        let mut cost = vec![f64::INFINITY; nm * np * c];
        let mut last = vec![0u8; nm * np * c];
        for i in system.model_ids() {
            for j in system.supporting(i) {
                let base = (i.0 * np + j.0) * c;
                cost[base] = 0.0;
                for n in 1..c {
                    for k in 1..=system.max_batch_on(i, j).min(n) {
                        let v = cost[base + n - k] + system.exec_ms(i, j, k);
                        if v < cost[base + n] {
                            cost[base + n] = v;
                            last[base + n] = k as u8;
                        }
                    }
                }
            }
        }
        Search {
            nm,
            np,
            cost,
            last,
            n: vec![0; nm * np],
            res: vec![false; nm * np],
            work: vec![0.0; np],
            ready: vec![0.0; np],
            count: vec![0; np],
            mem: vec![0.0; np],
            generation: system.generation(),
            min_share: DEFAULT_MIN_SHARE,
            rounding: Rounding::default(),
        }
    }

    /// Sets the share floor of [`Search::by_weights`]: a host whose share of
    /// a model's requests is under `min_share` requests is dropped (unless it
    /// is the model's largest). A learned policy's sidecar carries the floor
    /// calibrated on its training demonstrations.
    pub fn set_min_share(&mut self, min_share: f64) {
        self.min_share = min_share;
    }

    /// Sets how [`Search::by_weights`] gives out the requests the whole
    /// shares leave ([`Rounding`]); a learned policy's sidecar carries the
    /// one calibrated on its training demonstrations.
    pub fn set_rounding(&mut self, rounding: Rounding) {
        self.rounding = rounding;
    }

    /// Share decoding: reads n(i,j) = sum_k k b_k(i,j) of a raw plan as
    /// request shares and decodes them with [`Search::by_weights`].
    pub fn by_shares(&self, system: &System, input: &PlanInput, raw: &Plan) -> Option<Plan> {
        let weights: Vec<f64> = system
            .model_ids()
            .flat_map(|i| system.proc_ids().map(move |j| raw.served_on(i, j) as f64))
            .collect();
        self.by_weights(system, input, raw, &weights)
    }

    /// Decodes non-negative request weights w(i,j) (row-major, model by
    /// processor) into a plan: each model's r_i requests are split in
    /// proportion to its weights (after dropping hosts whose share is under
    /// the floor, half a request unless set by [`Search::set_min_share`];
    /// each kept host gets its whole share, the requests left go by
    /// [`Search::set_rounding`]; a model with no weight keeps none, for
    /// repair to place), and every pair is batched by its min-cost
    /// composition. Residency follows the batches, plus `roots`'
    /// residency of the root models. `None` beyond the tables.
    pub fn by_weights(
        &self,
        system: &System,
        input: &PlanInput,
        roots: &Plan,
        weights: &[f64],
    ) -> Option<Plan> {
        if system.num_models() != self.nm
            || system.num_processors() != self.np
            || weights.len() != self.nm * self.np
        {
            return None;
        }
        let mut out = Plan::empty(system);
        for r in system.roots() {
            for j in system.proc_ids() {
                out.set_resident(r, j, roots.resident(r, j));
            }
        }
        // Each model's floor shares, and its hosts left after the floor.
        let mut shares = vec![0u32; self.nm * self.np];
        let mut kept = vec![0.0f64; self.nm * self.np];
        let mut left = vec![0u32; self.nm];
        let mut rest = vec![0.0f64; self.nm * self.np];
        for i in system.request_models() {
            let want = input.scene[i.0];
            if want as usize > MAX_REQUESTS {
                return None;
            }
            let raw_w = |j: usize| {
                let v = weights[i.0 * self.np + j];
                if v.is_finite() && v > 0.0 && system.supports(i, ProcId(j)) {
                    v
                } else {
                    0.0
                }
            };
            let raw_total: f64 = (0..self.np).map(raw_w).sum();
            if raw_total <= 0.0 || want == 0 {
                continue;
            }
            // A host whose share is under the floor is dropped (it would cost
            // a residency, often a load, and a batch of its own for a fraction
            // of a request), unless it is the model's largest.
            let top = (0..self.np)
                .max_by(|&a, &b| raw_w(a).total_cmp(&raw_w(b)).then(b.cmp(&a)))
                .expect("n_p >= 1");
            for j in 0..self.np {
                if j == top || want as f64 * raw_w(j) / raw_total >= self.min_share {
                    kept[i.0 * self.np + j] = raw_w(j);
                }
            }
            let total: f64 = (0..self.np).map(|j| kept[i.0 * self.np + j]).sum();
            let mut given = 0u32;
            for j in 0..self.np {
                let x = i.0 * self.np + j;
                let exact = want as f64 * kept[x] / total;
                shares[x] = exact.floor() as u32;
                rest[x] = exact - exact.floor();
                given += shares[x];
            }
            left[i.0] = want - given;
        }
        match self.rounding {
            Rounding::LargestRemainder => {
                self.round_by_remainder(system, &kept, &left, &mut rest, &mut shares)
            }
            Rounding::LeastFinish => self.round_by_finish(system, input, &kept, &left, &mut shares),
        }
        for i in system.request_models() {
            for j in system.proc_ids() {
                let x = i.0 * self.np + j.0;
                if shares[x] == 0 {
                    continue;
                }
                out.set_resident(i, j, true);
                let base = x * (MAX_REQUESTS + 1);
                let mut n = shares[x] as usize;
                while n > 0 {
                    let k = self.last[base + n] as usize;
                    out.set_batches(i, j, k, out.batches(i, j, k) + 1);
                    n -= k;
                }
            }
        }
        Some(out)
    }

    /// [`Rounding::LargestRemainder`]: gives each model's `left` requests to
    /// the hosts it `kept` with the largest fractional shares `rest`.
    fn round_by_remainder(
        &self,
        system: &System,
        kept: &[f64],
        left: &[u32],
        rest: &mut [f64],
        shares: &mut [u32],
    ) {
        for i in system.request_models() {
            let x = |j: usize| i.0 * self.np + j;
            for _ in 0..left[i.0] {
                let j = (0..self.np)
                    .filter(|&j| kept[x(j)] > 0.0)
                    .max_by(|&a, &b| rest[x(a)].total_cmp(&rest[x(b)]).then(b.cmp(&a)))
                    .expect("a request left implies a kept host");
                shares[x(j)] += 1;
                rest[x(j)] = -1.0;
            }
        }
    }

    /// [`Rounding::LeastFinish`]: gives each model's `left` requests, one at
    /// a time, to the host among those it `kept` whose processor would
    /// finish first with it (queued work, the detector, the whole shares'
    /// batches and amortised loads, as the makespan counts them), in
    /// max-min order.
    fn round_by_finish(
        &self,
        system: &System,
        input: &PlanInput,
        kept: &[f64],
        left: &[u32],
        shares: &mut [u32],
    ) {
        let np = self.np;
        let d = detector_done_ms(system, input);
        let mut finish: Vec<f64> = input.rem_ms.iter().map(|r| r.max(d)).collect();
        let added = |i: usize, j: usize, n: u32| {
            self.pair_cost(i, j, n + 1) - self.pair_cost(i, j, n)
                + if n == 0 {
                    self.load(system, input, i, j)
                } else {
                    0.0
                }
        };
        for i in system.request_models() {
            for j in 0..np {
                let n = shares[i.0 * np + j];
                if n > 0 {
                    finish[j] += self.pair_cost(i.0, j, n) + self.load(system, input, i.0, j);
                }
            }
        }
        // Max-min: of every model's next request at its earliest-finishing
        // kept host, the one that still finishes latest goes first; the
        // requests that are hard to place anywhere set the makespan, and
        // the easy ones fill in around them.
        let mut left = left.to_vec();
        loop {
            let mut pick: Option<(usize, usize, f64)> = None;
            for i in system.request_models() {
                if left[i.0] == 0 {
                    continue;
                }
                let after = |j: usize| finish[j] + added(i.0, j, shares[i.0 * np + j]);
                let Some(j) = (0..np)
                    .filter(|&j| kept[i.0 * np + j] > 0.0)
                    .min_by(|&a, &b| after(a).total_cmp(&after(b)).then(a.cmp(&b)))
                else {
                    continue;
                };
                if pick.is_none_or(|(_, _, latest)| after(j) > latest) {
                    pick = Some((i.0, j, after(j)));
                }
            }
            let Some((i, j, end)) = pick else {
                return;
            };
            finish[j] = end;
            shares[i * np + j] += 1;
            left[i] -= 1;
        }
    }

    fn pair_cost(&self, i: usize, j: usize, n: u32) -> f64 {
        self.cost[(i * self.np + j) * (MAX_REQUESTS + 1) + n as usize]
    }

    fn load(&self, system: &System, input: &PlanInput, i: usize, j: usize) -> f64 {
        input.amortised_load_ms(system, ModelId(i), ProcId(j))
    }

    /// Rebuilds the batching tables if `system`'s timings changed since
    /// (live estimates: [`System::set_pair_timings`]).
    pub fn refresh(&mut self, system: &System) {
        if system.generation() != self.generation {
            let (min_share, rounding) = (self.min_share, self.rounding);
            *self = Search::new(system);
            self.min_share = min_share;
            self.rounding = rounding;
        }
    }

    /// Re-batches a feasible plan optimally per pair and improves its split;
    /// `None` when the scene is beyond the tables. The caller keeps whichever
    /// of the two plans has the lower makespan.
    pub fn improve(&mut self, system: &System, input: &PlanInput, plan: &Plan) -> Option<Plan> {
        self.refresh(system);
        if system.num_models() != self.nm || system.num_processors() != self.np {
            return None;
        }
        if system
            .request_models()
            .any(|i| input.scene[i.0] as usize > MAX_REQUESTS)
        {
            return None;
        }
        let d = detector_done_ms(system, input);
        let np = self.np;
        for j in 0..np {
            self.ready[j] = input.rem_ms[j].max(d);
            self.work[j] = 0.0;
            self.count[j] = 0;
            self.mem[j] = 0.0;
        }
        for i in system.model_ids() {
            let root = system.models[i.0].parent.is_none();
            for j in system.proc_ids() {
                let x = i.0 * np + j.0;
                self.n[x] = if root { 0 } else { plan.served_on(i, j) };
                self.res[x] = if root {
                    plan.resident(i, j)
                } else {
                    self.n[x] > 0
                };
                if self.res[x] {
                    self.count[j.0] += 1;
                    self.mem[j.0] += system.size_mb(i, j);
                    self.work[j.0] +=
                        self.pair_cost(i.0, j.0, self.n[x]) + self.load(system, input, i.0, j.0);
                }
            }
        }
        for _ in 0..MAX_MOVES {
            let (mut best, mut best_move) = (self.objective(d), None);
            for i in system.request_models() {
                for src in system.supporting(i) {
                    let xs = i.0 * np + src.0;
                    let have = self.n[xs];
                    if have == 0 {
                        continue;
                    }
                    for dst in system.supporting(i) {
                        if dst == src {
                            continue;
                        }
                        let xd = i.0 * np + dst.0;
                        let new_host = !self.res[xd];
                        if new_host && !self.fits(system, i, dst) {
                            continue;
                        }
                        for delta in 1..=have.min(system.max_batch as u32) {
                            let o = self.moved(system, input, d, i, src, dst, delta);
                            if better(o, best) {
                                best = o;
                                best_move = Some((i, src, dst, delta));
                            }
                        }
                    }
                }
            }
            let Some((i, src, dst, delta)) = best_move else {
                break;
            };
            self.apply(system, input, i, src, dst, delta);
        }
        let mut out = Plan::empty(system);
        for i in system.model_ids() {
            for j in system.proc_ids() {
                let x = i.0 * np + j.0;
                out.set_resident(i, j, self.res[x]);
                let base = x * (MAX_REQUESTS + 1);
                let mut n = self.n[x] as usize;
                while n > 0 {
                    let k = self.last[base + n] as usize;
                    out.set_batches(i, j, k, out.batches(i, j, k) + 1);
                    n -= k;
                }
            }
        }
        Some(out)
    }

    fn fits(&self, system: &System, i: ModelId, j: ProcId) -> bool {
        let p = &system.processors[j.0];
        self.count[j.0] < p.max_resident
            && p.memory_budget_mb
                .is_none_or(|b| self.mem[j.0] + system.size_mb(i, j) <= b + 1e-9)
    }

    fn objective(&self, d: f64) -> (f64, f64) {
        let mut t = d;
        let mut sum = 0.0;
        for j in 0..self.np {
            let f = self.ready[j] + self.work[j];
            t = t.max(f);
            sum += f;
        }
        (t, sum)
    }

    /// Objective after moving `delta` requests of i from src to dst.
    #[allow(clippy::too_many_arguments)]
    fn moved(
        &self,
        system: &System,
        input: &PlanInput,
        d: f64,
        i: ModelId,
        src: ProcId,
        dst: ProcId,
        delta: u32,
    ) -> (f64, f64) {
        let (ws, wd) = self.shifted(system, input, i, src, dst, delta);
        let mut t = d;
        let mut sum = 0.0;
        for j in 0..self.np {
            let w = if j == src.0 {
                ws
            } else if j == dst.0 {
                wd
            } else {
                self.work[j]
            };
            let f = self.ready[j] + w;
            t = t.max(f);
            sum += f;
        }
        (t, sum)
    }

    /// New work on src and dst after the move.
    fn shifted(
        &self,
        system: &System,
        input: &PlanInput,
        i: ModelId,
        src: ProcId,
        dst: ProcId,
        delta: u32,
    ) -> (f64, f64) {
        let np = self.np;
        let (xs, xd) = (i.0 * np + src.0, i.0 * np + dst.0);
        let (ns, nd) = (self.n[xs], self.n[xd]);
        let mut ws = self.work[src.0] - self.pair_cost(i.0, src.0, ns)
            + self.pair_cost(i.0, src.0, ns - delta);
        if ns == delta {
            ws -= self.load(system, input, i.0, src.0);
        }
        let mut wd = self.work[dst.0] - self.pair_cost(i.0, dst.0, nd)
            + self.pair_cost(i.0, dst.0, nd + delta);
        if !self.res[xd] {
            wd += self.load(system, input, i.0, dst.0);
        }
        (ws, wd)
    }

    fn apply(
        &mut self,
        system: &System,
        input: &PlanInput,
        i: ModelId,
        src: ProcId,
        dst: ProcId,
        delta: u32,
    ) {
        let (ws, wd) = self.shifted(system, input, i, src, dst, delta);
        let np = self.np;
        let (xs, xd) = (i.0 * np + src.0, i.0 * np + dst.0);
        self.work[src.0] = ws;
        self.work[dst.0] = wd;
        self.n[xs] -= delta;
        self.n[xd] += delta;
        if self.n[xs] == 0 {
            self.res[xs] = false;
            self.count[src.0] -= 1;
            self.mem[src.0] -= system.size_mb(i, src);
        }
        if !self.res[xd] {
            self.res[xd] = true;
            self.count[dst.0] += 1;
            self.mem[dst.0] += system.size_mb(i, dst);
        }
    }
}

/// When the frame's detector ends on its fastest processor, after the work
/// queued there: no request can start before (the makespan's first term).
fn detector_done_ms(system: &System, input: &PlanInput) -> f64 {
    let det = Detector::fastest(system);
    input.rem_ms[det.proc.0] + det.exec_ms
}

/// Strictly better in (makespan, total finish), with a tolerance so float
/// noise cannot cycle.
fn better(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0 < b.0 - 1e-9 || (a.0 <= b.0 + 1e-9 && a.1 < b.1 - 1e-9)
}
