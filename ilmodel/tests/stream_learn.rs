//! The stream policy learned end to end on a small board: the oracle's runs,
//! a DAgger round, the held-out check, the ONNX and sidecar the runtime
//! loads; and the runtime refusing a policy made for another board.

use camdnn_ilmodel::stream::learn::{learn, LearnConfig};
use camdnn_ilmodel::stream::StreamProblem;
use camdnn_policy::epoch::EpochScenes;
use camdnn_policy::gen::Shape;
use camdnn_policy::mlp::learned::Learned;
use camdnn_policy::mlp::stream::{StreamMlp, STREAM_FORMAT};
use camdnn_policy::{GlobalPolicy, PlanInput, System};

const PAIR: &str = include_str!("fixtures/pair.toml");

fn quick() -> LearnConfig {
    LearnConfig {
        hidden: vec![16],
        epochs: 30,
        copies: 1,
        // One shape: the test checks the pipeline end to end, not quality.
        shapes: vec![Shape::DominanceShift],
        ..LearnConfig::small()
    }
}

#[test]
fn a_stream_policy_learned_on_a_small_board_loads_and_plans_feasibly() {
    let system = System::from_toml(PAIR).unwrap();
    let mut stages = Vec::new();
    let learned = learn(&system, 7, &quick(), |s| stages.push(s.to_string())).unwrap();
    assert_eq!(stages.len(), 3, "{stages:?}");
    let t = &learned.sidecar.training;
    assert_eq!(learned.sidecar.format, STREAM_FORMAT);
    assert_eq!((t.dagger_rounds, t.hidden.as_slice()), (1, &[16][..]));
    assert!(t.train_states > 0 && t.heldout_states > 0, "{t:?}");
    // The gap is J(policy) / J(oracle) - 1: never below the oracle.
    let mean = t.heldout_gap_mean.expect("measured");
    assert!(mean >= -1e-6, "{mean}");
    assert!(
        learned.gaps.iter().all(|&g| g >= -1e-6),
        "{:?}",
        learned.gaps
    );
    // The runtime loads it (either way) and plans feasibly for an epoch.
    let json = serde_json::to_string(&learned.sidecar).unwrap();
    let mut policy = StreamMlp::new(&system, &learned.onnx, &json).unwrap();
    assert!(matches!(
        Learned::new(&system, &learned.onnx, &json).unwrap(),
        Learned::Stream(_)
    ));
    let scene = [0, 2, 1];
    let a_old = [true, false, false, false, false, false];
    let input = PlanInput {
        scene: &scene,
        rem_ms: &[0.0, 10.0],
        residency: &a_old,
        frames_per_epoch: 70.0,
    };
    let epoch = EpochScenes {
        scenes: vec![(scene.to_vec(), 0.7), (vec![0, 0, 3], 0.3)],
        period_ms: 70.0,
    };
    let plan = policy.plan_epoch(&system, &input, &epoch);
    assert_eq!(plan.infeasibility(&system, &input), None);
    assert_eq!(policy.last_error(), None);
    // Every model of the epoch's scenes has a host.
    let problem = StreamProblem {
        input,
        epoch: &epoch,
    };
    let (residency, _) = policy
        .residency(&system, &problem.input, problem.epoch)
        .unwrap();
    for i in system.request_models() {
        assert!(system.proc_ids().any(|j| residency.resident(i, j)));
    }
    // Another board's profile is refused, naming what differs.
    let other = System::from_toml(&PAIR.replace("exec_ms = [12.0]", "exec_ms = [13.0]")).unwrap();
    let err = StreamMlp::new(&other, &learned.onnx, &json).unwrap_err();
    assert!(err.to_string().contains("profile"), "{err}");
    let tiny = System::from_toml(include_str!("fixtures/tiny.toml")).unwrap();
    let err = StreamMlp::new(&tiny, &learned.onnx, &json).unwrap_err();
    assert!(err.to_string().contains("structure"), "{err}");
}
