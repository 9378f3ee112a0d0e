//! ONNX export of a trained policy network (onnx-protobuf) and its JSON
//! sidecar ([`camdnn_policy::mlp::Sidecar`]).
//!
//! Graph (opset 13, float32): `x` [1, F] -> Sub(mean) -> Div(std) ->
//! (Gemm -> Relu) per hidden layer -> two Gemm heads; the classifier head
//! ends in Sigmoid (`prob`, P(b > 0)), the regressor head is `count`. Both
//! outputs are [1, S], S = number of slots.

use camdnn_policy::features::{profile_ms, structure_fingerprint};
use camdnn_policy::mlp::{OutputSpec, Sidecar, TrainingInfo, SIDECAR_FORMAT};
use camdnn_policy::System;
use onnx_protobuf::{
    tensor_proto::DataType, tensor_shape_proto::Dimension, type_proto, GraphProto, Message,
    ModelProto, NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto,
    ValueInfoProto,
};

use crate::train::{Dense, TrainedModel};

/// Name of the input tensor.
pub const INPUT: &str = "x";
/// Name of the probability output.
pub const PROB: &str = "prob";
/// Name of the count output.
pub const COUNT: &str = "count";

/// The decoding, as written into the sidecar.
pub const DECODING: &str = "per slot model@proc#k: b_k = max(1, round(count)) capped at floor(r_i / k) when prob >= threshold, else 0; a(i,j) = 1 where any b_k(i,j) > 0, detector resident on its fastest processor; decoder counts: those b_k as they are; decoder shares: n(i,j) = sum_k k b_k(i,j), decoder expected_shares: sum_k k prob_k max(count_k, 0), read as request shares, rescaled to r_i after dropping hosts under min_share requests (unless the model's largest): each host its whole share, the requests left by rounding largest_remainder (largest fractional shares) or least_finish (one by one to the kept host whose processor would finish first with it: queued work, detector, batches, amortised loads; of all models, the request whose earliest finish is latest first), each pair batched by its min-cost composition; then camdnn_policy::repair (always) and, if local_search, optimal re-batching per pair plus request moves between hosts, keeping the lower makespan";

/// Why export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The model file is inconsistent.
    #[error("model: {0}")]
    Model(String),
    /// Protobuf encoding failed.
    #[error("protobuf: {0}")]
    Protobuf(#[from] protobuf::Error),
    /// JSON encoding failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

fn tensor(name: &str, dims: &[usize], data: &[f32]) -> TensorProto {
    let mut t = TensorProto::new();
    t.name = name.to_string();
    t.dims = dims.iter().map(|&d| d as i64).collect();
    t.data_type = DataType::FLOAT as i32;
    t.float_data = data.to_vec();
    t
}

fn value_info(name: &str, dims: &[usize]) -> ValueInfoProto {
    let mut shape = TensorShapeProto::new();
    for &d in dims {
        let mut dim = Dimension::new();
        dim.set_dim_value(d as i64);
        shape.dim.push(dim);
    }
    let mut tt = type_proto::Tensor::new();
    tt.elem_type = DataType::FLOAT as i32;
    tt.shape = protobuf::MessageField::some(shape);
    let mut ty = TypeProto::new();
    ty.value = Some(type_proto::Value::TensorType(tt));
    let mut v = ValueInfoProto::new();
    v.name = name.to_string();
    v.type_ = protobuf::MessageField::some(ty);
    v
}

fn node(op: &str, name: &str, inputs: &[&str], output: &str) -> NodeProto {
    let mut n = NodeProto::new();
    n.op_type = op.to_string();
    n.name = name.to_string();
    n.input = inputs.iter().map(|s| s.to_string()).collect();
    n.output = vec![output.to_string()];
    n
}

fn check(d: &Dense, inputs: usize, what: &str) -> Result<(), ExportError> {
    if d.inputs != inputs || d.weights.len() != d.inputs * d.outputs || d.bias.len() != d.outputs {
        return Err(ExportError::Model(format!(
            "{what}: {}x{} weights ({} values) and {} biases do not chain from {inputs} inputs",
            d.inputs,
            d.outputs,
            d.weights.len(),
            d.bias.len()
        )));
    }
    Ok(())
}

/// One output head of a network: its name, its layer and whether a
/// Sigmoid follows it.
pub struct Head<'a> {
    /// Output tensor name.
    pub name: &'a str,
    /// The layer.
    pub dense: &'a Dense,
    /// Whether the output is sigmoid(layer) rather than the layer itself.
    pub sigmoid: bool,
}

