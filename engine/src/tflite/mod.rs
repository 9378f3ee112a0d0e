//! The TFLite loading pass: rewrites what tract-tflite lacks before tract sees the model.
//!
//! Real TFLite files (mediapipe's face, hand, pose models) store weights as float16
//! constants behind `DEQUANTIZE`, sparse constants behind `DENSIFY`, and use `PRELU` and
//! `DEPTH_TO_SPACE`; tract-tflite 0.23 implements none of these and its op registry is
//! private. So the flatbuffer itself is parsed ([`graph`], with the schema code
//! tract-tflite generated from the official `schema.fbs`), rewritten ([`rewrite`]) and
//! written back; what still has no tract builder is refused with the op names listed.

mod graph;
mod options;
mod rewrite;

use std::collections::BTreeSet;

use tract_tflite::tflite::BuiltinOperator as Op;

pub use rewrite::Rewrites;

use graph::Graph;

/// Why a TFLite file could not be prepared for tract.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TfliteError {
    /// The bytes are not a TFLite flatbuffer.
    #[error("{0}")]
    Parse(String),
    /// The flatbuffer is one, but its content is inconsistent.
    #[error("malformed TFLite model: {0}")]
    Malformed(String),
    /// Operators left that neither tract nor a rewrite handles (sorted names).
    #[error("unsupported operators: {}", .0.join(", "))]
    Unsupported(Vec<String>),
}

/// A model ready for tract-tflite: the rewritten flatbuffer and what was rewritten.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The rewritten TFLite flatbuffer.
    pub bytes: Vec<u8>,
    /// Operators each rewrite replaced.
    pub rewrites: Rewrites,
}

/// The builtin operators tract-tflite 0.23.9 builds (`reg_to_tract` in its `ops/`);
/// checked against the pinned version, since its registry cannot be queried.
const TRACT_BUILTINS: &[Op] = &[
    Op::ABS,
    Op::ADD,
    Op::AVERAGE_POOL_2D,
    Op::BATCH_MATMUL,
    Op::BROADCAST_TO,
    Op::CEIL,
    Op::CONCATENATION,
    Op::CONV_2D,
    Op::COS,
    Op::DEPTHWISE_CONV_2D,
    Op::DIV,
    Op::EQUAL,
    Op::EXP,
    Op::EXPAND_DIMS,
    Op::FLOOR,
    Op::FULLY_CONNECTED,
    Op::GREATER,
    Op::GREATER_EQUAL,
    Op::HARD_SWISH,
    Op::LEAKY_RELU,
    Op::LESS,
    Op::LESS_EQUAL,
    Op::LOG,
    Op::LOGICAL_AND,
    Op::LOGICAL_NOT,
    Op::LOGICAL_OR,
    Op::LOGISTIC,
    Op::MAXIMUM,
    Op::MAX_POOL_2D,
    Op::MEAN,
    Op::MINIMUM,
    Op::MUL,
    Op::NOT_EQUAL,
    Op::PAD,
    Op::PADV2,
    Op::REDUCE_MAX,
    Op::REDUCE_MIN,
    Op::REDUCE_PROD,
    Op::RELU,
    Op::RELU6,
    Op::RESHAPE,
    Op::RESIZE_BILINEAR,
    Op::RESIZE_NEAREST_NEIGHBOR,
    Op::RSQRT,
    Op::SELECT,
    Op::SELECT_V2,
    Op::SHAPE,
    Op::SIN,
    Op::SLICE,
    Op::SOFTMAX,
    Op::SQRT,
    Op::SQUARE,
    Op::SQUEEZE,
    Op::STRIDED_SLICE,
    Op::SUB,
    Op::SUM,
    Op::TANH,
    Op::TRANSPOSE,
];

/// Names of the operators of `g` that tract-tflite cannot build, sorted.
fn unsupported_ops(g: &Graph) -> Vec<String> {
    let ops: BTreeSet<String> = g
        .ops
        .iter()
        .map(|op| g.code(op))
        .filter(|c| c.custom.is_some() || !TRACT_BUILTINS.iter().any(|b| b.0 == c.builtin))
        .map(|c| c.name())
        .collect();
    ops.into_iter().collect()
}

/// Parses a TFLite flatbuffer, applies every rewrite, and returns the flatbuffer tract
/// loads; refuses (listing them) operators that would still be unsupported.
pub fn prepare(bytes: &[u8]) -> Result<Prepared, TfliteError> {
    let mut g = Graph::read(bytes)?;
    let rewrites = rewrite::rewrite_all(&mut g)?;
    let missing = unsupported_ops(&g);
    if !missing.is_empty() {
        return Err(TfliteError::Unsupported(missing));
    }
    let is_sparse = |i: &i32| {
        usize::try_from(*i)
            .ok()
            .and_then(|i| g.tensors.get(i))
            .is_some_and(|t| t.sparsity.is_some())
    };
    if let Some(&t) = g
        .ops
        .iter()
        .flat_map(|op| &op.inputs)
        .find(|i| is_sparse(i))
    {
        return Err(TfliteError::Malformed(format!(
            "sparse tensor `{}` is used by an operator other than DENSIFY",
            g.tensors[t as usize].name
        )));
    }
    Ok(Prepared {
        bytes: g.write(),
        rewrites,
    })
}

#[cfg(test)]
mod tests;
