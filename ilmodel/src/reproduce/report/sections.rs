//! The report's real-time, ablation and suite sections, and the summary
//! printed to the terminal.

use super::*;

/// The scheduler suite: `camdnnd suite`'s own report on the same boards.
pub(super) fn suite_section(s: &mut String, suite: &SuiteRun, system: &str, command: &str) {
    let _ = writeln!(
        s,
        "## The scheduler suite: {} generated board{} and {system}, six trace shapes each\n",
        suite.boards,
        if suite.boards == 1 { "" } else { "s" }
    );
    let _ = writeln!(s, "Produced by the same command (`{command}`): {} cases, every scheduler in the simulator with real-time dropping, as `camdnnd suite --boards {} --system FILE` runs them (FILE: the system file of that command; add `--cases` for every case's line, `--first-seed S` for other boards). The boards (`policy::gen`, board `gen-SEED` the same on every machine), the shapes and the measures are described in [suite.md](suite.md), with the figures on held-out boards. The headline is the on-time share at a deadline of two frame periods, a dropped frame a miss; `camdnn` (the learned policy) runs on {system} only, `camdnn-greedy` (the same global step with the greedy planner) on every board. The suite's targets read off the lines below: `under 0.98x` against camdnn-local (the floor), `median speedup` against camdnn-local (the 1.10x target), and `against every baseline at once`.\n", suite.cases, suite.boards);
    let _ = writeln!(s, "```text{}```\n", suite.summary);
}

