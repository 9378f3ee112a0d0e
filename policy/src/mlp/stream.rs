//! The learned global step that plans for the stream: an MLP distilled from
//! the stream oracle (`ilmodel::stream`) on the states the step visits,
//! stored as ONNX plus a JSON sidecar and run with tract-onnx.
//!
//! The network reads the epoch ([`StreamEncoding`]) and gives, for every
//! (model, unit) pair that can run, the probability that the oracle keeps
//! the model resident there. Decoding: each detector on its most probable
//! unit; the classifier pairs at or above the threshold, most probable
//! first, while the unit has room; every model a scene of the epoch needs
//! and still has no host gets one ([`crate::repair`] on the epoch's largest
//! counts); then the latest scene's requests are split over that residency
//! ([`crate::repair`] and the local search, as the greedy planner splits).

use serde::{Deserialize, Serialize};
use tract_onnx::prelude::{tvec, IntoTValue, Tensor, TypedRunnableModel};

use super::search::Search;
use super::MlpError;
use crate::epoch::EpochScenes;
use crate::features::{fingerprint, structure_fingerprint};
use crate::{repair, Detector, GlobalPolicy, InputError, ModelId, Plan, PlanInput, ProcId, System};

/// Format tag of the stream policy's sidecar.
pub const STREAM_FORMAT: &str = "camdnn-stream-policy/1";

/// The JSON sidecar written next to the ONNX file by `ilmodel learn`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamSidecar {
    /// [`STREAM_FORMAT`].
    pub format: String,
    /// Name of the system the policy was trained for.
    pub system_name: String,
    /// [`fingerprint`] of the system: the exact profile it was trained on.
    pub system_fingerprint: String,
    /// [`structure_fingerprint`] of the system.
    pub structure_fingerprint: String,
    /// The trained-on timings ([`crate::features::profile_ms`]).
    pub profile_ms: std::collections::BTreeMap<String, [f64; 2]>,
    /// Input tensor name, shape [1, features.len()].
    pub input: String,
    /// Feature names, in input order ([`StreamEncoding::feature_names`]).
    pub features: Vec<String>,
    /// Output tensor name, shape [1, pairs.len()]: P(resident).
    pub output: String,
    /// The (model, unit) pairs as "model@unit", in output order.
    pub pairs: Vec<String>,
    /// A classifier pair is kept when its probability is at least this.
    pub threshold: f32,
    /// How the network was trained and how close it came to its oracle.
    pub training: StreamTraining,
}

/// Training parameters and held-out fidelity of a stream policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamTraining {
    /// Seed of initialisation, split and shuffling.
    pub seed: u64,
    /// Hidden layer widths.
    pub hidden: Vec<usize>,
    /// Epochs of the last training.
    pub epochs: usize,
    /// DAgger rounds: states the policy itself visited, labelled by the
    /// oracle, added before retraining.
    pub dagger_rounds: usize,
    /// Labelled states trained on.
    pub train_states: usize,
    /// Held-out states (visited on traces training never saw).
    pub heldout_states: usize,
    /// Mean of J(policy) / J(oracle) - 1 on the held-out states (none
    /// before they are measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heldout_gap_mean: Option<f64>,
    /// Its median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heldout_gap_p50: Option<f64>,
    /// Its largest value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heldout_gap_max: Option<f64>,
    /// Share of held-out states whose residency and detector unit are the
    /// oracle's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heldout_exact: Option<f64>,
}

/// The stream policy's input features and output pairs for one system.
#[derive(Clone, Debug)]
pub struct StreamEncoding {
    names: Vec<String>,
    request: Vec<ModelId>,
    /// Every supported (model, unit) pair, detectors included: the outputs.
    pairs: Vec<(ModelId, ProcId)>,
    /// Supported (request model, unit) pairs and their best time per request.
    work_pairs: Vec<(ModelId, ProcId, f64)>,
    /// Per request model, its best time per request on any unit.
    best_any: Vec<f64>,
    /// The first detector's fastest run, ms.
    fastest_detector_ms: f64,
}

