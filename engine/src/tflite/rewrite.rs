//! Rewrites of a TFLite graph into operators tract-tflite implements: constant folding
//! of `DENSIFY` and `DEQUANTIZE` (float16 or int8/uint8 weights become float32 weights),
//! `PRELU` as `relu(x) + alpha * (x - relu(x))`, and `DEPTH_TO_SPACE` as reshape,
//! transpose, reshape. Each rewrite keeps the graph's tensor indices valid.

use tract_tflite::prelude::f16;
use tract_tflite::tflite::{ActivationFunctionType as Act, BuiltinOperator as Op, TensorType};

use super::graph::{DimStorage, Graph, OpDef, Sparsity, TensorDef};
use super::options::Options;
use super::TfliteError;

/// Largest constant a rewrite may materialise (a file claiming more is refused).
const MAX_CONST_BYTES: usize = 1 << 30;

/// How many operators each rewrite replaced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rewrites {
    /// `DENSIFY` of constant sparse tensors folded into dense constants.
    pub densify: usize,
    /// `DEQUANTIZE` of constants folded into float32 constants.
    pub dequantize: usize,
    /// `PRELU` decomposed into `RELU`, `SUB`, `MUL`, `ADD`.
    pub prelu: usize,
    /// `DEPTH_TO_SPACE` decomposed into `RESHAPE`, `TRANSPOSE`, `RESHAPE`.
    pub depth_to_space: usize,
}

impl Rewrites {
    /// Total number of operators rewritten.
    pub fn total(&self) -> usize {
        self.densify + self.dequantize + self.prelu + self.depth_to_space
    }
}

/// Runs every rewrite, in dependency order (densified weights are then dequantized).
pub fn rewrite_all(g: &mut Graph) -> Result<Rewrites, TfliteError> {
    Ok(Rewrites {
        densify: fold_consts(g, Op::DENSIFY, densify)?,
        dequantize: fold_consts(g, Op::DEQUANTIZE, dequantize)?,
        prelu: expand(g, Op::PRELU, expand_prelu)?,
        depth_to_space: expand(g, Op::DEPTH_TO_SPACE, expand_depth_to_space)?,
    })
}

fn malformed(what: impl Into<String>) -> TfliteError {
    TfliteError::Malformed(what.into())
}

fn elem_size(dt: TensorType) -> Option<usize> {
    Some(match dt {
        TensorType::FLOAT32 | TensorType::INT32 | TensorType::UINT32 => 4,
        TensorType::FLOAT16 | TensorType::INT16 | TensorType::UINT16 => 2,
        TensorType::INT8 | TensorType::UINT8 | TensorType::BOOL => 1,
        TensorType::INT64 | TensorType::FLOAT64 | TensorType::UINT64 => 8,
        _ => return None,
    })
}

/// Number of elements of a fully known shape.
fn volume(t: &TensorDef) -> Result<usize, TfliteError> {
    t.shape.iter().try_fold(1usize, |acc, &d| {
        usize::try_from(d)
            .ok()
            .and_then(|d| acc.checked_mul(d))
            .filter(|&n| n <= MAX_CONST_BYTES)
            .ok_or_else(|| malformed(format!("tensor `{}` has shape {:?}", t.name, t.shape)))
    })
}

/// A folded constant: its bytes and element type.
type Folded = (Vec<u8>, TensorType);

/// Replaces every `op` whose inputs are all constant by a constant on its output
/// tensor, computed by `fold` (which returns `None` when it does not apply).
fn fold_consts(
    g: &mut Graph,
    op: Op,
    fold: fn(&Graph, &OpDef) -> Result<Option<Folded>, TfliteError>,
) -> Result<usize, TfliteError> {
    let mut folded = 0;
    let mut kept = Vec::with_capacity(g.ops.len());
    for def in std::mem::take(&mut g.ops) {
        let code = g.code(&def);
        let applies = code.builtin == op.0
            && code.custom.is_none()
            && def.outputs.len() == 1
            && !def.inputs.is_empty()
            && def.inputs.iter().all(|&i| g.const_data(i).is_some());
        let result = if applies { fold(g, &def)? } else { None };
        match result {
            Some((data, dtype)) => {
                let out = def.outputs[0] as usize;
                if g.outputs.contains(&def.outputs[0]) {
                    return Err(malformed(format!(
                        "graph output `{}` is a constant",
                        g.tensors[out].name
                    )));
                }
                let buffer = g.add_buffer(data);
                let t = &mut g.tensors[out];
                t.buffer = buffer;
                t.dtype = dtype;
                t.quant = None;
                t.sparsity = None;
                folded += 1;
            }
            None => kept.push(def),
        }
    }
    g.ops = kept;
    Ok(folded)
}

