//! What the schedulers know of the processors: when each becomes idle
//! (rem_j), which models are resident (a(i,j)), and how to run a batch on one,
//! loading and evicting as needed. Every processor runs its queue in order.

use crate::{ModelId, Plan, ProcId, System};

/// The outcome of putting one batch on a processor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placement {
    /// The processor.
    pub proc: ProcId,
    /// Requests in the batch.
    pub batch: usize,
    /// When the processor starts on it (after earlier work), ms.
    pub start_ms: f64,
    /// Load time paid first because the model was not resident, ms (0 if resident).
    pub load_ms: f64,
    /// When the batch's results are ready, ms.
    pub finish_ms: f64,
    /// Models evicted to make room.
    pub evictions: u32,
}

/// A batch's expected finish on its processor, taken when it was placed
/// ([`Cluster::finish_mark`]) and handed back when it completes
/// ([`Cluster::correct_finish`]). It remembers the corrections already made
/// to that processor's queue, so the errors of earlier batches, which shifted
/// this one too, are not counted twice.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FinishMark {
    proc: ProcId,
    /// Expected finish minus the processor's accumulated correction, ms.
    uncorrected_ms: f64,
}

/// Processor availability and model residency, with least-recently-used eviction.
#[derive(Clone, Debug)]
pub struct Cluster {
    np: usize,
    busy_until: Vec<f64>,
    /// Sum of the corrections applied to each processor's queue, ms.
    shift_ms: Vec<f64>,
    resident: Vec<bool>,
    last_used: Vec<f64>,
    resident_count: Vec<usize>,
    resident_mb: Vec<f64>,
    /// On how many processors each model is resident: a detector's last
    /// copy is pinned, its other copies are evicted like any model.
    copies: Vec<usize>,
    /// Pairs whose last load failed (or whose engine panicked): never hosted
    /// until [`Cluster::set_available`] (see `crate::retry`).
    unavailable: Vec<bool>,
    /// Rest after each ms of work, ms: 1 / cap - 1 (0 without a cap).
    rest_per_ms: Vec<f64>,
}

impl Cluster {
    /// Idle processors, nothing resident.
    pub fn new(system: &System) -> Self {
        let (nm, np) = (system.num_models(), system.num_processors());
        Cluster {
            np,
            busy_until: vec![0.0; np],
            rest_per_ms: system
                .processors
                .iter()
                .map(|p| 1.0 / p.utilisation_cap - 1.0)
                .collect(),
            shift_ms: vec![0.0; np],
            resident: vec![false; nm * np],
            last_used: vec![f64::NEG_INFINITY; nm * np],
            resident_count: vec![0; np],
            resident_mb: vec![0.0; np],
            copies: vec![0; nm],
            unavailable: vec![false; nm * np],
        }
    }

    /// rem_j at `now`: how long until p_j is idle, ms.
    #[inline]
    pub fn rem_ms(&self, j: ProcId, now: f64) -> f64 {
        (self.busy_until[j.0] - now).max(0.0)
    }

    /// The work queued on p_j at `now`, ms: rem_j without the rest a
    /// utilisation cap adds after each batch (rem_j itself without a cap).
    #[inline]
    pub fn queued_work_ms(&self, j: ProcId, now: f64) -> f64 {
        self.rem_ms(j, now) / (1.0 + self.rest_per_ms[j.0])
    }

    /// rem for every processor.
    pub fn rem_all(&self, now: f64) -> Vec<f64> {
        self.busy_until
            .iter()
            .map(|&b| (b - now).max(0.0))
            .collect()
    }

    /// When p_j becomes idle (absolute), ms.
    #[inline]
    pub fn busy_until(&self, j: ProcId) -> f64 {
        self.busy_until[j.0]
    }

    /// a(i,j).
    #[inline]
    pub fn is_resident(&self, i: ModelId, j: ProcId) -> bool {
        self.resident[i.0 * self.np + j.0]
    }

    /// What placing model i on p_j costs in load time now, ms: t_l(i,j) when
    /// it is not resident there, 0 when it is (t_l (1 - a(i,j))).
    #[inline]
    pub fn load_cost_ms(&self, system: &System, i: ModelId, j: ProcId) -> f64 {
        if self.is_resident(i, j) {
            0.0
        } else {
            system.load_ms(i, j)
        }
    }

