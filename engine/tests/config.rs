//! Serde config structs refuse unknown fields and parse the documented shapes.

use camdnn_engine::{EngineKind, ModelSource, OrtProvider, ProcessorConfig};

#[test]
fn processor_config_parses_and_defaults() {
    let p: ProcessorConfig = serde_json::from_str(
        r#"{"name": "dsp", "engine": "ort", "provider": "qnn",
            "qnn": {"backend_path": "/usr/lib/libQnnHtp.so", "context_cache_dir": "/var/cache/camdnn"}}"#,
    )
    .unwrap();
    assert_eq!(p.engine, EngineKind::Ort);
    assert_eq!(p.provider, Some(OrtProvider::Qnn));
    assert_eq!(p.intra_threads, 1);
    assert_eq!(p.core, None);
}

#[test]
fn unknown_fields_are_refused() {
    let e = serde_json::from_str::<ProcessorConfig>(
        r#"{"name": "cpu", "engine": "tract", "thread": 2}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("unknown field `thread`"), "{e}");
    let e = serde_json::from_str::<ProcessorConfig>(r#"{"name": "cpu", "engine": "onnx"}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown variant `onnx`"), "{e}");
    let e = serde_json::from_str::<ModelSource>(r#"{"name": "m", "path": "m.onnx", "shape": []}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `shape`"), "{e}");
}

#[test]
fn model_source_format_comes_from_the_extension() {
    let m: ModelSource = serde_json::from_str(
        r#"{"name": "cls", "path": "models/cls.onnx", "input_shapes": {"x": [-1, 3, 48, 192]}}"#,
    )
    .unwrap();
    assert_eq!(m.input_shapes["x"], vec![-1, 3, 48, 192]);
    assert!(m.format().is_ok());
    let err = ModelSource::new("w", "weights.bin")
        .format()
        .unwrap_err()
        .to_string();
    assert!(err.contains("set `format`"), "{err}");
}
