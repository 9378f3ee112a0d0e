//! The global step's output: which models are resident where, a(i,j), and how
//! each model's requests are batched, b_k(i,j); the [`GlobalPolicy`] trait
//! that produces one; and [`repair`], which turns any plan into a feasible one.

pub use crate::global::GlobalPolicy;
pub use repair::{fits, repair, Infeasible};
pub use start::{fastest_hosts, fill_free_slots, start_plan};

mod repair;
mod start;

use crate::{InputError, ModelId, ProcId, System};

/// What a global policy sees at an epoch boundary.
#[derive(Clone, Copy, Debug)]
pub struct PlanInput<'a> {
    /// r_i per model (index = `ModelId`); entries of detectors are ignored.
    pub scene: &'a [u32],
    /// rem_j per processor, ms.
    pub rem_ms: &'a [f64],
    /// a_old(i,j), flattened `i * n_p + j`.
    pub residency: &'a [bool],
    /// F: frames over which a load is amortised (frames per epoch).
    pub frames_per_epoch: f64,
}

impl PlanInput<'_> {
    /// Checks the vectors' lengths against the system.
    pub fn validate(&self, system: &System) -> Result<(), InputError> {
        let (nm, np) = (system.num_models(), system.num_processors());
        check_len("scene", self.scene.len(), nm)?;
        check_len("rem_ms", self.rem_ms.len(), np)?;
        check_len("residency", self.residency.len(), nm * np)
    }

    /// a_old(i,j).
    pub fn was_resident(&self, system: &System, i: ModelId, j: ProcId) -> bool {
        self.residency[i.0 * system.num_processors() + j.0]
    }

    /// What making model i resident on p_j costs per frame, ms: its load
    /// amortised over the epoch's F frames, or nothing when it already is.
    pub fn amortised_load_ms(&self, system: &System, i: ModelId, j: ProcId) -> f64 {
        if self.was_resident(system, i, j) {
            0.0
        } else {
            system.load_ms(i, j) / self.frames_per_epoch.max(1.0)
        }
    }
}

fn check_len(what: &'static str, got: usize, want: usize) -> Result<(), InputError> {
    if got == want {
        Ok(())
    } else {
        Err(InputError::Length { what, got, want })
    }
}

/// A global plan: residency a(i,j) and batch counts b_k(i,j).
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    np: usize,
    nb: usize,
    resident: Vec<bool>,
    batches: Vec<u32>,
}

impl Plan {
    /// A plan with nothing resident and no batches.
    pub fn empty(system: &System) -> Self {
        let (nm, np, nb) = (
            system.num_models(),
            system.num_processors(),
            system.max_batch,
        );
        Plan {
            np,
            nb,
            resident: vec![false; nm * np],
            batches: vec![0; nm * np * nb],
        }
    }

    /// a(i,j).
    pub fn resident(&self, i: ModelId, j: ProcId) -> bool {
        self.resident[i.0 * self.np + j.0]
    }

    /// Sets a(i,j).
    pub fn set_resident(&mut self, i: ModelId, j: ProcId, on: bool) {
        self.resident[i.0 * self.np + j.0] = on;
    }

    /// The residency matrix, flattened `i * n_p + j`.
    pub fn residency(&self) -> &[bool] {
        &self.resident
    }

    /// b_k(i,j).
    pub fn batches(&self, i: ModelId, j: ProcId, k: usize) -> u32 {
        self.batches[(i.0 * self.np + j.0) * self.nb + k - 1]
    }

    /// Sets b_k(i,j).
    pub fn set_batches(&mut self, i: ModelId, j: ProcId, k: usize, n: u32) {
        self.batches[(i.0 * self.np + j.0) * self.nb + k - 1] = n;
    }

    /// Requests of model i this plan serves: sum_j sum_k k * b_k(i,j).
    pub fn served(&self, i: ModelId) -> u32 {
        let row = &self.batches[i.0 * self.np * self.nb..(i.0 + 1) * self.np * self.nb];
        row.iter()
            .enumerate()
            .map(|(n, &b)| b * (n % self.nb + 1) as u32)
            .sum()
    }

    /// Requests of model i planned on p_j.
    pub fn served_on(&self, i: ModelId, j: ProcId) -> u32 {
        (1..=self.nb)
            .map(|k| k as u32 * self.batches(i, j, k))
            .sum()
    }

    /// Number of models resident on p_j.
    pub fn resident_count(&self, j: ProcId) -> usize {
        self.resident
            .iter()
            .skip(j.0)
            .step_by(self.np)
            .filter(|&&r| r)
            .count()
    }

