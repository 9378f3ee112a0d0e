//! The learned global policy (paper Sec. 5.1.2): an MLP distilled offline
//! from the ILP (ilmodel), stored as ONNX plus a JSON sidecar, run with
//! tract-onnx. Pure: the caller reads the files and passes their contents.
//!
//! Decoding of the network's two outputs, per slot s = (i, j, k) of
//! [`crate::features::Encoding::slots`]: `prob[s]` = P(b_k(i,j) > 0) and
//! `count[s]` = b_k(i,j) when non-zero. b_k(i,j) = max(1, round(count)) when
//! prob >= threshold, else 0; a(i,j) = 1 where any b_k(i,j) > 0, and the
//! detector is resident on its fastest processor. [`Decoding`] then turns
//! the outputs into request shares w(i,j): by default the expected count
//! sum_k k prob[s] count[s] (the network's sub-integer preferences kept),
//! or n(i,j) = sum_k k b_k(i,j) of the thresholded counts; it rescales
//! them to r_i (each host its whole share, the requests left by the
//! sidecar's [`search::Rounding`]) and batches each pair by its min-cost
//! composition ([`search::Search::by_weights`]). The plan then ALWAYS goes
//! through [`crate::repair`] (every request served, N_j and budgets kept),
//! and, when the sidecar enables it, through [`search::Search`] (optimal
//! re-batching per pair and request moves between hosts), keeping whichever
//! feasible plan has the lower makespan.

pub mod learned;
mod onnx;
pub mod search;
mod sidecar;
pub mod stream;

pub use onnx::OnnxMlp;
pub use sidecar::{
    HeldoutMetrics, OutputSpec, Sidecar, TrainingInfo, PROFILE_TOLERANCE, SIDECAR_FORMAT,
};

use serde::{Deserialize, Serialize};

use crate::features::{fingerprint, profile_ms, structure_fingerprint, Encoding};
use crate::{repair, Detector, GlobalPolicy, Plan, PlanInput, System};

/// Why a policy could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum MlpError {
    /// The sidecar is not valid JSON of the expected shape.
    #[error("policy sidecar: {0}")]
    Sidecar(#[from] serde_json::Error),
    /// The sidecar was written for another format version.
    #[error("policy sidecar has format {got:?}, expected {SIDECAR_FORMAT:?}")]
    Format {
        /// Format found.
        got: String,
    },
    /// The policy was trained for another system or profile.
    #[error("policy was trained for {what} {trained}, but the system has {actual}")]
    SystemMismatch {
        /// Which property differs.
        what: &'static str,
        /// Value in the sidecar.
        trained: String,
        /// Value of the system.
        actual: String,
    },
    /// The ONNX file could not be loaded or does not match the sidecar.
    #[error("policy network: {0}")]
    Onnx(String),
}

/// How the network's two outputs become a plan before repair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decoding {
    /// The thresholded counts b_k(i,j) as they are.
    Counts,
    /// n(i,j) = sum_k k b_k(i,j) of the thresholded counts, read as request
    /// shares, rescaled to r_i and batched by the min-cost composition.
    Shares,
    /// Like `Shares`, from the expected counts P(b > 0) count instead of the
    /// thresholded, rounded ones.
    #[default]
    ExpectedShares,
}

/// The learned global policy: features, MLP, decoding, repair (and search).
#[derive(Debug)]
pub struct MlpPolicy {
    name: String,
    encoding: Encoding,
    net: OnnxMlp,
    threshold: f32,
    local_search: bool,
    decoding: Decoding,
    search: search::Search,
    features: Vec<f32>,
    prob: Vec<f32>,
    count: Vec<f32>,
    weights: Vec<f64>,
    sidecar: Sidecar,
    dims: (usize, usize, usize),
    last_error: Option<String>,
    profile_drift: f64,
}