/// `DEQUANTIZE` of a float16, int8 or uint8 constant into float32.
fn dequantize(g: &Graph, def: &OpDef) -> Result<Option<Folded>, TfliteError> {
    let input = &g.tensors[def.inputs[0] as usize];
    let data = g.const_data(def.inputs[0]).unwrap_or_default();
    let n = volume(input)?;
    let bad_len = || {
        malformed(format!(
            "constant `{}` holds {} bytes for {n} elements",
            input.name,
            data.len()
        ))
    };
    let values: Vec<f32> = match input.dtype {
        TensorType::FLOAT16 => {
            if data.len() != 2 * n {
                return Err(bad_len());
            }
            data.chunks_exact(2)
                .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect()
        }
        TensorType::INT8 | TensorType::UINT8 => {
            if data.len() != n {
                return Err(bad_len());
            }
            let Some(q) = input.quant.as_ref().filter(|q| !q.scale.is_empty()) else {
                return Ok(None);
            };
            let signed = input.dtype == TensorType::INT8;
            // per-tensor, or per-axis along `quantized_dimension`
            let axis = usize::try_from(q.quantized_dimension).unwrap_or(0);
            let inner: usize = input
                .shape
                .iter()
                .skip(axis + 1)
                .map(|&d| d.max(1) as usize)
                .product();
            let channels = q.scale.len();
            data.iter()
                .enumerate()
                .map(|(i, &b)| {
                    let c = if channels == 1 {
                        0
                    } else {
                        (i / inner.max(1)) % channels
                    };
                    let zp = q.zero_point.get(c).copied().unwrap_or(0) as f32;
                    let v = if signed { b as i8 as f32 } else { b as f32 };
                    (v - zp) * q.scale[c]
                })
                .collect()
        }
        _ => return Ok(None),
    };
    Ok(Some((
        values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        TensorType::FLOAT32,
    )))
}

/// `DENSIFY` of a constant sparse tensor (TFLite's `FormatConverter::SparseToDense`).
fn densify(g: &Graph, def: &OpDef) -> Result<Option<Folded>, TfliteError> {
    let input = &g.tensors[def.inputs[0] as usize];
    let Some(sp) = &input.sparsity else {
        return Ok(None);
    };
    let esize = elem_size(input.dtype).ok_or_else(|| {
        malformed(format!(
            "sparse tensor `{}` of type {:?}",
            input.name, input.dtype
        ))
    })?;
    let shape: Vec<usize> = input.shape.iter().map(|&d| d.max(0) as usize).collect();
    let n = volume(input)?;
    if n.saturating_mul(esize) > MAX_CONST_BYTES {
        return Err(malformed(format!(
            "sparse tensor `{}` is too large",
            input.name
        )));
    }
    let src = g.const_data(def.inputs[0]).unwrap_or_default();
    let mut dense = vec![0u8; n * esize];
    let mut walk = SparseWalk {
        sp,
        shape: &shape,
        src,
        esize,
        next: 0,
        dense: &mut dense,
        indices: vec![0; sp.dims.len()],
    };
    walk.check()
        .map_err(|e| malformed(format!("sparse tensor `{}`: {e}", input.name)))?;
    walk.populate(0, 0)
        .map_err(|e| malformed(format!("sparse tensor `{}`: {e}", input.name)))?;
    Ok(Some((dense, input.dtype)))
}

