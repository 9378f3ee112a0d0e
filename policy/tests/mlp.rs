//! The committed learned policy for the rb5 profile: it loads, refuses other
//! systems and broken files with a clear error, and its plans are always
//! feasible (repair) and never worse with the local search than without.

use camdnn_policy::mlp::{MlpError, MlpPolicy};
use camdnn_policy::{Detector, GlobalPolicy, PlanInput, ProcId, System};
use proptest::prelude::*;

const RB5: &str = include_str!("../../config/profiles/rb5.toml");
const ONNX: &[u8] = include_bytes!("../../config/policies/rb5.onnx");
const SIDECAR: &str = include_str!("../../config/policies/rb5.policy.json");

fn rb5() -> System {
    System::from_toml(RB5).unwrap()
}

#[test]
fn committed_policy_loads_for_rb5() {
    let system = rb5();
    let policy = MlpPolicy::new(&system, ONNX, SIDECAR).unwrap();
    assert_eq!(policy.sidecar().system_name, "rb5");
    assert_eq!(policy.name(), "mlp(rb5)");
}

#[test]
fn another_profile_is_refused() {
    let system = rb5().with_max_resident(ProcId(1), 3);
    let err = MlpPolicy::new(&system, ONNX, SIDECAR).unwrap_err();
    assert!(
        matches!(err, MlpError::SystemMismatch { what, .. } if what.starts_with("profile fingerprint")),
        "{err}"
    );
    let renamed = RB5.replacen("name = \"rb5\"", "name = \"rb6\"", 1);
    let err = MlpPolicy::new(&System::from_toml(&renamed).unwrap(), ONNX, SIDECAR).unwrap_err();
    assert!(err.to_string().contains("system name rb5"), "{err}");
}

#[test]
fn broken_files_are_refused() {
    let system = rb5();
    let err = MlpPolicy::new(&system, ONNX, "{").unwrap_err();
    assert!(matches!(err, MlpError::Sidecar(_)), "{err}");
    let other = SIDECAR.replacen("camdnn-mlp-policy/1", "camdnn-mlp-policy/0", 1);
    let err = MlpPolicy::new(&system, ONNX, &other).unwrap_err();
    assert!(matches!(err, MlpError::Format { .. }), "{err}");
    let err = MlpPolicy::new(&system, b"not an onnx file", SIDECAR).unwrap_err();
    assert!(matches!(err, MlpError::Onnx(_)), "{err}");
}

#[test]
fn bad_input_lengths_give_an_error_not_a_panic() {
    let system = rb5();
    let mut policy = MlpPolicy::new(&system, ONNX, SIDECAR).unwrap();
    let input = PlanInput {
        scene: &[0, 1, 2],
        rem_ms: &[0.0; 3],
        residency: &[false; 12],
        frames_per_epoch: 70.0,
    };
    let _ = policy.plan(&system, &input);
    assert!(policy.last_error().unwrap().contains("scene"));
}

fn inputs() -> impl Strategy<Value = (Vec<u32>, Vec<f64>, Vec<bool>, f64)> {
    (
        // Beyond the training range (0..=14) and beyond the search tables (64).
        prop::collection::vec(prop_oneof![4 => 0u32..=20, 1 => 0u32..=100], 3),
        prop::collection::vec(prop_oneof![Just(0.0), 0.0f64..200.0], 3),
        prop::collection::vec(any::<bool>(), 12),
        prop_oneof![Just(70.0), 1.0f64..500.0],
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn repaired_plan_is_always_feasible((r, rem, a_old, f) in inputs(), search in any::<bool>()) {
        let system = rb5();
        let mut policy = MlpPolicy::new(&system, ONNX, SIDECAR).unwrap();
        policy.set_local_search(search);
        let scene = [0, r[0], r[1], r[2]];
        let input = PlanInput { scene: &scene, rem_ms: &rem, residency: &a_old, frames_per_epoch: f };
        let plan = policy.plan(&system, &input);
        prop_assert_eq!(policy.last_error(), None);
        prop_assert_eq!(plan.infeasibility(&system, &input), None);
    }

    #[test]
    fn local_search_never_loses((r, rem, a_old, f) in inputs()) {
        let system = rb5();
        let det = Detector::fastest(&system);
        let mut policy = MlpPolicy::new(&system, ONNX, SIDECAR).unwrap();
        let scene = [0, r[0], r[1], r[2]];
        let input = PlanInput { scene: &scene, rem_ms: &rem, residency: &a_old, frames_per_epoch: f };
        policy.set_local_search(false);
        let plain = policy.plan(&system, &input).makespan_ms(&system, &input, det);
        policy.set_local_search(true);
        let searched = policy.plan(&system, &input).makespan_ms(&system, &input, det);
        prop_assert!(searched <= plain + 1e-9, "{} > {}", searched, plain);
    }
}
