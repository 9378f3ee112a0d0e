//! The tract engine: pure-Rust CPU inference of ONNX (tract-onnx) and TFLite (tract-tflite).
//!
//! Dynamic batch is handled by **one optimised plan per batch size**: the ONNX model is
//! parsed once; for each batch size k its inputs get fully concrete facts (batch = k)
//! and the model is typed, optimised and planned, and the plan is cached for the life
//! of the handle. Plans for [`ModelSource::prepare_batches`] (default: batch 1) are
//! built at load and counted in the load time; other sizes are built on first use.
//! Concrete shapes are what tract handles best (real models such as PP-OCR compute
//! reshape targets from the batch dim, which tract cannot type symbolically); the price
//! is one optimisation per new batch size. Fixed-batch models run in [`BatchMode::Loop`].

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use tract_onnx::pb;
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::infer::Factoid;

use crate::engine::expect_kind;
use crate::model::{batch_mode_of, resolve_dims};
use crate::tflite::TfliteError;
use crate::{
    BatchMode, DType, Dim, Engine, EngineError, EngineKind, LoadedModel, ModelFormat, ModelInfo,
    ModelSource, ProcessorConfig, Tensor, TensorData, TensorInfo,
};

const ENGINE: &str = "tract";
/// Name of the symbol we give the batch dim (unlikely to clash with a model's own symbols).
const BATCH_SYMBOL: &str = "camdnn_batch";

/// The tract engine (stateless; every loaded model owns its plans).
#[derive(Debug, Default, Clone, Copy)]
pub struct TractEngine;

impl TractEngine {
    /// A tract engine.
    pub fn new() -> TractEngine {
        TractEngine
    }
}

impl Engine for TractEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Tract
    }

    fn check_processor(&self, proc: &ProcessorConfig) -> Result<(), EngineError> {
        expect_kind(proc, EngineKind::Tract)
    }

    fn load(
        &self,
        model: &ModelSource,
        proc: &ProcessorConfig,
    ) -> Result<Box<dyn LoadedModel>, EngineError> {
        self.check_processor(proc)?;
        let start = Instant::now();
        let mut loaded = match model.format()? {
            ModelFormat::Onnx => load_onnx(model)?,
            ModelFormat::Tflite => load_tflite(model)?,
        };
        let prepare: Vec<usize> = match loaded.info.batch {
            BatchMode::Native if model.prepare_batches.is_empty() => vec![1],
            BatchMode::Native => model.prepare_batches.clone(),
            BatchMode::Loop { model_batch } => vec![model_batch],
        };
        for k in prepare {
            loaded.plans.plan_for(&model.name, k)?;
        }
        loaded.outputs_from_plan()?;
        loaded.info.load_time = start.elapsed();
        Ok(Box::new(loaded))
    }
}

fn backend(model: &str, stage: impl Into<String>, e: impl std::fmt::Display) -> EngineError {
    EngineError::Backend {
        model: model.into(),
        engine: ENGINE,
        stage: stage.into(),
        // `{:#}` of an anyhow error prints the whole cause chain on one line.
        reason: format!("{e:#}"),
    }
}

fn bad_config(model: &str, reason: String) -> EngineError {
    EngineError::BadModelConfig {
        model: model.into(),
        reason,
    }
}

fn no_file(src: &ModelSource) -> Result<(), EngineError> {
    if src.path.is_file() {
        return Ok(());
    }
    Err(EngineError::ModelFile {
        model: src.name.clone(),
        path: src.path.clone(),
        reason: "no such file".into(),
    })
}

/// ONNX op types in `graph` (and its subgraphs) that tract-onnx has no builder for.
fn missing_ops(
    graph: &pb::GraphProto,
    known: &tract_onnx::model::OnnxOpRegister,
) -> BTreeSet<String> {
    let mut missing = BTreeSet::new();
    for node in &graph.node {
        if !known.0.contains_key(&node.op_type) {
            missing.insert(node.op_type.clone());
        }
        for attr in &node.attribute {
            for g in attr.g.iter().chain(attr.graphs.iter()) {
                missing.extend(missing_ops(g, known));
            }
        }
    }
    missing
}

