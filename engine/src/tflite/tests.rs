//! The loading pass on small graphs built here: each rewrite, run by tract, gives what
//! the TFLite operator's definition says; what cannot be rewritten is refused by name.

use tract_tflite::prelude::*;
use tract_tflite::tflite::{ActivationFunctionType, BuiltinOperator as Op, TensorType};

use super::graph::{DimStorage, Graph, OpCode, OpDef, Sparsity, TensorDef};
use super::options::Options;
use super::{prepare, TfliteError};

fn empty_graph() -> Graph {
    Graph {
        version: 3,
        description: Some("camdnn test".into()),
        opcodes: vec![],
        buffers: vec![vec![]],
        tensors: vec![],
        inputs: vec![],
        outputs: vec![],
        ops: vec![],
    }
}

fn tensor(
    g: &mut Graph,
    name: &str,
    shape: &[i32],
    dtype: TensorType,
    data: Option<Vec<u8>>,
) -> i32 {
    let buffer = data.map_or(0, |d| g.add_buffer(d));
    g.add_tensor(TensorDef {
        name: name.into(),
        shape: shape.to_vec(),
        dtype,
        buffer,
        quant: None,
        sparsity: None,
    })
}

fn push(g: &mut Graph, code: Op, inputs: Vec<i32>, outputs: Vec<i32>, options: Options) {
    let opcode = g.opcode_for(code);
    g.ops.push(OpDef {
        opcode,
        inputs,
        outputs,
        options,
    });
}

fn f16_bytes(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|x| f16::from_f32(*x).to_le_bytes())
        .collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Prepares `g`, loads the result in tract and runs it on `x`.
fn run(g: &Graph, x: Tensor) -> (super::Rewrites, Vec<f32>, Vec<usize>) {
    let prepared = prepare(&g.write()).expect("prepare");
    let plan = tract_tflite::tflite()
        .model_for_read(&mut prepared.bytes.as_slice())
        .and_then(|m| m.into_optimized())
        .and_then(|m| m.into_runnable())
        .expect("tract loads the rewritten model");
    let out = plan.run(tvec![x.into_tvalue()]).expect("run");
    let y = out[0].to_plain_array_view::<f32>().unwrap();
    (
        prepared.rewrites,
        y.iter().copied().collect(),
        y.shape().to_vec(),
    )
}

#[test]
fn a_graph_survives_writing_and_reading_back() {
    let mut g = empty_graph();
    let x = tensor(&mut g, "x", &[1, 4], TensorType::FLOAT32, None);
    let w = tensor(
        &mut g,
        "w",
        &[1, 4],
        TensorType::FLOAT32,
        Some(f32_bytes(&[1.0, 2.0, 3.0, 4.0])),
    );
    let y = tensor(&mut g, "y", &[1, 4], TensorType::FLOAT32, None);
    push(
        &mut g,
        Op::ADD,
        vec![x, w],
        vec![y],
        Options::Add(ActivationFunctionType::NONE),
    );
    g.inputs = vec![x];
    g.outputs = vec![y];
    assert_eq!(Graph::read(&g.write()).unwrap(), g);
}

