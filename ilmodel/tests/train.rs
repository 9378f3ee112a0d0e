//! Training: deterministic for a seed, sensitive to it, learns something on
//! real ILP demonstrations, and rejects bad options with a clear error.

use camdnn_ilmodel::train::{curves_csv, curves_svg, load_demos, train, TrainConfig};
use camdnn_policy::System;

mod common;

use common::{small_demos, RB5};

fn config(seed: u64, epochs: usize) -> TrainConfig {
    TrainConfig {
        seed,
        hidden: vec![32, 32],
        epochs,
        batch_size: 32,
        learning_rate: 3e-3,
        penalty_weight: 0.05,
        share_weight: 0.0,
        work_weight: 0.0,
        heldout_fraction: 0.2,
        augment: 0,
    }
}

/// A policy trained on `demos` (the test config, `epochs` epochs) written as
/// ONNX + sidecar beside a copy of rb5's system file: (system, onnx, sidecar).
fn policy_files(
    dir: &std::path::Path,
    set: &camdnn_ilmodel::train::DemoSet,
    epochs: usize,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let system = System::from_toml(RB5).unwrap();
    let trained = train(&system, RB5, set, &config(3, epochs), |_| {}).unwrap();
    let onnx = dir.join("p.onnx");
    let side = dir.join("p.policy.json");
    let sys = dir.join("rb5.toml");
    std::fs::write(&sys, RB5).unwrap();
    std::fs::write(
        &onnx,
        camdnn_ilmodel::export::onnx_bytes(&trained.model).unwrap(),
    )
    .unwrap();
    let text = camdnn_ilmodel::export::sidecar_json(&trained.model, false, &system).unwrap();
    std::fs::write(&side, &text).unwrap();
    (sys, onnx, side)
}

#[test]
fn training_is_deterministic_for_a_seed_and_learns() {
    let dir = tempfile::tempdir().unwrap();
    small_demos(dir.path(), 5, 160);
    let system = System::from_toml(RB5).unwrap();
    let set = load_demos(dir.path(), RB5).unwrap();
    let a = train(&system, RB5, &set, &config(11, 30), |_| {}).unwrap();
    let b = train(&system, RB5, &set, &config(11, 30), |_| {}).unwrap();
    assert_eq!(a.model, b.model);
    assert_eq!(curves_csv(&a.curves), curves_csv(&b.curves));
    let c = train(&system, RB5, &set, &config(12, 30), |_| {}).unwrap();
    assert_ne!(a.model.hidden, c.model.hidden);
    // Loss falls on both sides of the split.
    let (first, last) = (a.curves[0], a.curves[a.curves.len() - 1]);
    assert!(last.train < 0.7 * first.train, "{first:?} -> {last:?}");
    assert!(last.heldout < first.heldout, "{first:?} -> {last:?}");
    assert!(a.model.train_samples > 0 && a.model.heldout_samples > 0);
    let csv = curves_csv(&a.curves);
    assert_eq!(csv.lines().count(), 31);
    let svg = curves_svg(&a.curves, "t");
    assert!(svg.starts_with("<svg") && svg.contains("polyline"));
}

/// Held-out metrics of two short runs on the same 400 demonstrations, the
/// test config without and with the change `with` makes to it.
fn metrics_without_and_with(
    with: impl Fn(TrainConfig) -> TrainConfig,
) -> [camdnn_policy::mlp::HeldoutMetrics; 2] {
    let dir = tempfile::tempdir().unwrap();
    small_demos(dir.path(), 5, 400);
    let system = System::from_toml(RB5).unwrap();
    let set = load_demos(dir.path(), RB5).unwrap();
    [config(2, 40), with(config(2, 40))].map(|cfg| {
        train(&system, RB5, &set, &cfg, |_| {})
            .unwrap()
            .model
            .metrics
    })
}

/// The per-pair term trains the quantity the expected-shares decoding reads:
/// with it, the held-out error of each pair's expected requests is lower.
#[test]
fn the_pair_term_lowers_the_pair_requests_error() {
    let [without, with] = metrics_without_and_with(|c| TrainConfig {
        share_weight: 2.0,
        ..c
    })
    .map(|m| m.pair_requests_mae.unwrap());
    assert!(
        with < without,
        "pair requests MAE {without:.4} -> {with:.4}"
    );
}

/// The per-processor work term trains what the makespan adds up: with it,
/// the held-out error of each processor's expected execution time is lower.
#[test]
fn the_work_term_lowers_the_processor_work_error() {
    let [without, with] = metrics_without_and_with(|c| TrainConfig {
        work_weight: 2.0,
        ..c
    })
    .map(|m| m.processor_work_mae.unwrap());
    assert!(
        with < without,
        "processor work MAE {without:.4} -> {with:.4}"
    );
}

#[test]
fn bad_options_and_other_systems_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    small_demos(dir.path(), 5, 160);
    let system = System::from_toml(RB5).unwrap();
    let set = load_demos(dir.path(), RB5).unwrap();
    let mut bad = config(1, 1);
    bad.heldout_fraction = 1.5;
    let err = train(&system, RB5, &set, &bad, |_| {}).err().unwrap();
    assert!(err.to_string().contains("heldout fraction"), "{err}");
    for w in [-1.0, f64::NAN] {
        let bad = TrainConfig {
            share_weight: w,
            ..config(1, 1)
        };
        let err = train(&system, RB5, &set, &bad, |_| {}).err().unwrap();
        assert!(err.to_string().contains("share weight"), "{err}");
        let bad = TrainConfig {
            work_weight: w,
            ..config(1, 1)
        };
        let err = train(&system, RB5, &set, &bad, |_| {}).err().unwrap();
        assert!(err.to_string().contains("work weight"), "{err}");
    }
    let other = RB5.replacen("max_resident = 2", "max_resident = 1", 1);
    let err = load_demos(dir.path(), &other).err().unwrap();
    assert!(err.to_string().contains("hash"), "{err}");
}

