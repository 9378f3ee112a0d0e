//! A model with an operator the engine lacks is refused at load, naming the operator.
//! The model is generated here (tests/common), never taken from a third party.

mod common;

use camdnn_engine::{
    Engine, EngineError, EngineKind, ModelSource, OrtProvider, ProcessorConfig, TractEngine,
};

#[test]
fn tract_refuses_unknown_ops_and_lists_them() {
    let dir = common::scratch("unsupported-tract");
    let path = common::write_chain_model(
        &dir,
        "madeup.onnx",
        &[
            "Relu",
            "CamdnnMadeUpOp",
            "Sigmoid",
            "CamdnnOtherOp",
            "CamdnnMadeUpOp",
        ],
    );
    let src = ModelSource::new("madeup", path);
    let err = TractEngine::new()
        .load(&src, &ProcessorConfig::new("t", EngineKind::Tract))
        .err()
        .expect("tract must refuse the model");
    match &err {
        EngineError::UnsupportedOps { model, engine, ops } => {
            assert_eq!(model, "madeup");
            assert_eq!(*engine, "tract");
            assert_eq!(ops, &["CamdnnMadeUpOp", "CamdnnOtherOp"]);
        }
        other => panic!("wrong error: {other}"),
    }
    assert!(
        err.to_string().contains("CamdnnMadeUpOp, CamdnnOtherOp"),
        "{err}"
    );
}

#[test]
fn tract_loads_the_same_chain_without_the_unknown_op() {
    // Control: the generator itself makes loadable models, so the refusal above is
    // caused by the op, not by a broken file.
    let dir = common::scratch("supported-tract");
    let path = common::write_chain_model(&dir, "ok.onnx", &["Relu", "Sigmoid"]);
    let mut m = TractEngine::new()
        .load(
            &ModelSource::new("ok", path),
            &ProcessorConfig::new("t", EngineKind::Tract),
        )
        .expect("a Relu/Sigmoid chain loads");
    let x = camdnn_engine::Tensor::from_f32(
        vec![2, 4],
        vec![-1.0, 0.0, 1.0, 2.0, -2.0, 3.0, 0.5, -0.5],
    )
    .unwrap();
    let y = m.run(&[x]).unwrap();
    let y = y[0].as_f32().unwrap();
    assert!(
        (y[0] - 0.5).abs() < 1e-6,
        "sigmoid(relu(-1)) = 0.5, got {}",
        y[0]
    );
    assert!((y[3] - 1.0 / (1.0 + (-2.0f32).exp())).abs() < 1e-6);
}

#[test]
fn ort_refuses_unknown_ops_and_lists_them() {
    let dir = common::scratch("unsupported-ort");
    let path = common::write_chain_model(&dir, "madeup.onnx", &["Relu", "CamdnnMadeUpOp"]);
    let mut proc = ProcessorConfig::new("o", EngineKind::Ort);
    proc.provider = Some(OrtProvider::Cpu);
    let err = common::ort()
        .load(&ModelSource::new("madeup", path), &proc)
        .err()
        .expect("ort must refuse the model");
    match &err {
        EngineError::UnsupportedOps { ops, .. } => assert_eq!(ops, &["CamdnnMadeUpOp"]),
        other => panic!("wrong error: {other}"),
    }
}
