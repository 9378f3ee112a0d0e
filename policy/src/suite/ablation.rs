//! The global step's ablation: the full step and, beside it, the same step
//! without one choice or one threshold each, over the same cases; a rule is
//! worth keeping when its removal costs mean on-time share on some set.

use std::fmt::Write as _;

use super::{Case, Headline};

/// How one variant did against the full step over the cases both ran.
#[derive(Clone, Debug, PartialEq)]
pub struct AblationRow {
    /// The variant's report name.
    pub name: String,
    /// Cases both ran.
    pub cases: usize,
    /// Mean on-time share of the variant.
    pub mean_on_time: f64,
    /// The full step's mean minus the variant's, in points (hundredths of
    /// the share): what removing the rule costs (negative: it gains).
    pub cost_points: f64,
    /// Cases where the variant is more on time than the full step by more
    /// than `tie`.
    pub better: usize,
    /// Cases where it is less on time by more than `tie`.
    pub worse: usize,
}

/// Each of `variants` against `full` on the on-time share, over the cases
/// where both ran; differences of at most `tie` are ties.
pub fn ablation(cases: &[Case], full: &str, variants: &[String], tie: f64) -> Vec<AblationRow> {
    variants
        .iter()
        .map(|name| {
            let pairs: Vec<(Headline, Headline)> = cases
                .iter()
                .filter_map(|c| Some((c.of(full)?, c.of(name)?)))
                .collect();
            let n = pairs.len().max(1) as f64;
            let mean =
                |pick: fn(&(Headline, Headline)) -> f64| pairs.iter().map(pick).sum::<f64>() / n;
            let (full_mean, mean_on_time) = (mean(|p| p.0.on_time), mean(|p| p.1.on_time));
            AblationRow {
                name: name.clone(),
                cases: pairs.len(),
                mean_on_time,
                cost_points: (full_mean - mean_on_time) * 100.0,
                better: pairs
                    .iter()
                    .filter(|p| p.1.on_time > p.0.on_time + tie)
                    .count(),
                worse: pairs
                    .iter()
                    .filter(|p| p.1.on_time < p.0.on_time - tie)
                    .count(),
            }
        })
        .collect()
}

/// The ablation as a Markdown table: the full step's mean first, then one
/// row per variant with what its removal costs.
pub fn ablation_text(cases: &[Case], full: &str, variants: &[String], tie: f64) -> String {
    let mut out = String::new();
    let n = cases.iter().filter(|c| c.of(full).is_some()).count();
    let full_mean = cases
        .iter()
        .filter_map(|c| c.of(full))
        .map(|h| h.on_time)
        .sum::<f64>()
        / n.max(1) as f64;
    let _ = writeln!(
        out,
        "{full} over {n} cases: mean on-time share {full_mean:.4}; each row removes one choice or threshold (cost: the full step's mean minus the variant's, in points; better/worse: cases where the variant is more/less on time, ties within {tie})"
    );
    let _ = writeln!(
        out,
        "| variant | mean on time | cost (points) | better | worse |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for r in ablation(cases, full, variants, tie) {
        let _ = writeln!(
            out,
            "| {} | {:.4} | {:+.3} | {} | {} |",
            r.name, r.mean_on_time, r.cost_points, r.better, r.worse
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(shape: &str, full: f64, a: f64, b: f64) -> Case {
        let h = |on_time| Headline {
            on_time,
            median_ms: 50.0,
            dropped: 0.0,
            band_ms: [50.0; 2],
        };
        Case {
            board: "b".into(),
            shape: shape.into(),
            results: vec![
                ("full".into(), h(full)),
                ("-a".into(), h(a)),
                ("-b".into(), h(b)),
            ],
            median_bound_ms: 10.0,
            on_time_ceiling: 1.0,
            own_board: Vec::new(),
        }
    }

    #[test]
    fn a_rules_cost_is_the_full_means_lead_in_points() {
        let cases = [case("x", 0.9, 0.8, 0.9), case("y", 0.7, 0.7, 0.75)];
        let rows = ablation(&cases, "full", &["-a".into(), "-b".into()], 0.001);
        // Without a: (0.8 + 0.7) / 2 = 0.75 against 0.8: 5 points lost.
        assert!((rows[0].cost_points - 5.0).abs() < 1e-9, "{rows:?}");
        assert_eq!((rows[0].better, rows[0].worse), (0, 1));
        // Without b: 0.825, 2.5 points gained.
        assert!((rows[1].cost_points + 2.5).abs() < 1e-9, "{rows:?}");
        assert_eq!((rows[1].better, rows[1].worse, rows[1].cases), (1, 0, 2));
        let text = ablation_text(&cases, "full", &["-a".into()], 0.001);
        assert!(text.contains("| -a | 0.7500 | +5.000 | 0 | 1 |"), "{text}");
    }
}
