//! ONNX export round trip: tract runs the exported graph (normalisation
//! inside) and agrees with candle's forward pass; the sidecar loads back into
//! the runtime policy and is refused by another system.

use camdnn_ilmodel::export::{onnx_bytes, sidecar_json};
use camdnn_ilmodel::rng::SplitMix64;
use camdnn_ilmodel::train::{Dense, TrainConfig, TrainedModel, MODEL_FORMAT};
use camdnn_policy::features::{fingerprint, fnv1a64_hex, Encoding};
use camdnn_policy::mlp::{slot_names, HeldoutMetrics, MlpError, MlpPolicy, OnnxMlp};
use camdnn_policy::{ProcId, System};

const RB5: &str = include_str!("../../config/profiles/rb5.toml");

fn dense(rng: &mut SplitMix64, inputs: usize, outputs: usize) -> Dense {
    let mut v = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| (rng.next_f64() * 2.0 - 1.0) as f32 * 0.5)
            .collect()
    };
    Dense {
        inputs,
        outputs,
        weights: v(inputs * outputs),
        bias: v(outputs),
    }
}

/// A model with random weights and non-trivial normalisation for rb5.
fn random_model(seed: u64) -> (System, TrainedModel) {
    let system = System::from_toml(RB5).unwrap();
    let enc = Encoding::new(&system);
    let (nf, ns) = (enc.num_features(), enc.slots().len());
    let mut rng = SplitMix64::new(seed);
    let mean = (0..nf).map(|_| rng.next_f64() as f32 * 20.0).collect();
    let std = (0..nf)
        .map(|_| 0.5 + rng.next_f64() as f32 * 10.0)
        .collect();
    let model = TrainedModel {
        format: MODEL_FORMAT.into(),
        system_name: system.name.clone(),
        system_file_fnv1a64: fnv1a64_hex(RB5.as_bytes()),
        system_fingerprint: fingerprint(&system),
        features: enc.feature_names().to_vec(),
        slots: slot_names(&system, &enc),
        mean,
        std,
        hidden: vec![dense(&mut rng, nf, 32), dense(&mut rng, 32, 24)],
        prob_head: dense(&mut rng, 24, ns),
        count_head: dense(&mut rng, 24, ns),
        config: TrainConfig::default(),
        demos_fnv1a64: "0".into(),
        train_samples: 1,
        heldout_samples: 1,
        metrics: HeldoutMetrics {
            loss: 0.0,
            bce: 0.0,
            mae: 0.0,
            slot_accuracy: 0.0,
            exact_plans: 0.0,
            pair_requests_mae: None,
            processor_work_mae: None,
        },
    };
    (system, model)
}

#[test]
fn tract_matches_candle_on_random_inputs() {
    let (_, model) = random_model(7);
    let (nf, ns) = (model.features.len(), model.slots.len());
    let bytes = onnx_bytes(&model).unwrap();
    let net = OnnxMlp::load(&bytes, nf, ns).unwrap();
    let mut rng = SplitMix64::new(99);
    let rows = 50;
    let x: Vec<f32> = (0..rows * nf)
        .map(|_| (rng.next_f64() * 60.0 - 10.0) as f32)
        .collect();
    let (p, c) = model.forward(&x, rows).unwrap();
    let mut worst = 0.0f32;
    for r in 0..rows {
        let (tp, tc) = net.run(&x[r * nf..(r + 1) * nf]).unwrap();
        for s in 0..ns {
            worst = worst
                .max((tp[s] - p[r * ns + s]).abs())
                .max((tc[s] - c[r * ns + s]).abs());
        }
    }
    assert!(worst <= 1e-4, "tract and candle differ by {worst}");
    // The outputs are not trivially constant (the comparison means something).
    let spread =
        c.iter().cloned().fold(f32::MIN, f32::max) - c.iter().cloned().fold(f32::MAX, f32::min);
    assert!(spread > 0.1, "count output spread {spread}");
}

#[test]
fn exported_policy_loads_and_is_refused_elsewhere() {
    let (system, model) = random_model(3);
    let bytes = onnx_bytes(&model).unwrap();
    let side = sidecar_json(&model, true, &system).unwrap();
    let policy = MlpPolicy::new(&system, &bytes, &side).unwrap();
    assert!(policy.sidecar().local_search);
    let other = System::from_toml(RB5)
        .unwrap()
        .with_max_resident(ProcId(0), 4);
    let err = MlpPolicy::new(&other, &bytes, &side).unwrap_err();
    assert!(matches!(err, MlpError::SystemMismatch { .. }), "{err}");
}

#[test]
fn inconsistent_model_is_an_error() {
    let (_, mut model) = random_model(5);
    model.count_head.outputs -= 1;
    let err = onnx_bytes(&model).unwrap_err();
    assert!(err.to_string().contains("count head"), "{err}");
}

/// A re-measured profile of the same board (another name, timings moved by
/// less than the tolerance) still runs the policy, and says how far it is;
/// one moved further is refused, naming the pair.
#[test]
fn exported_policy_loads_on_a_re_measured_profile_within_the_tolerance() {
    use camdnn_policy::mlp::PROFILE_TOLERANCE;
    use camdnn_policy::ModelId;
    let (system, model) = random_model(4);
    let bytes = onnx_bytes(&model).unwrap();
    let side = sidecar_json(&model, true, &system).unwrap();
    let scaled = |factor: f64| {
        let mut s =
            System::from_toml(&RB5.replace("name = \"rb5\"", "name = \"rb5-again\"")).unwrap();
        let (i, j) = (ModelId(1), s.supporting(ModelId(1)).next().unwrap());
        let exec: Vec<f64> = (1..=s.max_batch)
            .map(|k| s.exec_ms(i, j, k) * factor)
            .collect();
        let load = s.load_ms(i, j);
        s.set_pair_timings(i, j, &exec, load);
        s
    };
    let near = scaled(1.5);
    assert_ne!(near.name, system.name, "the test must change the name");
    let policy = MlpPolicy::new(&near, &bytes, &side).unwrap();
    assert!(
        (policy.profile_drift() - 1.5).abs() < 1e-9,
        "{}",
        policy.profile_drift()
    );
    assert_eq!(
        MlpPolicy::new(&system, &bytes, &side)
            .unwrap()
            .profile_drift(),
        1.0
    );
    let far = scaled(PROFILE_TOLERANCE * 1.5);
    let err = MlpPolicy::new(&far, &bytes, &side).unwrap_err().to_string();
    let pair = format!("{}@", far.models[1].name);
    assert!(
        err.contains(&pair) && err.contains("batch-1 execution"),
        "{err}"
    );
}
