//! The JSON sidecar `ilmodel export` writes beside the ONNX file: what the
//! network was trained for (system, profile, features, slots), how its
//! outputs are decoded, and its held-out metrics.

use serde::{Deserialize, Serialize};

use super::{search, Decoding};

/// Format tag of the sidecar.
pub const SIDECAR_FORMAT: &str = "camdnn-mlp-policy/1";

/// How far (as a factor either way) a re-measured profile's batch-1
/// execution and load times may be from the trained-on ones for the policy
/// to still load: a shared host's speed drifts by up to 2x within hours, and
/// the features carry the live timings, so the network sees the change; the
/// repair, the search and the global step's replay check what it proposes.
pub const PROFILE_TOLERANCE: f64 = 2.0;

/// The JSON sidecar written next to the ONNX file by `ilmodel export`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sidecar {
    /// [`SIDECAR_FORMAT`].
    pub format: String,
    /// Name of the system the policy was trained for.
    pub system_name: String,
    /// FNV-1a 64 (hex) of the system file's text (provenance).
    pub system_file_fnv1a64: String,
    /// [`fingerprint`] of the validated system: checked at load.
    pub system_fingerprint: String,
    /// [`structure_fingerprint`] of the system (absent in older sidecars,
    /// which then load only on the exact profile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structure_fingerprint: Option<String>,
    /// The trained-on timings, [`profile_ms`]: with the structure, they let
    /// the policy load on a re-measured profile of the same board whose
    /// timings are within [`PROFILE_TOLERANCE`] of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_ms: Option<std::collections::BTreeMap<String, [f64; 2]>>,
    /// Input tensor name, shape [1, features.len()].
    pub input: String,
    /// Feature names, in input order ([`Encoding::feature_names`]).
    pub features: Vec<String>,
    /// Output tensors and their decoding.
    pub outputs: OutputSpec,
    /// Whether the runtime runs the local search after repair.
    pub local_search: bool,
    /// How the network was trained.
    pub training: TrainingInfo,
    /// Held-out metrics from training.
    pub metrics: HeldoutMetrics,
}

/// Output layout and decoding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    /// Name of the P(b > 0) output, shape [1, slots.len()].
    pub prob: String,
    /// Name of the count output, shape [1, slots.len()].
    pub count: String,
    /// Slots as "model@proc#k", in output order.
    pub slots: Vec<String>,
    /// prob >= threshold means a non-zero count.
    pub threshold: f32,
    /// The share floor of the share decodings, requests: a host whose share
    /// of a model's requests is under it is dropped
    /// ([`search::Search::set_min_share`]). Chosen by `ilmodel calibrate` on
    /// the training split (never the held-out one); 0.5 when absent.
    #[serde(default = "default_min_share")]
    pub min_share: f64,
    /// The decoding the runtime uses, chosen with the share floor by
    /// `ilmodel calibrate` on the training split; expected shares when
    /// absent.
    #[serde(default)]
    pub decoder: Decoding,
    /// How the share decodings give out the requests the hosts' whole
    /// shares leave, chosen with the decoder by `ilmodel calibrate`; the
    /// largest remainders when absent (as before it was a choice).
    #[serde(default)]
    pub rounding: search::Rounding,
    /// The decoding, in words.
    pub decoding: String,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn default_min_share() -> f64 {
    search::DEFAULT_MIN_SHARE
}

/// Training parameters (reproducibility).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingInfo {
    /// Seed of initialisation, split and shuffling.
    pub seed: u64,
    /// Hidden layer widths.
    pub hidden: Vec<usize>,
    /// Epochs run.
    pub epochs: usize,
    /// Mini-batch size.
    pub batch_size: usize,
    /// AdamW learning rate.
    pub learning_rate: f64,
    /// Weight of the served-requests penalty.
    pub penalty_weight: f64,
    /// Weight of the per-pair expected-requests term (0 in older sidecars).
    #[serde(default)]
    pub share_weight: f64,
    /// Weight of the per-processor expected-work term (0 in older sidecars).
    #[serde(default)]
    pub work_weight: f64,
    /// Fraction of scenes held out.
    pub heldout_fraction: f64,
    /// Label-preserving copies per training demonstration (0, and absent
    /// from the file, for policies trained without them).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub augment: usize,
    /// FNV-1a 64 (hex) of the demonstrations file.
    pub demos_fnv1a64: String,
    /// Demonstrations used for training.
    pub train_samples: usize,
    /// Demonstrations held out.
    pub heldout_samples: usize,
}

/// Held-out metrics computed by `ilmodel train`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeldoutMetrics {
    /// Total loss (BCE + MAE + penalty).
    pub loss: f64,
    /// Binary cross-entropy of the zero / non-zero head.
    pub bce: f64,
    /// Mean absolute error of the decoded counts over all slots.
    pub mae: f64,
    /// Fraction of slots whose decoded count equals the ILP's.
    pub slot_accuracy: f64,
    /// Fraction of instances whose decoded plan equals the ILP's exactly.
    pub exact_plans: f64,
    /// Mean absolute error of each pair's expected requests
    /// sum_k k P(b_k > 0) count_k against the ILP's n(i,j), over all pairs:
    /// what the expected-shares decoding reads (absent in older sidecars).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair_requests_mae: Option<f64>,
    /// Mean absolute error of each processor's expected execution time
    /// against the ILP plan's, in units of the training set's mean
    /// per-processor work (absent in older sidecars).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processor_work_mae: Option<f64>,
}
