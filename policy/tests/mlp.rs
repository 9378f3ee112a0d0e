//! The committed learned policy for the rb5 profile: it loads, refuses other
//! systems and broken files with a clear error, and its plans are always
//! feasible (repair) and never worse with the local search than without.

use camdnn_policy::mlp::search::{Rounding, Search};
use camdnn_policy::mlp::{Decoding, MlpError, MlpPolicy};
use camdnn_policy::{Detector, GlobalPolicy, ModelId, Plan, PlanInput, ProcId, System};
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
        matches!(err, MlpError::SystemMismatch { what, .. } if what.starts_with("structure")),
        "{err}"
    );
    // A sidecar without the structure and the trained-on timings (written
    // before they existed) loads on the exact profile only.
    let mut old: serde_json::Value = serde_json::from_str(SIDECAR).unwrap();
    let fields = old.as_object_mut().unwrap();
    fields.remove("structure_fingerprint");
    fields.remove("profile_ms");
    let old = old.to_string();
    MlpPolicy::new(&rb5(), ONNX, &old).unwrap();
    let err = MlpPolicy::new(&system, ONNX, &old).unwrap_err();
    assert!(
        matches!(err, MlpError::SystemMismatch { what, .. } if what.starts_with("profile fingerprint")),
        "{err}"
    );
    let renamed = RB5.replacen("name = \"rb5\"", "name = \"rb6\"", 1);
    let err = MlpPolicy::new(&System::from_toml(&renamed).unwrap(), ONNX, &old).unwrap_err();
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

/// Decodes request weights (model by processor, rb5's 4 x 3) for `scene`.
fn split(scene: [u32; 4], weights: [[f64; 3]; 4]) -> (System, Plan) {
    split_with_floor(scene, weights, 0.5)
}

/// [`split`] with a share floor of `min_share` requests.
fn split_with_floor(scene: [u32; 4], weights: [[f64; 3]; 4], min_share: f64) -> (System, Plan) {
    split_rounded(scene, weights, min_share, Rounding::LargestRemainder)
}

/// [`split_with_floor`] giving out the requests left by `rounding`.
fn split_rounded(
    scene: [u32; 4],
    weights: [[f64; 3]; 4],
    min_share: f64,
    rounding: Rounding,
) -> (System, Plan) {
    let system = rb5();
    let input = idle_input(&scene);
    let w: Vec<f64> = weights.iter().flatten().copied().collect();
    let mut search = Search::new(&system);
    search.set_min_share(min_share);
    search.set_rounding(rounding);
    let plan = search
        .by_weights(&system, &input, &Plan::empty(&system), &w)
        .unwrap();
    (system, plan)
}

/// `scene` on rb5's idle units with nothing resident, loads amortised over
/// 70 frames: what [`split_rounded`] decodes for.
fn idle_input(scene: &[u32; 4]) -> PlanInput<'_> {
    PlanInput {
        scene,
        rem_ms: &[0.0; 3],
        residency: &[false; 12],
        frames_per_epoch: 70.0,
    }
}

/// `plan`'s makespan for [`idle_input`].
fn idle_makespan(system: &System, scene: &[u32; 4], plan: &Plan) -> f64 {
    plan.makespan_ms(system, &idle_input(scene), Detector::fastest(system))
}

fn served(system: &System, plan: &Plan, i: usize) -> Vec<u32> {
    system
        .proc_ids()
        .map(|j| plan.served_on(ModelId(i), j))
        .collect()
}

#[test]
fn weights_split_each_model_in_proportion() {
    // inception 3:1 between CPU and GPU over 8 requests; mobilenet 1:1:2
    // over 12; squeezenet has no weight and is left for repair.
    let (system, plan) = split(
        [0, 8, 5, 12],
        [[0.0; 3], [0.3, 0.1, 0.0], [0.0; 3], [1.0, 1.0, 2.0]],
    );
    assert_eq!(served(&system, &plan, 1), vec![6, 2, 0]);
    assert_eq!(served(&system, &plan, 2), vec![0, 0, 0]);
    assert_eq!(served(&system, &plan, 3), vec![3, 3, 6]);
    assert!(plan.resident(ModelId(3), ProcId(2)));
    assert!(!plan.resident(ModelId(1), ProcId(2)));
}

#[test]
fn a_host_under_half_a_request_is_dropped_and_the_rest_still_sums_to_r() {
    // 4 requests; the GPU's weight is worth 0.11 of one: no residency (and
    // load) for it. The DSP's 1.9 of them is kept; the remainder rounds up.
    let (system, plan) = split(
        [0, 0, 0, 4],
        [[0.0; 3], [0.0; 3], [0.0; 3], [5.0, 0.3, 5.7]],
    );
    assert_eq!(served(&system, &plan, 3), vec![2, 0, 2]);
    assert!(!plan.resident(ModelId(3), ProcId(1)));
    // Unsupported hosts, negative and NaN weights count as none.
    let (system, plan) = split(
        [0, 0, 3, 0],
        [[0.0; 3], [0.0; 3], [-1.0, f64::NAN, 9.0], [0.0; 3]],
    );
    assert_eq!(served(&system, &plan, 2), vec![0, 0, 0]);
}

