//! What a loaded model looks like from outside (inputs, outputs, batching mode) and the
//! input checks and fixed-batch loop shared by every engine.

use std::fmt;
use std::time::Duration;

use crate::{DType, EngineError, EngineKind, ModelName, Tensor};

/// One dimension of a model input or output.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A fixed size.
    Fixed(usize),
    /// The dynamic batch dimension (always the leading one): any k >= 1.
    Batch,
    /// Another dynamic dimension (e.g. an image height), with its symbol (`?` when unnamed).
    Dynamic(String),
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Batch => f.write_str("N"),
            Dim::Dynamic(s) => f.write_str(s),
        }
    }
}

/// Name, element type and shape of one model input or output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Name in the model.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape with dynamic dims marked.
    pub shape: Vec<Dim>,
}

impl TensorInfo {
    /// The shape with the batch dim set to `k` and other dynamic dims unresolved (`None`).
    pub fn shape_for_batch(&self, k: usize) -> Vec<Option<usize>> {
        self.shape
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => Some(*n),
                Dim::Batch => Some(k),
                Dim::Dynamic(_) => None,
            })
            .collect()
    }
}

/// How a batch of k requests is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BatchMode {
    /// The model has a dynamic batch dim: batch k runs in one call.
    Native,
    /// The model has a fixed batch `model_batch` (usually 1): a batch of k (a multiple
    /// of `model_batch`) runs as k / model_batch sequential calls whose outputs are
    /// concatenated. t_e then grows linearly in k.
    Loop {
        /// The model's fixed leading dim.
        model_batch: usize,
    },
}

/// Metadata of a resident model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// Model name from the config.
    pub name: ModelName,
    /// Engine that holds it.
    pub engine: EngineKind,
    /// Inputs, in the order `run` expects them.
    pub inputs: Vec<TensorInfo>,
    /// Outputs, in the order `run` returns them.
    pub outputs: Vec<TensorInfo>,
    /// How batches are run.
    pub batch: BatchMode,
    /// Measured wall time of the load (parse, optimise, first plan, session creation).
    pub load_time: Duration,
    /// Engine-specific detail for logs ("CPUExecutionProvider, 1 thread", ...).
    pub detail: String,
}

impl ModelInfo {
    /// Whether the batch dim is dynamic (batch k runs in one call).
    pub fn dynamic_batch(&self) -> bool {
        self.batch == BatchMode::Native
    }