/// The global step's ablation on the headline measure: no global step,
/// the greedy planner + search, the MLP alone, the MLP + search, the ILP
/// every epoch; the on-time share per real-time trace, and each planner's
/// plans against the ILP's where measured.
pub(super) fn ablation_section(s: &mut String, traces: &[RealTime], fd: &Fidelity) {
    let rows = [
        ("no global step (Algorithm 1 alone)", "camdnn-local", None),
        (
            "no global step (Algorithm 1 alone, earliest-finish rule: camdnn's start)",
            "camdnn-local-eft",
            None,
        ),
        ("greedy planner + local search", "camdnn-greedy", None),
        (
            "MLP alone (repaired, no search)",
            MLP_ALONE,
            Some(fd.extra_alone.mean),
        ),
        ("MLP + local search (camdnn)", CAMDNN, Some(fd.extra.mean)),
        ("ILP every epoch", ORACLE, Some(0.0)),
    ];
    let _ = writeln!(
        s,
        "## Ablation of the global step
"
    );
    let _ = writeln!(s, "The same real-time runs as above, one row per global step; the last column is the planner's extra makespan over the ILP on the held-out instances of the fidelity table (one plan on idle units, not the stream).
");
    let mut head = String::from("| global step |");
    let mut rule = String::from("|---|");
    for t in traces {
        let _ = write!(head, " on-time share, {} |", t.trace);
        rule.push_str("---|");
    }
    let _ = writeln!(
        s,
        "{head} plan over the ILP, mean |
{rule}---|"
    );
    for (what, name, plan) in rows {
        let mut line = format!("| {what} (`{name}`) |");
        for t in traces {
            match t.rows.iter().find(|r| r.scheduler == name) {
                Some(r) => {
                    let _ = write!(line, " {:.1}% |", 100.0 * r.accounting.goodput());
                }
                None => line.push_str(" - |"),
            }
        }
        match plan {
            Some(x) => {
                let _ = write!(line, " {:+.2} % |", 100.0 * x);
            }
            None => line.push_str(" - |"),
        }
        let _ = writeln!(s, "{line}");
    }
    s.push('\n');
}

/// The real-time measures and the distance to the bound, one table per trace.
pub(super) fn realtime_section(s: &mut String, traces: &[RealTime], command: &str) {
    let _ = writeln!(
        s,
        "\n## Real time: on-time share, delay over all offered frames, distance to the bound\n"
    );
    let _ = writeln!(s, "Produced by the same command (`{command}`). The same simulator with real-time dropping (a frame is dropped at its arrival when no unit that runs the detector could start it within one frame period, and after its detector when the pipeline is further behind than what its age leaves of that period and it has objects to classify, as a live camera's frames are; `policy::admission`). Every offered frame is **on time** (answered within the deadline), **late**, or **dropped**; **on-time share** = on time / offered. Delay percentiles are over *all* offered frames, a dropped frame counting as a miss (`miss`: a drop sits at that rank), so a scheduler cannot look faster by dropping its heavy frames. Rows are ranked best first by on-time share, then p50, p90, p99. The same table comes from `camdnnd simulate --system config/profiles/rb5.toml` (Fig. 11 trace; `--trace FILE` for another).\n");
    let _ = writeln!(s, "Distance to the bound (`policy::bound`): **delay / bound** is each frame's delay over a lower bound on its makespan on idle units with the residency it found (the longest of the critical path, each model on its best unit with that unit's load when not resident; the per-level fractional work split over the units; and each model's requests split whole over its units, each unit's share in its fastest batches; a drop is a miss); the ratio includes queueing behind earlier frames. **Sustainable** is the highest frame rate any schedule could sustain on the trace's mean scene (its per-frame work split fractionally over the units at their best per-request time, batches of any size, loads excluded); **achieved** is the rate the scheduler answered frames at when offered {}x that rate with no drops.\n", camdnn_policy::sim::OVERLOAD);
    for t in traces {
        let _ = writeln!(
            s,
            "### {}: {} frames at 14 fps, deadline {:.1} ms\n",
            t.trace, t.frames, t.deadline_ms
        );
        let _ = writeln!(
            s,
            "No schedule is on time for more than {:.1}% of these frames (the on-time ceiling, `policy::suite::ceiling`), nor has a p50 below {} ms (the median bound, `policy::suite::median_bound_ms`); both are repeated beside each scheduler's figure.\n",
            100.0 * t.on_time_ceiling,
            fmt_delay(t.median_bound_ms)
        );
        s.push_str("| scheduler | on-time share | ceiling | on time | late | dropped | p50 ms | p50 bound ms | p90 ms | p99 ms | delay / bound p50 | delay / bound p90 | achieved fps | sustainable fps | achieved / sustainable |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for row in &t.rows {
            let a = &row.accounting;
            let ratio_cell = |x: f64| {
                if x.is_finite() {
                    format!("{x:.2}x")
                } else {
                    "miss".into()
                }
            };
            let _ = writeln!(
                s,
                "| {} | {:.1}% | {:.1}% | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.2} |",
                row.scheduler,
                100.0 * a.goodput(),
                100.0 * t.on_time_ceiling,
                a.on_time,
                a.late,
                a.dropped,
                fmt_delay(a.delay.p50),
                fmt_delay(t.median_bound_ms),
                fmt_delay(a.delay.p90),
                fmt_delay(a.delay.p99),
                ratio_cell(row.bound.p50),
                ratio_cell(row.bound.p90),
                row.rate.achieved_fps,
                row.rate.sustainable_fps,
                row.rate.ratio()
            );
        }
        s.push('\n');
    }
}

/// Prints the headline figures to stdout.
pub fn print_summary(r: &Results) {
    let sweep = |name: &str| -> f64 {
        r.sweep
            .delays
            .iter()
            .find(|d| d.0 == name)
            .map_or(f64::NAN, |d| {
                mean_std(&d.1.iter().filter_map(|x| *x).collect::<Vec<_>>()).0
            })
    };
    let cm = sweep(CAMDNN);
    println!(
        "Table 3 (steady state over {} scenes): camdnn {cm:.1} ms",
        r.sweep.scenes.len()
    );
    for name in [
        "camdnn-oracle",
        "camdnn-local",
        "static-dist",
        "cpu-only",
        "gpu-only",
    ] {
        let m = sweep(name);
        println!("  {name:<14} {m:7.1} ms  {:.2}x camdnn", m / cm);
    }
    if let Some(b) = cell_of(&r.table5, CAMDNN) {
        println!(
            "Table 5 (Fig. 11 trace): camdnn {:.1} ms (std {:.1})",
            b.mean, b.std
        );
        for a in r.table5.iter().filter(|a| a.scheduler != CAMDNN) {
            println!(
                "  {:<14} {:7.1} ms  {:.2}x camdnn (std {:.2}x), dropped {:.1}%",
                a.scheduler,
                a.mean,
                a.mean / b.mean,
                a.std / b.std,
                100.0 * a.dropped
            );
        }
    }
    for row in &r.table6 {
        let g = |n: &str| cell_of(&row.cells, n).map_or(f64::NAN, |c| c.mean);
        let o = |n: &str| cell_of(&row.oracle_subset, n).map_or(f64::NAN, |c| c.mean);
        println!("Table 6, {:>5} ms: camdnn {:.1}, heft {:.1} ({:.2}x), local {:.1}; subset: oracle {:.1}, camdnn {:.1}, heft {:.1}", row.interval_ms, g(CAMDNN), g("heft"), g("heft") / g(CAMDNN), g("camdnn-local"), o(ORACLE), o(CAMDNN), o("heft"));
    }
    let f = &r.fidelity;
    println!("Fidelity: {} held-out instances, extra latency mean {:+.2}%, p99 {:+.2}%, max {:+.2}%; ILP solve median {:.1} ms; global step median {:.1} us", f.instances, 100.0 * f.extra.mean, 100.0 * f.extra.p99, 100.0 * f.extra.max, f.ilp_ms.p50, f.step_us.p50);
    println!(
        "Fig. 6: optimal T {:.1} ms vs Static-DIST {:.1} ms",
        r.fig6.optimal.1, r.fig6.static_dist.1
    );
    for t in &r.realtime {
        println!("Real time, {} (deadline {:.1} ms):", t.trace, t.deadline_ms);
        for row in &t.rows {
            let a = &row.accounting;
            println!(
                "  {:<14} on time {:5.1}%  dropped {:4}  p50 {:>7}  p99 {:>7} ms  delay/bound p50 {:.2}x  achieved/sustainable {:.2}",
                row.scheduler,
                100.0 * a.goodput(),
                a.dropped,
                fmt_delay(a.delay.p50),
                fmt_delay(a.delay.p99),
                row.bound.p50,
                row.rate.ratio()
            );
        }
    }
}
