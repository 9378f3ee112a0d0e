//! `camdnnd check-config` as a user runs it: a good config passes with a
//! summary after loading every model on tract and ONNX Runtime; a typo, a
//! missing model file and a model with operators the engines lack are refused
//! with an error naming what is wrong.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use prost::Message;
use tract_onnx::pb;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/paper_tract_ort.toml")
}

fn check(config: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_camdnnd"))
        .args(["check-config", "--config"])
        .arg(config)
        .output()
        .expect("running camdnnd")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The fixture rewritten into `dir` (absolute model and profile paths) with
/// `edit` applied to its text.
fn variant(dir: &Path, edit: impl Fn(String) -> String) -> PathBuf {
    let fixtures = fixture().parent().unwrap().canonicalize().unwrap();
    let models = fixtures.join("../../../models").canonicalize().unwrap();
    let original = std::fs::read_to_string(fixture()).unwrap();
    let text = original
        .replace("../../../models", &models.display().to_string())
        .replace(
            "profile = \"paper_tract_ort.profile.toml\"",
            &format!(
                "profile = \"{}\"",
                fixtures.join("paper_tract_ort.profile.toml").display()
            ),
        );
    assert_ne!(text, original, "the fixture's paths were not rewritten");
    let path = dir.join("camdnnd.toml");
    std::fs::write(&path, edit(text)).unwrap();
    path
}

#[test]
fn good_config_passes_after_loading_every_model() {
    let out = check(&fixture());
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("is valid"), "{stdout}");
    // 3 classifiers on 2 processors, every pair supported by the profile.
    assert!(
        stdout.contains("loaded and ran 6 model/processor pairs"),
        "{stdout}"
    );
    for pair in [
        "squeezenet on tract0",
        "shufflenet on ort1",
        "inception_v1 on ort1",
    ] {
        assert!(stdout.contains(pair), "{pair} missing: {stdout}");
    }
}

#[test]
fn a_misspelt_field_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = variant(dir.path(), |t| {
        t.replacen("max_resident = 3", "max_residnt = 3", 1)
    });
    let out = check(&cfg);
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("max_residnt"), "{stderr}");
    assert!(stderr.contains("unknown field"), "{stderr}");
}

#[test]
fn a_missing_model_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = variant(dir.path(), |t| {
        t.replace("light_squeezenet.onnx", "light_squeezenet_missing.onnx")
    });
    let out = check(&cfg);
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("squeezenet"), "{stderr}");
    assert!(stderr.contains("light_squeezenet_missing.onnx"), "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
}

/// A chain x -> Relu -> made-up ops -> y, as an ONNX file.
fn write_madeup_model(path: &Path) {
    let ops = ["Relu", "CamdnnMadeUpOp", "CamdnnOtherOp"];
    let node = |i: usize, op: &str| pb::NodeProto {
        input: vec![if i == 0 { "x".into() } else { format!("t{i}") }],
        output: vec![if i + 1 == ops.len() {
            "y".into()
        } else {
            format!("t{}", i + 1)
        }],
        name: format!("n{i}"),
        op_type: op.into(),
        ..Default::default()
    };
    let value = |name: &str| pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: pb::tensor_proto::DataType::Float as i32,
                shape: Some(pb::TensorShapeProto {
                    dim: [1, 3, 224, 224]
                        .iter()
                        .map(|&d| pb::tensor_shape_proto::Dimension {
                            value: Some(pb::tensor_shape_proto::dimension::Value::DimValue(d)),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    };
    let model = pb::ModelProto {
        ir_version: 8,
        producer_name: "camdnn-daemon tests".into(),
        opset_import: vec![pb::OperatorSetIdProto {
            domain: String::new(),
            version: 13,
        }],
        graph: Some(pb::GraphProto {
            node: ops.iter().enumerate().map(|(i, op)| node(i, op)).collect(),
            name: "chain".into(),
            input: vec![value("x")],
            output: vec![value("y")],
            ..Default::default()
        }),
        ..Default::default()
    };
    std::fs::write(path, model.encode_to_vec()).unwrap();
}

#[test]
fn a_model_with_unsupported_ops_is_refused_with_the_op_names() {
    let dir = tempfile::tempdir().unwrap();
    let madeup = dir.path().join("madeup.onnx");
    write_madeup_model(&madeup);
    let cfg = variant(dir.path(), |t| {
        let models = t
            .lines()
            .find(|l| l.contains("light_squeezenet.onnx"))
            .unwrap()
            .to_string();
        t.replace(&models, &format!("path = \"{}\"", madeup.display()))
    });
    let out = check(&cfg);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{}", text(&out.stdout));
    // Both engines refuse it, each naming the operators.
    assert!(
        stderr.contains("\"squeezenet\" on processor \"tract0\"")
            && stderr.contains("CamdnnMadeUpOp, CamdnnOtherOp"),
        "{stderr}"
    );
    // ONNX Runtime stops at the first operator it has no kernel for.
    assert!(
        stderr.contains("\"squeezenet\" on processor \"ort1\"")
            && stderr.contains("the ort engine does not support: CamdnnMadeUpOp"),
        "{stderr}"
    );
}
