//! `camdnnd profile` on a small config (one light classifier behind an
//! upstream detector, tract on core 0 and ONNX Runtime on core 1): the file
//! it writes records the host in its header and parses back through the
//! policy crate and the daemon's own config check; `camdnnd bench` then runs
//! the whole comparison on it (pipeline, sequential Rust per engine,
//! sequential Python, simulator).

use std::path::Path;
use std::process::Command;

use camdnn_daemon::config::DaemonConfig;
use camdnn_policy::spec::SystemSpec;
use camdnn_policy::{ModelId, ProcId, System};

fn profile(cfg: &Path, out_path: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_camdnnd"))
        .args([
            "profile", "--runs", "3", "--warmup", "1", "--loads", "2", "--config",
        ])
        .arg(cfg)
        .arg("--out")
        .arg(out_path)
        .output()
        .unwrap()
}

fn config(dir: &Path) -> std::path::PathBuf {
    let model = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../models/light_squeezenet.onnx")
        .canonicalize()
        .expect("models/light_squeezenet.onnx: run scripts/setup.sh");
    let text = format!(
        r#"
[server]
socket = "/tmp/camdnnd-profile-test.sock"

[pipeline]
profile = "measured.toml"
max_batch = 3

[[pipeline.processor]]
name = "tract0"
kind = "cpu"
max_resident = 2
engine = "tract"
core = 0

[[pipeline.processor]]
name = "ort1"
kind = "cpu"
max_resident = 2
engine = "ort"
provider = "cpu"
core = 1

[[pipeline.model]]
name = "detector"
output = {{ kind = "upstream" }}

[[pipeline.model]]
name = "squeezenet"
path = "{}"
parent = "detector"
classes = ["car"]
input = {{ width = 224, height = 224, norm = {{ scale = 0.0039215686 }} }}
output = {{ kind = "topk", k = 3 }}
"#,
        model.display()
    );
    let path = dir.join("camdnnd.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn profile_writes_a_file_the_scheduler_reads() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let out_path = dir.path().join("measured.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_camdnnd"))
        .args([
            "profile", "--runs", "3", "--warmup", "1", "--loads", "2", "--config",
        ])
        .arg(&cfg)
        .arg("--out")
        .arg(&out_path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Progress names every measured pair.
    assert!(stderr.contains("squeezenet on tract0"), "{stderr}");
    assert!(stderr.contains("squeezenet on ort1"), "{stderr}");

    let text = std::fs::read_to_string(&out_path).unwrap();
    for line in [
        "# cpu governor: ",
        "# online cores: ",
        "# processor tract0: engine tract, intra_threads 1, core 0",
        "# processor ort1: engine ort (CPUExecutionProvider), intra_threads 1, core 1",
    ] {
        assert!(text.contains(line), "{line:?} missing from:\n{text}");
    }

    let spec = SystemSpec::from_toml(&text).unwrap();
    assert_eq!(spec.max_batch, 3);
    let sq = &spec.profile["squeezenet"];
    for proc in ["tract0", "ort1"] {
        let pair = &sq[proc];
        assert_eq!(pair.exec_ms.len(), 3, "{proc}: k = 1..n_b");
        assert!(pair.exec_ms.iter().all(|t| t.is_finite() && *t > 0.0));
        assert!(pair.load_ms.is_finite() && pair.load_ms > 0.0);
        let size = pair.size_mb.unwrap();
        assert!((size - 15_618.0 / 1e6).abs() < 1e-3, "size_mb {size}");
    }
    // The upstream detector costs nothing anywhere.
    assert!(spec.profile["detector"]["tract0"].exec_ms[0] < 0.01);

    let system = System::from_toml(&text).unwrap();
    let (sq, t0) = (ModelId(1), ProcId(0));
    assert!(system.supports(sq, t0) && system.supports(sq, ProcId(1)));
    assert_eq!(system.max_batch_on(sq, t0), 3);

    // The daemon accepts the config with the measured profile.
    let daemon = DaemonConfig::load(&cfg).unwrap();
    camdnn_daemon::pipeline::check(&daemon.pipeline).unwrap();
}

#[test]
fn profile_refuses_a_sim_processor() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let text = std::fs::read_to_string(&cfg).unwrap().replacen(
        "engine = \"tract\"",
        "engine = \"sim\"",
        1,
    );
    std::fs::write(&cfg, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_camdnnd"))
        .args(["profile", "--runs", "1", "--config"])
        .arg(&cfg)
        .arg("--out")
        .arg(dir.path().join("measured.toml"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("\"tract0\" uses the sim engine"),
        "{stderr}"
    );
    assert!(!dir.path().join("measured.toml").exists());
}

#[test]
fn bench_compares_every_contender_and_the_simulator_on_the_profile() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let out = profile(&cfg, &dir.path().join("measured.toml"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = bench(
        &cfg,
        dir.path(),
        &[
            "--json",
            "--rounds",
            "2",
            "--rates",
            "0.5",
            "--open-rounds",
            "1",
        ],
    );
    let names = [
        "camdnn (tract + ort, 2 in flight)",
        "camdnn (ort on every processor, 2 in flight)",
        "Rust ORT, 2 single-thread workers, one queue",
        "Rust ORT, 2 intra-op threads, one frame at a time",
        "sequential Rust (tract engine of tract0, 1 thread)",
        "sequential Rust (ort engine of ort1, 1 thread)",
        "Python, 2 single-thread processes round robin",
        "Python, one process, default threads",
    ];
    for row in names.iter().copied().chain(["measured / simulated = "]) {
        assert!(stdout.contains(row), "{row:?} missing:\n{stdout}");
    }
    let json: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let contenders = json["contenders"].as_array().unwrap();
    assert_eq!(contenders.len(), names.len(), "{json}");
    for c in contenders {
        assert!(c["fps_median"].as_f64().unwrap() > 0.0, "{c}");
        for round in c["rounds"].as_array().unwrap() {
            assert_eq!(round["frames"], 2, "{c}");
            assert_eq!(round["failed"], 0, "{c}");
        }
        // Every contender did the same work on the real models: the same
        // crops per model and the same answers.
        assert_eq!(c["work"], contenders[0]["work"], "{json}");
        assert!(c["work"].is_string() && c["work"] != "not reported", "{c}");
    }
    let ratio = json["sim"]["ratio"].as_f64().unwrap();
    assert!(ratio.is_finite() && ratio > 0.0, "{json}");
}

/// `bench` on `cfg` with a two-frame trace of three cars at 2 fps, one
/// warm-up frame and `extra` options; its stdout (the run must succeed).
fn bench(cfg: &Path, dir: &Path, extra: &[&str]) -> String {
    let trace = dir.join("trace.txt");
    std::fs::write(&trace, "2 3\n").unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(env!("CARGO_BIN_EXE_camdnnd"))
        .current_dir(&repo)
        .args(["bench", "--warmup-frames", "1", "--fps", "2", "--config"])
        .arg(cfg)
        .arg("--trace")
        .arg(&trace)
        .args(extra)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    stdout
}

/// [`bench`] with the pipeline and the simulator only.
fn bench_pipeline_only(cfg: &Path, dir: &Path, extra: &[&str]) -> String {
    let mut args = vec!["--no-python", "--no-sequential"];
    args.extend_from_slice(extra);
    bench(cfg, dir, &args)
}

#[test]
fn bench_profile_now_plans_and_simulates_with_a_profile_it_measures() {
    let dir = tempfile::tempdir().unwrap();
    // The config names measured.toml, which does not exist: only the fresh
    // profile can make this bench run.
    let cfg = config(dir.path());
    let fresh = dir.path().join("fresh.toml");
    let stdout = bench_pipeline_only(
        &cfg,
        dir.path(),
        &[
            "--profile-now",
            "--profile-runs",
            "3",
            "--profile-out",
            fresh.to_str().unwrap(),
        ],
    );
    assert!(!dir.path().join("measured.toml").exists());
    let spec = SystemSpec::from_toml(&std::fs::read_to_string(&fresh).unwrap()).unwrap();
    assert_eq!(spec.profile["squeezenet"]["ort1"].exec_ms.len(), 3);
    let shown = format!("profile {}", fresh.display());
    assert!(stdout.contains(&shown), "{shown:?} missing:\n{stdout}");
    assert!(stdout.contains("measured / simulated = "), "{stdout}");
    assert!(
        stdout.contains("their profiled time on average"),
        "{stdout}"
    );
}

#[test]
fn bench_warns_when_the_host_runs_far_from_its_profile() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let measured = dir.path().join("measured.toml");
    let out = profile(&cfg, &measured);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A profile of a machine ten times faster than this one.
    let mut spec = SystemSpec::from_toml(&std::fs::read_to_string(&measured).unwrap()).unwrap();
    for pair in spec.profile.get_mut("squeezenet").unwrap().values_mut() {
        for t in &mut pair.exec_ms {
            *t /= 10.0;
        }
    }
    std::fs::write(&measured, spec.to_toml()).unwrap();
    let stdout = bench_pipeline_only(&cfg, dir.path(), &[]);
    assert!(
        stdout.contains("warning: batches ran ") && stdout.contains("--profile-now"),
        "no drift warning:\n{stdout}"
    );
}

/// On an image graph (the shipped MTCNN config on a real photo), the Python
/// baselines run as two single-thread processes round robin and as one, and
/// report the items each model ran (counted at onnxruntime's `run`): the
/// bench compares those counts with the pipeline's, so it either prints a
/// ratio that says the answers were not compared, or refuses one and names
/// the count that differs; it never calls their work unreported.
#[test]
fn bench_counts_the_work_of_the_python_processes_on_an_image_graph() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for f in ["models/mtcnn_pnet.onnx", "testdata/astronaut.ppm"] {
        assert!(
            repo.join(f).exists(),
            "{f} is missing: run scripts/setup.sh"
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_camdnnd"))
        .current_dir(&repo)
        .args([
            "bench",
            "--config",
            "config/camdnnd-faces.toml",
            "--image",
            "testdata/astronaut.ppm",
            "--frames",
            "4",
            "--warmup-frames",
            "1",
            "--rounds",
            "1",
            "--rates",
            "0.5",
            "--open-rounds",
            "1",
            "--open-frames",
            "4",
            "--no-sequential",
            "--no-all-ort",
            "--no-sim",
            "--json",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let json: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let contenders = json["contenders"].as_array().unwrap();
    let names: Vec<&str> = contenders
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "camdnn (tract + ort, 3 in flight)",
            "Python faces, 2 single-thread processes round robin",
            "Python faces, one process, default threads",
        ]
    );
    let work = |c: &serde_json::Value| c["work"].as_str().unwrap().to_string();
    let runs = |w: &str| w.split(',').next().unwrap().to_string();
    let pipeline = work(&contenders[0]);
    assert!(pipeline.starts_with("detector runs "), "{pipeline}");
    // 4 frames of 512x512: the package runs P-Net once per pyramid scale (8), ours once per
    // canvas the 8 scales are packed on (2).
    assert_eq!(runs(&pipeline), "detector runs 8", "{pipeline}");
    for c in &contenders[1..] {
        let w = work(c);
        assert_eq!(runs(&w), "detector runs 32", "{w} vs {pipeline}");
        assert!(w.contains("answers not compared"), "{w}");
        assert!(w.contains("rnet "), "{w}");
        for round in c["rounds"].as_array().unwrap() {
            assert_eq!(round["frames"], 4, "{c}");
        }
        let name = c["name"].as_str().unwrap();
        let ratio = format!("/ {name}: ");
        let refused = format!("/ {name}: their work differs (");
        let line = stdout
            .lines()
            .find(|l| l.contains(&ratio) || l.contains(&refused))
            .unwrap_or_else(|| panic!("no comparison with {name}:\n{stdout}"));
        assert!(
            line.contains("answers not compared") || line.contains("crops of"),
            "{line}"
        );
        assert!(!line.contains("does not report"), "{line}");
    }
    // The processes round robin run open; the one process only closed.
    assert_eq!(contenders[1]["open"].as_array().unwrap().len(), 1, "{json}");
    assert!(
        contenders[2]["open"].as_array().unwrap().is_empty(),
        "{json}"
    );
}