#[test]
fn calibration_picks_the_decoding_on_the_training_split_only() {
    use camdnn_ilmodel::mlp_cli::{
        calibration_candidates, run_calibrate, CalibrateArgs, DecoderChoice, MIN_SHARE_CANDIDATES,
    };
    use camdnn_ilmodel::train::{eval::fidelity, is_heldout};
    use camdnn_policy::mlp::search::Rounding;
    use camdnn_policy::mlp::{Decoding, MlpPolicy};
    let dir = tempfile::tempdir().unwrap();
    let demos = dir.path().join("demos");
    small_demos(&demos, 5, 160);
    let system = System::from_toml(RB5).unwrap();
    let set = load_demos(&demos, RB5).unwrap();
    let (sys, onnx, side) = policy_files(dir.path(), &set, 20);
    let args = CalibrateArgs {
        system: sys.clone(),
        demos: demos.clone(),
        onnx: onnx.clone(),
        sidecar: side.clone(),
    };
    run_calibrate(&args).unwrap();
    let bytes = std::fs::read(&onnx).unwrap();
    let calibrated = std::fs::read_to_string(&side).unwrap();
    let mut policy = MlpPolicy::new(&system, &bytes, &calibrated).unwrap();
    let chosen = DecoderChoice::of(&policy.sidecar().outputs);
    assert!(
        MIN_SHARE_CANDIDATES.contains(&chosen.min_share),
        "{chosen:?}"
    );
    // Every decoding, every floor and every rounding is tried.
    let candidates = calibration_candidates();
    for d in [Decoding::Counts, Decoding::Shares, Decoding::ExpectedShares] {
        assert!(candidates.iter().any(|c| c.decoder == d), "{d:?} not tried");
    }
    for r in [Rounding::LargestRemainder, Rounding::LeastFinish] {
        assert!(
            candidates
                .iter()
                .any(|c| c.decoder == Decoding::ExpectedShares && c.rounding == r),
            "{r:?} not tried"
        );
    }
    assert!(candidates.contains(&chosen), "{chosen:?}");
    // No other candidate does better on the training split, and the loaded
    // policy decodes as calibrated.
    let t = policy.sidecar().training.clone();
    let train_split: Vec<_> = set
        .demos
        .iter()
        .filter(|d| !is_heldout(t.seed, &d.scene, t.heldout_fraction))
        .collect();
    let as_loaded = fidelity(&system, &mut policy, &train_split).unwrap().mean;
    let mean = |p: &mut MlpPolicy, c: DecoderChoice| {
        c.apply(p);
        fidelity(&system, p, &train_split).unwrap().mean
    };
    let best = mean(&mut policy, chosen);
    assert_eq!(as_loaded, best);
    for c in candidates {
        assert!(best <= mean(&mut policy, c) + 1e-12, "{chosen:?} vs {c:?}");
    }
    // Other demonstrations than the trained-on ones are refused.
    let other = dir.path().join("other");
    small_demos(&other, 6, 40);
    let err = run_calibrate(&CalibrateArgs {
        demos: other,
        ..args
    })
    .unwrap_err();
    assert!(err.to_string().contains("not the demonstrations"), "{err}");
}

#[test]
fn the_validation_band_shares_no_scene_with_the_final_test_or_the_candidates_training() {
    use camdnn_ilmodel::mlp_cli::validation_band;
    use camdnn_ilmodel::train::is_heldout;
    let dir = tempfile::tempdir().unwrap();
    small_demos(dir.path(), 7, 400);
    let set = load_demos(dir.path(), RB5).unwrap();
    let (seed, inner, outer) = (5, 0.15, 0.30);
    let band = validation_band(&set.demos, seed, inner, outer);
    let test: Vec<_> = set
        .demos
        .iter()
        .filter(|d| is_heldout(seed, &d.scene, inner))
        .collect();
    let candidates_training: Vec<_> = set
        .demos
        .iter()
        .filter(|d| !is_heldout(seed, &d.scene, outer))
        .collect();
    assert!(!band.is_empty() && !test.is_empty() && !candidates_training.is_empty());
    for d in &band {
        assert!(
            test.iter().all(|t| t.scene != d.scene),
            "{:?} is tested on",
            d.scene
        );
        assert!(
            candidates_training.iter().all(|t| t.scene != d.scene),
            "{:?} is trained on",
            d.scene
        );
    }
    // The three parts cover every demonstration once.
    assert_eq!(
        band.len() + test.len() + candidates_training.len(),
        set.demos.len()
    );
}

#[test]
fn eval_refuses_a_validation_band_outside_the_policys_held_out_split() {
    use camdnn_ilmodel::mlp_cli::{run_eval, EvalArgs};
    let dir = tempfile::tempdir().unwrap();
    let demos = dir.path().join("demos");
    small_demos(&demos, 5, 160);
    let set = load_demos(&demos, RB5).unwrap();
    // Held out 0.2 (the test config); a band "of" 0.3 would reach into its training split.
    let (sys, onnx, side) = policy_files(dir.path(), &set, 2);
    let args = |v| EvalArgs {
        system: sys.clone(),
        demos: demos.clone(),
        onnx: onnx.clone(),
        sidecar: side.clone(),
        validation_of: v,
    };
    let err = run_eval(&args(Some(0.3))).unwrap_err();
    assert!(err.to_string().contains("--validation-of 0.3"), "{err}");
    run_eval(&args(Some(0.1))).unwrap();
    run_eval(&args(None)).unwrap();
}
