//! An owned, editable copy of a TFLite model's main subgraph, read from and written
//! back to the flatbuffer with the schema code tract-tflite generated from the official
//! `schema.fbs` (`tract_tflite::tflite`).
//!
//! Only what tract-tflite reads is kept: the first subgraph (tract runs no other),
//! tensors with their shapes, types, buffers, quantization and sparsity, operators with
//! their inputs, outputs and the builtin options tract or our rewrites read
//! ([`Options`]). Other options tables are dropped: tract never reads them.

use tract_tflite::tflite;

use super::options::Options;
use super::TfliteError;

/// An operator code: a builtin operator, or a custom one by name.
#[derive(Debug, Clone, PartialEq)]
pub struct OpCode {
    /// `BuiltinOperator` value (`CUSTOM` for custom ops).
    pub builtin: i32,
    /// Name of a custom op.
    pub custom: Option<String>,
    /// Operator version.
    pub version: i32,
}

impl OpCode {
    /// The op's name as reports print it: the builtin's schema name, or `CUSTOM:name`.
    pub fn name(&self) -> String {
        if let Some(custom) = &self.custom {
            return format!("CUSTOM:{custom}");
        }
        tflite::BuiltinOperator(self.builtin)
            .variant_name()
            .map(str::to_string)
            .unwrap_or_else(|| format!("BUILTIN_{}", self.builtin))
    }
}

/// Per-tensor or per-axis affine quantization.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Quant {
    pub scale: Vec<f32>,
    pub zero_point: Vec<i64>,
    pub quantized_dimension: i32,
}

/// One dimension of a sparse tensor's storage (TACO format of the TFLite schema).
#[derive(Debug, Clone, PartialEq)]
pub enum DimStorage {
    /// A dense dimension of the given size.
    Dense(usize),
    /// A compressed (CSR) dimension: segment offsets and the indices they cover.
    Sparse {
        segments: Vec<usize>,
        indices: Vec<usize>,
    },
}

/// Sparsity of a constant tensor, consumed by `DENSIFY`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sparsity {
    pub traversal_order: Vec<usize>,
    pub block_map: Vec<usize>,
    pub dims: Vec<DimStorage>,
}

/// A tensor of the subgraph.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorDef {
    pub name: String,
    pub shape: Vec<i32>,
    pub dtype: tflite::TensorType,
    /// Index into [`Graph::buffers`]; 0 is the empty sentinel (no data).
    pub buffer: u32,
    pub quant: Option<Quant>,
    pub sparsity: Option<Sparsity>,
}

/// An operator of the subgraph.
#[derive(Debug, Clone, PartialEq)]
pub struct OpDef {
    /// Index into [`Graph::opcodes`].
    pub opcode: usize,
    pub inputs: Vec<i32>,
    pub outputs: Vec<i32>,
    pub options: Options,
}

/// The model: operator codes, buffers and the main subgraph.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    pub version: u32,
    pub description: Option<String>,
    pub opcodes: Vec<OpCode>,
    pub buffers: Vec<Vec<u8>>,
    pub tensors: Vec<TensorDef>,
    pub inputs: Vec<i32>,
    pub outputs: Vec<i32>,
    pub ops: Vec<OpDef>,
}

fn malformed(what: impl Into<String>) -> TfliteError {
    TfliteError::Malformed(what.into())
}

fn index_vec(
    v: Option<flatbuffers::Vector<'_, i32>>,
    what: &str,
) -> Result<Vec<usize>, TfliteError> {
    ints(v.iter().flatten(), what)
}

fn ints<T: Into<i64>>(v: impl Iterator<Item = T>, what: &str) -> Result<Vec<usize>, TfliteError> {
    v.map(|i| {
        let i: i64 = i.into();
        usize::try_from(i).map_err(|_| malformed(format!("negative {what} {i}")))
    })
    .collect()
}