impl StreamEncoding {
    /// The encoding of a validated system.
    pub fn new(system: &System) -> Self {
        let request: Vec<ModelId> = system.request_models().collect();
        let pairs: Vec<(ModelId, ProcId)> = system
            .model_ids()
            .flat_map(|i| system.supporting(i).map(move |j| (i, j)))
            .collect();
        let best = |i: ModelId, j: ProcId| crate::bound::per_request_ms(system, i, j, usize::MAX);
        let work_pairs: Vec<(ModelId, ProcId, f64)> = pairs
            .iter()
            .filter(|(i, _)| system.models[i.0].parent.is_some())
            .map(|&(i, j)| (i, j, best(i, j)))
            .collect();
        let best_any = request
            .iter()
            .map(|&i| {
                system
                    .supporting(i)
                    .map(|j| best(i, j))
                    .fold(f64::INFINITY, f64::min)
            })
            .collect();
        let name = |i: ModelId| system.models[i.0].name.clone();
        let pair = |i: ModelId, j: ProcId| format!("{}@{}", name(i), system.processors[j.0].name);
        let mut names = Vec::new();
        for what in ["rbar", "rlast", "rmax"] {
            names.extend(request.iter().map(|&i| format!("{what}[{}]", name(i))));
        }
        names.extend(system.processors.iter().map(|p| format!("rem[{}]", p.name)));
        for what in ["a_old", "load", "load_wait"] {
            names.extend(
                pairs
                    .iter()
                    .map(|&(i, j)| format!("{what}[{}]", pair(i, j))),
            );
        }
        names.extend(
            work_pairs
                .iter()
                .map(|&(i, j, _)| format!("work[{}]", pair(i, j))),
        );
        names.extend(["period".to_string(), "frames".into(), "load_factor".into()]);
        StreamEncoding {
            names,
            request,
            pairs,
            work_pairs,
            best_any,
            fastest_detector_ms: Detector::fastest(system).exec_ms,
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

    /// The output pairs, in output order.
    pub fn pairs(&self) -> &[(ModelId, ProcId)] {
        &self.pairs
    }

    /// The output pairs as "model@unit".
    pub fn pair_names(&self, system: &System) -> Vec<String> {
        self.pairs
            .iter()
            .map(|&(i, j)| {
                format!(
                    "{}@{}",
                    system.models[i.0].name, system.processors[j.0].name
                )
            })
            .collect()
    }

    /// Writes the features of the step's `input` and `epoch` into `out`
    /// (length [`StreamEncoding::num_features`]).
    pub fn write(
        &self,
        system: &System,
        input: &PlanInput,
        epoch: &EpochScenes,
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
        let f = input.frames_per_epoch.max(1.0);
        let (mean, max) = (epoch.mean_scene(), epoch.max_scene());
        let count = |v: &[f64], i: ModelId| v.get(i.0).copied().unwrap_or(0.0);
        let mut values: Vec<f64> = Vec::with_capacity(out.len());
        values.extend(self.request.iter().map(|&i| count(&mean, i)));
        values.extend(self.request.iter().map(|&i| f64::from(input.scene[i.0])));
        values.extend(
            self.request
                .iter()
                .map(|&i| f64::from(max.get(i.0).copied().unwrap_or(0))),
        );
        values.extend(input.rem_ms.iter().copied());
        let new_load = |i: ModelId, j: ProcId| {
            if input.was_resident(system, i, j) {
                0.0
            } else {
                system.load_ms(i, j)
            }
        };
        values.extend(
            self.pairs
                .iter()
                .map(|&(i, j)| f64::from(u8::from(input.was_resident(system, i, j)))),
        );
        values.extend(self.pairs.iter().map(|&(i, j)| new_load(i, j) / f));
        values.extend(
            self.pairs
                .iter()
                .map(|&(i, j)| epoch.load_delay_ms(new_load(i, j), f)),
        );
        values.extend(self.work_pairs.iter().map(|&(i, _, b)| count(&mean, i) * b));
        let work: f64 = self
            .request
            .iter()
            .zip(&self.best_any)
            .map(|(&i, &b)| count(&mean, i) * b)
            .sum();
        let units = system.num_processors() as f64;
        let load_factor = (work + self.fastest_detector_ms) / (units * epoch.period_ms);
        values.extend([epoch.period_ms, f, load_factor]);
        for (o, v) in out.iter_mut().zip(&values) {
            *o = *v as f32;
        }
        Ok(())
    }
}

/// The network: features in, P(resident) per pair out.
struct Net {
    plan: std::sync::Arc<TypedRunnableModel>,
    inputs: usize,
    outputs: usize,
}

impl Net {
    fn load(bytes: &[u8], inputs: usize, outputs: usize) -> Result<Self, MlpError> {
        use tract_onnx::prelude::*;
        let err = |e: TractError| MlpError::Onnx(format!("{e:#}"));
        let plan = tract_onnx::onnx()
            .model_for_read(&mut std::io::Cursor::new(bytes))
            .map_err(err)?
            .with_input_fact(0, f32::fact([1, inputs]).into())
            .map_err(err)?
            .into_optimized()
            .map_err(err)?
            .into_runnable()
            .map_err(err)?;
        let net = Net {
            plan,
            inputs,
            outputs,
        };
        let mut probe = vec![0.0; outputs];
        net.run(&vec![0.0; inputs], &mut probe)?;
        Ok(net)
    }

    fn run(&self, features: &[f32], out: &mut [f32]) -> Result<(), MlpError> {
        let onnx = |e: tract_onnx::prelude::TractError| MlpError::Onnx(format!("{e:#}"));
        let x = Tensor::from_shape(&[1, self.inputs], features).map_err(onnx)?;
        let result = self.plan.run(tvec!(x.into_tvalue())).map_err(onnx)?;
        let view = result
            .first()
            .ok_or_else(|| MlpError::Onnx("the network has no output".into()))?
            .to_plain_array_view::<f32>()
            .map_err(onnx)?;
        if view.len() != self.outputs {
            return Err(MlpError::Onnx(format!(
                "the network gives {} values, the sidecar lists {} pairs",
                view.len(),
                self.outputs
            )));
        }
        for (o, v) in out.iter_mut().zip(view.iter()) {
            *o = *v;
        }
        Ok(())
    }
}

/// The learned stream policy: features, MLP, decoding, split.
pub struct StreamMlp {
    name: String,
    encoding: StreamEncoding,
    net: Net,
    sidecar: StreamSidecar,
    features: Vec<f32>,
    probs: Vec<f32>,
    search: Search,
    last_error: Option<String>,
}

impl std::fmt::Debug for StreamMlp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamMlp")
            .field("name", &self.name)
            .field("pairs", &self.sidecar.pairs.len())
            .finish_non_exhaustive()
    }
}