#[test]
fn the_share_floor_drops_a_host_given_less_than_it() {
    // 9 requests, the GPU's weight worth 0.9 of one: kept (rounded to one
    // request on a host of its own) at the default floor of half a request,
    // dropped at a floor of one request, its share going to the DSP.
    let weights = [[0.0; 3], [0.0, 0.1, 0.9], [0.0; 3], [0.0; 3]];
    let (system, plan) = split_with_floor([0, 9, 0, 0], weights, 0.5);
    assert_eq!(served(&system, &plan, 1), vec![0, 1, 8]);
    let (system, plan) = split_with_floor([0, 9, 0, 0], weights, 1.0);
    assert_eq!(served(&system, &plan, 1), vec![0, 0, 9]);
    assert!(!plan.resident(ModelId(1), ProcId(1)));
    // The model's largest host is never dropped, whatever the floor.
    let (system, plan) = split_with_floor([0, 1, 0, 0], weights, 5.0);
    assert_eq!(served(&system, &plan, 1), vec![0, 0, 1]);
}

#[test]
fn least_finish_rounding_gives_the_request_left_to_the_host_that_finishes_first() {
    // 9 inception_v1 requests weighted 1.6 : 7.4 between GPU and DSP: whole
    // shares 1 and 7, one request left. The largest remainder (0.6 > 0.4)
    // gives it to the GPU: 2 there, 7 on the DSP. By finish time (the
    // detector ends at 27 ms on the CPU; loads amortised over 70 frames) the
    // GPU would end at 27 + 56.0 + 506/70 = 90.2 ms, the DSP with 8 (5 + 3:
    // 14.8 + 10.4) at 27 + 25.2 + 278/70 = 56.2 ms: the DSP takes it, and
    // the plan's makespan drops from 90.2 to the GPU's 27 + 29.5 + 7.2 =
    // 63.7 ms.
    let weights = [[0.0; 3], [0.0, 1.6, 7.4], [0.0; 3], [0.0; 3]];
    let scene = [0, 9, 0, 0];
    let (system, plan) = split_rounded(scene, weights, 0.5, Rounding::LargestRemainder);
    assert_eq!(served(&system, &plan, 1), vec![0, 2, 7]);
    let (system, least) = split_rounded(scene, weights, 0.5, Rounding::LeastFinish);
    assert_eq!(served(&system, &least, 1), vec![0, 1, 8]);
    let ms = |p: &Plan| idle_makespan(&system, &scene, p);
    assert!((ms(&plan) - 90.2).abs() < 0.1, "{}", ms(&plan));
    assert!((ms(&least) - 63.7).abs() < 0.1, "{}", ms(&least));
    // It only chooses among the hosts the weights kept: a model on one host
    // stays there whatever another unit would cost.
    let (system, plan) = split_rounded(
        [0, 3, 0, 0],
        [[0.0; 3], [0.0, 1.0, 0.0], [0.0; 3], [0.0; 3]],
        0.5,
        Rounding::LeastFinish,
    );
    assert_eq!(served(&system, &plan, 1), vec![0, 3, 0]);
}

#[test]
fn least_finish_places_the_request_that_would_end_latest_first() {
    // squeezenet: 2 requests weighted 0.5 : 1 (CPU : GPU), whole shares
    // 0 and 1, one left; mobilenet_v1: 1 request at 1 : 1, one left. The
    // detector ends at 27 ms; loads are amortised over 70 frames. The GPU
    // starts at 27 + 15.2 + 300/70 = 46.5 ms with squeezenet's whole share.
    // squeezenet's request ends first on the CPU (27 + 13 + 0.3 = 40.3,
    // GPU 49.5), mobilenet's too (27 + 16 + 0.7 = 43.7, GPU 27 + 13.5 +
    // 6.0 = 46.5). Taken in model order, squeezenet gets the CPU and
    // mobilenet follows it there (56.95 ms). The later of the two earliest
    // finishes (mobilenet's 43.7) goes first: the CPU ends at 43.7 and
    // squeezenet's request goes to the GPU, which ends at 49.5 ms.
    let weights = [[0.0; 3], [0.0; 3], [0.5, 1.0, 0.0], [1.0, 1.0, 0.0]];
    let scene = [0, 0, 2, 1];
    let (system, plan) = split_rounded(scene, weights, 0.5, Rounding::LeastFinish);
    assert_eq!(served(&system, &plan, 2), vec![0, 2, 0]);
    assert_eq!(served(&system, &plan, 3), vec![1, 0, 0]);
    let ms = idle_makespan(&system, &scene, &plan);
    assert!((ms - 49.49).abs() < 0.01, "{ms}");
    // The largest remainder puts both on the CPU.
    let (system, plan) = split_rounded(scene, weights, 0.5, Rounding::LargestRemainder);
    assert_eq!(served(&system, &plan, 2), vec![1, 1, 0]);
    assert_eq!(served(&system, &plan, 3), vec![1, 0, 0]);
    assert!((idle_makespan(&system, &scene, &plan) - 56.95).abs() < 0.01);
}

