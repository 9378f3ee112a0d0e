//! The `ilmodel train`, `ilmodel export`, `ilmodel calibrate` and `ilmodel
//! eval` subcommands.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use camdnn_policy::mlp::search::Rounding;
use camdnn_policy::mlp::{Decoding, MlpPolicy};
use camdnn_policy::System;
use clap::Args;

use crate::demos::Demo;
use crate::export;
use crate::train::{
    curves_csv, curves_svg, eval, is_heldout, load_demos, read_model, train, TrainConfig,
};

/// `ilmodel train`.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// System TOML file the demonstrations were made for.
    #[arg(long)]
    pub system: PathBuf,
    /// Demonstration folder (manifest.json + demos.jsonl from `ilmodel demos`).
    #[arg(long)]
    pub demos: PathBuf,
    /// Output folder: model.json, loss.csv, loss.svg.
    #[arg(long)]
    pub out: PathBuf,
    /// Seed of split, initialisation and mini-batch order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Epochs.
    #[arg(long, default_value_t = 150)]
    pub epochs: usize,
    /// Hidden layer widths, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "128,128")]
    pub hidden: Vec<usize>,
    /// Mini-batch size.
    #[arg(long, default_value_t = 128)]
    pub batch_size: usize,
    /// Peak learning rate (AdamW, cosine decay).
    #[arg(long, default_value_t = 3e-3)]
    pub lr: f64,
    /// Weight of the served-requests penalty.
    #[arg(long, default_value_t = 0.05)]
    pub penalty: f64,
    /// Weight of the per-pair expected-requests term (0: off; a model file
    /// without the field reads as 0).
    #[arg(long, default_value_t = 1.0)]
    pub share_weight: f64,
    /// Weight of the per-processor expected-work term (0: off; a model file
    /// without the field reads as 0).
    #[arg(long, default_value_t = 1.0)]
    pub work_weight: f64,
    /// Fraction of scenes held out.
    #[arg(long, default_value_t = 0.15)]
    pub heldout: f64,
    /// Label-preserving copies of each training demonstration (a unit busy
    /// for longer, a previous residency the plan does not use forgotten):
    /// more rows without more ILP solves. 0: none.
    #[arg(long, default_value_t = 0)]
    pub augment: usize,
    /// No per-epoch lines.
    #[arg(long)]
    pub quiet: bool,
}

/// `ilmodel export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// model.json written by `ilmodel train`.
    #[arg(long)]
    pub model: PathBuf,
    /// System TOML file (checked against the model).
    #[arg(long)]
    pub system: PathBuf,
    /// ONNX output file.
    #[arg(long)]
    pub onnx: PathBuf,
    /// Sidecar JSON output file.
    #[arg(long)]
    pub sidecar: PathBuf,
    /// Disable the runtime local search after repair in the sidecar.
    #[arg(long)]
    pub no_local_search: bool,
}

/// `ilmodel eval`.
#[derive(Args, Debug)]
pub struct EvalArgs {
    /// System TOML file.
    #[arg(long)]
    pub system: PathBuf,
    /// Demonstration folder; the held-out scenes are recomputed from the
    /// sidecar's seed and fraction.
    #[arg(long)]
    pub demos: PathBuf,
    /// ONNX policy.
    #[arg(long)]
    pub onnx: PathBuf,
    /// Its sidecar.
    #[arg(long)]
    pub sidecar: PathBuf,
    /// Evaluate on a validation band instead: the scenes the sidecar's
    /// split holds out that a split of this smaller fraction (same seed)
    /// does not. A policy trained with `--heldout 0.30` and evaluated with
    /// `--validation-of 0.15` never sees, nor is judged on, the scenes a
    /// `--heldout 0.15` policy is finally tested on (the splits nest), so
    /// choices such as the hidden widths can be made on the band.
    #[arg(long)]
    pub validation_of: Option<f64>,
}

/// `ilmodel calibrate`.
#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// System TOML file.
    #[arg(long)]
    pub system: PathBuf,
    /// The demonstrations the policy was trained on; only its training split
    /// (the scenes not held out by the sidecar's seed and fraction) is used.
    #[arg(long)]
    pub demos: PathBuf,
    /// ONNX policy.
    #[arg(long)]
    pub onnx: PathBuf,
    /// Its sidecar, rewritten with the chosen share floor.
    #[arg(long)]
    pub sidecar: PathBuf,
}

/// The share floors `ilmodel calibrate` tries, requests.
pub const MIN_SHARE_CANDIDATES: [f64; 6] = [0.25, 0.5, 0.75, 1.0, 1.25, 1.5];