    /// The residency matrix, flattened `i * n_p + j`.
    pub fn residency(&self) -> &[bool] {
        &self.resident
    }

    /// Models resident on p_j.
    pub fn resident_count(&self, j: ProcId) -> usize {
        self.resident_count[j.0]
    }

    /// Whether model i can be made resident on p_j, evicting if needed;
    /// a detector's only copy is pinned and never evicted; an unavailable
    /// pair never can.
    #[inline]
    pub fn can_host(&self, system: &System, i: ModelId, j: ProcId) -> bool {
        if !system.supports(i, j) || self.unavailable[i.0 * self.np + j.0] {
            return false;
        }
        if self.is_resident(i, j) {
            return true;
        }
        let p = &system.processors[j.0];
        let (pinned, pinned_mb) = system
            .roots()
            .filter(|&m| self.pinned(system, m, j))
            .fold((0, 0.0), |(n, mb), m| (n + 1, mb + system.size_mb(m, j)));
        pinned < p.max_resident
            && p.memory_budget_mb
                .is_none_or(|b| pinned_mb + system.size_mb(i, j) <= b + 1e-9)
    }

    /// Whether model i would fit on p_j beside what is resident there now,
    /// evicting nothing (N_j and the memory budget).
    pub fn has_room(&self, system: &System, i: ModelId, j: ProcId) -> bool {
        let p = &system.processors[j.0];
        self.resident_count[j.0] < p.max_resident
            && p.memory_budget_mb
                .is_none_or(|b| self.resident_mb[j.0] + system.size_mb(i, j) <= b + 1e-9)
    }

    /// Runs a batch of `batch` requests of model i on p_j after the work already
    /// queued there, loading the model first (evicting the least recently used
    /// models that are not a detector's only copy) if it is not resident.
    /// The caller checks [`Cluster::can_host`] first.
    pub fn run(
        &mut self,
        system: &System,
        now: f64,
        i: ModelId,
        j: ProcId,
        batch: usize,
    ) -> Placement {
        let start = now.max(self.busy_until[j.0]);
        let mut load = 0.0;
        let mut evictions = 0;
        if !self.is_resident(i, j) {
            evictions = self.make_room(system, i, j);
            self.set_resident(system, i, j, true);
            load = system.load_ms(i, j);
        }
        let finish = start + load + system.exec_ms(i, j, batch);
        self.busy_until[j.0] = finish + (finish - start) * self.rest_per_ms[j.0];
        self.last_used[i.0 * self.np + j.0] = finish;
        Placement {
            proc: j,
            batch,
            start_ms: start,
            load_ms: load,
            finish_ms: finish,
            evictions,
        }
    }

    /// Makes residency follow a plan at `now`: models the plan drops are
    /// evicted, new ones are loaded on their processor (which stays busy for
    /// t_l). Returns the number of loads started.
    pub fn apply_residency(&mut self, system: &System, now: f64, plan: &Plan) -> u32 {
        let mut loads = 0;
        for j in system.proc_ids() {
            for i in system.model_ids() {
                if self.is_resident(i, j) && !plan.resident(i, j) {
                    self.set_resident(system, i, j, false);
                }
            }
            for i in system.model_ids() {
                if plan.resident(i, j) && self.load(system, now, i, j) {
                    loads += 1;
                }
            }
        }
        loads
    }

    /// Takes the pair out of service: it is no longer resident (its load
    /// failed, or the engine lost it) and no scheduler may place or load it
    /// there until [`Cluster::set_available`].
    pub fn set_unavailable(&mut self, system: &System, i: ModelId, j: ProcId) {
        self.set_resident(system, i, j, false);
        self.unavailable[i.0 * self.np + j.0] = true;
    }

    /// Puts the pair back in service (e.g. to retry its load).
    pub fn set_available(&mut self, i: ModelId, j: ProcId) {
        self.unavailable[i.0 * self.np + j.0] = false;
    }

    /// False while the pair is out of service ([`Cluster::set_unavailable`]).
    pub fn is_available(&self, i: ModelId, j: ProcId) -> bool {
        !self.unavailable[i.0 * self.np + j.0]
    }