#[test]
fn the_sidecar_rounding_is_read_and_defaults_to_largest_remainder() {
    let system = rb5();
    let side: serde_json::Value = serde_json::from_str(SIDECAR).unwrap();
    let mut absent = side.clone();
    absent["outputs"]
        .as_object_mut()
        .unwrap()
        .remove("rounding");
    let p = MlpPolicy::new(&system, ONNX, &absent.to_string()).unwrap();
    assert_eq!(p.sidecar().outputs.rounding, Rounding::LargestRemainder);
    let mut least = side.clone();
    least["outputs"]["rounding"] = serde_json::json!("least_finish");
    let p = MlpPolicy::new(&system, ONNX, &least.to_string()).unwrap();
    assert_eq!(p.sidecar().outputs.rounding, Rounding::LeastFinish);
    let mut bad = side.clone();
    bad["outputs"]["rounding"] = serde_json::json!("nearest");
    let err = MlpPolicy::new(&system, ONNX, &bad.to_string()).unwrap_err();
    assert!(err.to_string().contains("nearest"), "{err}");
}

#[test]
fn the_sidecar_share_floor_is_read_and_checked() {
    let system = rb5();
    let side: serde_json::Value = serde_json::from_str(SIDECAR).unwrap();
    let with = |v: serde_json::Value| {
        let mut s = side.clone();
        s["outputs"]["min_share"] = v;
        s.to_string()
    };
    // Absent: the default floor; a bad one is refused, naming the field.
    let mut absent = side.clone();
    absent["outputs"]
        .as_object_mut()
        .unwrap()
        .remove("min_share");
    let p = MlpPolicy::new(&system, ONNX, &absent.to_string()).unwrap();
    assert_eq!(p.sidecar().outputs.min_share, 0.5);
    let err = MlpPolicy::new(&system, ONNX, &with(serde_json::json!(-1.0))).unwrap_err();
    assert!(err.to_string().contains("min_share"), "{err}");
    let p = MlpPolicy::new(&system, ONNX, &with(serde_json::json!(1.0))).unwrap();
    assert_eq!(p.sidecar().outputs.min_share, 1.0);
}

#[test]
fn the_sidecar_decoder_is_read_and_used() {
    let system = rb5();
    let side: serde_json::Value = serde_json::from_str(SIDECAR).unwrap();
    let with = |v: &str| {
        let mut s = side.clone();
        s["outputs"]["decoder"] = serde_json::json!(v);
        s.to_string()
    };
    // Absent (older sidecars): expected shares.
    let mut absent = side.clone();
    absent["outputs"].as_object_mut().unwrap().remove("decoder");
    let mut default = MlpPolicy::new(&system, ONNX, &absent.to_string()).unwrap();
    assert_eq!(default.sidecar().outputs.decoder, Decoding::ExpectedShares);
    let err = MlpPolicy::new(&system, ONNX, &with("rounded")).unwrap_err();
    assert!(err.to_string().contains("unknown variant"), "{err}");
    // "counts" decodes as the thresholded counts do, which on some scene
    // differs from the default decoding.
    let mut counts = MlpPolicy::new(&system, ONNX, &with("counts")).unwrap();
    assert_eq!(counts.sidecar().outputs.decoder, Decoding::Counts);
    let mut reference = MlpPolicy::new(&system, ONNX, &absent.to_string()).unwrap();
    reference.set_decoding(Decoding::Counts);
    for p in [&mut default, &mut counts, &mut reference] {
        p.set_local_search(false);
    }
    let rem = [0.0, 20.0, 40.0];
    let residency = [
        true, false, false, false, true, false, false, false, true, true, false, false,
    ];
    let mut differs = false;
    for a in 0..=14u32 {
        for b in [0u32, 3, 9, 14] {
            let scene = [0, a, b, 14 - a];
            let input = PlanInput {
                scene: &scene,
                rem_ms: &rem,
                residency: &residency,
                frames_per_epoch: 70.0,
            };
            let plan = counts.plan(&system, &input);
            assert_eq!(plan, reference.plan(&system, &input), "scene {scene:?}");
            differs |= plan != default.plan(&system, &input);
        }
    }
    assert!(
        differs,
        "the counts decoding never differed from the default"
    );
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
    fn repaired_plan_is_always_feasible(
        (r, rem, a_old, f) in inputs(),
        search in any::<bool>(),
        decoding in prop_oneof![Just(Decoding::Counts), Just(Decoding::Shares), Just(Decoding::ExpectedShares)],
        rounding in prop_oneof![Just(Rounding::LargestRemainder), Just(Rounding::LeastFinish)],
    ) {
        let system = rb5();
        let mut policy = MlpPolicy::new(&system, ONNX, SIDECAR).unwrap();
        policy.set_local_search(search);
        policy.set_decoding(decoding);
        policy.set_rounding(rounding);
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