/// How `ilmodel eval` labels its first line, the MLP alone as the sidecar
/// decodes it (the fidelity figure the policy is judged by;
/// `scripts/train_policy.sh` reads it).
pub const CALIBRATED_LABEL: &str = "MLP alone as calibrated";

/// One way the sidecar can decode: the decoding, its share floor and its
/// rounding (the last two only matter to the share decodings).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DecoderChoice {
    /// How the outputs become request shares.
    pub decoder: Decoding,
    /// The share floor, requests.
    pub min_share: f64,
    /// Who gets the requests the whole shares leave.
    pub rounding: Rounding,
}

impl DecoderChoice {
    /// The choice a sidecar carries.
    pub fn of(outputs: &camdnn_policy::mlp::OutputSpec) -> Self {
        DecoderChoice {
            decoder: outputs.decoder,
            min_share: outputs.min_share,
            rounding: outputs.rounding,
        }
    }

    /// Writes it into a sidecar's outputs (the inverse of [`DecoderChoice::of`]).
    pub fn write_to(&self, outputs: &mut camdnn_policy::mlp::OutputSpec) {
        outputs.decoder = self.decoder;
        outputs.min_share = self.min_share;
        outputs.rounding = self.rounding;
    }

    /// Sets it on `policy`.
    pub fn apply(&self, policy: &mut MlpPolicy) {
        policy.set_decoding(self.decoder);
        policy.set_min_share(self.min_share);
        policy.set_rounding(self.rounding);
    }

    /// In words, as `calibrate` and `eval` print it.
    pub fn label(&self) -> String {
        let rounding = match self.rounding {
            Rounding::LargestRemainder => "largest_remainder",
            Rounding::LeastFinish => "least_finish",
        };
        let m = self.min_share;
        match self.decoder {
            Decoding::Counts => "decoder counts".to_string(),
            Decoding::Shares => format!("decoder shares, min_share {m:.2}, rounding {rounding}"),
            Decoding::ExpectedShares => {
                format!("decoder expected_shares, min_share {m:.2}, rounding {rounding}")
            }
        }
    }
}

/// What `ilmodel calibrate` tries: each share decoding with every floor of
/// [`MIN_SHARE_CANDIDATES`] and each [`Rounding`], and the thresholded
/// counts (which have neither; the sidecar keeps the first floor and the
/// default rounding for them).
pub fn calibration_candidates() -> Vec<DecoderChoice> {
    let shares = [Decoding::ExpectedShares, Decoding::Shares]
        .into_iter()
        .flat_map(|decoder| {
            [Rounding::LeastFinish, Rounding::LargestRemainder]
                .into_iter()
                .flat_map(move |rounding| {
                    MIN_SHARE_CANDIDATES.map(|min_share| DecoderChoice {
                        decoder,
                        min_share,
                        rounding,
                    })
                })
        });
    shares
        .chain([DecoderChoice {
            decoder: Decoding::Counts,
            min_share: MIN_SHARE_CANDIDATES[0],
            rounding: Rounding::default(),
        }])
        .collect()
}

/// Reads a system TOML file: its text and the system it describes.
pub fn read_system(path: &Path) -> Result<(String, System)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let system = System::from_toml(&text).with_context(|| format!("in {}", path.display()))?;
    Ok((text, system))
}

/// Runs `ilmodel train`.
pub fn run_train(args: &TrainArgs) -> Result<()> {
    let (text, system) = read_system(&args.system)?;
    let set = load_demos(&args.demos, &text)?;
    let config = TrainConfig {
        seed: args.seed,
        hidden: args.hidden.clone(),
        epochs: args.epochs,
        batch_size: args.batch_size,
        learning_rate: args.lr,
        penalty_weight: args.penalty,
        share_weight: args.share_weight,
        work_weight: args.work_weight,
        heldout_fraction: args.heldout,
        augment: args.augment,
    };
    let start = Instant::now();
    let quiet = args.quiet;
    let out = train(&system, &text, &set, &config, |e| {
        if !quiet {
            eprintln!(
                "epoch {:4}: train {:.5}  held-out {:.5} (bce {:.5}, mae {:.5}, penalty {:.5})",
                e.epoch, e.train, e.heldout, e.heldout_bce, e.heldout_mae, e.heldout_penalty
            );
        }
    })?;
    let secs = start.elapsed().as_secs_f64();
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let write = |name: &str, body: &str| -> Result<()> {
        let p = args.out.join(name);
        std::fs::write(&p, body).with_context(|| format!("writing {}", p.display()))
    };
    write("model.json", &serde_json::to_string(&out.model)?)?;
    write("loss.csv", &curves_csv(&out.curves))?;
    write(
        "loss.svg",
        &curves_svg(
            &out.curves,
            &format!(
                "camdnn policy MLP ({}), seed {}: total loss per epoch",
                system.name, args.seed
            ),
        ),
    )?;
    let m = &out.model.metrics;
    println!(
        "trained on {} demonstrations ({} held out) in {secs:.1} s; held-out: loss {:.4}, bce {:.4}, mae {:.4} batches/slot, slot accuracy {:.4}, exact plans {:.4}; wrote {}",
        out.model.train_samples,
        out.model.heldout_samples,
        m.loss,
        m.bce,
        m.mae,
        m.slot_accuracy,
        m.exact_plans,
        args.out.display()
    );
    Ok(())
}