/// The recursive walk over a sparse tensor's storage levels.
struct SparseWalk<'a> {
    sp: &'a Sparsity,
    shape: &'a [usize],
    src: &'a [u8],
    esize: usize,
    /// Next element of `src` to place.
    next: usize,
    dense: &'a mut [u8],
    /// Index at each storage level of the element being placed.
    indices: Vec<usize>,
}

impl SparseWalk<'_> {
    fn check(&self) -> Result<(), String> {
        let rank = self.shape.len();
        let levels = self.sp.dims.len();
        if self.sp.traversal_order.len() != levels
            || levels != rank + self.sp.block_map.len()
            || levels > 16
        {
            return Err(format!(
                "traversal order of {} levels, {} dims and {} blocks for rank {rank}",
                self.sp.traversal_order.len(),
                levels,
                self.sp.block_map.len()
            ));
        }
        if self.sp.traversal_order.iter().any(|&t| t >= levels)
            || self.sp.traversal_order[..rank].iter().any(|&t| t >= rank)
            || self.sp.block_map.iter().any(|&d| d >= rank)
        {
            return Err("traversal order or block map out of range".into());
        }
        Ok(())
    }

    fn block_size(&self, block: usize) -> usize {
        match self.sp.dims[self.shape.len() + block] {
            DimStorage::Dense(n) => n,
            DimStorage::Sparse { .. } => 1,
        }
    }

    fn populate(&mut self, level: usize, prev: usize) -> Result<(), String> {
        let rank = self.shape.len();
        if level == self.sp.dims.len() {
            let mut orig = vec![0usize; rank];
            for i in 0..rank {
                orig[self.sp.traversal_order[i]] = self.indices[i];
            }
            for i in rank..level {
                let block = self.sp.traversal_order[i] - rank;
                let dim = self.sp.block_map[block];
                orig[dim] = orig[dim] * self.block_size(block) + self.indices[i];
            }
            let mut flat = 0usize;
            for (d, (&ix, &size)) in orig.iter().zip(self.shape).enumerate() {
                if ix >= size {
                    return Err(format!("index {ix} past dim {d} of size {size}"));
                }
                flat = flat * size + ix;
            }
            let (s, e) = (self.next * self.esize, (self.next + 1) * self.esize);
            let value = self
                .src
                .get(s..e)
                .ok_or("more stored positions than values")?;
            self.dense[flat * self.esize..(flat + 1) * self.esize].copy_from_slice(value);
            self.next += 1;
            return Ok(());
        }
        match &self.sp.dims[level] {
            DimStorage::Dense(size) => {
                for i in 0..*size {
                    self.indices[level] = i;
                    self.populate(level + 1, prev * size + i)?;
                }
            }
            DimStorage::Sparse { segments, indices } => {
                let (Some(&from), Some(&to)) = (segments.get(prev), segments.get(prev + 1)) else {
                    return Err(format!("segment {prev} out of range"));
                };
                for i in from..to {
                    self.indices[level] = *indices.get(i).ok_or("array index out of range")?;
                    self.populate(level + 1, i)?;
                }
            }
        }
        Ok(())
    }
}

/// The operators an expansion replaces one by (`None`: it does not apply).
type Expansion = Result<Option<Vec<OpDef>>, TfliteError>;

/// Replaces every `op` by the operators `expand` returns (`None`: left as is).
fn expand(
    g: &mut Graph,
    op: Op,
    expand: fn(&mut Graph, &OpDef) -> Expansion,
) -> Result<usize, TfliteError> {
    let mut expanded = 0;
    let mut out = Vec::with_capacity(g.ops.len());
    for def in std::mem::take(&mut g.ops) {
        let code = g.code(&def);
        let replacement = if code.builtin == op.0 && code.custom.is_none() {
            expand(g, &def)?
        } else {
            None
        };
        match replacement {
            Some(ops) => {
                out.extend(ops);
                expanded += 1;
            }
            None => out.push(def),
        }
    }
    g.ops = out;
    Ok(expanded)
}