/// A normalised MLP as an ONNX model: `x` [1, F] -> Sub(mean) -> Div(std)
/// -> (Gemm -> Relu) per hidden layer -> each head's Gemm (and Sigmoid).
pub fn network_bytes(
    name: &str,
    doc: String,
    mean: &[f32],
    std: &[f32],
    hidden: &[Dense],
    heads: &[Head],
) -> Result<Vec<u8>, ExportError> {
    let nf = mean.len();
    if std.len() != nf {
        return Err(ExportError::Model(format!(
            "{nf} means but {} stds",
            std.len()
        )));
    }
    let mut g = GraphProto::new();
    g.name = name.to_string();
    g.input.push(value_info(INPUT, &[1, nf]));
    g.initializer.push(tensor("mean", &[nf], mean));
    g.initializer.push(tensor("std", &[nf], std));
    g.node
        .push(node("Sub", "center", &[INPUT, "mean"], "x_centered"));
    g.node
        .push(node("Div", "scale", &["x_centered", "std"], "x_norm"));
    let mut prev = "x_norm".to_string();
    let mut width = nf;
    for (l, d) in hidden.iter().enumerate() {
        check(d, width, &format!("hidden layer {l}"))?;
        let (w, b, z, h) = (
            format!("w{l}"),
            format!("b{l}"),
            format!("z{l}"),
            format!("h{l}"),
        );
        g.initializer
            .push(tensor(&w, &[d.inputs, d.outputs], &d.weights));
        g.initializer.push(tensor(&b, &[d.outputs], &d.bias));
        g.node
            .push(node("Gemm", &format!("gemm{l}"), &[&prev, &w, &b], &z));
        g.node.push(node("Relu", &format!("relu{l}"), &[&z], &h));
        prev = h;
        width = d.outputs;
    }
    for head in heads {
        check(head.dense, width, &format!("{} head", head.name))?;
        let (w, b) = (format!("w_{}", head.name), format!("b_{}", head.name));
        g.initializer.push(tensor(
            &w,
            &[head.dense.inputs, head.dense.outputs],
            &head.dense.weights,
        ));
        g.initializer
            .push(tensor(&b, &[head.dense.outputs], &head.dense.bias));
    }
    for head in heads {
        let (w, b) = (format!("w_{}", head.name), format!("b_{}", head.name));
        let gemm = format!("gemm_{}", head.name);
        if head.sigmoid {
            let logits = if head.name == PROB {
                "logits".to_string()
            } else {
                format!("logits_{}", head.name)
            };
            g.node.push(node("Gemm", &gemm, &[&prev, &w, &b], &logits));
            let sig = if head.name == PROB {
                "sigmoid".to_string()
            } else {
                format!("sigmoid_{}", head.name)
            };
            g.node.push(node("Sigmoid", &sig, &[&logits], head.name));
        } else {
            g.node
                .push(node("Gemm", &gemm, &[&prev, &w, &b], head.name));
        }
    }
    for head in heads {
        g.output
            .push(value_info(head.name, &[1, head.dense.outputs]));
    }
    let mut m = ModelProto::new();
    m.ir_version = 8;
    m.producer_name = "camdnn-ilmodel".to_string();
    m.producer_version = env!("CARGO_PKG_VERSION").to_string();
    m.doc_string = doc;
    let mut opset = OperatorSetIdProto::new();
    opset.domain = String::new();
    opset.version = 13;
    m.opset_import.push(opset);
    m.graph = protobuf::MessageField::some(g);
    Ok(m.write_to_bytes()?)
}

