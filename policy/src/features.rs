//! The fixed input/output encoding of the learned global policy (paper Sec.
//! 5.1.2), shared by training (ilmodel) and the runtime ([`crate::mlp`]) so
//! the two can never disagree on a feature's position.
//!
//! Features, in this order (names as in [`Encoding::feature_names`]):
//! 1. `r[i]`: r_i of every request model (the scene complexity);
//! 2. `rem[j]`: rem_j of every processor, ms;
//! 3. `ready[j]`: max(rem_j, D), D = rem_d + t_det, the earliest start of
//!    classifier work on p_j;
//! 4. `a_old[i@j]`: previous residency of every supported pair (detector too);
//! 5. `load[i@j]`: (1 - a_old(i,j)) t_l(i,j) / F, the amortised load a plan
//!    pays to use a request-model pair;
//! 6. `work[i@j]`: r_i min_k t_e(i,j,k)/k, the work if p_j served all of i;
//! 7. `fluid`: max(D, (sum_j ready_j + sum_i r_i min_j,k t_e/k) / n_p), a
//!    fluid estimate of the makespan;
//! 8. `te1[i@j]`, `teb[i@j]`: t_e(i,j,1) and the best per-request time
//!    min_k t_e(i,j,k)/k of every supported request-model pair, and
//!    `prio[i]`: priority rho_i. These are constant for one profile (the
//!    paper lists them; with one profile per policy they normalise to 0).
//!
//! Outputs: one slot per (request model i, supported p_j, 1 <= k <=
//! max_batch_on(i,j)), in model, processor, batch-size order
//! ([`Encoding::slots`]).

use crate::{Detector, InputError, ModelId, PlanInput, ProcId, System};

/// One output slot: b_k(i,j).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Request model i.
    pub model: ModelId,
    /// Processor j (supports i).
    pub proc: ProcId,
    /// Batch size k.
    pub k: usize,
}

/// The encoding of one [`System`]: feature layout, output slots and the
/// static tables the feature builder reads.
#[derive(Clone, Debug)]
pub struct Encoding {
    names: Vec<String>,
    slots: Vec<Slot>,
    request: Vec<ModelId>,
    /// Supported (request model, processor) pairs.
    pairs: Vec<(ModelId, ProcId)>,
    /// Supported (any model, processor) pairs, for `a_old`.
    all_pairs: Vec<(ModelId, ProcId)>,
    /// min_k t_e(i,j,k)/k per entry of `pairs`.
    best_per_req: Vec<f64>,
    /// min over j of `best_per_req` per request model.
    best_any: Vec<f64>,
    statics: Vec<f32>,
    detector: Detector,
}

impl Encoding {
    /// Builds the encoding of a validated system.
    pub fn new(system: &System) -> Self {
        let request: Vec<ModelId> = system.request_models().collect();
        let pairs: Vec<(ModelId, ProcId)> = request
            .iter()
            .flat_map(|&i| system.supporting(i).map(move |j| (i, j)))
            .collect();
        let all_pairs: Vec<(ModelId, ProcId)> = system
            .model_ids()
            .flat_map(|i| system.supporting(i).map(move |j| (i, j)))
            .collect();
        let best = |i: ModelId, j: ProcId| {
            (1..=system.max_batch_on(i, j))
                .map(|k| system.exec_ms(i, j, k) / k as f64)
                .fold(f64::INFINITY, f64::min)
        };
        let best_per_req: Vec<f64> = pairs.iter().map(|&(i, j)| best(i, j)).collect();
        let best_any: Vec<f64> = request
            .iter()
            .map(|&i| {
                pairs
                    .iter()
                    .zip(&best_per_req)
                    .filter(|((m, _), _)| *m == i)
                    .map(|(_, &b)| b)
                    .fold(f64::INFINITY, f64::min)
            })
            .collect();
        let pair_name = |i: ModelId, j: ProcId| {
            format!(
                "{}@{}",
                system.models[i.0].name, system.processors[j.0].name
            )
        };
        let mut names = Vec::new();
        for &i in &request {
            names.push(format!("r[{}]", system.models[i.0].name));
        }
        for j in system.proc_ids() {
            names.push(format!("rem[{}]", system.processors[j.0].name));
        }
        for j in system.proc_ids() {
            names.push(format!("ready[{}]", system.processors[j.0].name));
        }
        for &(i, j) in &all_pairs {
            names.push(format!("a_old[{}]", pair_name(i, j)));
        }
        for &(i, j) in &pairs {
            names.push(format!("load[{}]", pair_name(i, j)));
        }
        for &(i, j) in &pairs {
            names.push(format!("work[{}]", pair_name(i, j)));
        }
        names.push("fluid".to_string());
        let mut statics = Vec::new();
        for &(i, j) in &pairs {
            names.push(format!("te1[{}]", pair_name(i, j)));
            statics.push(system.exec_ms(i, j, 1) as f32);
        }
        for (n, &(i, j)) in pairs.iter().enumerate() {
            names.push(format!("teb[{}]", pair_name(i, j)));
            statics.push(best_per_req[n] as f32);
        }
        for &i in &request {
            names.push(format!("prio[{}]", system.models[i.0].name));
            statics.push(system.priority(i) as f32);
        }
        let slots = pairs
            .iter()
            .flat_map(|&(i, j)| {
                (1..=system.max_batch_on(i, j)).map(move |k| Slot {
                    model: i,
                    proc: j,
                    k,
                })
            })
            .collect();
        Encoding {
            names,
            slots,
            request,
            pairs,
            all_pairs,
            best_per_req,
            best_any,
            statics,
            detector: Detector::fastest(system),
        }
    }