fn load_onnx(src: &ModelSource) -> Result<TractModel, EngineError> {
    let name = src.name.as_str();
    let onnx = tract_onnx::onnx()
        .with_ignore_output_shapes(true)
        .with_ignore_value_info(true);
    no_file(src)?;
    let proto = onnx
        .proto_model_for_path(&src.path)
        .map_err(|e| EngineError::ModelFile {
            model: name.into(),
            path: src.path.clone(),
            reason: format!("{e:#}"),
        })?;
    if let Some(graph) = &proto.graph {
        let missing = missing_ops(graph, &onnx.op_register);
        if !missing.is_empty() {
            return Err(EngineError::UnsupportedOps {
                model: name.into(),
                engine: ENGINE,
                ops: missing.into_iter().collect(),
            });
        }
    }
    let mut model = onnx
        .model_for_proto_model(&proto)
        .map_err(|e| backend(name, "parsing", e))?;
    let batch = model.sym(BATCH_SYMBOL);

    let outlets = model
        .input_outlets()
        .map_err(|e| backend(name, "reading inputs", e))?
        .to_vec();
    let input_names: Vec<String> = outlets
        .iter()
        .map(|o| model.node(o.node).name.clone())
        .collect();
    for given in src.input_shapes.keys() {
        if !input_names.contains(given) {
            return Err(bad_config(
                name,
                format!(
                    "input_shapes names `{given}`, which is not an input (inputs: {})",
                    input_names.join(", ")
                ),
            ));
        }
    }
    let mut inputs = Vec::new();
    let mut dts = Vec::new();
    for (ix, input) in input_names.iter().enumerate() {
        let fact = model
            .input_fact(ix)
            .map_err(|e| backend(name, "reading inputs", e))?
            .clone();
        let dt = fact.datum_type.concretize().unwrap_or(DatumType::F32);
        let dtype = dtype_of(dt).ok_or_else(|| {
            bad_config(
                name,
                format!("input `{input}` has element type {dt:?}; only f32, u8, i64 are supported"),
            )
        })?;
        let model_dims: Option<Vec<Option<i64>>> = (!fact.shape.is_open()).then(|| {
            fact.shape
                .dims()
                .map(|d| d.concretize().and_then(|t| t.to_i64().ok()))
                .collect()
        });
        let dims = resolve_dims(name, input, model_dims, src.input_shapes.get(input), false)?;
        let tdims: TVec<TDim> = dims
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => TDim::from(*n as i64),
                _ => TDim::from(batch.clone()),
            })
            .collect();
        model
            .set_input_fact(ix, InferenceFact::dt_shape(dt, tdims))
            .map_err(|e| backend(name, format!("setting input fact of `{input}`"), e))?;
        dts.push(dt);
        inputs.push(TensorInfo {
            name: input.clone(),
            dtype,
            shape: dims,
        });
    }
    let batch_mode = batch_mode_of(name, &inputs)?;
    // Output metadata with the batch dim symbolic, when tract can type the model so
    // (otherwise it is read from the smallest plan after load, see `outputs_from_plan`).
    let outputs = if batch_mode == BatchMode::Native {
        model
            .clone()
            .into_typed()
            .and_then(|m| m.into_decluttered())
            .ok()
            .map(|typed| output_infos(name, &typed, Some(&batch)))
            .transpose()?
    } else {
        None
    };
    Ok(TractModel::new(
        name,
        inputs,
        outputs,
        batch_mode,
        Source::Onnx { model, dts },
    ))
}

fn load_tflite(src: &ModelSource) -> Result<TractModel, EngineError> {
    // TFLite files carry fixed shapes; they run in loop mode.
    let name = src.name.as_str();
    if !src.input_shapes.is_empty() {
        return Err(bad_config(
            name,
            "input_shapes is not supported for TFLite models (their shapes are fixed)".into(),
        ));
    }
    no_file(src)?;
    let file_error = |reason: String| EngineError::ModelFile {
        model: name.into(),
        path: src.path.clone(),
        reason,
    };
    let bytes = std::fs::read(&src.path).map_err(|e| file_error(e.to_string()))?;
    // rewrite what tract-tflite lacks (float16 weights, PRELU, ...) before tract parses it
    let prepared = crate::tflite::prepare(&bytes).map_err(|e| match e {
        TfliteError::Unsupported(ops) => EngineError::UnsupportedOps {
            model: name.into(),
            engine: ENGINE,
            ops,
        },
        other => file_error(other.to_string()),
    })?;
    let typed = tract_tflite::tflite()
        .model_for_read(&mut prepared.bytes.as_slice())
        .and_then(|m| m.into_decluttered())
        .map_err(|e| backend(name, "parsing TFLite", e))?;
    let mut inputs = Vec::new();
    let in_outlets = typed
        .input_outlets()
        .map_err(|e| backend(name, "reading inputs", e))?;
    for (ix, outlet) in in_outlets.iter().enumerate() {
        let fact = typed
            .input_fact(ix)
            .map_err(|e| backend(name, "reading inputs", e))?;
        let input = typed.node(outlet.node).name.clone();
        let dtype = dtype_of(fact.datum_type).ok_or_else(|| {
            bad_config(
                name,
                format!(
                    "input `{input}` has element type {:?}; only f32, u8, i64 are supported",
                    fact.datum_type
                ),
            )
        })?;
        let shape = fact
            .shape
            .iter()
            .map(|d| match d.to_i64() {
                Ok(n) => Dim::Fixed(n as usize),
                Err(_) => Dim::Dynamic(d.to_string()),
            })
            .collect();
        inputs.push(TensorInfo {
            name: input,
            dtype,
            shape,
        });
    }
    let batch_mode = batch_mode_of(name, &inputs)?;
    if batch_mode == BatchMode::Native {
        return Err(bad_config(
            name,
            "TFLite models with a dynamic batch dim are not supported".into(),
        ));
    }
    let outputs = Some(output_infos(name, &typed, None)?);
    let mut model = TractModel::new(name, inputs, outputs, batch_mode, Source::Typed(typed));
    let r = prepared.rewrites;
    if r.total() > 0 {
        model.info.detail += &format!(
            "; TFLite rewrites: {} DEQUANTIZE and {} DENSIFY folded, {} PRELU and {} DEPTH_TO_SPACE expanded",
            r.dequantize, r.densify, r.prelu, r.depth_to_space
        );
    }
    Ok(model)
}