#[test]
fn float16_weights_are_folded_and_prelu_is_expanded() {
    let mut g = empty_graph();
    let x = tensor(&mut g, "x", &[1, 2, 2, 3], TensorType::FLOAT32, None);
    let alpha16 = tensor(
        &mut g,
        "alpha16",
        &[1, 1, 3],
        TensorType::FLOAT16,
        Some(f16_bytes(&[0.25, -0.5, 2.0])),
    );
    let alpha = tensor(&mut g, "alpha", &[1, 1, 3], TensorType::FLOAT32, None);
    let y = tensor(&mut g, "y", &[1, 2, 2, 3], TensorType::FLOAT32, None);
    push(
        &mut g,
        Op::DEQUANTIZE,
        vec![alpha16],
        vec![alpha],
        Options::None,
    );
    push(&mut g, Op::PRELU, vec![x, alpha], vec![y], Options::None);
    g.inputs = vec![x];
    g.outputs = vec![y];
    let input: Vec<f32> = (0..12).map(|i| i as f32 - 5.5).collect();
    let (rewrites, out, shape) = run(&g, tensor1(&input).into_shape(&[1, 2, 2, 3]).unwrap());
    assert_eq!((rewrites.dequantize, rewrites.prelu), (1, 1));
    assert_eq!(shape, [1, 2, 2, 3]);
    let alphas = [0.25, -0.5, 2.0];
    for (i, (&got, &v)) in out.iter().zip(&input).enumerate() {
        // PRELU's definition: x if x >= 0, alpha * x otherwise
        let want = if v >= 0.0 { v } else { alphas[i % 3] * v };
        assert!((got - want).abs() < 1e-6, "element {i}: {got} vs {want}");
    }
}