impl StreamMlp {
    /// Loads a stream policy for `system`; refuses one trained for another
    /// system or profile, or whose features or pairs differ.
    pub fn new(system: &System, onnx: &[u8], sidecar: &str) -> Result<Self, MlpError> {
        let sidecar: StreamSidecar = serde_json::from_str(sidecar)?;
        if sidecar.format != STREAM_FORMAT {
            return Err(MlpError::Format {
                got: sidecar.format,
            });
        }
        let mismatch = |what, trained: &str, actual: String| MlpError::SystemMismatch {
            what,
            trained: trained.to_string(),
            actual,
        };
        if sidecar.system_fingerprint != fingerprint(system) {
            let structure = structure_fingerprint(system);
            return Err(if sidecar.structure_fingerprint != structure {
                mismatch("structure", &sidecar.structure_fingerprint, structure)
            } else {
                mismatch(
                    "profile (a stream policy runs on the profile it was trained on)",
                    &sidecar.system_fingerprint,
                    fingerprint(system),
                )
            });
        }
        let encoding = StreamEncoding::new(system);
        if sidecar.features != encoding.feature_names() {
            let actual = encoding.feature_names().join(",");
            return Err(mismatch(
                "feature layout",
                &sidecar.features.join(","),
                actual,
            ));
        }
        let pairs = encoding.pair_names(system);
        if sidecar.pairs != pairs {
            return Err(mismatch(
                "output pairs",
                &sidecar.pairs.join(","),
                pairs.join(","),
            ));
        }
        if !(sidecar.threshold > 0.0 && sidecar.threshold < 1.0) {
            return Err(MlpError::Onnx(format!(
                "sidecar threshold {} is not in (0, 1)",
                sidecar.threshold
            )));
        }
        let net = Net::load(onnx, encoding.num_features(), pairs.len())?;
        Ok(StreamMlp {
            name: format!("stream-mlp({})", system.name),
            features: vec![0.0; encoding.num_features()],
            probs: vec![0.0; pairs.len()],
            encoding,
            net,
            sidecar,
            search: Search::new(system),
            last_error: None,
        })
    }

    /// The sidecar the policy was loaded with.
    pub fn sidecar(&self) -> &StreamSidecar {
        &self.sidecar
    }