fn dtype_of(dt: DatumType) -> Option<DType> {
    match dt {
        DatumType::F32 => Some(DType::F32),
        DatumType::U8 => Some(DType::U8),
        DatumType::I64 => Some(DType::I64),
        _ => None,
    }
}

/// A model resident in tract.
struct TractModel {
    info: ModelInfo,
    plans: Plans,
}

/// Where plans come from.
enum Source {
    /// A parsed ONNX model (input facts may hold the batch symbol) and the element type
    /// of each input; each batch size gets a copy with concrete input facts.
    Onnx {
        model: InferenceModel,
        dts: Vec<DatumType>,
    },
    /// An already typed model with fixed shapes (TFLite).
    Typed(TypedModel),
}

/// The model source and its optimised plans, one per batch size.
struct Plans {
    source: Source,
    /// Input shapes (batch dims marked) to make concrete per batch size.
    inputs: Vec<Vec<Dim>>,
    by_batch: HashMap<usize, Arc<TypedRunnableModel>>,
}

/// Output metadata of a typed model; a dim equal to the batch symbol is [`Dim::Batch`].
fn output_infos(
    name: &str,
    typed: &TypedModel,
    batch: Option<&Symbol>,
) -> Result<Vec<TensorInfo>, EngineError> {
    let out_outlets = typed
        .output_outlets()
        .map_err(|e| backend(name, "reading outputs", e))?;
    let mut outputs = Vec::new();
    for (ix, outlet) in out_outlets.iter().enumerate() {
        let fact = typed
            .output_fact(ix)
            .map_err(|e| backend(name, "reading outputs", e))?;
        let out_name = typed
            .outlet_label(*outlet)
            .map(str::to_string)
            .unwrap_or_else(|| typed.node(outlet.node).name.clone());
        let shape = fact
            .shape
            .iter()
            .map(|d| {
                if let Ok(n) = d.to_i64() {
                    Dim::Fixed(n as usize)
                } else if batch.is_some_and(|s| *d == TDim::from(s.clone())) {
                    Dim::Batch
                } else {
                    Dim::Dynamic(d.to_string())
                }
            })
            .collect();
        outputs.push(TensorInfo {
            name: out_name,
            // other element types are converted to f32 on the way out
            dtype: dtype_of(fact.datum_type).unwrap_or(DType::F32),
            shape,
        });
    }
    Ok(outputs)
}

impl TractModel {
    fn new(
        name: &str,
        inputs: Vec<TensorInfo>,
        outputs: Option<Vec<TensorInfo>>,
        batch: BatchMode,
        source: Source,
    ) -> TractModel {
        let detail = match batch {
            BatchMode::Native => "tract, one optimised plan per batch size".to_string(),
            BatchMode::Loop { model_batch } => {
                format!("tract, fixed batch {model_batch}, batches run as a loop")
            }
        };
        let plans = Plans {
            source,
            inputs: inputs.iter().map(|i| i.shape.clone()).collect(),
            by_batch: HashMap::new(),
        };
        TractModel {
            info: ModelInfo {
                name: name.into(),
                engine: EngineKind::Tract,
                inputs,
                // filled by `outputs_from_plan` when not known yet
                outputs: outputs.unwrap_or_default(),
                batch,
                load_time: Default::default(),
                detail,
            },
            plans,
        }
    }