#[test]
fn depth_to_space_moves_channel_blocks_into_pixels() {
    let (h, w, c, b) = (2usize, 3usize, 8usize, 2usize);
    let mut g = empty_graph();
    let x = tensor(
        &mut g,
        "x",
        &[1, h as i32, w as i32, c as i32],
        TensorType::FLOAT32,
        None,
    );
    let oc = c / (b * b);
    let y_shape = [1, (h * b) as i32, (w * b) as i32, oc as i32];
    let y = tensor(&mut g, "y", &y_shape, TensorType::FLOAT32, None);
    push(
        &mut g,
        Op::DEPTH_TO_SPACE,
        vec![x],
        vec![y],
        Options::DepthToSpace {
            block_size: b as i32,
        },
    );
    g.inputs = vec![x];
    g.outputs = vec![y];
    let input: Vec<f32> = (0..h * w * c).map(|i| i as f32).collect();
    let (rewrites, out, shape) = run(&g, tensor1(&input).into_shape(&[1, h, w, c]).unwrap());
    assert_eq!(rewrites.depth_to_space, 1);
    assert_eq!(shape, [1, h * b, w * b, oc]);
    // TFLite's definition (DCR): out[y*b + by, x*b + bx, k] = in[y, x, (by*b + bx)*oc + k]
    for yy in 0..h {
        for xx in 0..w {
            for by in 0..b {
                for bx in 0..b {
                    for k in 0..oc {
                        let o = ((yy * b + by) * w * b + xx * b + bx) * oc + k;
                        let i = (yy * w + xx) * c + (by * b + bx) * oc + k;
                        assert_eq!(out[o], input[i], "out {o}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_sparse_constant_is_densified_then_dequantized() {
    // [[0, 0, 5, 0], [0, 0, 0, 0], [6, 0, 0, 7]] as CSR: row 0 dense, column compressed
    let mut g = empty_graph();
    let x = tensor(&mut g, "x", &[3, 4], TensorType::FLOAT32, None);
    let sparse = tensor(
        &mut g,
        "sparse",
        &[3, 4],
        TensorType::FLOAT16,
        Some(f16_bytes(&[5.0, 6.0, 7.0])),
    );
    g.tensors[sparse as usize].sparsity = Some(Sparsity {
        traversal_order: vec![0, 1],
        block_map: vec![],
        dims: vec![
            DimStorage::Dense(3),
            DimStorage::Sparse {
                segments: vec![0, 1, 1, 3],
                indices: vec![2, 0, 3],
            },
        ],
    });
    let dense16 = tensor(&mut g, "dense16", &[3, 4], TensorType::FLOAT16, None);
    let dense = tensor(&mut g, "dense", &[3, 4], TensorType::FLOAT32, None);
    let y = tensor(&mut g, "y", &[3, 4], TensorType::FLOAT32, None);
    push(
        &mut g,
        Op::DENSIFY,
        vec![sparse],
        vec![dense16],
        Options::None,
    );
    push(
        &mut g,
        Op::DEQUANTIZE,
        vec![dense16],
        vec![dense],
        Options::None,
    );
    push(
        &mut g,
        Op::ADD,
        vec![x, dense],
        vec![y],
        Options::Add(ActivationFunctionType::NONE),
    );
    g.inputs = vec![x];
    g.outputs = vec![y];
    assert_eq!(Graph::read(&g.write()).unwrap(), g, "sparsity is read back");
    let (rewrites, out, _) = run(&g, tensor1(&[1.0f32; 12]).into_shape(&[3, 4]).unwrap());
    assert_eq!((rewrites.densify, rewrites.dequantize), (1, 1));
    let want = [1., 1., 6., 1., 1., 1., 1., 1., 7., 1., 1., 8.];
    assert_eq!(out, want);
}

#[test]
fn a_broken_sparse_constant_is_an_error_not_a_panic() {
    let mut g = empty_graph();
    let sparse = tensor(
        &mut g,
        "sparse",
        &[2, 2],
        TensorType::FLOAT32,
        Some(f32_bytes(&[1.0])),
    );
    g.tensors[sparse as usize].sparsity = Some(Sparsity {
        traversal_order: vec![0, 1],
        block_map: vec![],
        dims: vec![
            DimStorage::Dense(2),
            DimStorage::Sparse {
                segments: vec![0, 1, 9],
                indices: vec![7],
            },
        ],
    });
    let x = tensor(&mut g, "x", &[2, 2], TensorType::FLOAT32, None);
    let d = tensor(&mut g, "d", &[2, 2], TensorType::FLOAT32, None);
    let y = tensor(&mut g, "y", &[2, 2], TensorType::FLOAT32, None);
    push(&mut g, Op::DENSIFY, vec![sparse], vec![d], Options::None);
    push(
        &mut g,
        Op::ADD,
        vec![x, d],
        vec![y],
        Options::Add(ActivationFunctionType::NONE),
    );
    g.inputs = vec![x];
    g.outputs = vec![y];
    let err = prepare(&g.write()).unwrap_err();
    assert!(
        matches!(&err, TfliteError::Malformed(m) if m.contains("sparse tensor `sparse`")),
        "{err}"
    );
}

#[test]
fn ops_without_a_rewrite_are_refused_by_name() {
    let mut g = empty_graph();
    let x = tensor(&mut g, "x", &[1, 4], TensorType::FLOAT32, None);
    let a = tensor(&mut g, "a", &[1, 4], TensorType::FLOAT32, None);
    let y = tensor(&mut g, "y", &[1, 4], TensorType::FLOAT32, None);
    g.opcodes.push(OpCode {
        builtin: Op::CUSTOM.0,
        custom: Some("TransformLandmarks".into()),
        version: 1,
    });
    g.ops.push(OpDef {
        opcode: 0,
        inputs: vec![x],
        outputs: vec![a],
        options: Options::None,
    });
    push(
        &mut g,
        Op::L2_NORMALIZATION,
        vec![a],
        vec![y],
        Options::None,
    );
    g.inputs = vec![x];
    g.outputs = vec![y];
    assert_eq!(
        prepare(&g.write()).unwrap_err(),
        TfliteError::Unsupported(vec![
            "CUSTOM:TransformLandmarks".into(),
            "L2_NORMALIZATION".into()
        ])
    );
}

#[test]
fn bad_bytes_and_bad_indices_are_errors() {
    assert!(matches!(
        prepare(b"not a model at all"),
        Err(TfliteError::Parse(_))
    ));
    let mut g = empty_graph();
    let x = tensor(&mut g, "x", &[1], TensorType::FLOAT32, None);
    push(&mut g, Op::RELU, vec![x], vec![7], Options::None);
    g.inputs = vec![x];
    g.outputs = vec![x];
    let err = prepare(&g.write()).unwrap_err();
    assert!(
        matches!(&err, TfliteError::Malformed(m) if m.contains("out of range")),
        "{err}"
    );
}
