//! The stream policy distilled from the stream oracle, for one board, in
//! one call ([`learn`]): the oracle drives camdnn over the board's trace
//! shapes (training trace seeds) and its steps' problems are labelled for
//! free; copies with other queues and residencies are labelled by solving;
//! an MLP learns which (model, unit) pairs the oracle keeps resident; then
//! DAgger rounds add the states camdnn with the MLP itself visits, labelled
//! by the oracle; finally the MLP is judged on the states it visits on
//! traces training never saw: J of its residency (split at its best) over
//! the oracle's J.

use std::time::Instant;

use camdnn_policy::features::{fingerprint, profile_ms, structure_fingerprint};
use camdnn_policy::gen::Shape;
use camdnn_policy::mlp::stream::{
    StreamEncoding, StreamMlp, StreamSidecar, StreamTraining, STREAM_FORMAT,
};
use camdnn_policy::stats::Summary;
use camdnn_policy::System;
use candle_core::{Device, Tensor, Var};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};

use super::states::{cost_of, label, perturbed, trace_seeds, visit};
use super::{Recorded, StreamOptions, StreamPolicy};
use crate::export::{network_bytes, Head, INPUT, PROB};
use crate::rng::SplitMix64;
use crate::train::{dense, init_dense, Dense};
use crate::OracleError;
use crate::SolveStatus;

/// How much a board's policy costs to learn.
#[derive(Clone, Debug, PartialEq)]
pub struct LearnConfig {
    /// Seed of initialisation, shuffling and the copies' draws.
    pub seed: u64,
    /// Hidden layer widths.
    pub hidden: Vec<usize>,
    /// Passes over the labelled states per training.
    pub epochs: usize,
    /// Mini-batch size.
    pub batch_size: usize,
    /// Peak AdamW learning rate (cosine decay to 5 % of it).
    pub learning_rate: f64,
    /// Training trace seeds (each runs every shape).
    pub train_runs: u64,
    /// Copies of each state the oracle visited, with other queues and
    /// residencies, each labelled by a solve.
    pub copies: usize,
    /// DAgger rounds.
    pub dagger_rounds: usize,
    /// Held-out trace seeds the fidelity is measured on.
    pub heldout_runs: u64,
    /// The trace shapes every run plays (each seed runs each of them).
    pub shapes: Vec<Shape>,
    /// The oracle's solver options.
    pub options: StreamOptions,
}

impl LearnConfig {
    /// The variant the suite trains for every board it runs.
    pub fn small() -> Self {
        LearnConfig {
            seed: 1,
            hidden: vec![64, 64],
            epochs: 200,
            batch_size: 64,
            learning_rate: 3e-3,
            train_runs: 1,
            copies: 2,
            dagger_rounds: 1,
            heldout_runs: 1,
            shapes: Shape::ALL.to_vec(),
            options: StreamOptions::default(),
        }
    }

    /// More runs, copies and rounds: what the small variant is measured
    /// against.
    pub fn full() -> Self {
        LearnConfig {
            hidden: vec![128, 128],
            epochs: 300,
            train_runs: 3,
            copies: 4,
            dagger_rounds: 2,
            ..Self::small()
        }
    }
}

/// One labelled state: its features and which pairs the oracle keeps.
struct Example {
    x: Vec<f32>,
    y: Vec<f32>,
}

/// A learned policy and how it was made.
pub struct Learned {
    /// The ONNX bytes.
    pub onnx: Vec<u8>,
    /// The sidecar (JSON).
    pub sidecar: StreamSidecar,
    /// Wall time of the whole run, seconds.
    pub wall_s: f64,
    /// Oracle solves made.
    pub solves: usize,
    /// Held-out gaps, J(policy) / J(oracle) - 1, one per state the policy's
    /// residency could serve.
    pub gaps: Vec<f64>,
    /// Held-out states whose residency could not serve their scenes.
    pub unserved: usize,
    /// States the oracle gave no label (no feasible residency, or none found
    /// within the time limit), skipped.
    pub unlabelled: usize,
}

/// The example of a state labelled with `plan`'s residency.
fn example(
    system: &System,
    enc: &StreamEncoding,
    state: &Recorded,
    plan: &camdnn_policy::Plan,
) -> Result<Example, String> {
    let mut x = vec![0.0; enc.num_features()];
    let problem = state.problem();
    enc.write(system, &problem.input, &state.epoch, &mut x)
        .map_err(|e| e.to_string())?;
    let y = enc
        .pairs()
        .iter()
        .map(|&(m, j)| f32::from(u8::from(plan.resident(m, j))))
        .collect();
    Ok(Example { x, y })
}