/// The segments (`segments == true`) or indices of a compressed dimension.
fn sparse_index_vec(
    dm: &tflite::DimensionMetadata<'_>,
    segments: bool,
) -> Result<Vec<usize>, TfliteError> {
    let what = if segments {
        "array_segments"
    } else {
        "array_indices"
    };
    let (i32s, u16s, u8s) = if segments {
        (
            dm.array_segments_as_int_32_vector()
                .and_then(|v| v.values()),
            dm.array_segments_as_uint_16_vector()
                .and_then(|v| v.values()),
            dm.array_segments_as_uint_8_vector()
                .and_then(|v| v.values()),
        )
    } else {
        (
            dm.array_indices_as_int_32_vector().and_then(|v| v.values()),
            dm.array_indices_as_uint_16_vector()
                .and_then(|v| v.values()),
            dm.array_indices_as_uint_8_vector().and_then(|v| v.values()),
        )
    };
    if let Some(v) = i32s {
        ints(v.iter(), what)
    } else if let Some(v) = u16s {
        ints(v.iter(), what)
    } else if let Some(v) = u8s {
        ints(v.iter(), what)
    } else {
        Err(malformed(format!("sparse dimension without {what}")))
    }
}

fn read_sparsity(sp: tflite::SparsityParameters<'_>) -> Result<Sparsity, TfliteError> {
    let mut dims = Vec::new();
    for dm in sp.dim_metadata().iter().flatten() {
        dims.push(match dm.format() {
            tflite::DimensionType::DENSE => DimStorage::Dense(
                usize::try_from(dm.dense_size())
                    .map_err(|_| malformed("negative dense_size in sparsity"))?,
            ),
            _ => DimStorage::Sparse {
                segments: sparse_index_vec(&dm, true)?,
                indices: sparse_index_vec(&dm, false)?,
            },
        });
    }
    Ok(Sparsity {
        traversal_order: index_vec(sp.traversal_order(), "traversal order")?,
        block_map: index_vec(sp.block_map(), "block map")?,
        dims,
    })
}

fn i32s(v: &[usize]) -> Vec<i32> {
    v.iter().map(|&i| i as i32).collect()
}

fn write_int32_vector<'a>(
    fbb: &mut flatbuffers::FlatBufferBuilder<'a>,
    v: &[usize],
) -> flatbuffers::WIPOffset<flatbuffers::UnionWIPOffset> {
    let values = Some(fbb.create_vector(&i32s(v)));
    tflite::Int32Vector::create(fbb, &tflite::Int32VectorArgs { values }).as_union_value()
}

fn write_sparsity<'a>(
    fbb: &mut flatbuffers::FlatBufferBuilder<'a>,
    sp: &Sparsity,
) -> flatbuffers::WIPOffset<tflite::SparsityParameters<'a>> {
    let dims: Vec<_> = sp
        .dims
        .iter()
        .map(|d| {
            let args = match d {
                DimStorage::Dense(n) => tflite::DimensionMetadataArgs {
                    format: tflite::DimensionType::DENSE,
                    dense_size: *n as i32,
                    ..Default::default()
                },
                DimStorage::Sparse { segments, indices } => tflite::DimensionMetadataArgs {
                    format: tflite::DimensionType::SPARSE_CSR,
                    array_segments_type: tflite::SparseIndexVector::Int32Vector,
                    array_segments: Some(write_int32_vector(fbb, segments)),
                    array_indices_type: tflite::SparseIndexVector::Int32Vector,
                    array_indices: Some(write_int32_vector(fbb, indices)),
                    ..Default::default()
                },
            };
            tflite::DimensionMetadata::create(fbb, &args)
        })
        .collect();
    let traversal_order = Some(fbb.create_vector(&i32s(&sp.traversal_order)));
    let block_map = Some(fbb.create_vector(&i32s(&sp.block_map)));
    let dim_metadata = Some(fbb.create_vector(&dims));
    tflite::SparsityParameters::create(
        fbb,
        &tflite::SparsityParametersArgs {
            traversal_order,
            block_map,
            dim_metadata,
        },
    )
}