/// Runs `ilmodel export`.
pub fn run_export(args: &ExportArgs) -> Result<()> {
    let (text, system) = read_system(&args.system)?;
    let model = read_model(&args.model)?;
    let fp = camdnn_policy::features::fingerprint(&system);
    if model.system_fingerprint != fp || model.system_name != system.name {
        bail!(
            "{} was trained for system {} (fingerprint {}), but {} is {} (fingerprint {fp})",
            args.model.display(),
            model.system_name,
            model.system_fingerprint,
            args.system.display(),
            system.name
        );
    }
    let _ = text;
    let bytes = export::onnx_bytes(&model)?;
    let side = export::sidecar_json(&model, !args.no_local_search, &system)?;
    // Refuse to write a policy the runtime would not load.
    MlpPolicy::new(&system, &bytes, &side).context("the exported policy does not load back")?;
    std::fs::write(&args.onnx, &bytes)
        .with_context(|| format!("writing {}", args.onnx.display()))?;
    std::fs::write(&args.sidecar, &side)
        .with_context(|| format!("writing {}", args.sidecar.display()))?;
    println!(
        "wrote {} ({} bytes) and {} ({} bytes)",
        args.onnx.display(),
        bytes.len(),
        args.sidecar.display(),
        side.len()
    );
    Ok(())
}

/// Runs `ilmodel eval`: fidelity with repair only and with the local search.
pub fn run_eval(args: &EvalArgs) -> Result<()> {
    let (text, system) = read_system(&args.system)?;
    let onnx =
        std::fs::read(&args.onnx).with_context(|| format!("reading {}", args.onnx.display()))?;
    let side = std::fs::read_to_string(&args.sidecar)
        .with_context(|| format!("reading {}", args.sidecar.display()))?;
    let mut policy = MlpPolicy::new(&system, &onnx, &side)?;
    let t = policy.sidecar().training.clone();
    let set = load_demos(&args.demos, &text)?;
    if set.fnv1a64 != t.demos_fnv1a64 {
        eprintln!(
            "note: {} differs from the demonstrations the policy was trained on; held-out scenes are still chosen by the training seed",
            args.demos.display()
        );
    }
    let (held, split): (Vec<&Demo>, &str) = match args.validation_of {
        None => (
            set.demos
                .iter()
                .filter(|d| is_heldout(t.seed, &d.scene, t.heldout_fraction))
                .collect(),
            "held-out",
        ),
        Some(inner) => {
            if !(inner > 0.0 && inner < t.heldout_fraction) {
                bail!(
                    "--validation-of {inner} must be above 0 and below the policy's held-out fraction {}",
                    t.heldout_fraction
                );
            }
            (
                validation_band(&set.demos, t.seed, inner, t.heldout_fraction),
                "validation",
            )
        }
    };
    if held.is_empty() {
        bail!("no {split} demonstrations to evaluate on");
    }
    let own = DecoderChoice::of(&policy.sidecar().outputs);
    let own_label = own.label();
    let with = |decoder, rounding| DecoderChoice {
        decoder,
        rounding,
        ..own
    };
    for (label, choice, search) in [
        (
            format!("{CALIBRATED_LABEL} ({own_label}) + repair"),
            own,
            false,
        ),
        (
            "MLP (thresholded counts) + repair".to_string(),
            with(Decoding::Counts, own.rounding),
            false,
        ),
        (
            "MLP (share decoding) + repair".to_string(),
            with(Decoding::Shares, own.rounding),
            false,
        ),
        (
            "MLP (expected shares) + repair".to_string(),
            with(Decoding::ExpectedShares, own.rounding),
            false,
        ),
        (
            "MLP (expected shares, rounding largest_remainder) + repair".to_string(),
            with(Decoding::ExpectedShares, Rounding::LargestRemainder),
            false,
        ),
        (
            format!("MLP ({own_label}) + repair + local search"),
            own,
            true,
        ),
    ] {
        choice.apply(&mut policy);
        policy.set_local_search(search);
        let start = Instant::now();
        let f = eval::fidelity(&system, &mut policy, &held)?;
        let us = start.elapsed().as_secs_f64() * 1e6 / f.instances as f64;
        println!(
            "{label}: {} {split} instances, extra latency over the ILP: mean {:.3}%, p50 {:.3}%, p99 {:.3}%, max {:.3}%; optimal on {:.1}%; {us:.1} us per plan",
            f.instances,
            f.mean * 100.0,
            f.p50 * 100.0,
            f.p99 * 100.0,
            f.max * 100.0,
            f.optimal * 100.0
        );
    }
    Ok(())
}

