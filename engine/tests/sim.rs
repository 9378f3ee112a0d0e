//! The sim engine returns zeros of the right shapes and reports its batching mode;
//! timings are handed in per model (no timed assertions: only that the engine
//! measured something at least as long as it was told to sleep would be timing, so we
//! only check shapes, modes and errors).

use std::time::Duration;

use camdnn_engine::{
    BatchMode, DType, Dim, Engine, EngineKind, ModelSource, ProcessorConfig, SimEngine,
    SimModelSpec, Tensor, TensorInfo,
};

fn spec(lead: Dim) -> SimModelSpec {
    SimModelSpec {
        inputs: vec![TensorInfo {
            name: "x".into(),
            dtype: DType::F32,
            shape: vec![lead.clone(), Dim::Fixed(3), Dim::Fixed(8), Dim::Fixed(8)],
        }],
        outputs: vec![
            TensorInfo {
                name: "prob".into(),
                dtype: DType::F32,
                shape: vec![lead.clone(), Dim::Fixed(10)],
            },
            TensorInfo {
                name: "box".into(),
                dtype: DType::F32,
                shape: vec![lead, Dim::Fixed(4)],
            },
        ],
        load_time: Duration::from_millis(1),
        exec_time: vec![Duration::from_micros(200), Duration::from_micros(300)],
    }
}

fn proc() -> ProcessorConfig {
    ProcessorConfig::new("dsp", EngineKind::Sim)
}

#[test]
fn native_batch_returns_zero_outputs_of_the_right_shapes() {
    let engine = SimEngine::default().with_model("cls", spec(Dim::Batch));
    let mut m = engine
        .load(&ModelSource::new("cls", "/nonexistent/cls.onnx"), &proc())
        .unwrap();
    assert_eq!(m.info().batch, BatchMode::Native);
    assert_eq!(m.info().engine, EngineKind::Sim);
    let out = m
        .run(&[Tensor::zeros("x", DType::F32, vec![2, 3, 8, 8])])
        .unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!((out[0].name(), out[0].shape()), ("prob", &[2usize, 10][..]));
    assert_eq!((out[1].name(), out[1].shape()), ("box", &[2usize, 4][..]));
    assert!(out[0].as_f32().unwrap().iter().all(|v| *v == 0.0));
}

#[test]
fn fixed_batch_model_loops_and_concatenates() {
    let engine = SimEngine::default().with_model("cls", spec(Dim::Fixed(1)));
    let mut m = engine
        .load(&ModelSource::new("cls", "unused"), &proc())
        .unwrap();
    assert_eq!(m.info().batch, BatchMode::Loop { model_batch: 1 });
    // batch 5 > the profile's largest k (2) is fine in loop mode: five calls of batch 1.
    let out = m
        .run(&[Tensor::zeros("", DType::F32, vec![5, 3, 8, 8])])
        .unwrap();
    assert_eq!(out[0].shape(), &[5, 10]);
}

#[test]
fn errors_name_the_problem() {
    let engine = SimEngine::default().with_model("cls", spec(Dim::Batch));
    let err = engine
        .load(&ModelSource::new("det", "unused"), &proc())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("det") && err.contains("it knows: cls"),
        "{err}"
    );

    let mut m = engine
        .load(&ModelSource::new("cls", "unused"), &proc())
        .unwrap();
    let err = m
        .run(&[Tensor::zeros("x", DType::F32, vec![3, 3, 8, 8])])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("batch 3 is larger than the sim profile's largest batch 2"),
        "{err}"
    );
    let err = m
        .run(&[Tensor::zeros("x", DType::F32, vec![1, 3, 8, 9])])
        .unwrap_err()
        .to_string();
    assert!(err.contains("the model wants [N, 3, 8, 8]"), "{err}");

    let tract_proc = ProcessorConfig::new("cpu", EngineKind::Tract);
    let err = engine
        .load(&ModelSource::new("cls", "unused"), &tract_proc)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("configured for engine `tract`"), "{err}");
}