/// A new float tensor shaped like `like`, named after it.
fn temp_like(g: &mut Graph, like: i32, suffix: &str, shape: Option<Vec<i32>>) -> i32 {
    let base = g.tensors[like as usize].clone();
    g.add_tensor(TensorDef {
        name: format!("{}/camdnn_{suffix}", base.name),
        shape: shape.unwrap_or(base.shape),
        dtype: base.dtype,
        buffer: 0,
        quant: None,
        sparsity: None,
    })
}

fn op(g: &mut Graph, code: Op, inputs: Vec<i32>, outputs: Vec<i32>, options: Options) -> OpDef {
    OpDef {
        opcode: g.opcode_for(code),
        inputs,
        outputs,
        options,
    }
}

/// `PRELU(x, alpha) = relu(x) + alpha * (x - relu(x))` (float models only).
fn expand_prelu(g: &mut Graph, def: &OpDef) -> Expansion {
    let ([x, alpha], [y]) = (def.inputs.as_slice(), def.outputs.as_slice()) else {
        return Err(malformed("PRELU takes two inputs and one output"));
    };
    let (x, alpha, y) = (*x, *alpha, *y);
    if g.tensors[x as usize].dtype != TensorType::FLOAT32 {
        return Ok(None);
    }
    let relu = temp_like(g, y, "prelu_pos", None);
    let neg = temp_like(g, y, "prelu_neg", None);
    let scaled = temp_like(g, y, "prelu_scaled", None);
    Ok(Some(vec![
        op(g, Op::RELU, vec![x], vec![relu], Options::None),
        op(
            g,
            Op::SUB,
            vec![x, relu],
            vec![neg],
            Options::Sub(Act::NONE),
        ),
        op(
            g,
            Op::MUL,
            vec![neg, alpha],
            vec![scaled],
            Options::Mul(Act::NONE),
        ),
        op(
            g,
            Op::ADD,
            vec![relu, scaled],
            vec![y],
            Options::Add(Act::NONE),
        ),
    ]))
}

/// `DEPTH_TO_SPACE` (NHWC, DCR order) as reshape to `[n, h, w, b, b, c/b²]`,
/// transpose to `[n, h, b, w, b, c/b²]`, reshape to `[n, h*b, w*b, c/b²]`.
fn expand_depth_to_space(g: &mut Graph, def: &OpDef) -> Expansion {
    let ([x], [y]) = (def.inputs.as_slice(), def.outputs.as_slice()) else {
        return Err(malformed("DEPTH_TO_SPACE takes one input and one output"));
    };
    let (x, y) = (*x, *y);
    let Options::DepthToSpace { block_size: b } = def.options else {
        return Err(malformed("DEPTH_TO_SPACE without its block size"));
    };
    let &[n, h, w, c] = g.tensors[x as usize].shape.as_slice() else {
        return Ok(None);
    };
    if b <= 0 || c % (b * b) != 0 {
        return Err(malformed(format!(
            "DEPTH_TO_SPACE block {b} for {c} channels"
        )));
    }
    let split = vec![n, h, w, b, b, c / (b * b)];
    let moved = vec![n, h, b, w, b, c / (b * b)];
    let target = vec![n, h * b, w * b, c / (b * b)];
    let name = g.tensors[y as usize].name.clone();
    let split_shape = g.add_i32_const(format!("{name}/camdnn_d2s_split_shape"), &split);
    let perm = g.add_i32_const(format!("{name}/camdnn_d2s_perm"), &[0, 1, 3, 2, 4, 5]);
    let target_shape = g.add_i32_const(format!("{name}/camdnn_d2s_shape"), &target);
    let t1 = temp_like(g, x, "d2s_split", Some(split.clone()));
    let t2 = temp_like(g, x, "d2s_moved", Some(moved));
    Ok(Some(vec![
        op(
            g,
            Op::RESHAPE,
            vec![x, split_shape],
            vec![t1],
            Options::Reshape {
                new_shape: Some(split),
            },
        ),
        op(g, Op::TRANSPOSE, vec![t1, perm], vec![t2], Options::None),
        op(
            g,
            Op::RESHAPE,
            vec![t2, target_shape],
            vec![y],
            Options::Reshape {
                new_shape: Some(target),
            },
        ),
    ]))
}