/// The largest factor between `system`'s timings and the sidecar's
/// trained-on ones, when the structure is the same and every factor is
/// within [`PROFILE_TOLERANCE`]; else why the policy does not fit.
fn re_measured_drift(system: &System, sidecar: &Sidecar) -> Result<f64, MlpError> {
    let exact = || {
        if sidecar.system_name != system.name {
            MlpError::SystemMismatch {
                what: "system name",
                trained: sidecar.system_name.clone(),
                actual: system.name.clone(),
            }
        } else {
            MlpError::SystemMismatch {
                what: "profile fingerprint (models, processors, N_j, t_e, t_l)",
                trained: sidecar.system_fingerprint.clone(),
                actual: fingerprint(system),
            }
        }
    };
    let (Some(structure), Some(trained)) = (&sidecar.structure_fingerprint, &sidecar.profile_ms)
    else {
        // An older sidecar: only the exact profile fits.
        return Err(exact());
    };
    let actual = structure_fingerprint(system);
    if *structure != actual {
        return Err(MlpError::SystemMismatch {
            what: "structure (models, graph, processors, N_j, budgets, supported pairs)",
            trained: structure.clone(),
            actual,
        });
    }
    let now = profile_ms(system);
    let mut worst = (1.0_f64, String::new());
    for (pair, t) in &now {
        let Some(was) = trained.get(pair) else {
            return Err(exact());
        };
        for (what, a, b) in [("batch-1 execution", t[0], was[0]), ("load", t[1], was[1])] {
            let factor = if a > 0.0 && b > 0.0 {
                (a / b).max(b / a)
            } else if a == b {
                1.0
            } else {
                f64::INFINITY
            };
            if factor > worst.0 {
                worst = (
                    factor,
                    format!("{pair} {what} {a:.2} ms, trained on {b:.2} ms"),
                );
            }
        }
    }
    if worst.0 > PROFILE_TOLERANCE {
        return Err(MlpError::SystemMismatch {
            what: "profile within the tolerance",
            trained: format!("timings within {PROFILE_TOLERANCE}x of this profile's"),
            actual: format!("{} ({:.2}x)", worst.1, worst.0),
        });
    }
    Ok(worst.0)
}

impl MlpPolicy {
    /// Loads a policy for `system` from the ONNX bytes and the sidecar text;
    /// refuses a policy trained for another system or profile.
    pub fn new(system: &System, onnx: &[u8], sidecar: &str) -> Result<Self, MlpError> {
        let sidecar: Sidecar = serde_json::from_str(sidecar)?;
        if sidecar.format != SIDECAR_FORMAT {
            return Err(MlpError::Format {
                got: sidecar.format,
            });
        }
        let profile_drift = if sidecar.system_name == system.name
            && sidecar.system_fingerprint == fingerprint(system)
        {
            1.0
        } else {
            re_measured_drift(system, &sidecar)?
        };
        let encoding = Encoding::new(system);
        if sidecar.features != encoding.feature_names() {
            return Err(MlpError::SystemMismatch {
                what: "feature layout",
                trained: sidecar.features.join(","),
                actual: encoding.feature_names().join(","),
            });
        }
        let slots = slot_names(system, &encoding);
        if sidecar.outputs.slots != slots {
            return Err(MlpError::SystemMismatch {
                what: "output slots",
                trained: sidecar.outputs.slots.join(","),
                actual: slots.join(","),
            });
        }
        let threshold = sidecar.outputs.threshold;
        if !(threshold > 0.0 && threshold < 1.0) {
            return Err(MlpError::Onnx(format!(
                "sidecar threshold {threshold} is not in (0, 1)"
            )));
        }
        let min_share = sidecar.outputs.min_share;
        if !(min_share.is_finite() && min_share >= 0.0) {
            return Err(MlpError::Onnx(format!(
                "sidecar min_share {min_share} is not a non-negative number"
            )));
        }
        let net = OnnxMlp::load(onnx, encoding.num_features(), slots.len())?;
        let mut search = search::Search::new(system);
        search.set_min_share(min_share);
        search.set_rounding(sidecar.outputs.rounding);
        Ok(MlpPolicy {
            name: format!("mlp({})", system.name),
            features: vec![0.0; encoding.num_features()],
            prob: vec![0.0; slots.len()],
            count: vec![0.0; slots.len()],
            weights: Vec::new(),
            search,
            local_search: sidecar.local_search,
            decoding: sidecar.outputs.decoder,
            threshold,
            encoding,
            net,
            sidecar,
            dims: (
                system.num_models(),
                system.num_processors(),
                system.max_batch,
            ),
            last_error: None,
            profile_drift,
        })
    }

    /// How far the profile it was loaded on is from the trained-on one: the
    /// largest factor, either way, between a pair's batch-1 execution or
    /// load times (1.0: the exact profile it was trained on).
    pub fn profile_drift(&self) -> f64 {
        self.profile_drift
    }

    /// Turns the local search on or off (the sidecar sets the default).
    pub fn set_local_search(&mut self, on: bool) {
        self.local_search = on;
    }

    /// Sets the share floor of the share decodings (the sidecar's
    /// `min_share` by default); `ilmodel calibrate` tries several.
    pub fn set_min_share(&mut self, min_share: f64) {
        self.search.set_min_share(min_share);
    }

