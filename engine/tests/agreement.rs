//! tract and ONNX Runtime agree on real models (same input, stated tolerance), and
//! batching is real: a native batch of k equals k single runs; fixed-batch models loop.

mod common;

use camdnn_engine::{
    BatchMode, Dim, Engine, EngineKind, LoadedModel, ModelSource, OrtProvider, ProcessorConfig,
    Tensor, TractEngine,
};

/// Largest allowed |tract - ort| / max(1, |ort|) on any output element. Both run f32;
/// differences come from kernel summation order and fused ops.
const TOL: f32 = 1e-4;

fn procs() -> (ProcessorConfig, ProcessorConfig) {
    let tract = ProcessorConfig::new("t", EngineKind::Tract);
    let mut ort = ProcessorConfig::new("o", EngineKind::Ort);
    ort.provider = Some(OrtProvider::Cpu);
    (tract, ort)
}

fn load_both(src: &ModelSource) -> (Box<dyn LoadedModel>, Box<dyn LoadedModel>) {
    let (tp, op) = procs();
    let t = TractEngine::new().load(src, &tp).expect("tract load");
    let o = common::ort().load(src, &op).expect("ort load");
    (t, o)
}

/// Largest minus smallest element: agreement on a constant output proves little.
fn spread(t: &Tensor) -> f32 {
    let v = t.as_f32().unwrap();
    let (mn, mx) = v
        .iter()
        .fold((f32::MAX, f32::MIN), |(a, b), &z| (a.min(z), b.max(z)));
    mx - mn
}

fn assert_agree(name: &str, a: &[Tensor], b: &[Tensor]) {
    assert_eq!(a.len(), b.len(), "{name}: output counts differ");
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.name(), y.name(), "{name}: output names differ");
        let d = common::max_rel_diff(y, x);
        eprintln!(
            "{name}: output `{}` {:?}: max rel diff {d:e}",
            x.name(),
            x.shape()
        );
        assert!(
            d <= TOL,
            "{name}: output `{}` differs by {d} (> {TOL})",
            x.name()
        );
        assert!(
            x.as_f32().unwrap().iter().all(|v| v.is_finite()),
            "{name}: non-finite output"
        );
    }
}

/// Loads `src` on both engines, runs a batch of `k` and checks batch mode, metadata,
/// agreement and that batch rows equal single runs. `real_weights`: the outputs must
/// also vary (the onnx "light" models have constant synthetic weights, so their
/// softmax is uniform and only shapes and modes are meaningful there).
fn check_model(src: ModelSource, k: usize, expect: BatchMode, real_weights: bool) {
    let (mut t, mut o) = load_both(&src);
    assert_eq!(t.info().batch, expect, "{}: tract batch mode", src.name);
    assert_eq!(o.info().batch, expect, "{}: ort batch mode", src.name);
    assert_eq!(
        t.info().inputs,
        o.info().inputs,
        "{}: input metadata",
        src.name
    );
    let inputs: Vec<Tensor> = t
        .info()
        .inputs
        .iter()
        .enumerate()
        .map(|(i, info)| common::input(info, k, 7 + i as u64))
        .collect();
    let to = t.run(&inputs).expect("tract run");
    let oo = o.run(&inputs).expect("ort run");
    for out in to.iter().chain(&oo) {
        assert_eq!(
            out.batch(),
            Some(k),
            "{}: output `{}` batch",
            src.name,
            out.name()
        );
    }
    assert_agree(&src.name, &to, &oo);
    if real_weights {
        for out in &to {
            assert!(
                spread(out) > 1e-6,
                "{}: output `{}` is constant (spread {}), agreement would prove nothing",
                src.name,
                out.name(),
                spread(out)
            );
        }
    }

    // Batching is real: row r of the batch-k result equals a batch-1 run of row r.
    for r in [0, k - 1] {
        let row: Vec<Tensor> = inputs
            .iter()
            .map(|x| x.slice_batch(r, 1).unwrap())
            .collect();
        let single = t.run(&row).expect("tract single run");
        for (whole, one) in to.iter().zip(&single) {
            let d = common::max_rel_diff(&whole.slice_batch(r, 1).unwrap(), one);
            assert!(
                d <= TOL,
                "{}: batch row {r} differs from a single run by {d}",
                src.name
            );
        }
    }
}

#[test]
fn light_squeezenet_loops_over_its_fixed_batch_on_both_engines() {
    let src = ModelSource::new("light_squeezenet", common::model("light_squeezenet.onnx"));
    check_model(src, 3, BatchMode::Loop { model_batch: 1 }, false);
}

#[test]
fn light_inception_v1_loops_over_its_fixed_batch_on_both_engines() {
    let src = ModelSource::new(
        "light_inception_v1",
        common::model("light_inception_v1.onnx"),
    );
    check_model(src, 2, BatchMode::Loop { model_batch: 1 }, false);
}

#[test]
fn ppocr_det_agrees_with_a_native_dynamic_batch() {
    let src = ModelSource::new("ppocr_det", common::model("ch_PP-OCRv4_det_infer.onnx"))
        .with_input_shape("x", vec![-1, 3, 160, 160]);
    check_model(src, 2, BatchMode::Native, true);
}

#[test]
fn ppocr_rec_agrees_with_a_native_dynamic_batch() {
    let src = ModelSource::new("ppocr_rec", common::model("ch_PP-OCRv4_rec_infer.onnx"))
        .with_input_shape("x", vec![-1, 3, 48, 160]);
    check_model(src, 2, BatchMode::Native, true);
}

#[test]
fn ppocr_cls_agrees_with_a_native_dynamic_batch() {
    let src = ModelSource::new(
        "ppocr_cls",
        common::model("ch_ppocr_mobile_v2.0_cls_infer.onnx"),
    )
    .with_input_shape("x", vec![-1, 3, 48, 192]);
    check_model(src.clone(), 4, BatchMode::Native, true);
    let (t, _) = load_both(&src);
    assert_eq!(
        t.info().outputs[0].shape,
        vec![Dim::Batch, Dim::Fixed(2)],
        "cls output is [N, 2]"
    );
}

#[test]
fn mtcnn_rnet_agrees_with_a_native_dynamic_batch() {
    let src = ModelSource::new("mtcnn_rnet", common::model("mtcnn_rnet.onnx"));
    check_model(src, 5, BatchMode::Native, true);
}

#[test]
fn symbolic_dims_without_a_shape_are_refused_by_tract_with_the_fix() {
    let src = ModelSource::new(
        "ppocr_cls",
        common::model("ch_ppocr_mobile_v2.0_cls_infer.onnx"),
    );
    let err = TractEngine::new()
        .load(&src, &procs().0)
        .err()
        .expect("tract must refuse symbolic H/W");
    let msg = err.to_string();
    assert!(
        msg.contains("input `x`") && msg.contains("input_shapes"),
        "{msg}"
    );
}

#[test]
fn bad_input_shape_is_a_clear_error_on_both_engines() {
    let src = ModelSource::new("light_squeezenet", common::model("light_squeezenet.onnx"));
    let (mut t, mut o) = load_both(&src);
    let wrong = Tensor::from_f32(vec![1, 3, 10, 10], vec![0.0; 300]).unwrap();
    for m in [&mut t, &mut o] {
        let msg = m.run(std::slice::from_ref(&wrong)).unwrap_err().to_string();
        assert!(msg.contains("the model wants [1, 3, 224, 224]"), "{msg}");
    }
}