    /// W_j: planned execution plus amortised loads on p_j, ms.
    pub fn work_ms(&self, system: &System, input: &PlanInput, j: ProcId) -> f64 {
        let mut w = 0.0;
        for i in system.model_ids() {
            for k in 1..=self.nb {
                let b = self.batches(i, j, k);
                if b > 0 {
                    w += b as f64 * system.exec_ms(i, j, k);
                }
            }
            if self.resident(i, j) {
                w += input.amortised_load_ms(system, i, j);
            }
        }
        w
    }

    /// The makespan the design's ILP minimises: classifiers start once the
    /// detector (on `detector_proc`, taking `detector_ms`) is done.
    pub fn makespan_ms(&self, system: &System, input: &PlanInput, detector: Detector) -> f64 {
        let d = input.rem_ms[detector.proc.0] + detector.exec_ms;
        system
            .proc_ids()
            .map(|j| {
                let w = self.work_ms(system, input, j);
                (input.rem_ms[j.0] + w).max(d + w)
            })
            .fold(d, f64::max)
    }

    /// The stream's bottleneck: the most planned work any one unit does per
    /// frame, the detector's run included on its unit, ms. Under sustained
    /// load the frames queue behind this unit, so a stream of frames every P
    /// ms is sustainable only when this is at most P; [`Plan::makespan_ms`]
    /// (one frame on the units as they are now) cannot see that.
    pub fn cycle_ms(&self, system: &System, input: &PlanInput, detector: Detector) -> f64 {
        system
            .proc_ids()
            .map(|j| {
                let w = self.work_ms(system, input, j);
                if j == detector.proc {
                    w + detector.exec_ms
                } else {
                    w
                }
            })
            .fold(0.0, f64::max)
    }

    /// Why this plan is not feasible for the scene, if it is not.
    pub fn infeasibility(&self, system: &System, input: &PlanInput) -> Option<String> {
        for i in system.model_ids() {
            for j in system.proc_ids() {
                let planned = self.served_on(i, j) > 0;
                if (planned || self.resident(i, j)) && !system.supports(i, j) {
                    return Some(format!(
                        "{} is planned on {}, which cannot run it",
                        system.models[i.0].name, system.processors[j.0].name
                    ));
                }
                if planned && !self.resident(i, j) {
                    return Some(format!(
                        "{} has batches on {} but is not resident there",
                        system.models[i.0].name, system.processors[j.0].name
                    ));
                }
                for k in system.max_batch_on(i, j) + 1..=self.nb {
                    if self.batches(i, j, k) > 0 {
                        return Some(format!(
                            "{} has batches of {k} on {}, beyond its profiled sizes",
                            system.models[i.0].name, system.processors[j.0].name
                        ));
                    }
                }
            }
        }
        for i in system.request_models() {
            if self.served(i) != input.scene[i.0] {
                return Some(format!(
                    "{} serves {} requests but the scene has {}",
                    system.models[i.0].name,
                    self.served(i),
                    input.scene[i.0]
                ));
            }
        }
        for j in system.proc_ids() {
            let p = &system.processors[j.0];
            if self.resident_count(j) > p.max_resident {
                return Some(format!(
                    "{} holds more than {} models",
                    p.name, p.max_resident
                ));
            }
            if let Some(budget) = p.memory_budget_mb {
                if self.resident_mb(system, j) > budget + 1e-9 {
                    return Some(format!("{} exceeds its {budget} MB budget", p.name));
                }
            }
        }
        for r in system.roots() {
            if !system.proc_ids().any(|j| self.resident(r, j)) {
                return Some(format!(
                    "detector {} is resident nowhere",
                    system.models[r.0].name
                ));
            }
        }
        None
    }

    fn resident_mb(&self, system: &System, j: ProcId) -> f64 {
        system
            .model_ids()
            .filter(|&i| self.resident(i, j))
            .map(|i| system.size_mb(i, j))
            .sum()
    }
}

/// Where the detector runs and how long one frame takes on it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Detector {
    /// p_d.
    pub proc: ProcId,
    /// t_det, ms.
    pub exec_ms: f64,
}

impl Detector {
    /// The fastest processor for the system's first detector.
    pub fn fastest(system: &System) -> Detector {
        let root = system
            .roots()
            .next()
            .expect("a validated system has a root");
        system
            .supporting(root)
            .map(|j| Detector {
                proc: j,
                exec_ms: system.exec_ms(root, j, 1),
            })
            .min_by(|a, b| a.exec_ms.total_cmp(&b.exec_ms))
            .expect("a validated model has a supporting processor")
    }
}
