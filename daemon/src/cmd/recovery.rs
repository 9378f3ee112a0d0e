//! `camdnnd simulate --recovery`: how schedulers recover when a processor
//! slows down (DVFS, thermal throttling) and speeds up again, window by
//! window, against the best fixed schedule for the board as it runs then.

use anyhow::{bail, Context};
use camdnn_policy::scheduler::Scheduler;
use camdnn_policy::sim::{
    simulate, throttled_board, windowed_goodput, SimConfig, SimReport, Throttle, Trace,
};
use camdnn_policy::System;

/// Parses PROC:FACTOR:FROM_S[:UNTIL_S] (seconds) into a [`Throttle`].
pub fn parse_throttle(system: &System, text: &str) -> anyhow::Result<Throttle> {
    let parts: Vec<&str> = text.split(':').collect();
    if !(3..=4).contains(&parts.len()) {
        bail!("--throttle {text:?}: expected PROC:FACTOR:FROM_S[:UNTIL_S], e.g. gpu:2:20:40");
    }
    let proc = system.proc_by_name(parts[0]).with_context(|| {
        let names: Vec<&str> = system.processors.iter().map(|p| p.name.as_str()).collect();
        format!(
            "--throttle {text:?}: no processor {:?} (the board has {})",
            parts[0],
            names.join(", ")
        )
    })?;
    let num = |s: &str, what: &str| -> anyhow::Result<f64> {
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .with_context(|| format!("--throttle {text:?}: {what} {s:?} is not a number"))
    };
    let factor = num(parts[1], "factor")?;
    let from_s = num(parts[2], "start")?;
    let until_s = match parts.get(3) {
        Some(u) => num(u, "end")?,
        None => f64::INFINITY,
    };
    if factor <= 0.0 || from_s < 0.0 || until_s <= from_s {
        bail!("--throttle {text:?}: needs FACTOR > 0 and 0 <= FROM_S < UNTIL_S");
    }
    Ok(Throttle {
        proc,
        factor,
        from_ms: from_s * 1000.0,
        until_ms: until_s * 1000.0,
    })
}

/// What the recovery figure compares.
pub struct Options<'a> {
    /// The full scheduler's name (`camdnn` with a learned policy, else
    /// `camdnn-greedy`).
    pub camdnn: &'a str,
    /// On-time deadline, ms.
    pub deadline_ms: f64,
    /// Window of the on-time shares, ms.
    pub window_ms: f64,
}

/// Schedulers a reference is taken from: the best of them, each run with a
/// profile that is right for the board (no throttling it is not told of).
const FIXED: [&str; 2] = ["camdnn-local", "heft"];

/// On-time share per window: (window start ms, share).
type Shares = Vec<(f64, f64)>;

type Make<'a> = dyn Fn(&str) -> anyhow::Result<Box<dyn Scheduler>> + 'a;

/// Runs the recovery figure and prints it.
pub fn run(
    system: &System,
    trace: &Trace,
    cfg: &SimConfig,
    opts: &Options,
    make: &Make,
) -> anyhow::Result<()> {
    if !(opts.window_ms.is_finite() && opts.window_ms > 0.0) {
        bail!("--window-s must be a positive number of seconds");
    }
    let span = Throttled::of(cfg);
    let reference = Reference::best(system, trace, cfg, opts, make, span)?;
    let adapting = SimConfig {
        adapt: Some(cfg.adapt.clone().unwrap_or_default()),
        ..cfg.clone()
    };
    let epoch_only = SimConfig {
        adapt: None,
        ..cfg.clone()
    };
    let runs: Vec<(String, SimReport)> = vec![
        (
            format!("{}+adapt", opts.camdnn),
            simulate(system, make(opts.camdnn)?.as_mut(), trace, &adapting)?,
        ),
        (
            format!("{} epoch-only", opts.camdnn),
            simulate(system, make(opts.camdnn)?.as_mut(), trace, &epoch_only)?,
        ),
        (
            "heft".into(),
            simulate(system, make("heft")?.as_mut(), trace, &epoch_only)?,
        ),
    ];
    print_header(system, trace, cfg, opts, &reference);
    print_table(opts, span, &reference, &runs);
    print_windows(opts, &reference, &runs);
    Ok(())
}

/// When the throttles slow the board: from the first one's start to the
/// last one's end, ms.
#[derive(Clone, Copy)]
struct Throttled {
    from: f64,
    until: f64,
}

impl Throttled {
    fn of(cfg: &SimConfig) -> Throttled {
        Throttled {
            from: cfg
                .throttles
                .iter()
                .map(|t| t.from_ms)
                .fold(f64::INFINITY, f64::min),
            until: cfg.throttles.iter().map(|t| t.until_ms).fold(0.0, f64::max),
        }
    }

