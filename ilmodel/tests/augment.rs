//! Label-preserving copies (`ilmodel train --augment`): every copy's label is
//! still the ILP's optimum, checked by solving the copy again.

use camdnn_ilmodel::demos::DemoStatus;
use camdnn_ilmodel::train::augment::label_preserving_copies;
use camdnn_ilmodel::train::load_demos;
use camdnn_ilmodel::{solve, OracleOptions};
use camdnn_policy::{Detector, PlanInput, System};

mod common;

use common::{small_demos, RB5};

#[test]
fn every_copy_keeps_the_ilp_optimum_of_its_demonstration() {
    let dir = tempfile::tempdir().unwrap();
    small_demos(dir.path(), 11, 60);
    let system = System::from_toml(RB5).unwrap();
    let set = load_demos(dir.path(), RB5).unwrap();
    let demos: Vec<_> = set.demos.iter().collect();
    let copies = label_preserving_copies(&system, &demos, 3, 5, set.manifest.rem_max_ms);
    // Most demonstrations leave something to change; a few copies per run
    // would mean the draws or the caps are wrong.
    assert!(copies.len() >= demos.len(), "only {} copies", copies.len());
    let det = Detector::fastest(&system);
    let np = system.num_processors();
    let (mut rem_raised, mut forgotten) = (0, 0);
    for c in &copies {
        let original = set.demos.iter().find(|d| d.index == c.index).unwrap();
        assert_eq!(original.status, DemoStatus::Optimal);
        assert_eq!((&c.scene, &c.batches), (&original.scene, &original.batches));
        for (j, (&now, &before)) in c.rem_ms.iter().zip(&original.rem_ms).enumerate() {
            assert!(now >= before, "demo {} unit {j}: rem fell", c.index);
            assert!(now <= set.manifest.rem_max_ms, "demo {} unit {j}", c.index);
            rem_raised += (now > before) as usize;
        }
        for (now, before) in c
            .a_old
            .iter()
            .flatten()
            .zip(original.a_old.iter().flatten())
        {
            assert!(!now || *before, "demo {}: a residency appeared", c.index);
            forgotten += (*before && !now) as usize;
        }
        let residency: Vec<bool> = c.a_old.iter().flatten().copied().collect();
        assert_eq!(residency.len(), system.num_models() * np);
        let input = PlanInput {
            scene: &c.scene,
            rem_ms: &c.rem_ms,
            residency: &residency,
            frames_per_epoch: c.frames_per_epoch,
        };
        let again = solve(&system, &input, det, &OracleOptions::default()).unwrap();
        let t = c.t_ms.unwrap();
        assert!(
            (again.makespan_ms - t).abs() <= 1e-6 * t.max(1.0),
            "demo {}: the copy's optimum is {} ms, its label's {t} ms",
            c.index,
            again.makespan_ms
        );
    }
    assert!(rem_raised > 0 && forgotten > 0, "{rem_raised} {forgotten}");
}

#[test]
fn no_copies_are_made_when_none_are_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    small_demos(dir.path(), 12, 20);
    let system = System::from_toml(RB5).unwrap();
    let set = load_demos(dir.path(), RB5).unwrap();
    let demos: Vec<_> = set.demos.iter().collect();
    assert!(label_preserving_copies(&system, &demos, 0, 5, 60.0).is_empty());
}