impl Graph {
    /// Parses a TFLite flatbuffer (verified first, so a corrupt file is an error, not UB).
    pub fn read(bytes: &[u8]) -> Result<Graph, TfliteError> {
        let model = tflite::root_as_model(bytes)
            .map_err(|e| TfliteError::Parse(format!("not a valid TFLite flatbuffer: {e}")))?;
        let opcodes = model
            .operator_codes()
            .ok_or_else(|| malformed("no operator codes"))?
            .iter()
            .map(|oc| OpCode {
                builtin: (oc.deprecated_builtin_code() as i32).max(oc.builtin_code().0),
                custom: oc.custom_code().map(str::to_string),
                version: oc.version(),
            })
            .collect();
        let buffers = model
            .buffers()
            .map(|bs| {
                bs.iter()
                    .map(|b| b.data().map(|d| d.bytes().to_vec()).unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default();
        let subgraphs = model.subgraphs().ok_or_else(|| malformed("no subgraphs"))?;
        if subgraphs.is_empty() {
            return Err(malformed("no subgraphs"));
        }
        let main = subgraphs.get(0);
        let mut tensors = Vec::new();
        for t in main.tensors().iter().flatten() {
            tensors.push(TensorDef {
                name: t.name().unwrap_or_default().to_string(),
                shape: t.shape().map(|s| s.iter().collect()).unwrap_or_default(),
                dtype: t.type_(),
                buffer: t.buffer(),
                quant: t.quantization().and_then(|q| {
                    let scale: Vec<f32> = q.scale()?.iter().collect();
                    let zero_point: Vec<i64> = q.zero_point()?.iter().collect();
                    Some(Quant {
                        scale,
                        zero_point,
                        quantized_dimension: q.quantized_dimension(),
                    })
                }),
                sparsity: t.sparsity().map(read_sparsity).transpose()?,
            });
        }
        let mut ops = Vec::new();
        for op in main.operators().iter().flatten() {
            ops.push(OpDef {
                opcode: op.opcode_index() as usize,
                inputs: op.inputs().map(|v| v.iter().collect()).unwrap_or_default(),
                outputs: op.outputs().map(|v| v.iter().collect()).unwrap_or_default(),
                options: Options::read(&op),
            });
        }
        let graph = Graph {
            version: model.version(),
            description: model.description().map(str::to_string),
            opcodes,
            buffers,
            tensors,
            inputs: main
                .inputs()
                .map(|v| v.iter().collect())
                .unwrap_or_default(),
            outputs: main
                .outputs()
                .map(|v| v.iter().collect())
                .unwrap_or_default(),
            ops,
        };
        graph.check_indices()?;
        Ok(graph)
    }

    /// Every index in range, so rewrites and tract can index without panicking.
    fn check_indices(&self) -> Result<(), TfliteError> {
        let nt = self.tensors.len();
        let tensor_ok = |i: &i32| *i == -1 || (*i >= 0 && (*i as usize) < nt);
        for t in &self.tensors {
            if t.buffer as usize >= self.buffers.len() {
                return Err(malformed(format!(
                    "tensor `{}` names buffer {} of {}",
                    t.name,
                    t.buffer,
                    self.buffers.len()
                )));
            }
        }
        for (ix, op) in self.ops.iter().enumerate() {
            if op.opcode >= self.opcodes.len() {
                return Err(malformed(format!(
                    "operator {ix} names opcode {} of {}",
                    op.opcode,
                    self.opcodes.len()
                )));
            }
            if !op.inputs.iter().chain(&op.outputs).all(tensor_ok) {
                return Err(malformed(format!(
                    "operator {ix} names a tensor out of range"
                )));
            }
        }
        if !self
            .inputs
            .iter()
            .chain(&self.outputs)
            .all(|i| *i >= 0 && tensor_ok(i))
        {
            return Err(malformed(
                "a graph input or output names a tensor out of range",
            ));
        }
        Ok(())
    }

    /// The op code of `op`.
    pub fn code(&self, op: &OpDef) -> &OpCode {
        &self.opcodes[op.opcode]
    }

    /// The constant data of tensor `t`, if it has any.
    pub fn const_data(&self, t: i32) -> Option<&[u8]> {
        let def = self.tensors.get(usize::try_from(t).ok()?)?;
        let data = &self.buffers[def.buffer as usize];
        (def.buffer != 0 && !data.is_empty()).then_some(data.as_slice())
    }

    /// Index of the op code for builtin `op`, added when the model has none yet.
    pub fn opcode_for(&mut self, op: tflite::BuiltinOperator) -> usize {
        if let Some(ix) = self
            .opcodes
            .iter()
            .position(|c| c.builtin == op.0 && c.custom.is_none())
        {
            return ix;
        }
        self.opcodes.push(OpCode {
            builtin: op.0,
            custom: None,
            version: 1,
        });
        self.opcodes.len() - 1
    }

    /// Adds a buffer holding `data` and returns its index.
    pub fn add_buffer(&mut self, data: Vec<u8>) -> u32 {
        self.buffers.push(data);
        (self.buffers.len() - 1) as u32
    }

    /// Adds a tensor and returns its index.
    pub fn add_tensor(&mut self, t: TensorDef) -> i32 {
        self.tensors.push(t);
        (self.tensors.len() - 1) as i32
    }

    /// Adds a constant tensor of `int32` values (shapes and permutations).
    pub fn add_i32_const(&mut self, name: String, values: &[i32]) -> i32 {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let buffer = self.add_buffer(data);
        self.add_tensor(TensorDef {
            name,
            shape: vec![values.len() as i32],
            dtype: tflite::TensorType::INT32,
            buffer,
            quant: None,
            sparsity: None,
        })
    }

    /// Serialises the graph as a TFLite flatbuffer (identifier `TFL3`).
    pub fn write(&self) -> Vec<u8> {
        let mut fbb = flatbuffers::FlatBufferBuilder::with_capacity(
            self.buffers.iter().map(Vec::len).sum::<usize>() + 4096,
        );
        let buffers: Vec<_> = self
            .buffers
            .iter()
            .map(|data| {
                let data = (!data.is_empty()).then(|| fbb.create_vector(data.as_slice()));
                tflite::Buffer::create(&mut fbb, &tflite::BufferArgs { data })
            })
            .collect();
        let buffers = fbb.create_vector(&buffers);
        let tensors: Vec<_> = self
            .tensors
            .iter()
            .map(|t| {
                let shape = Some(fbb.create_vector(&t.shape));
                let name = Some(fbb.create_string(&t.name));
                let quantization = t.quant.as_ref().map(|q| {
                    let scale = Some(fbb.create_vector(&q.scale));
                    let zero_point = Some(fbb.create_vector(&q.zero_point));
                    tflite::QuantizationParameters::create(
                        &mut fbb,
                        &tflite::QuantizationParametersArgs {
                            scale,
                            zero_point,
                            quantized_dimension: q.quantized_dimension,
                            ..Default::default()
                        },
                    )
                });
                let sparsity = t.sparsity.as_ref().map(|sp| write_sparsity(&mut fbb, sp));
                tflite::Tensor::create(
                    &mut fbb,
                    &tflite::TensorArgs {
                        shape,
                        type_: t.dtype,
                        buffer: t.buffer,
                        name,
                        quantization,
                        sparsity,
                        ..Default::default()
                    },
                )
            })
            .collect();
        let tensors = fbb.create_vector(&tensors);
        let ops: Vec<_> = self
            .ops
            .iter()
            .map(|op| {
                let inputs = Some(fbb.create_vector(&op.inputs));
                let outputs = Some(fbb.create_vector(&op.outputs));
                let (builtin_options_type, builtin_options) = op.options.write(&mut fbb);
                tflite::Operator::create(
                    &mut fbb,
                    &tflite::OperatorArgs {
                        opcode_index: op.opcode as u32,
                        inputs,
                        outputs,
                        builtin_options_type,
                        builtin_options,
                        ..Default::default()
                    },
                )
            })
            .collect();
        let operators = Some(fbb.create_vector(&ops));
        let inputs = Some(fbb.create_vector(&self.inputs));
        let outputs = Some(fbb.create_vector(&self.outputs));
        let main = tflite::SubGraph::create(
            &mut fbb,
            &tflite::SubGraphArgs {
                tensors: Some(tensors),
                inputs,
                outputs,
                operators,
                name: None,
            },
        );
        let subgraphs = Some(fbb.create_vector(&[main]));
        let codes: Vec<_> = self
            .opcodes
            .iter()
            .map(|c| {
                let custom_code = c.custom.as_ref().map(|s| fbb.create_string(s));
                tflite::OperatorCode::create(
                    &mut fbb,
                    &tflite::OperatorCodeArgs {
                        deprecated_builtin_code: c
                            .builtin
                            .min(tflite::BuiltinOperator::PLACEHOLDER_FOR_GREATER_OP_CODES.0)
                            as i8,
                        custom_code,
                        version: c.version,
                        builtin_code: tflite::BuiltinOperator(c.builtin),
                    },
                )
            })
            .collect();
        let operator_codes = Some(fbb.create_vector(&codes));
        let description = self.description.as_ref().map(|d| fbb.create_string(d));
        let model = tflite::Model::create(
            &mut fbb,
            &tflite::ModelArgs {
                version: self.version,
                operator_codes,
                subgraphs,
                description,
                buffers: Some(buffers),
                ..Default::default()
            },
        );
        fbb.finish(model, Some("TFL3"));
        fbb.finished_data().to_vec()
    }
}