/// The demonstrations held out at fraction `outer` but not at `inner`
/// (`inner < outer`, same seed): [`is_heldout`] is a threshold on a hash of
/// the scene, so the `inner` split lies inside the `outer` one and this band
/// shares no scene with either the `inner` held-out split or the `outer`
/// training split.
pub fn validation_band(demos: &[Demo], seed: u64, inner: f64, outer: f64) -> Vec<&Demo> {
    demos
        .iter()
        .filter(|d| is_heldout(seed, &d.scene, outer) && !is_heldout(seed, &d.scene, inner))
        .collect()
}

/// Runs `ilmodel calibrate`: the decoding ([`Decoding`]: thresholded
/// counts, or either share decoding with a share floor from
/// [`MIN_SHARE_CANDIDATES`]) with the lowest mean extra makespan of the MLP
/// alone (repair, no local search) over the ILP on the *training* split of
/// the demonstrations, written into the sidecar. The held-out split stays
/// unseen, so `ilmodel eval` and `ilmodel reproduce` still measure the
/// policy on scenes nothing was fitted to.
pub fn run_calibrate(args: &CalibrateArgs) -> Result<()> {
    let (text, system) = read_system(&args.system)?;
    let onnx =
        std::fs::read(&args.onnx).with_context(|| format!("reading {}", args.onnx.display()))?;
    let side_text = std::fs::read_to_string(&args.sidecar)
        .with_context(|| format!("reading {}", args.sidecar.display()))?;
    let mut policy = MlpPolicy::new(&system, &onnx, &side_text)?;
    let mut side = policy.sidecar().clone();
    let t = side.training.clone();
    let set = load_demos(&args.demos, &text)?;
    if set.fnv1a64 != t.demos_fnv1a64 {
        bail!(
            "{} (FNV-1a {}) are not the demonstrations the policy was trained on ({}): calibrating on them could fit the held-out scenes",
            args.demos.display(),
            set.fnv1a64,
            t.demos_fnv1a64
        );
    }
    let train_split: Vec<&Demo> = set
        .demos
        .iter()
        .filter(|d| !is_heldout(t.seed, &d.scene, t.heldout_fraction))
        .collect();
    policy.set_local_search(false);
    let mut best: Option<(DecoderChoice, f64)> = None;
    for choice in calibration_candidates() {
        choice.apply(&mut policy);
        let f = eval::fidelity(&system, &mut policy, &train_split)?;
        println!(
            "{}: MLP alone on {} training instances, extra latency over the ILP mean {:.3}%, p99 {:.3}%",
            choice.label(),
            f.instances,
            f.mean * 100.0,
            f.p99 * 100.0
        );
        if best.is_none_or(|b| f.mean < b.1 - 1e-12) {
            best = Some((choice, f.mean));
        }
    }
    let (choice, mean) = best.context("no decoding was evaluated")?;
    choice.write_to(&mut side.outputs);
    side.outputs.decoding = export::DECODING.to_string();
    let json = serde_json::to_string_pretty(&side)? + "\n";
    MlpPolicy::new(&system, &onnx, &json).context("the calibrated sidecar does not load back")?;
    std::fs::write(&args.sidecar, json)
        .with_context(|| format!("writing {}", args.sidecar.display()))?;
    println!(
        "chose {} (training split mean {:.3}%); wrote {}",
        choice.label(),
        mean * 100.0,
        args.sidecar.display()
    );
    Ok(())
}