    /// The mean share of the windows of `w` that start in [a, b).
    fn mean_share(w: &[(f64, f64)], a: f64, b: f64) -> f64 {
        let v: Vec<f64> = w
            .iter()
            .filter(|(t, _)| *t >= a && *t < b)
            .map(|x| x.1)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    }
}

/// The reference: the best fixed schedule on the board as it runs
/// before and after the throttles, and while throttled, every candidate
/// planned with the right profile (no surprise).
struct Reference {
    hot_name: String,
    cool_name: String,
    shares: Shares,
}

impl Reference {
    fn best(
        system: &System,
        trace: &Trace,
        cfg: &SimConfig,
        opts: &Options,
        make: &Make,
        span: Throttled,
    ) -> anyhow::Result<Reference> {
        let steady = SimConfig {
            throttles: Vec::new(),
            adapt: None,
            ..cfg.clone()
        };
        let best = |board: &System| -> anyhow::Result<(String, Shares)> {
            let mut out: Option<(String, f64, Shares)> = None;
            for name in std::iter::once(opts.camdnn).chain(FIXED) {
                let r = simulate(board, make(name)?.as_mut(), trace, &steady)?;
                let w = windowed_goodput(&r.frames, opts.deadline_ms, opts.window_ms);
                let score = Throttled::mean_share(&w, span.from, span.until)
                    + r.goodput(opts.deadline_ms) * 1e-6;
                if out.as_ref().is_none_or(|o| score > o.1) {
                    out = Some((r.scheduler.clone(), score, w));
                }
            }
            let (name, _, w) = out.expect("at least one candidate");
            Ok((name, w))
        };
        let (hot_name, hot) = best(&throttled_board(system, &cfg.throttles))?;
        let (cool_name, cool) = best(system)?;
        let shares = cool
            .iter()
            .zip(&hot)
            .map(|(c, h)| {
                if c.0 >= span.from && c.0 < span.until {
                    *h
                } else {
                    *c
                }
            })
            .collect();
        Ok(Reference {
            hot_name,
            cool_name,
            shares,
        })
    }
}

fn print_header(
    system: &System,
    trace: &Trace,
    cfg: &SimConfig,
    opts: &Options,
    reference: &Reference,
) {
    let names: Vec<String> = cfg
        .throttles
        .iter()
        .map(|t| {
            format!(
                "{} x{} from {:.0} s{}",
                system.processors[t.proc.0].name,
                t.factor,
                t.from_ms / 1000.0,
                if t.until_ms.is_finite() {
                    format!(" to {:.0} s", t.until_ms / 1000.0)
                } else {
                    " on".into()
                }
            )
        })
        .collect();
    println!(
        "system {:?}, {} frames at {} fps, deadline {:.1} ms, epoch {:.0} ms; throttled: {}",
        system.name,
        trace.frames(),
        cfg.fps,
        opts.deadline_ms,
        cfg.epoch_ms,
        names.join(", ")
    );
    println!(
        "reference = best fixed schedule planned with the right profile: {} on the throttled board while throttled, {} on the nominal board otherwise",
        reference.hot_name, reference.cool_name
    );
}

/// Each run's on-time share overall, while throttled and after, and how
/// long it took to recover and to restore, beside the reference's.
fn print_table(
    opts: &Options,
    span: Throttled,
    reference: &Reference,
    runs: &[(String, SimReport)],
) {
    let Throttled { from, until } = span;
    println!(
        "\n{:<26} {:>8} {:>9} {:>9} {:>11} {:>11} {:>9} {:>7} {:>8}",
        "scheduler",
        "on-time",
        "throttled",
        "after",
        "recover(s)",
        "restore(s)",
        "triggered",
        "drifts",
        "reprobes"
    );
    let fmt_rec = |r: Option<f64>| r.map_or("never".into(), |s| format!("{s:.1}"));
    let after = |w: &[(f64, f64)]| {
        if until.is_finite() {
            format!(
                "{:.1}%",
                Throttled::mean_share(w, until, f64::INFINITY) * 100.0
            )
        } else {
            "-".into()
        }
    };
    let r = &reference.shares;
    println!(
        "{:<26} {:>7.1}% {:>8.1}% {:>9} {:>11} {:>11} {:>9} {:>7} {:>8}",
        "reference",
        Throttled::mean_share(r, 0.0, f64::INFINITY) * 100.0,
        Throttled::mean_share(r, from, until) * 100.0,
        after(r),
        "-",
        "-",
        "-",
        "-",
        "-"
    );
    for (name, run) in runs {
        let w = windowed_goodput(&run.frames, opts.deadline_ms, opts.window_ms);
        println!(
            "{:<26} {:>7.1}% {:>8.1}% {:>9} {:>11} {:>11} {:>9} {:>7} {:>8}",
            name,
            run.goodput(opts.deadline_ms) * 100.0,
            Throttled::mean_share(&w, from, until) * 100.0,
            after(&w),
            fmt_rec(recovery_s(&w, r, from, until)),
            if until.is_finite() {
                fmt_rec(recovery_s(&w, r, until, f64::INFINITY))
            } else {
                "-".into()
            },
            run.triggered_epochs,
            run.adapt.map_or("-".into(), |a| a.drifts.to_string()),
            run.adapt.map_or("-".into(), |a| a.reprobes.to_string()),
        );
    }
    println!(
        "\non-time = share of offered frames answered within the deadline (drops are misses);\nrecover(s) = from the slow-down until every later {:.1} s window before the restore is within 10% of the reference's; restore(s) likewise after it",
        opts.window_ms / 1000.0
    );
}

