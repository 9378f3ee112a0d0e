//! The recovery drill of `camdnnd bench` (`--drill PROC:FACTOR`): the real
//! pipeline starts from a profile whose times on one processor are off by a
//! factor, once adapting (`[pipeline] adapt`, `policy::adapt`) and once on
//! the epoch timer alone, beside the fresh profile. Each runs the same frames
//! closed loop in windows; the drill prints every window's frames/s and how
//! many frames each needed until every later window was within 10% of the
//! fresh profile's median.

use anyhow::{bail, Context};
use camdnn_policy::stats::{bootstrap_median, MedianCi, Summary};
use camdnn_policy::System;

use super::stream::{drive, BenchFrame, Pace};
use crate::config::DaemonConfig;
use crate::pipeline;
use crate::pipeline::config::ThrottleDrill;
use crate::pipeline::FrameProcessor;

/// A window is recovered when within this share of the fresh profile's median.
const WITHIN: f64 = 0.9;

/// Which processor's profile is off, and by how much.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Drill {
    /// The processor.
    pub proc: String,
    /// Its times in the profile the pipeline starts from, as a multiple of
    /// the measured ones (2: the profile says it is twice as slow as it is).
    pub factor: f64,
}

impl std::str::FromStr for Drill {
    type Err = String;

    /// `PROC:FACTOR`, e.g. `cpu-ort:2`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (proc, factor) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("--drill {s:?}: expected PROCESSOR:FACTOR, e.g. cpu-ort:2"))?;
        let factor: f64 = factor
            .parse()
            .map_err(|_| format!("--drill {s:?}: the factor {factor:?} is not a number"))?;
        if !(factor.is_finite() && factor > 0.0) || proc.is_empty() {
            return Err(format!(
                "--drill {s:?}: needs a processor name and a positive factor"
            ));
        }
        Ok(Drill {
            proc: proc.to_string(),
            factor,
        })
    }
}

/// `--throttle PROC:FACTOR:FROM[:TO]` (seconds from the pipeline's start):
/// the processor and its throttling drill.
pub(super) fn parse_throttle(s: &str) -> Result<(String, ThrottleDrill), String> {
    let parts: Vec<&str> = s.split(':').collect();
    let bad = |why: &str| {
        format!("--throttle {s:?}: {why} (expected PROCESSOR:FACTOR:FROM_S[:UNTIL_S], e.g. cpu-ort:2:10:20)")
    };
    if !(3..=4).contains(&parts.len()) || parts[0].is_empty() {
        return Err(bad("wrong number of fields"));
    }
    let num = |x: &str, what: &str| -> Result<f64, String> {
        x.parse::<f64>()
            .map_err(|_| bad(&format!("the {what} {x:?} is not a number")))
    };
    let drill = ThrottleDrill {
        factor: num(parts[1], "factor")?,
        from_s: num(parts[2], "start")?,
        until_s: parts.get(3).map(|u| num(u, "end")).transpose()?,
    };
    drill.throttle().map_err(|e| bad(&e.to_string()))?;
    Ok((parts[0].to_string(), drill))
}

/// `system` with every time of processor `drill.proc` multiplied by the
/// drill's factor.
pub(super) fn off_profile(system: &System, drill: &Drill) -> anyhow::Result<System> {
    let j = system.proc_by_name(&drill.proc).with_context(|| {
        format!(
            "--drill: no processor {:?} in the config (it has {})",
            drill.proc,
            system
                .processors
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })?;
    let mut off = system.clone();
    for i in system.model_ids() {
        if !system.supports(i, j) {
            continue;
        }
        let exec: Vec<f64> = (1..=system.max_batch_on(i, j))
            .map(|k| system.exec_ms(i, j, k) * drill.factor)
            .collect();
        off.set_pair_timings(i, j, &exec, system.load_ms(i, j) * drill.factor);
    }
    Ok(off)
}

/// The median of `v` (`None` when empty).
fn median(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| Summary::of(v).p50)
}

/// One variant's frames/s per round and window.
struct Variant {
    name: String,
    fps: Vec<Vec<f64>>,
    /// Frames never answered, over every round.
    unanswered: usize,
}