    /// The error of the last plan, if it had one.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// The network's P(resident) per pair for this step ([`StreamEncoding::pairs`]).
    pub fn probabilities(
        &mut self,
        system: &System,
        input: &PlanInput,
        epoch: &EpochScenes,
    ) -> Result<&[f32], String> {
        self.encoding
            .write(system, input, epoch, &mut self.features)
            .map_err(|e| e.to_string())?;
        self.net
            .run(&self.features, &mut self.probs)
            .map_err(|e| e.to_string())?;
        Ok(&self.probs)
    }

    /// The decoded residency (no batches) and the first detector's unit.
    pub fn residency(
        &mut self,
        system: &System,
        input: &PlanInput,
        epoch: &EpochScenes,
    ) -> Result<(Plan, ProcId), String> {
        let threshold = self.sidecar.threshold;
        let pairs = self.encoding.pairs.clone();
        let probs = self.probabilities(system, input, epoch)?.to_vec();
        decode_residency(system, input, epoch, &pairs, &probs, threshold)
    }

    fn try_plan(
        &mut self,
        system: &System,
        input: &PlanInput,
        epoch: &EpochScenes,
    ) -> Result<Plan, String> {
        let (residency, _) = self.residency(system, input, epoch)?;
        let start = repair(system, input, &residency).map_err(|e| e.to_string())?;
        self.search.refresh(system);
        let det = Detector::fastest(system);
        Ok(match self.search.improve(system, input, &start) {
            Some(better)
                if better.infeasibility(system, input).is_none()
                    && better.makespan_ms(system, input, det)
                        < start.makespan_ms(system, input, det) =>
            {
                better
            }
            _ => start,
        })
    }
}

/// The residency decoded from P(resident) per pair (see the module doc),
/// and the first detector's unit.
pub fn decode_residency(
    system: &System,
    input: &PlanInput,
    epoch: &EpochScenes,
    pairs: &[(ModelId, ProcId)],
    probs: &[f32],
    threshold: f32,
) -> Result<(Plan, ProcId), String> {
    let mut plan = Plan::empty(system);
    let mut first = None;
    for r in system.roots() {
        let j = pairs
            .iter()
            .zip(probs)
            .filter(|((m, _), _)| *m == r)
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|((_, j), _)| *j)
            .ok_or_else(|| format!("no unit runs detector {}", system.models[r.0].name))?;
        plan.set_resident(r, j, true);
        first.get_or_insert(j);
    }
    let mut kept: Vec<(ModelId, ProcId, f32)> = Vec::new();
    for (&(m, j), &p) in pairs.iter().zip(probs) {
        if system.models[m.0].parent.is_some() && p >= threshold {
            kept.push((m, j, p));
        }
    }
    kept.sort_by(|a, b| b.2.total_cmp(&a.2));
    for (m, j, _) in kept {
        if crate::plan::fits(system, &plan, m, j) {
            plan.set_resident(m, j, true);
        }
    }
    // Every model some scene of the epoch needs gets a host; the latest
    // scene's, when the units cannot hold them all.
    let largest = epoch.max_scene();
    let all = PlanInput {
        scene: &largest,
        ..*input
    };
    let hosted = repair(system, &all, &plan)
        .or_else(|_| repair(system, input, &plan))
        .map_err(|e| e.to_string())?;
    let mut residency = Plan::empty(system);
    for i in system.model_ids() {
        for j in system.proc_ids() {
            residency.set_resident(i, j, hosted.resident(i, j));
        }
    }
    Ok((residency, first.expect("a validated system has a detector")))
}

impl GlobalPolicy for StreamMlp {
    fn name(&self) -> &str {
        &self.name
    }

    /// The latest scene alone, at 14 frames/s.
    fn plan(&mut self, system: &System, input: &PlanInput) -> Plan {
        let epoch = EpochScenes::latest(input.scene, 1000.0 / 14.0);
        self.plan_epoch(system, input, &epoch)
    }

    fn plan_epoch(&mut self, system: &System, input: &PlanInput, epoch: &EpochScenes) -> Plan {
        match self.try_plan(system, input, epoch) {
            Ok(plan) => {
                self.last_error = None;
                plan
            }
            Err(e) => {
                self.last_error = Some(e);
                repair(system, input, &Plan::empty(system)).unwrap_or_else(|_| Plan::empty(system))
            }
        }
    }
}