    /// Makes model i resident on p_j at `now` if it can be hosted there
    /// (evicting as [`Cluster::run`] does; the processor is busy for t_l).
    /// Returns whether a load was started.
    pub fn load(&mut self, system: &System, now: f64, i: ModelId, j: ProcId) -> bool {
        if self.is_resident(i, j) || !self.can_host(system, i, j) {
            return false;
        }
        self.make_room(system, i, j);
        self.set_resident(system, i, j, true);
        let start = now.max(self.busy_until[j.0]);
        let finish = start + system.load_ms(i, j);
        self.busy_until[j.0] = finish + (finish - start) * self.rest_per_ms[j.0];
        self.last_used[i.0 * self.np + j.0] = finish;
        true
    }

    /// Marks models resident without paying load time (start-up state).
    pub fn preload(&mut self, system: &System, plan: &Plan) {
        for i in system.model_ids() {
            for j in system.proc_ids() {
                if plan.resident(i, j) && !self.is_resident(i, j) && self.can_host(system, i, j) {
                    self.make_room(system, i, j);
                    self.set_resident(system, i, j, true);
                }
            }
        }
    }

    /// The mark of a batch placed on p_j that is expected to finish at
    /// `expected_finish` (its [`Placement::finish_ms`]).
    pub fn finish_mark(&self, j: ProcId, expected_finish: f64) -> FinishMark {
        FinishMark {
            proc: j,
            uncorrected_ms: expected_finish - self.shift_ms[j.0],
        }
    }

    /// Where the batch of `mark` is expected to finish now, ms: its placed
    /// finish as moved by the corrections made since to its processor.
    pub fn expected_finish(&self, mark: FinishMark) -> f64 {
        mark.uncorrected_ms + self.shift_ms[mark.proc.0]
    }

    /// Lets a real executor correct rem_j once a batch finished at
    /// `actual_finish`: the work queued behind it moves by the batch's error,
    /// measured against its expected finish as already moved by the batches
    /// that completed before it. The processor is idle from `actual_finish`
    /// unless later work was queued. Under a utilisation cap the rest after
    /// the batch grows (or shrinks) with its error.
    pub fn correct_finish(&mut self, mark: FinishMark, actual_finish: f64) {
        let j = mark.proc.0;
        let error = actual_finish - (mark.uncorrected_ms + self.shift_ms[j]);
        let occupied = error * (1.0 + self.rest_per_ms[j]);
        self.shift_ms[j] += occupied;
        self.busy_until[j] = (self.busy_until[j] + occupied).max(actual_finish);
    }

    fn set_resident(&mut self, system: &System, i: ModelId, j: ProcId, on: bool) {
        let idx = i.0 * self.np + j.0;
        if self.resident[idx] == on {
            return;
        }
        self.resident[idx] = on;
        let (n, mb) = (
            if on { 1 } else { -1 },
            if on { 1.0 } else { -1.0 } * system.size_mb(i, j),
        );
        self.resident_count[j.0] = self.resident_count[j.0].wrapping_add_signed(n);
        self.resident_mb[j.0] += mb;
        self.copies[i.0] = self.copies[i.0].wrapping_add_signed(n);
    }

    /// Whether model m on p_j can never be evicted: it is a detector's only
    /// copy. Without a detector no frame is answered; its other copies go
    /// when a classifier needs the slot more (least recently used first).
    fn pinned(&self, system: &System, m: ModelId, j: ProcId) -> bool {
        system.models[m.0].parent.is_none() && self.is_resident(m, j) && self.copies[m.0] == 1
    }

    /// The model a load of i on p_j evicts next when p_j is full: the least
    /// recently used resident there that is not a detector's only copy.
    pub fn victim(&self, system: &System, i: ModelId, j: ProcId) -> Option<ModelId> {
        system
            .model_ids()
            .filter(|&m| m != i && self.is_resident(m, j) && !self.pinned(system, m, j))
            .min_by(|a, b| {
                self.last_used[a.0 * self.np + j.0].total_cmp(&self.last_used[b.0 * self.np + j.0])
            })
    }

