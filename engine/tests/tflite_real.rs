//! Real TFLite files (mediapipe's, fetched by scripts/fetch_tflite_models.sh) load
//! through the TFLite loading pass and run on tract; what the pass cannot rewrite is
//! refused with the operators named. Agreement with LiteRT is measured by
//! scripts/tflite_coverage.sh (docs/tflite.md), which needs LiteRT's Python package.

mod common;

use camdnn_engine::{
    BatchMode, Dim, Engine, EngineError, EngineKind, LoadedModel, ModelSource, ProcessorConfig,
    TractEngine,
};

fn load(file: &str) -> Result<Box<dyn LoadedModel>, EngineError> {
    let path = common::model(&format!("tflite/{file}"));
    TractEngine::new().load(
        &ModelSource::new(file, path),
        &ProcessorConfig::new("t", EngineKind::Tract),
    )
}

fn shapes(dims: &[Dim]) -> Vec<usize> {
    dims.iter()
        .map(|d| match d {
            Dim::Fixed(n) => *n,
            other => panic!("dim {other} is not fixed"),
        })
        .collect()
}

/// Loads `file`, checks its inputs and outputs, runs it once on a pseudo-random
/// input and checks the outputs are finite and not constant.
fn loads_and_runs(file: &str, input: &[usize], outputs: &[&[usize]], rewrites: &str) {
    let mut m = load(file).unwrap_or_else(|e| panic!("{file}: {e}"));
    let info = m.info().clone();
    assert_eq!(info.batch, BatchMode::Loop { model_batch: 1 }, "{file}");
    assert_eq!(shapes(&info.inputs[0].shape), input, "{file}");
    let outs: Vec<Vec<usize>> = info.outputs.iter().map(|o| shapes(&o.shape)).collect();
    assert_eq!(outs, outputs, "{file}");
    assert!(info.detail.contains(rewrites), "{file}: {}", info.detail);
    let x = common::input(&info.inputs[0], 1, 7);
    let y = m.run(&[x]).unwrap_or_else(|e| panic!("{file}: {e}"));
    for t in &y {
        let v = t.as_f32().unwrap();
        assert!(v.iter().all(|x| x.is_finite()), "{file}: {}", t.name());
    }
    let big = y.iter().max_by_key(|t| t.len()).unwrap().as_f32().unwrap();
    assert!(
        big.iter().any(|&x| x != big[0]),
        "{file}: a constant output proves little"
    );
}

#[test]
fn the_face_detector_loads_with_its_float16_weights_folded() {
    loads_and_runs(
        "face_detection_short_range.tflite",
        &[1, 128, 128, 3],
        &[&[1, 896, 16], &[1, 896, 1]],
        "74 DEQUANTIZE and 0 DENSIFY folded, 0 PRELU",
    );
}

#[test]
fn the_face_landmark_model_loads_with_prelu_expanded() {
    loads_and_runs(
        "face_landmark.tflite",
        &[1, 192, 192, 3],
        &[&[1, 1, 1, 1404], &[1, 1, 1, 1]],
        "113 DEQUANTIZE and 0 DENSIFY folded, 23 PRELU",
    );
}

#[test]
fn the_sparse_full_range_detector_loads_with_densify_and_depth_to_space() {
    loads_and_runs(
        "face_detection_full_range_sparse.tflite",
        &[1, 192, 192, 3],
        &[&[1, 2304, 16], &[1, 2304, 1]],
        "182 DEQUANTIZE and 46 DENSIFY folded, 0 PRELU and 2 DEPTH_TO_SPACE expanded",
    );
}

#[test]
fn custom_ops_are_refused_by_name() {
    match load("face_landmark_with_attention.tflite") {
        Err(EngineError::UnsupportedOps { engine, ops, .. }) => {
            assert_eq!(engine, "tract");
            assert_eq!(
                ops,
                [
                    "CUSTOM:Landmarks2TransformMatrix",
                    "CUSTOM:TransformLandmarks",
                    "CUSTOM:TransformTensorBilinear"
                ]
            );
        }
        Err(other) => panic!("wrong error: {other}"),
        Ok(_) => panic!("custom ops cannot load"),
    }
}
