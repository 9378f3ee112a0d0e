//! The states the policy visits: recorded once per global step with the
//! frames the step was given, and the ILP is never beaten on them.

use camdnn_ilmodel::visited::{fidelity_on, Recorder};
use camdnn_policy::mlp::MlpPolicy;
use camdnn_policy::schedulers::Camdnn;
use camdnn_policy::sim::{simulate, SimConfig, Trace};
use camdnn_policy::System;

mod common;

use common::{small_demos, RB5};
const ONNX: &[u8] = include_bytes!("../../config/policies/rb5.onnx");
const SIDECAR: &str = include_str!("../../config/policies/rb5.policy.json");

#[test]
fn every_global_step_is_recorded_and_no_plan_beats_the_ilp_on_it() {
    let system = System::from_toml(RB5).unwrap();
    // 14 fps, 5 s epochs, 280 frames (20 s; no step once the camera
    // stopped): steps at 5, 10 and 15 s, the first with the 71 frames that
    // arrived by then (0 ms to 5000 ms), the others with the 70 since.
    let trace = Trace::parse("70 2 1 0\n70 9 6 10\n70 0 0 0\n70 1 1 1\n", 3).unwrap();
    let policy = MlpPolicy::new(&system, ONNX, SIDECAR).unwrap();
    let mut camdnn = Camdnn::new(Recorder::new(policy), 5.0);
    simulate(&system, &mut camdnn, &trace, &SimConfig::default()).unwrap();
    let states = &camdnn.global().expect("every step applied").inputs;
    assert_eq!(states.len(), 3, "{states:?}");
    let frames: Vec<f64> = states.iter().map(|s| s.frames_per_epoch).collect();
    assert_eq!(frames, vec![71.0, 70.0, 70.0]);
    for s in states {
        assert_eq!(s.scene.len(), system.num_models());
        assert_eq!(
            s.residency.len(),
            system.num_models() * system.num_processors()
        );
    }
    // Each step plans the scene of the last frame whose detector ran.
    assert_eq!(&states[0].scene[1..], &[2, 1, 0]);
    assert_eq!(&states[1].scene[1..], &[9, 6, 10]);
    assert_eq!(&states[2].scene[1..], &[0, 0, 0]);
    let mut alone = MlpPolicy::new(&system, ONNX, SIDECAR).unwrap();
    alone.set_local_search(false);
    let searched = MlpPolicy::new(&system, ONNX, SIDECAR).unwrap();
    let mut policies = [alone, searched];
    let f = fidelity_on(&system, &mut policies, states).unwrap();
    for s in &f {
        assert_eq!(s.n, 3);
        assert!(s.p50 >= -1e-9 && s.max >= s.p50, "{s:?}");
    }
    // The search never makes the MLP's plan worse.
    assert!(f[1].mean <= f[0].mean + 1e-12, "{f:?}");
}

#[test]
fn dagger_appends_the_visited_states_labelled_by_the_ilp() {
    use camdnn_ilmodel::demos::DemoStatus;
    use camdnn_ilmodel::train::load_demos;
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    small_demos(&base, 5, 40);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = dir.path().join("dagger");
    let run = |out: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_ilmodel"))
            .current_dir(&root)
            .args([
                "dagger",
                "--system",
                "config/profiles/rb5.toml",
                "--seeds",
                "1",
            ])
            .arg("--demos")
            .arg(&base)
            .arg("--out")
            .arg(out)
            .output()
            .unwrap()
    };
    let o = run(&out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let set = load_demos(&out, RB5).unwrap();
    let added = &set.demos[40..];
    // One state per global step of six 800-frame traces at 5 s epochs.
    assert!(added.len() >= 6 * 10, "{}", added.len());
    assert_eq!(set.manifest.samples, set.demos.len() as u64);
    assert!(
        set.manifest.scene_mode.contains("visited"),
        "{}",
        set.manifest.scene_mode
    );
    for (n, d) in added.iter().enumerate() {
        assert_eq!(d.index, 40 + n as u64);
        assert_eq!(d.status, DemoStatus::Optimal);
        assert!(d.t_ms.is_some_and(|t| t > 0.0));
    }
    // It never writes over an existing folder.
    let o = run(&out);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("exists"));
}