    fn make_room(&mut self, system: &System, i: ModelId, j: ProcId) -> u32 {
        let mut evictions = 0;
        loop {
            if self.has_room(system, i, j) {
                return evictions;
            }
            match self.victim(system, i, j) {
                Some(m) => {
                    self.set_resident(system, m, j, false);
                    evictions += 1;
                }
                None => return evictions,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: &str = include_str!("../tests/fixtures/tiny.toml");

    /// A CPU with two slots and a GPU with one; the detector and `a` run on
    /// both.
    const ONE_GPU_SLOT: &str = r#"
name = "one-gpu-slot"
max_batch = 1
[[processor]]
name = "cpu"
kind = "cpu"
max_resident = 2
[[processor]]
name = "gpu"
kind = "gpu"
max_resident = 1
[[model]]
name = "detector"
[[model]]
name = "a"
parent = "detector"
classes = ["person"]
[profile.detector.cpu]
exec_ms = [20.0]
load_ms = 5.0
[profile.detector.gpu]
exec_ms = [5.0]
load_ms = 50.0
[profile.a.cpu]
exec_ms = [10.0]
load_ms = 6.0
[profile.a.gpu]
exec_ms = [2.0]
load_ms = 12.0
"#;

    /// A detector copy on the GPU's one slot gives way to a classifier, as
    /// any model would; the detector's last copy never does, so a frame can
    /// always be detected.
    #[test]
    fn a_detectors_extra_copy_is_evicted_but_never_its_last() {
        let system = System::from_toml(ONE_GPU_SLOT).unwrap();
        let (det, a) = (ModelId(0), ModelId(1));
        let (cpu, gpu) = (ProcId(0), ProcId(1));
        let mut cluster = Cluster::new(&system);
        let mut plan = Plan::empty(&system);
        plan.set_resident(det, cpu, true);
        plan.set_resident(det, gpu, true);
        cluster.preload(&system, &plan);
        assert!(cluster.can_host(&system, a, gpu));
        assert_eq!(cluster.victim(&system, a, gpu), Some(det));
        let placed = cluster.run(&system, 0.0, a, gpu, 1);
        assert_eq!((placed.load_ms, placed.evictions), (12.0, 1));
        assert!(cluster.is_resident(a, gpu) && !cluster.is_resident(det, gpu));
        assert!(cluster.is_resident(det, cpu));
        // Now the CPU's copy is the detector's only one: pinned there, while
        // `a` on the GPU gives way to a detector copy again.
        assert!(!cluster.pinned(&system, a, gpu));
        assert!(cluster.pinned(&system, det, cpu));
        assert_eq!(cluster.victim(&system, det, gpu), Some(a));

        // With the detector's only copy on the GPU, `a` cannot go there.
        let mut alone = Cluster::new(&system);
        let mut plan = Plan::empty(&system);
        plan.set_resident(det, gpu, true);
        alone.preload(&system, &plan);
        assert!(!alone.can_host(&system, a, gpu));
        assert_eq!(alone.victim(&system, a, gpu), None);
        assert!(alone.can_host(&system, a, cpu));
    }

    /// Three batches of `a` queued back to back on the CPU (8 ms each, from
    /// 0): the first runs 5 ms late, which moves the other two; the second
    /// then runs as profiled, so its completion 5 ms after its planned finish
    /// is no new error.
    #[test]
    fn a_late_batch_moves_the_queue_once() {
        let system = System::from_toml(TINY).unwrap();
        let (a, cpu) = (ModelId(1), ProcId(0));
        let mut cluster = Cluster::new(&system);
        let mut plan = Plan::empty(&system);
        plan.set_resident(a, cpu, true);
        cluster.preload(&system, &plan);
        let marks: Vec<FinishMark> = (0..3)
            .map(|_| {
                let p = cluster.run(&system, 0.0, a, cpu, 1);
                cluster.finish_mark(cpu, p.finish_ms)
            })
            .collect();
        assert_eq!(cluster.busy_until(cpu), 24.0);
        cluster.correct_finish(marks[0], 13.0);
        assert_eq!(cluster.busy_until(cpu), 29.0);
        cluster.correct_finish(marks[1], 21.0);
        assert_eq!(
            cluster.busy_until(cpu),
            29.0,
            "the second batch's delay was the first's"
        );
        cluster.correct_finish(marks[2], 27.0);
        assert_eq!(
            cluster.busy_until(cpu),
            27.0,
            "early by 2 ms: idle from then"
        );
    }
}