/// The on-time share of every window, the reference's first.
fn print_windows(opts: &Options, reference: &Reference, runs: &[(String, SimReport)]) {
    let names: Vec<&str> = runs.iter().map(|r| r.0.as_str()).collect();
    println!("\nper window (s: reference / {}):", names.join(" / "));
    let per_run: Vec<Shares> = runs
        .iter()
        .map(|(_, r)| windowed_goodput(&r.frames, opts.deadline_ms, opts.window_ms))
        .collect();
    for (n, (t, rf)) in reference.shares.iter().enumerate() {
        let cells: Vec<String> = per_run
            .iter()
            .map(|w| {
                w.get(n)
                    .map_or("-".into(), |x| format!("{:.0}%", x.1 * 100.0))
            })
            .collect();
        println!(
            "  {:>5.1} {:>5.0}% | {}",
            t / 1000.0,
            rf * 100.0,
            cells.join(" ")
        );
    }
}

/// Seconds from `from_ms` to the first window from which every window
/// before `until_ms` has an on-time share within 10% of the reference's;
/// `None` when it never gets there.
pub fn recovery_s(
    shares: &[(f64, f64)],
    reference: &[(f64, f64)],
    from_ms: f64,
    until_ms: f64,
) -> Option<f64> {
    let inside: Vec<(f64, bool)> = shares
        .iter()
        .zip(reference)
        .filter(|(w, _)| w.0 >= from_ms && w.0 < until_ms)
        .map(|(w, r)| (w.0, w.1 >= 0.9 * r.1 - 1e-9))
        .collect();
    let last_bad = inside.iter().rposition(|(_, ok)| !ok);
    match last_bad {
        None => Some(0.0),
        Some(n) if n + 1 < inside.len() => Some((inside[n + 1].0 - from_ms) / 1000.0),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_is_the_first_window_after_the_last_miss() {
        let r = [(0.0, 1.0), (1000.0, 1.0), (2000.0, 1.0), (3000.0, 1.0)];
        let w = [(0.0, 0.5), (1000.0, 0.95), (2000.0, 0.5), (3000.0, 0.92)];
        assert_eq!(recovery_s(&w, &r, 0.0, 4000.0), Some(3.0));
        assert_eq!(recovery_s(&w, &r, 3000.0, 4000.0), Some(0.0));
        let never = [(0.0, 1.0), (1000.0, 0.1)];
        assert_eq!(recovery_s(&never, &r[..2], 0.0, 2000.0), None);
    }

    #[test]
    fn throttle_specs_are_parsed_or_refused_clearly() {
        let system = System::from_toml(
            "max_batch = 1\n[[processor]]\nname = \"gpu\"\nkind = \"gpu\"\nmax_resident = 1\n\
             [[model]]\nname = \"d\"\n[profile.d.gpu]\nexec_ms = [1.0]\nload_ms = 1.0\n",
        )
        .expect("valid");
        let t = parse_throttle(&system, "gpu:2:20:40").expect("valid");
        assert_eq!((t.factor, t.from_ms, t.until_ms), (2.0, 20_000.0, 40_000.0));
        assert!(parse_throttle(&system, "gpu:2:0").is_ok_and(|t| t.until_ms.is_infinite()));
        for bad in [
            "npu:2:1",
            "gpu:x:1",
            "gpu:2",
            "gpu:0:1",
            "gpu:2:5:4",
            "gpu:2:1:2:3",
        ] {
            let e = parse_throttle(&system, bad).expect_err(bad).to_string();
            assert!(e.contains(bad), "{e}");
        }
    }
}
