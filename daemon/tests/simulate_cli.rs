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
    // The table is ranked best first on the headline measure (on-time share,
    // then delay over all offered frames), relative to camdnn (the committed
    // learned policy): it ranks above every baseline of the paper.
    assert!(
        stdout.contains("ranked best first by on-time share"),
        "{stdout}"
    );
    assert!(stdout.contains("relative to camdnn "), "{stdout}");
    let row = |name: &str| {
        stdout
            .lines()
            .position(|l| l.split_whitespace().next() == Some(name) && !l.starts_with(' '))
            .unwrap_or_else(|| panic!("no row for {name}:\n{stdout}"))
    };
    for name in [
        "camdnn-local",
        "heft",
        "cq",
        "static-dist",
        "cpu-only",
        "gpu-only",
    ] {
        assert!(
            row("camdnn") < row(name),
            "camdnn does not rank above {name}:\n{stdout}"
        );
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
    for l in &lines {
        let n = |k: &str| l[k].as_u64().unwrap();
        assert_eq!(n("on_time") + n("late") + n("dropped"), n("offered"), "{l}");
        // The default deadline is two frame periods at 14 fps.
        assert!((l["deadline_ms"].as_f64().unwrap() - 2000.0 / 14.0).abs() < 1e-9);
    }
}

/// `--frames-out` writes every frame of every scheduler, and the frames add
/// up to the summary `--json` prints for the same run: on time, late and
/// dropped counts, and the scenes of the trace in order.
#[test]
fn frames_out_writes_every_frame_and_they_add_up_to_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.txt");
    std::fs::write(&trace, "3 0 0 0\n4 14 14 14\n").unwrap();
    let frames = dir.path().join("frames.jsonl");
    let out = camdnnd(&[
        "simulate",
        "--system",
        "config/profiles/rb5.toml",
        "--trace",
        trace.to_str().unwrap(),
        "--schedulers",
        "heft,camdnn-local",
        "--json",
        "--frames-out",
        frames.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&frames)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2 * 7, "7 frames for each of 2 schedulers");
    for s in &summary {
        let name = s["scheduler"].as_str().unwrap();
        let mine: Vec<&serde_json::Value> =
            lines.iter().filter(|l| l["scheduler"] == name).collect();
        assert_eq!(mine.len(), 7, "{name}");
        for outcome in ["on_time", "late", "dropped"] {
            let n = mine.iter().filter(|l| l["outcome"] == outcome).count() as u64;
            assert_eq!(n, s[outcome].as_u64().unwrap(), "{name} {outcome}");
        }
        for (k, l) in mine.iter().enumerate() {
            assert_eq!(l["frame"], k as u64);
            let objects = if k < 3 { 0 } else { 14 };
            assert_eq!(l["scene"].as_object().unwrap().len(), 3, "{l}");
            assert!(
                l["scene"]
                    .as_object()
                    .unwrap()
                    .values()
                    .all(|c| c == objects),
                "{l}"
            );
            assert_eq!(l["delay_ms"].is_null(), l["outcome"] == "dropped", "{l}");
            assert!(
                l["rem_at_arrival_ms"]
                    .as_object()
                    .unwrap()
                    .contains_key("cpu"),
                "{l}"
            );
        }
    }
    // A path that cannot be written is named.
    let bad = dir.path().join("no-such-dir").join("f.jsonl");
    let out = camdnnd(&[
        "simulate",
        "--system",
        "config/profiles/rb5.toml",
        "--schedulers",
        "heft",
        "--frames-out",
        bad.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("--frames-out") && stderr.contains("no-such-dir"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn the_no_drop_mode_and_the_deadline_are_options() {
    let out = camdnnd(&[
        "simulate",
        "--system",
        "config/profiles/rb5.toml",
        "--json",
        "--schedulers",
        "cpu-only",
        "--no-drop",
        "--deadline-ms",
        "1000",
    ]);
    assert!(out.status.success());
    let l: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(l["dropped"], 0, "{l}");
    assert_eq!(l["deadline_ms"], 1000.0);
    assert!(l["offered_delay_ms"]["mean"].is_number(), "{l}");

    let out = camdnnd(&[
        "simulate",
        "--system",
        "config/profiles/rb5.toml",
        "--deadline-ms=-3",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--deadline-ms -3"), "{err}");
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

#[test]
fn a_graph_without_three_classifiers_gets_the_paper_shape_sized_to_it() {
    // The real street graph: CenterNet, then MoveNet per person, then faceres
    // per face (two request models, one of them a level deeper).
    let out = camdnnd(&["simulate", "--system", "config/profiles/host-street.toml"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("the default trace is the paper's shape sized to this board"),
        "{stderr}"
    );
    assert!(stdout.contains("800 frames in 16 scenes"), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with("camdnn-local")),
        "{stdout}"
    );
}

/// `camdnnd simulate ... | head -1`: the reader goes away before the tables
/// are written, and the command stops without a panic.
#[test]
fn a_closed_stdout_stops_the_report_without_a_panic() {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_camdnnd"))
        .args([
            "simulate",
            "--system",
            "config/profiles/rb5.toml",
            "--schedulers",
            "camdnn-local",
        ])
        .current_dir(repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
}
