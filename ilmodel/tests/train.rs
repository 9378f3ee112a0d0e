//! Training: deterministic for a seed, sensitive to it, learns something on
//! real ILP demonstrations, and rejects bad options with a clear error.

use camdnn_ilmodel::demos::{generate, DemoConfig};
use camdnn_ilmodel::train::{curves_csv, curves_svg, load_demos, train, TrainConfig};
use camdnn_policy::System;

const RB5: &str = include_str!("../../config/profiles/rb5.toml");

fn small_demos(dir: &std::path::Path) {
    generate(&DemoConfig {
        system_toml: RB5.into(),
        out: dir.into(),
        seed: 5,
        max_objects: 4,
        samples: 160,
        rem_max_ms: 60.0,
        frames_per_epoch: 70.0,
        chunk_size: 40,
        jobs: 2,
        time_limit_s: 10.0,
        progress: false,
    })
    .unwrap();
}

fn config(seed: u64, epochs: usize) -> TrainConfig {
    TrainConfig {
        seed,
        hidden: vec![32, 32],
        epochs,
        batch_size: 32,
        learning_rate: 3e-3,
        penalty_weight: 0.05,
        heldout_fraction: 0.2,
    }
}

#[test]
fn training_is_deterministic_for_a_seed_and_learns() {
    let dir = tempfile::tempdir().unwrap();
    small_demos(dir.path());
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

#[test]
fn bad_options_and_other_systems_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    small_demos(dir.path());
    let system = System::from_toml(RB5).unwrap();
    let set = load_demos(dir.path(), RB5).unwrap();
    let mut bad = config(1, 1);
    bad.heldout_fraction = 1.5;
    let err = train(&system, RB5, &set, &bad, |_| {}).err().unwrap();
    assert!(err.to_string().contains("heldout fraction"), "{err}");
    let other = RB5.replacen("max_resident = 2", "max_resident = 1", 1);
    let err = load_demos(dir.path(), &other).err().unwrap();
    assert!(err.to_string().contains("hash"), "{err}");
}