    /// When output metadata could not be typed with a symbolic batch, reads it from the
    /// smallest prepared plan, taking its leading dim as the batch (Native mode).
    fn outputs_from_plan(&mut self) -> Result<(), EngineError> {
        if !self.info.outputs.is_empty() {
            return Ok(());
        }
        let Some(k) = self.plans.by_batch.keys().min().copied() else {
            return Ok(());
        };
        let plan = self.plans.by_batch[&k].clone();
        let mut outputs = output_infos(&self.info.name, plan.model(), None)?;
        if self.info.batch == BatchMode::Native {
            for o in &mut outputs {
                if let Some(d) = o.shape.first_mut() {
                    if *d == Dim::Fixed(k) {
                        *d = Dim::Batch;
                    }
                }
            }
        }
        self.info.outputs = outputs;
        Ok(())
    }
}

impl Plans {
    /// The plan for batch size `k`, optimised now if not cached.
    fn plan_for(&mut self, name: &str, k: usize) -> Result<Arc<TypedRunnableModel>, EngineError> {
        if let Some(p) = self.by_batch.get(&k) {
            return Ok(p.clone());
        }
        let stage = format!("optimising for batch {k}");
        let optimized = match &self.source {
            Source::Onnx { model, dts } => {
                let mut model = model.clone();
                for (ix, (dims, dt)) in self.inputs.iter().zip(dts).enumerate() {
                    let shape: TVec<usize> = dims
                        .iter()
                        .map(|d| match d {
                            Dim::Fixed(n) => *n,
                            _ => k,
                        })
                        .collect();
                    model
                        .set_input_fact(ix, InferenceFact::dt_shape(*dt, shape))
                        .map_err(|e| backend(name, stage.clone(), e))?;
                }
                model.into_optimized()
            }
            Source::Typed(typed) => typed.clone().into_optimized(),
        };
        let plan = optimized
            .and_then(|m| m.into_runnable())
            .map_err(|e| backend(name, stage, e))?;
        self.by_batch.insert(k, plan.clone());
        Ok(plan)
    }

    fn run_once(
        &mut self,
        info: &ModelInfo,
        inputs: &[Tensor],
    ) -> Result<Vec<Tensor>, EngineError> {
        let name = info.name.as_str();
        let k = inputs.first().and_then(|t| t.batch()).unwrap_or(1);
        let plan = self.plan_for(name, k)?;
        let values = inputs
            .iter()
            .map(|t| to_tract(t).map(|t| t.into_tvalue()))
            .collect::<TractResult<TVec<TValue>>>()
            .map_err(|e| backend(name, "converting inputs", e))?;
        let outs = plan.run(values).map_err(|e| backend(name, "running", e))?;
        outs.iter()
            .zip(&info.outputs)
            .map(|(v, out)| {
                from_tract(v, &out.name).map_err(|e| backend(name, "reading outputs", e))
            })
            .collect()
    }
}

fn to_tract(t: &Tensor) -> TractResult<tract_onnx::prelude::Tensor> {
    match t.data() {
        TensorData::F32(v) => tract_onnx::prelude::Tensor::from_shape(t.shape(), v),
        TensorData::U8(v) => tract_onnx::prelude::Tensor::from_shape(t.shape(), v),
        TensorData::I64(v) => tract_onnx::prelude::Tensor::from_shape(t.shape(), v),
    }
}

fn from_tract(t: &tract_onnx::prelude::Tensor, name: &str) -> Result<Tensor, String> {
    let data = convert_out(t).map_err(|e| format!("{e:#}"))?;
    Tensor::new(name, t.shape().to_vec(), data).map_err(|e| e.to_string())
}

fn convert_out(t: &tract_onnx::prelude::Tensor) -> TractResult<TensorData> {
    let data = match t.datum_type() {
        DatumType::U8 => TensorData::U8(t.to_plain_array_view::<u8>()?.iter().copied().collect()),
        DatumType::I64 => {
            TensorData::I64(t.to_plain_array_view::<i64>()?.iter().copied().collect())
        }
        DatumType::F32 => {
            TensorData::F32(t.to_plain_array_view::<f32>()?.iter().copied().collect())
        }
        _ => {
            let f = t.cast_to::<f32>()?;
            TensorData::F32(f.to_plain_array_view::<f32>()?.iter().copied().collect())
        }
    };
    Ok(data)
}

impl LoadedModel for TractModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>, EngineError> {
        let TractModel { info, plans } = self;
        info.run_batched(inputs, |chunk| plans.run_once(info, chunk))
    }

    fn prepared_for(&self, batch: usize) -> bool {
        let k = match self.info.batch {
            BatchMode::Native => batch,
            BatchMode::Loop { model_batch } => model_batch,
        };
        self.plans.by_batch.contains_key(&k)
    }
}