    /// Sets how the share decodings give out the requests left after the
    /// whole shares (the sidecar's `rounding` by default); `ilmodel
    /// calibrate` tries each.
    pub fn set_rounding(&mut self, rounding: search::Rounding) {
        self.search.set_rounding(rounding);
    }

    /// Chooses how the network's outputs become a plan (default: the
    /// sidecar's `decoder`).
    pub fn set_decoding(&mut self, decoding: Decoding) {
        self.decoding = decoding;
    }

    /// The sidecar the policy was loaded with.
    pub fn sidecar(&self) -> &Sidecar {
        &self.sidecar
    }

    /// The error of the last [`GlobalPolicy::plan`] call, if it had one.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// The network's raw decoding of `input`, before repair.
    pub fn decode(&mut self, system: &System, input: &PlanInput) -> Result<Plan, String> {
        self.encoding
            .write(system, input, &mut self.features)
            .map_err(|e| e.to_string())?;
        self.net
            .run_into(&self.features, &mut self.prob, &mut self.count)
            .map_err(|e| e.to_string())?;
        let mut plan = Plan::empty(system);
        for (s, slot) in self.encoding.slots().iter().enumerate() {
            if self.prob[s] >= self.threshold {
                let cap = (input.scene[slot.model.0] as usize / slot.k) as f32;
                let b = self.count[s].round().clamp(1.0, cap.max(1.0));
                plan.set_batches(slot.model, slot.proc, slot.k, b as u32);
                plan.set_resident(slot.model, slot.proc, true);
            }
        }
        if let Some(root) = system.roots().next() {
            plan.set_resident(root, Detector::fastest(system).proc, true);
        }
        Ok(plan)
    }

    /// Fills `weights` with each pair's expected request count from the
    /// last network run: sum over k of k P(b_k > 0) max(count_k, 0), the
    /// quantity the training penalty ties to r_i. Unlike the thresholded
    /// counts it keeps the network's sub-integer preferences between hosts.
    fn expected_shares(&mut self, system: &System) {
        let np = system.num_processors();
        self.weights.clear();
        self.weights.resize(system.num_models() * np, 0.0);
        for (s, slot) in self.encoding.slots().iter().enumerate() {
            let expected = self.prob[s].clamp(0.0, 1.0) * self.count[s].max(0.0);
            self.weights[slot.model.0 * np + slot.proc.0] += slot.k as f64 * expected as f64;
        }
    }

    fn try_plan(&mut self, system: &System, input: &PlanInput) -> Result<Plan, String> {
        if self.dims
            != (
                system.num_models(),
                system.num_processors(),
                system.max_batch,
            )
        {
            return Err("the system differs from the one the policy was loaded for".into());
        }
        let mut raw = self.decode(system, input)?;
        self.search.refresh(system);
        let shaped = match self.decoding {
            Decoding::Counts => None,
            Decoding::Shares => self.search.by_shares(system, input, &raw),
            Decoding::ExpectedShares => {
                self.expected_shares(system);
                self.search.by_weights(system, input, &raw, &self.weights)
            }
        };
        if let Some(shaped) = shaped {
            raw = shaped;
        }
        let repaired = repair(system, input, &raw).map_err(|e| e.to_string())?;
        if !self.local_search {
            return Ok(repaired);
        }
        let det = Detector::fastest(system);
        match self.search.improve(system, input, &repaired) {
            Some(better)
                if better.infeasibility(system, input).is_none()
                    && better.makespan_ms(system, input, det)
                        < repaired.makespan_ms(system, input, det) =>
            {
                Ok(better)
            }
            _ => Ok(repaired),
        }
    }
}

impl GlobalPolicy for MlpPolicy {
    fn name(&self) -> &str {
        &self.name
    }

    fn plan(&mut self, system: &System, input: &PlanInput) -> Plan {
        match self.try_plan(system, input) {
            Ok(plan) => {
                self.last_error = None;
                plan
            }
            Err(e) => {
                self.last_error = Some(e);
                if input.validate(system).is_err() {
                    return Plan::empty(system);
                }
                repair(system, input, &Plan::empty(system)).unwrap_or_else(|e| {
                    self.last_error = Some(e.to_string());
                    Plan::empty(system)
                })
            }
        }
    }
}

/// Slot names "model@proc#k" in output order (the sidecar's `outputs.slots`).
pub fn slot_names(system: &System, encoding: &Encoding) -> Vec<String> {
    encoding
        .slots()
        .iter()
        .map(|s| {
            format!(
                "{}@{}#{}",
                system.models[s.model.0].name, system.processors[s.proc.0].name, s.k
            )
        })
        .collect()
}