/// The ONNX bytes of a trained model.
pub fn onnx_bytes(model: &TrainedModel) -> Result<Vec<u8>, ExportError> {
    let nf = model.features.len();
    let ns = model.slots.len();
    if model.mean.len() != nf || model.std.len() != nf {
        return Err(ExportError::Model(format!(
            "{} features but {} means and {} stds",
            nf,
            model.mean.len(),
            model.std.len()
        )));
    }
    for (head, d) in [("prob", &model.prob_head), ("count", &model.count_head)] {
        if d.outputs != ns {
            return Err(ExportError::Model(format!(
                "{head} head has {} outputs but there are {ns} slots",
                d.outputs
            )));
        }
    }
    network_bytes(
        &format!("camdnn_policy_{}", model.system_name),
        format!(
            "camdnn learned global policy for system {} (fingerprint {})",
            model.system_name, model.system_fingerprint
        ),
        &model.mean,
        &model.std,
        &model.hidden,
        &[
            Head {
                name: PROB,
                dense: &model.prob_head,
                sigmoid: true,
            },
            Head {
                name: COUNT,
                dense: &model.count_head,
                sigmoid: false,
            },
        ],
    )
}

/// The sidecar path of a policy: `X.onnx` -> `X.policy.json`.
pub fn sidecar_path(onnx: &std::path::Path) -> std::path::PathBuf {
    onnx.with_extension("policy.json")
}

/// The sidecar of a model trained for `system` (its structure and timings
/// are recorded, so the policy also loads on a re-measured profile of the
/// same board; `camdnn_policy::mlp::PROFILE_TOLERANCE`).
pub fn sidecar(model: &TrainedModel, local_search: bool, system: &System) -> Sidecar {
    Sidecar {
        format: SIDECAR_FORMAT.to_string(),
        system_name: model.system_name.clone(),
        system_file_fnv1a64: model.system_file_fnv1a64.clone(),
        system_fingerprint: model.system_fingerprint.clone(),
        structure_fingerprint: Some(structure_fingerprint(system)),
        profile_ms: Some(profile_ms(system)),
        input: INPUT.to_string(),
        features: model.features.clone(),
        outputs: OutputSpec {
            prob: PROB.to_string(),
            count: COUNT.to_string(),
            slots: model.slots.clone(),
            threshold: 0.5,
            min_share: camdnn_policy::mlp::search::DEFAULT_MIN_SHARE,
            decoder: camdnn_policy::mlp::Decoding::default(),
            rounding: camdnn_policy::mlp::search::Rounding::default(),
            decoding: DECODING.to_string(),
        },
        local_search,
        training: TrainingInfo {
            seed: model.config.seed,
            hidden: model.config.hidden.clone(),
            epochs: model.config.epochs,
            batch_size: model.config.batch_size,
            learning_rate: model.config.learning_rate,
            penalty_weight: model.config.penalty_weight,
            share_weight: model.config.share_weight,
            work_weight: model.config.work_weight,
            heldout_fraction: model.config.heldout_fraction,
            augment: model.config.augment,
            demos_fnv1a64: model.demos_fnv1a64.clone(),
            train_samples: model.train_samples,
            heldout_samples: model.heldout_samples,
        },
        metrics: model.metrics.clone(),
    }
}

/// The sidecar as pretty JSON text.
pub fn sidecar_json(
    model: &TrainedModel,
    local_search: bool,
    system: &System,
) -> Result<String, ExportError> {
    Ok(serde_json::to_string_pretty(&sidecar(model, local_search, system))? + "\n")
}