    /// Number of features.
    pub fn num_features(&self) -> usize {
        self.names.len()
    }

    /// Feature names, in input order.
    pub fn feature_names(&self) -> &[String] {
        &self.names
    }

    /// Output slots, in output order.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// The request models, in system order.
    pub fn request_models(&self) -> &[ModelId] {
        &self.request
    }

    /// Writes the features of `input` into `out` (length
    /// [`Encoding::num_features`]) without allocating.
    pub fn write(
        &self,
        system: &System,
        input: &PlanInput,
        out: &mut [f32],
    ) -> Result<(), InputError> {
        input.validate(system)?;
        if out.len() != self.names.len() {
            return Err(InputError::Length {
                what: "feature buffer",
                got: out.len(),
                want: self.names.len(),
            });
        }
        let np = system.num_processors();
        let f = input.frames_per_epoch.max(1.0);
        let d = input.rem_ms[self.detector.proc.0] + self.detector.exec_ms;
        let mut n = 0;
        let mut push = |v: f64| {
            out[n] = v as f32;
            n += 1;
        };
        for &i in &self.request {
            push(input.scene[i.0] as f64);
        }
        for j in 0..np {
            push(input.rem_ms[j]);
        }
        let mut ready_sum = 0.0;
        for j in 0..np {
            let ready = input.rem_ms[j].max(d);
            ready_sum += ready;
            push(ready);
        }
        for &(i, j) in &self.all_pairs {
            push(if input.was_resident(system, i, j) {
                1.0
            } else {
                0.0
            });
        }
        for &(i, j) in &self.pairs {
            let load = if input.was_resident(system, i, j) {
                0.0
            } else {
                system.load_ms(i, j) / f
            };
            push(load);
        }
        for (p, &(i, _)) in self.pairs.iter().enumerate() {
            push(input.scene[i.0] as f64 * self.best_per_req[p]);
        }
        let total: f64 = self
            .request
            .iter()
            .zip(&self.best_any)
            .map(|(&i, &b)| input.scene[i.0] as f64 * b)
            .sum();
        push(((ready_sum + total) / np as f64).max(d));
        out[n..].copy_from_slice(&self.statics);
        Ok(())
    }
}

/// FNV-1a 64 of a system's structure and profile (names, graph, n_b, N_j,
/// budgets, t_e, t_l, sizes): what a trained policy is only valid for.
pub fn fingerprint(system: &System) -> String {
    let mut h = Fnv::default();
    h.str(&system.name);
    hash_board(&mut h, system);
    for (i, m) in system.models.iter().enumerate() {
        h.str(&m.name);
        h.u64(m.parent.map_or(u64::MAX, |p| p.0 as u64));
        for j in system.proc_ids() {
            let i = ModelId(i);
            h.f64(system.load_ms(i, j));
            h.f64(system.size_mb(i, j));
            for k in 1..=system.max_batch {
                h.f64(system.exec_ms(i, j, k));
            }
        }
    }
    format!("{:016x}", h.0)
}

/// FNV-1a 64 of a system's structure without its timings or name (models,
/// graph, processors, n_b, N_j, budgets, which pairs are supported, sizes):
/// what a policy needs unchanged to run on a re-measured profile of the same
/// board ([`profile_ms`] bounds how far the timings may have moved).
pub fn structure_fingerprint(system: &System) -> String {
    let mut h = Fnv::default();
    hash_board(&mut h, system);
    for (i, m) in system.models.iter().enumerate() {
        h.str(&m.name);
        h.u64(m.parent.map_or(u64::MAX, |p| p.0 as u64));
        for j in system.proc_ids() {
            let i = ModelId(i);
            h.u64(u64::from(system.supports(i, j)));
            h.f64(system.size_mb(i, j));
        }
    }
    format!("{:016x}", h.0)
}

/// n_b and each processor's name, N_j and budget, into `h` (both
/// fingerprints start so).
fn hash_board(h: &mut Fnv, system: &System) {
    h.u64(system.max_batch as u64);
    for p in &system.processors {
        h.str(&p.name);
        h.u64(p.max_resident as u64);
        h.f64(p.memory_budget_mb.unwrap_or(-1.0));
    }
}

/// Per supported pair, `"model@processor"` -> [batch-1 execution ms, load
/// ms]: the timings a policy was trained on, recorded in its sidecar so a
/// re-measured profile can be compared with them.
pub fn profile_ms(system: &System) -> std::collections::BTreeMap<String, [f64; 2]> {
    let mut out = std::collections::BTreeMap::new();
    for i in system.model_ids() {
        for j in system.supporting(i) {
            out.insert(
                format!(
                    "{}@{}",
                    system.models[i.0].name, system.processors[j.0].name
                ),
                [system.exec_ms(i, j, 1), system.load_ms(i, j)],
            );
        }
    }
    out
}

/// FNV-1a 64 of a byte string, hex: the hash recorded for system files.
pub fn fnv1a64_hex(bytes: &[u8]) -> String {
    let mut h = Fnv::default();
    h.bytes(bytes);
    format!("{:016x}", h.0)
}

struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= x as u64;
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.bytes(s.as_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
}
