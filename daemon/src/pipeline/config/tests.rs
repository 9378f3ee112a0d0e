//! The `[pipeline]` section's checks: each bad value refused naming its field.

use super::*;

const PROCS: &str = r#"
profile = "p.toml"
[[processor]]
name = "cpu"
kind = "cpu"
max_resident = 2
engine = "tract"
"#;

fn parse(models: &str) -> anyhow::Result<PipelineConfig> {
    let cfg: PipelineConfig = toml::from_str(&format!("{PROCS}{models}"))?;
    cfg.check()?;
    Ok(cfg)
}

fn err(models: &str) -> String {
    format!("{:#}", parse(models).unwrap_err())
}

const CLASSIFIER: &str = r#"
[[model]]
name = "cls"
path = "c.onnx"
parent = "det"
classes = ["person"]
input = { width = 8, height = 8, norm = {} }
output = { kind = "topk" }
"#;

#[test]
fn bad_face_settings_are_refused_naming_the_field() {
    let pose = |face: &str| {
        format!(
            "[[model]]\nname = \"det\"\noutput = {{ kind = \"upstream\" }}\n\
             [[model]]\nname = \"pose\"\npath = \"m.onnx\"\nparent = \"det\"\n\
             input = {{ width = 192, height = 192, crop = \"fit\", norm = {{}} }}\n\
             output = {{ kind = \"movenet\", face = {{ {face} }} }}\n"
        )
    };
    let ok = parse(&pose("")).unwrap();
    let OutputSpec::Movenet { face: Some(f) } = &ok.models[1].output else {
        panic!("movenet with a face")
    };
    assert_eq!((f.min_score, f.margin, f.min_side), (0.3, 0.2, 48.0));
    for (face, field) in [
        ("min_side = 0.5", "output.face.min_side = 0.5"),
        ("min_score = 1.5", "output.face.min_score = 1.5"),
        ("margin = -1.0", "output.face.margin = -1"),
    ] {
        let e = err(&pose(face));
        assert!(e.contains(field) && e.contains("\"pose\""), "{face}: {e}");
    }
}

#[test]
fn an_upstream_detector_has_no_file_and_no_input() {
    let cfg = parse(&format!(
        "[[model]]\nname = \"det\"\noutput = {{ kind = \"upstream\" }}\n{CLASSIFIER}"
    ))
    .unwrap();
    assert!(cfg.models[0].output.is_upstream() && cfg.models[0].output.is_detector());
    assert_eq!(
        cfg.models[0].source(|p| p.to_path_buf(), 1).path,
        PathBuf::new()
    );
    let e = err(&format!(
        "[[model]]\nname = \"det\"\npath = \"d.onnx\"\noutput = {{ kind = \"upstream\" }}\n{CLASSIFIER}"
    ));
    assert!(
        e.contains("upstream detector") && e.contains("remove `path`"),
        "{e}"
    );
    let e = err(&format!(
        "[[model]]\nname = \"det\"\ninput = {{ width = 8, height = 8, norm = {{}} }}\noutput = {{ kind = \"dbnet\" }}\n{CLASSIFIER}"
    ));
    assert!(e.contains("needs `path`"), "{e}");
}

#[test]
fn pnet_and_the_pyramid_go_together() {
    let pnet = |input: &str| {
        format!("[[model]]\nname = \"det\"\npath = \"p.onnx\"\ninput = {{ width = 64, height = 64, norm = {{}}{input} }}\noutput = {{ kind = \"mtcnn_pnet\" }}\n{CLASSIFIER}")
    };
    let cfg = parse(&pnet(", pyramid = { min_face = 30 }")).unwrap();
    assert_eq!(cfg.models[0].input.pyramid.as_ref().unwrap().min_face, 30.0);
    assert!(err(&pnet("")).contains("needs input.pyramid"));
    let e = err(&format!(
        "[[model]]\nname = \"det\"\npath = \"d.onnx\"\ninput = {{ width = 8, height = 8, norm = {{}}, pyramid = {{}} }}\noutput = {{ kind = \"dbnet\" }}\n{CLASSIFIER}"
    ));
    assert!(
        e.contains("only supported with output kind mtcnn_pnet"),
        "{e}"
    );
}

#[test]
fn the_drop_step_gap_is_a_number_of_ms_at_least_zero() {
    let models =
        format!("[[model]]\nname = \"det\"\noutput = {{ kind = \"upstream\" }}\n{CLASSIFIER}");
    let with = |line: &str| -> anyhow::Result<PipelineConfig> {
        let cfg: PipelineConfig = toml::from_str(&format!("{line}\n{PROCS}{models}"))?;
        cfg.check()?;
        Ok(cfg)
    };
    // Absent: the policy crate's default, a second.
    assert_eq!(
        with("").unwrap().drop_step_gap_ms,
        camdnn_policy::stepper::DROP_STEP_GAP_MS
    );
    assert_eq!(
        with("drop_step_gap_ms = 0.0").unwrap().drop_step_gap_ms,
        0.0
    );
    for bad in ["-1.0", "nan", "inf"] {
        let e = format!(
            "{:#}",
            with(&format!("drop_step_gap_ms = {bad}")).unwrap_err()
        );
        assert!(e.contains("pipeline.drop_step_gap_ms"), "{bad}: {e}");
    }
}

#[test]
fn ctc_needs_exactly_one_dictionary_source() {
    let rec = |out: &str| {
        format!("[[model]]\nname = \"det\"\noutput = {{ kind = \"upstream\" }}\n[[model]]\nname = \"rec\"\npath = \"r.onnx\"\nparent = \"det\"\nclasses = [\"text\"]\ninput = {{ width = 8, height = 8, crop = \"fit_height\", norm = {{}} }}\noutput = {out}\n")
    };
    parse(&rec(r#"{ kind = "ctc", dict_metadata = "character" }"#)).unwrap();
    parse(&rec(r#"{ kind = "ctc", dict_file = "keys.txt" }"#)).unwrap();
    for bad in [
        r#"{ kind = "ctc" }"#,
        r#"{ kind = "ctc", dict_file = "k.txt", dict_metadata = "character" }"#,
    ] {
        assert!(err(&rec(bad)).contains("exactly one of dict_file and dict_metadata"));
    }
    assert!(parse(&rec(r#"{ kind = "ctc", dict_metdata = "x" }"#)).is_err());
}