    /// Checks `inputs` against the model (count, names when given, element types, ranks,
    /// fixed dims, one common batch size) and returns the batch size k.
    pub fn check_inputs(&self, inputs: &[Tensor]) -> Result<usize, EngineError> {
        let bad = |reason: String| EngineError::BadInput {
            model: self.name.clone(),
            reason,
        };
        if inputs.len() != self.inputs.len() {
            return Err(bad(format!(
                "expected {} input(s) ({}), got {}",
                self.inputs.len(),
                self.inputs
                    .iter()
                    .map(|i| i.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                inputs.len()
            )));
        }
        let mut batch: Option<usize> = None;
        for (t, info) in inputs.iter().zip(&self.inputs) {
            if !t.name().is_empty() && t.name() != info.name {
                return Err(bad(format!(
                    "input `{}` given where `{}` was expected",
                    t.name(),
                    info.name
                )));
            }
            if t.dtype() != info.dtype {
                return Err(bad(format!(
                    "input `{}` is {:?}, the model wants {:?}",
                    info.name,
                    t.dtype(),
                    info.dtype
                )));
            }
            let wanted = || {
                info.shape
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if t.shape().len() != info.shape.len() || t.shape().is_empty() {
                return Err(bad(format!(
                    "input `{}` has shape {:?}, the model wants [{}]",
                    info.name,
                    t.shape(),
                    wanted()
                )));
            }
            for (ix, (&n, d)) in t.shape().iter().zip(&info.shape).enumerate() {
                let ok = match d {
                    Dim::Fixed(f) => ix == 0 || n == *f,
                    Dim::Batch | Dim::Dynamic(_) => n >= 1,
                };
                if !ok {
                    return Err(bad(format!(
                        "input `{}` has shape {:?}, the model wants [{}]",
                        info.name,
                        t.shape(),
                        wanted()
                    )));
                }
            }
            let k = t.shape()[0];
            match batch {
                None => batch = Some(k),
                Some(b) if b != k => {
                    return Err(bad(format!(
                        "inputs disagree on the batch size ({b} vs {k} for `{}`)",
                        info.name
                    )))
                }
                _ => {}
            }
        }
        let k = batch.unwrap_or(0);
        if k == 0 {
            return Err(bad("batch size 0".into()));
        }
        if let BatchMode::Loop { model_batch } = self.batch {
            if k % model_batch != 0 {
                return Err(bad(format!(
                    "batch {k} is not a multiple of the model's fixed batch {model_batch}"
                )));
            }
        }
        Ok(k)
    }

    /// Runs a batch through `call`, which runs one model invocation: once for
    /// [`BatchMode::Native`], k / model_batch times (outputs concatenated) for
    /// [`BatchMode::Loop`]. Inputs are checked first.
    pub fn run_batched(
        &self,
        inputs: &[Tensor],
        mut call: impl FnMut(&[Tensor]) -> Result<Vec<Tensor>, EngineError>,
    ) -> Result<Vec<Tensor>, EngineError> {
        let k = self.check_inputs(inputs)?;
        match self.batch {
            BatchMode::Native => call(inputs),
            BatchMode::Loop { model_batch } if model_batch == k => call(inputs),
            BatchMode::Loop { model_batch } => {
                let mut per_output: Vec<Vec<Tensor>> = vec![Vec::new(); self.outputs.len()];
                for start in (0..k).step_by(model_batch) {
                    let chunk = inputs
                        .iter()
                        .map(|t| t.slice_batch(start, model_batch))
                        .collect::<Result<Vec<_>, _>>()?;
                    let outs = call(&chunk)?;
                    for (slot, out) in per_output.iter_mut().zip(outs) {
                        slot.push(out);
                    }
                }
                per_output
                    .iter()
                    .map(|parts| Tensor::concat_batch(parts))
                    .collect()
            }
        }
    }
}

/// Final dims of one input: config override first, else the model's fixed dims, with a
/// symbolic leading dim taken as the batch. A symbolic non-leading dim without an
/// override is kept dynamic when `allow_symbolic`, else an error (tract wants
/// concrete shapes).
pub(crate) fn resolve_dims(
    model: &str,
    input: &str,
    model_dims: Option<Vec<Option<i64>>>,
    given: Option<&Vec<i64>>,
    allow_symbolic: bool,
) -> Result<Vec<Dim>, EngineError> {
    let err = |reason: String| EngineError::BadModelConfig {
        model: model.into(),
        reason: format!("input `{input}`: {reason}"),
    };
    match (model_dims, given) {
        (None, None) => Err(err(
            "the model does not say its rank; give its shape in input_shapes".into(),
        )),
        (Some(md), None) => md
            .iter()
            .enumerate()
            .map(|(ix, d)| match (ix, d) {
                (_, Some(n)) if *n > 0 => Ok(Dim::Fixed(*n as usize)),
                (0, _) => Ok(Dim::Batch),
                _ if allow_symbolic => Ok(Dim::Dynamic("?".into())),
                _ => Err(err(format!(
                    "dim {ix} is symbolic; give the input's full shape in input_shapes (e.g. [-1, ...])"
                ))),
            })
            .collect(),
        (md, Some(g)) => {
            if let Some(md) = &md {
                if md.len() != g.len() {
                    return Err(err(format!(
                        "input_shapes gives rank {} but the model's input has rank {}",
                        g.len(),
                        md.len()
                    )));
                }
            }
            g.iter()
                .enumerate()
                .map(|(ix, &v)| {
                    let model_dim = md.as_ref().and_then(|md| md[ix]).filter(|n| *n > 0);
                    match (ix, v, model_dim) {
                        (0, -1, None) => Ok(Dim::Batch),
                        (0, -1, Some(n)) => Err(err(format!(
                            "input_shapes asks for a dynamic batch but the model's batch dim is fixed to {n}"
                        ))),
                        (_, v, _) if v <= 0 => Err(err(format!(
                            "input_shapes dim {ix} is {v}; only the leading dim may be -1 (dynamic batch), others must be > 0"
                        ))),
                        (_, v, Some(n)) if v != n => Err(err(format!(
                            "input_shapes dim {ix} is {v} but the model fixes it to {n}"
                        ))),
                        (_, v, _) => Ok(Dim::Fixed(v as usize)),
                    }
                })
                .collect()
        }
    }
}

/// Batch mode from the inputs' leading dims: all dynamic -> Native, all fixed to the
/// same b -> Loop { b }; anything else is refused.
pub(crate) fn batch_mode_of(model: &str, inputs: &[TensorInfo]) -> Result<BatchMode, EngineError> {
    let mut leads: Vec<Dim> = inputs
        .iter()
        .map(|i| match i.shape.first() {
            Some(Dim::Fixed(b)) => Dim::Fixed(*b),
            Some(_) => Dim::Batch,
            None => Dim::Fixed(0),
        })
        .collect();
    leads.dedup();
    match leads.as_slice() {
        [Dim::Batch] => Ok(BatchMode::Native),
        [Dim::Fixed(b)] if *b > 0 => Ok(BatchMode::Loop { model_batch: *b }),
        _ => Err(EngineError::BadModelConfig {
            model: model.into(),
            reason: format!(
                "inputs have no common leading (batch) dim: {}",
                inputs
                    .iter()
                    .map(|i| format!(
                        "{}=[{}]",
                        i.name,
                        i.shape
                            .iter()
                            .map(|d| d.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(batch: BatchMode, lead: Dim) -> ModelInfo {
        ModelInfo {
            name: "m".into(),
            engine: EngineKind::Sim,
            inputs: vec![TensorInfo {
                name: "x".into(),
                dtype: DType::F32,
                shape: vec![lead.clone(), Dim::Fixed(2)],
            }],
            outputs: vec![TensorInfo {
                name: "y".into(),
                dtype: DType::F32,
                shape: vec![lead, Dim::Fixed(1)],
            }],
            batch,
            load_time: Duration::ZERO,
            detail: String::new(),
        }
    }

    #[test]
    fn check_inputs_names_the_problem() {
        let m = info(BatchMode::Native, Dim::Batch);
        let e = m
            .check_inputs(&[Tensor::zeros("x", DType::F32, vec![3, 4])])
            .unwrap_err();
        assert!(e.to_string().contains("the model wants [N, 2]"), "{e}");
        let e = m
            .check_inputs(&[Tensor::zeros("z", DType::F32, vec![3, 2])])
            .unwrap_err();
        assert!(e.to_string().contains("`z` given where `x`"), "{e}");
        assert_eq!(
            m.check_inputs(&[Tensor::zeros("", DType::F32, vec![3, 2])])
                .unwrap(),
            3
        );
    }

    #[test]
    fn loop_mode_calls_once_per_row_and_concatenates() {
        let m = info(BatchMode::Loop { model_batch: 1 }, Dim::Fixed(1));
        let x = Tensor::from_f32(vec![3, 2], vec![1., 2., 3., 4., 5., 6.]).unwrap();
        let mut calls = 0;
        let out = m
            .run_batched(&[x], |chunk| {
                calls += 1;
                assert_eq!(chunk[0].shape(), &[1, 2]);
                let s: f32 = chunk[0].as_f32().unwrap().iter().sum();
                Ok(vec![Tensor::from_f32(vec![1, 1], vec![s])?.with_name("y")])
            })
            .unwrap();
        assert_eq!(calls, 3);
        assert_eq!(out[0].shape(), &[3, 1]);
        assert_eq!(out[0].as_f32().unwrap(), &[3., 7., 11.]);
    }
}