/// Runs the drill on `frames` in windows of `window_frames`, the pipeline
/// keeping its `max_in_flight` frames inside, and prints the figures.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    cfg: &DaemonConfig,
    system: &System,
    drill: &Drill,
    throttle: Option<&(String, ThrottleDrill)>,
    frames: &[BenchFrame],
    warm: &[BenchFrame],
    window_frames: usize,
    rounds: usize,
    bound: Option<f64>,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<()> {
    if rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    if window_frames == 0 || frames.len() < 2 * window_frames {
        bail!(
            "--drill needs at least two windows: {} frames, windows of {window_frames}",
            frames.len()
        );
    }
    let off = off_profile(system, drill)?;
    let dir = std::env::temp_dir().join(format!("camdnnd-drill-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let off_path = dir.join("off-profile.toml");
    std::fs::write(&off_path, off.to_spec().to_toml())?;
    let fresh_path = dir.join("fresh-profile.toml");
    std::fs::write(&fresh_path, system.to_spec().to_toml())?;
    // Every variant runs the same scheduler: the learned policy only when it
    // fits both profiles.
    let mut base = cfg.clone();
    base.pipeline.profile = off_path.clone();
    let dropped = pipeline::drop_unfit_policy(&mut base.pipeline, &off);
    if let Some(why) = &dropped {
        println!("note: every drill variant plans without the learned policy: {why}");
    }
    if let Some((name, _)) = throttle {
        if system.proc_by_name(name).is_none() {
            bail!("--throttle: no processor {name:?} in the config");
        }
    }
    let variant = |profile: &std::path::Path, adapt: bool, throttled: bool| {
        let mut c = base.clone();
        c.pipeline.profile = profile.to_path_buf();
        c.pipeline.adapt = adapt;
        for q in &mut c.pipeline.processors {
            q.throttle_drill = throttle
                .filter(|(name, _)| throttled && *name == q.name)
                .map(|(_, t)| *t);
        }
        c
    };
    // The config's profile on the epoch timer alone too: that profile may
    // be off on this host at this hour already, which adapting corrects.
    let plans = [
        (
            "config's profile, adapting",
            variant(&fresh_path, true, false),
        ),
        (
            "config's profile, epoch only",
            variant(&fresh_path, false, false),
        ),
        ("drilled, adapting", variant(&off_path, true, true)),
        ("drilled, epoch timer only", variant(&off_path, false, true)),
    ];
    println!(
        "\nrecovery drill: the drilled pipeline starts from a profile with {}'s times x{}{}; {} frames in windows of {window_frames}, closed loop",
        drill.proc,
        drill.factor,
        throttle.map_or_else(String::new, |(name, t)| format!(
            ", and {name}'s batches run x{} from {} s{}",
            t.factor,
            t.from_s,
            t.until_s.map_or_else(String::new, |u| format!(" to {u} s"))
        )),
        frames.len()
    );
    let runs = (|| -> anyhow::Result<Vec<Variant>> {
        let mut variants: Vec<Variant> = plans
            .iter()
            .map(|(name, _)| Variant {
                name: name.to_string(),
                fps: Vec::new(),
                unanswered: 0,
            })
            .collect();
        // Interleaved rounds (A B C D A B C D ...): a host whose speed drifts
        // slows every variant alike instead of one.
        for round in 0..rounds {
            for ((name, c), v) in plans.iter().zip(&mut variants) {
                eprintln!("drill, round {}/{rounds}: {name} ...", round + 1);
                let built = pipeline::start(&c.pipeline)
                    .with_context(|| format!("starting the drill's {name}"))?;
                let window = built.pipeline.max_in_flight().max(1);
                rt.block_on(drive(&built, warm, Pace::Window(window)));
                let mut fps = Vec::new();
                for chunk in frames.chunks(window_frames) {
                    let (f, _, _) = rt.block_on(drive(&built, chunk, Pace::Window(window)));
                    v.unanswered += f.failed;
                    fps.push(f.fps());
                }
                v.fps.push(fps);
            }
        }
        Ok(variants)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    let runs = runs?;
    print_drill(&runs, window_frames);
    // How far the reference is from the limit (`policy::bound`).
    let all: Vec<f64> = runs.first().map_or_else(Vec::new, |r| r.fps.concat());
    if let (Some(bound), Some(m)) = (bound, median(&all)) {
        println!(
            "limit (the config's profile, this trace's mean scene, loads excluded): {bound:.2} frames/s; the reference's median window {m:.2} = {:.0}% of it",
            100.0 * m / bound
        );
    }
    Ok(())
}

/// The first window from which every later one's ratio to the
/// reference's same window (the same frames, so scenes of different weight
/// compare like with like) is at least `WITHIN`; `None` when the last
/// window's is not.
fn recovered_from(ratios: &[f64]) -> Option<usize> {
    let mut from = None;
    for (w, &x) in ratios.iter().enumerate() {
        if x >= WITHIN {
            from.get_or_insert(w);
        } else {
            from = None;
        }
    }
    from
}

/// Per window, a variant's frames/s over the reference's in the same
/// round (paired, so the host's drift between rounds cancels): the median
/// over rounds with its 95% bootstrap interval.
fn window_ratios(v: &Variant, reference: &Variant) -> Vec<Option<MedianCi>> {
    let windows = reference.fps.first().map_or(0, Vec::len);
    (0..windows)
        .map(|w| {
            let r: Vec<f64> = v
                .fps
                .iter()
                .zip(&reference.fps)
                .filter_map(|(x, r)| Some(x.get(w)? / r.get(w)?))
                .collect();
            bootstrap_median(&r, 0.95, 2000, 0x0d71_11ed)
        })
        .collect()
}

fn print_drill(variants: &[Variant], window_frames: usize) {
    let Some((reference, drilled)) = variants.split_first() else {
        return;
    };
    let rounds = reference.fps.len();
    let ratios: Vec<Vec<Option<MedianCi>>> = drilled
        .iter()
        .map(|v| window_ratios(v, reference))
        .collect();
    print!("{:<8} {:>28}", "frames", reference.name);
    for v in drilled {
        print!(" {:>32}", format!("{} / ref", v.name));
    }
    println!();
    for w in 0..ratios.first().map_or(0, Vec::len) {
        let r: Vec<f64> = reference
            .fps
            .iter()
            .filter_map(|f| f.get(w).copied())
            .collect();
        print!(
            "{:<8} {:>28}",
            (w + 1) * window_frames,
            median(&r).map_or_else(|| "-".to_string(), |m| format!("{m:.2} fps"))
        );
        for vr in &ratios {
            let cell = vr[w].map_or_else(
                || "-".to_string(),
                |c| format!("{:.2}x [{:.2}, {:.2}]", c.median, c.lo, c.hi),
            );
            print!(" {cell:>32}");
        }
        println!();
    }
    println!(
        "per window of {window_frames} frames: the reference's median frames/s, and each variant's frames/s over the reference's in the same round, median [95% bootstrap interval] over {rounds} interleaved rounds; within 10% = every later window's median ratio at least {WITHIN}"
    );
    for (v, vr) in drilled.iter().zip(&ratios) {
        let medians: Vec<f64> = vr.iter().map(|c| c.map_or(0.0, |c| c.median)).collect();
        let overall = median(&medians).unwrap_or(0.0);
        match recovered_from(&medians) {
            Some(w) => println!(
                "  {}: within 10% after {} frames (median window ratio {overall:.2}x)",
                v.name,
                w * window_frames
            ),
            None => println!(
                "  {}: not within 10% to the end ({} frames; median window ratio {overall:.2}x)",
                v.name,
                medians.len() * window_frames
            ),
        }
    }
    for v in variants.iter().filter(|v| v.unanswered > 0) {
        println!(
            "  warning: {} left {} frames unanswered (they count in no window's frames/s)",
            v.name, v.unanswered
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drill_parses_and_bad_ones_say_what_is_wrong() {
        let d: Drill = "cpu-ort:2".parse().unwrap();
        assert_eq!(
            d,
            Drill {
                proc: "cpu-ort".into(),
                factor: 2.0
            }
        );
        for bad in [
            "cpu-ort",
            "cpu-ort:x",
            "cpu-ort:0",
            ":2",
            "cpu:-1",
            "cpu:inf",
        ] {
            let e = bad.parse::<Drill>().unwrap_err();
            assert!(e.contains("--drill"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_throttle_parses_and_bad_ones_say_what_is_wrong() {
        let (p, t) = parse_throttle("cpu-ort:2:10:20").unwrap();
        assert_eq!(p, "cpu-ort");
        assert_eq!(
            t,
            ThrottleDrill {
                factor: 2.0,
                from_s: 10.0,
                until_s: Some(20.0)
            }
        );
        assert_eq!(parse_throttle("gpu:3:0").unwrap().1.until_s, None);
        for bad in [
            "gpu:2",
            "gpu:x:1",
            "gpu:0.5:1",
            "gpu:2:5:3",
            ":2:1",
            "gpu:2:1:2:3",
        ] {
            let e = parse_throttle(bad).unwrap_err();
            assert!(e.contains("--throttle"), "{bad}: {e}");
        }
    }

    #[test]
    fn recovery_is_the_first_window_after_which_all_are_within_ten_per_cent() {
        assert_eq!(recovered_from(&[0.5, 0.95, 1.0, 0.99]), Some(1));
        // A relapse restarts the count.
        assert_eq!(recovered_from(&[0.95, 0.5, 0.95, 0.96]), Some(2));
        assert_eq!(recovered_from(&[0.95, 0.96, 0.5]), None);
        assert_eq!(recovered_from(&[1.0, 1.0]), Some(0));
        // Each window against the reference's same window: a light scene's
        // fast window does not hide a slow heavy one.
        let window =
            |v: &[f64], r: &[f64]| -> Vec<f64> { v.iter().zip(r).map(|(x, r)| x / r).collect() };
        assert_eq!(
            recovered_from(&window(&[20.0, 1.0, 2.0], &[21.0, 2.0, 2.0])),
            Some(2)
        );
    }
}