/// Learns the stream policy of `system`; its traces are drawn from
/// `trace_base` (a generated board's seed). `progress` hears each stage.
pub fn learn(
    system: &System,
    trace_base: u64,
    config: &LearnConfig,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<Learned> {
    let start = Instant::now();
    let enc = StreamEncoding::new(system);
    let opts = config.options.clone();
    let mut solves = 0usize;
    // The oracle's own steps, labelled as it planned them.
    let train = trace_seeds(trace_base, 0, config.train_runs);
    let visited = visit_oracle(system, &opts, &train, &config.shapes)?;
    solves += visited.len();
    let mut examples = Vec::new();
    let mut unlabelled = 0usize;
    let mut rng = SplitMix64::new(config.seed);
    for state in &visited {
        match &state.plan {
            Some(plan) => {
                examples.push(example(system, &enc, state, plan).map_err(anyhow::Error::msg)?)
            }
            None => unlabelled += 1,
        }
        for _ in 0..config.copies {
            let copy = perturbed(system, state, &mut rng);
            solves += 1;
            match label(system, &copy, &opts)? {
                Some(s) => examples
                    .push(example(system, &enc, &copy, &s.plan).map_err(anyhow::Error::msg)?),
                None => unlabelled += 1,
            }
        }
    }
    progress(&format!(
        "{} labelled states from the oracle's runs ({unlabelled} without a label, skipped)",
        examples.len()
    ));
    let mut net = train_net(&enc, &examples, config)?;
    for round in 1..=config.dagger_rounds {
        let (onnx, sidecar) = package(system, &enc, &net, config, round - 1, examples.len())?;
        let json = serde_json::to_string(&sidecar)?;
        let load = || StreamMlp::new(system, &onnx, &json).expect("exported just now");
        let own = visit(system, load, &train, &config.shapes)?;
        for state in &own {
            solves += 1;
            match label(system, state, &opts)? {
                Some(s) => examples
                    .push(example(system, &enc, state, &s.plan).map_err(anyhow::Error::msg)?),
                None => unlabelled += 1,
            }
        }
        progress(&format!(
            "DAgger round {round}: {} labelled states ({unlabelled} without a label so far)",
            examples.len()
        ));
        net = train_net(&enc, &examples, config)?;
    }
    // Held out: the states the final policy visits on unseen traces.
    let rounds = config.dagger_rounds;
    let (onnx, mut sidecar) = package(system, &enc, &net, config, rounds, examples.len())?;
    let json = serde_json::to_string(&sidecar)?;
    let mut policy = StreamMlp::new(system, &onnx, &json)?;
    let heldout = trace_seeds(trace_base, 1000, config.heldout_runs);
    let states = visit(
        system,
        || StreamMlp::new(system, &onnx, &json).expect("loaded"),
        &heldout,
        &config.shapes,
    )?;
    let HeldOut {
        gaps,
        exact,
        unserved,
        unproven,
        unlabelled: not_labelled,
    } = held_out(system, &enc, &mut policy, &states, &opts)?;
    solves += 2 * states.len();
    unlabelled += not_labelled;
    let summary = Summary::of(&gaps);
    sidecar.training.heldout_states = states.len();
    sidecar.training.heldout_gap_mean = Some(summary.mean);
    sidecar.training.heldout_gap_p50 = Some(summary.p50);
    sidecar.training.heldout_gap_max = Some(summary.max);
    sidecar.training.heldout_exact = Some(exact as f64 / states.len().max(1) as f64);
    progress(&format!(
        "held out: {} states, J over the oracle's: mean {:+.2} %, p50 {:+.2} %, max {:+.2} %; {} unserved, {} not labelled to optimality; {unlabelled} states without a label in all",
        states.len(),
        summary.mean * 100.0,
        summary.p50 * 100.0,
        summary.max * 100.0,
        unserved,
        unproven
    ));
    Ok(Learned {
        onnx,
        sidecar,
        wall_s: start.elapsed().as_secs_f64(),
        solves,
        gaps,
        unserved,
        unlabelled,
    })
}

/// How the final policy's residencies fare against the oracle on held-out states.
#[derive(Default)]
struct HeldOut {
    /// J(policy) / J(oracle) - 1 per state the policy's residency serves.
    gaps: Vec<f64>,
    /// States where the policy chose the oracle's residency and detector unit.
    exact: usize,
    /// States whose scenes the policy's residency cannot serve.
    unserved: usize,
    /// States without an optimal label or a split found in time: no yardstick.
    unproven: usize,
    /// States the oracle gave no label.
    unlabelled: usize,
}

/// Judges `policy` on held-out `states` against the oracle's labels.
fn held_out(
    system: &System,
    enc: &StreamEncoding,
    policy: &mut StreamMlp,
    states: &[Recorded],
    opts: &StreamOptions,
) -> anyhow::Result<HeldOut> {
    let mut h = HeldOut::default();
    for state in states {
        let Some(best) = label(system, state, opts)? else {
            h.unlabelled += 1;
            continue;
        };
        // A label stopped by the time limit is no yardstick: the policy's
        // residency at its best split may beat it.
        if best.status != SolveStatus::Optimal {
            h.unproven += 1;
            continue;
        }
        let problem = state.problem();
        let Ok((residency, detector)) = policy.residency(system, &problem.input, &state.epoch)
        else {
            h.unserved += 1;
            continue;
        };
        match cost_of(system, state, &best, &residency, detector, opts) {
            Ok(Some(j)) => h.gaps.push(j / best.cost.objective_ms - 1.0),
            Ok(None) => h.unserved += 1,
            // The policy's residency found no split in time: no yardstick either.
            Err(OracleError::NoPlanInTime { .. }) => {
                h.unproven += 1;
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        let same = detector == best.detector
            && enc
                .pairs()
                .iter()
                .filter(|(m, _)| system.models[m.0].parent.is_some())
                .all(|&(m, j)| residency.resident(m, j) == best.plan.resident(m, j));
        h.exact += usize::from(same);
    }
    Ok(h)
}

/// The oracle's steps over every shape of `seeds`, each with its plan.
fn visit_oracle(
    system: &System,
    options: &StreamOptions,
    seeds: &[u64],
    shapes: &[Shape],
) -> anyhow::Result<Vec<Recorded>> {
    use camdnn_policy::gen;
    use camdnn_policy::schedulers::Camdnn;
    use camdnn_policy::sim::{simulate, SimConfig};
    let cfg = SimConfig::default();
    let heavy = gen::heavy_count(system, cfg.fps);
    let mut out = Vec::new();
    for &seed in seeds {
        for shape in shapes {
            let trace = shape.trace(system, seed, heavy);
            let oracle = StreamPolicy::new(options.clone()).recording();
            let mut camdnn = Camdnn::new(oracle, 5.0);
            simulate(system, &mut camdnn, &trace, &cfg)?;
            out.extend(
                camdnn
                    .global()
                    .into_iter()
                    .flat_map(|g| g.recorded().to_vec()),
            );
        }
    }
    Ok(out)
}

/// The trained network: normalisation, hidden layers and the head.
struct TrainedNet {
    mean: Vec<f32>,
    std: Vec<f32>,
    hidden: Vec<Dense>,
    head: Dense,
}

fn to_dense((w, b): &(Var, Var)) -> candle_core::Result<Dense> {
    let (i, o) = w.as_tensor().dims2()?;
    Ok(Dense {
        inputs: i,
        outputs: o,
        weights: w.as_tensor().flatten_all()?.to_vec1::<f32>()?,
        bias: b.as_tensor().to_vec1::<f32>()?,
    })
}

/// Trains the MLP on `examples`: binary cross-entropy of each pair's
/// residency, AdamW with a cosine schedule, deterministic for the seed.
fn train_net(
    enc: &StreamEncoding,
    examples: &[Example],
    config: &LearnConfig,
) -> anyhow::Result<TrainedNet> {
    anyhow::ensure!(!examples.is_empty(), "no labelled state to train on");
    let (nf, ny, n) = (enc.num_features(), enc.pairs().len(), examples.len());
    let mut mean = vec![0.0f64; nf];
    let mut var = vec![0.0f64; nf];
    for e in examples {
        for (m, &v) in mean.iter_mut().zip(&e.x) {
            *m += f64::from(v) / n as f64;
        }
    }
    for e in examples {
        for ((s, &v), m) in var.iter_mut().zip(&e.x).zip(&mean) {
            *s += (f64::from(v) - m).powi(2) / n as f64;
        }
    }
    let std: Vec<f32> = var
        .iter()
        .map(|s| {
            if s.sqrt() < 1e-6 {
                1.0
            } else {
                s.sqrt() as f32
            }
        })
        .collect();
    let mean: Vec<f32> = mean.iter().map(|&m| m as f32).collect();
    let dev = Device::Cpu;
    let mut rng = SplitMix64::new(config.seed);
    let mut layers = Vec::new();
    let mut width = nf;
    for &h in &config.hidden {
        layers.push(init_dense(&mut rng, width, h, true)?);
        width = h;
    }
    let head = init_dense(&mut rng, width, ny, false)?;
    let (mt, st) = (
        Tensor::from_vec(mean.clone(), nf, &dev)?,
        Tensor::from_vec(std.clone(), nf, &dev)?,
    );
    let forward = |x: &Tensor| -> candle_core::Result<Tensor> {
        let mut h = x.broadcast_sub(&mt)?.broadcast_div(&st)?;
        for l in &layers {
            h = dense(&h, l)?.relu()?;
        }
        dense(&h, &head)
    };
    let mut vars = Vec::new();
    for (w, b) in layers.iter().chain([&head]) {
        vars.push(w.clone());
        vars.push(b.clone());
    }
    let mut opt = AdamW::new(
        vars,
        ParamsAdamW {
            lr: config.learning_rate,
            weight_decay: 0.0,
            ..Default::default()
        },
    )?;
    let mut order: Vec<usize> = (0..n).collect();
    let (mut bx, mut by) = (Vec::new(), Vec::new());
    for epoch in 0..config.epochs {
        let t = epoch as f64 / config.epochs as f64;
        let lr =
            config.learning_rate * (0.05 + 0.95 * 0.5 * (1.0 + (std::f64::consts::PI * t).cos()));
        opt.set_learning_rate(lr);
        rng.shuffle(&mut order);
        for chunk in order.chunks(config.batch_size.max(1)) {
            bx.clear();
            by.clear();
            for &k in chunk {
                bx.extend_from_slice(&examples[k].x);
                by.extend_from_slice(&examples[k].y);
            }
            let x = Tensor::from_slice(&bx, (chunk.len(), nf), &dev)?;
            let y = Tensor::from_slice(&by, (chunk.len(), ny), &dev)?;
            let z = forward(&x)?;
            // Stable BCE with logits: max(z,0) - z*t + log(1 + exp(-|z|)).
            let bce = (z.relu()? - (&z * &y)?)?
                .add(&(z.abs()?.neg()?.exp()? + 1.0)?.log()?)?
                .mean_all()?;
            opt.backward_step(&bce)?;
        }
    }
    Ok(TrainedNet {
        mean,
        std,
        hidden: layers.iter().map(to_dense).collect::<Result<_, _>>()?,
        head: to_dense(&head)?,
    })
}

/// The network as ONNX bytes and its sidecar.
fn package(
    system: &System,
    enc: &StreamEncoding,
    net: &TrainedNet,
    config: &LearnConfig,
    dagger_rounds: usize,
    train_states: usize,
) -> anyhow::Result<(Vec<u8>, StreamSidecar)> {
    let onnx = network_bytes(
        &format!("camdnn_stream_policy_{}", system.name),
        format!(
            "camdnn stream policy for system {} (fingerprint {})",
            system.name,
            fingerprint(system)
        ),
        &net.mean,
        &net.std,
        &net.hidden,
        &[Head {
            name: PROB,
            dense: &net.head,
            sigmoid: true,
        }],
    )?;
    let sidecar = StreamSidecar {
        format: STREAM_FORMAT.to_string(),
        system_name: system.name.clone(),
        system_fingerprint: fingerprint(system),
        structure_fingerprint: structure_fingerprint(system),
        profile_ms: profile_ms(system),
        input: INPUT.to_string(),
        features: enc.feature_names().to_vec(),
        output: PROB.to_string(),
        pairs: enc.pair_names(system),
        threshold: 0.5,
        training: StreamTraining {
            seed: config.seed,
            hidden: config.hidden.clone(),
            epochs: config.epochs,
            dagger_rounds,
            train_states,
            heldout_states: 0,
            heldout_gap_mean: None,
            heldout_gap_p50: None,
            heldout_gap_max: None,
            heldout_exact: None,
        },
    };
    Ok((onnx, sidecar))
}
