//! `camdnnd simulate` runs every scheduler on the shipped profile and prints
//! the delay ratios; bad input is a clear error, not a panic.

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn camdnnd(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_camdnnd"))
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap()
}

#[test]
fn prints_every_scheduler_and_the_ratios() {
    let out = camdnnd(&["simulate", "--system", "config/profiles/rb5.toml"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in [
        "camdnn",
        "camdnn-local",
        "heft",
        "cq",
        "static-dist",
        "cpu-only",
        "gpu-only",
        "ltf",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(name)),
            "no row for {name}:\n{stdout}"
        );
    }
    assert!(stdout.contains("800 frames in 16 scenes"), "{stdout}");
    let ratio = |name: &str| -> f64 {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name) && l.trim_end().ends_with('x'))
            .unwrap_or_else(|| panic!("no ratio for {name}:\n{stdout}"));
        line.split_whitespace()
            .last()
            .unwrap()
            .trim_end_matches('x')
            .parse()
            .unwrap()
    };
    // The ratios are relative to camdnn (the committed learned policy):
    // it beats every baseline of the paper on the paper's trace.
    assert!(stdout.contains("relative to camdnn "), "{stdout}");
    for name in [
        "camdnn-local",
        "heft",
        "cq",
        "static-dist",
        "cpu-only",
        "gpu-only",
    ] {
        assert!(ratio(name) > 1.0, "camdnn does not beat {name}:\n{stdout}");
    }
}

#[test]
fn a_missing_policy_is_named() {
    let out = camdnnd(&[
        "simulate",
        "--system",
        "config/profiles/rb5.toml",
        "--policy",
        "config/policies/nope.onnx",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nope.onnx"), "{stderr}");
}

#[test]
fn json_output_has_one_object_per_scheduler() {
    let out = camdnnd(&[
        "simulate",
        "--system",
        "config/profiles/rb5.toml",
        "--json",
        "--schedulers",
        "heft,cq",
    ]);
    assert!(out.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["scheduler"], "heft");
    assert_eq!(lines[1]["frames"], 800);
}

#[test]
fn bad_inputs_are_reported_clearly() {
    let out = camdnnd(&["simulate", "--system", "no/such/file.toml"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no/such/file.toml"));

    let out = camdnnd(&[
        "simulate",
        "--system",
        "config/profiles/rb5.toml",
        "--schedulers",
        "magic",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown scheduler \"magic\""));

    let dir = std::env::temp_dir().join(format!("camdnn-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("bad.trace");
    std::fs::write(&trace, "50 1 1 1\n50 1 x 1\n").unwrap();
    let out = camdnnd(&[
        "simulate",
        "--system",
        "config/profiles/rb5.toml",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2") && err.contains("\"x\""), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
