//! The training loss curves, as CSV and as an SVG chart.

use std::fmt::Write as _;

use super::EpochLoss;

/// The loss curves as CSV.
pub fn curves_csv(curves: &[EpochLoss]) -> String {
    let mut s =
        String::from("epoch,train_loss,heldout_loss,heldout_bce,heldout_mae,heldout_penalty\n");
    for e in curves {
        let _ = writeln!(
            s,
            "{},{:.6},{:.6},{:.6},{:.6},{:.6}",
            e.epoch, e.train, e.heldout, e.heldout_bce, e.heldout_mae, e.heldout_penalty
        );
    }
    s
}

/// The loss curves (train and held-out total loss per epoch, log scale) as a
/// hand-written SVG line chart.
pub fn curves_svg(curves: &[EpochLoss], title: &str) -> String {
    let (w, h, l, r, t, b) = (720.0, 420.0, 70.0, 20.0, 40.0, 50.0);
    let vals: Vec<f64> = curves
        .iter()
        .flat_map(|e| [e.train, e.heldout])
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let lo = vals.iter().cloned().fold(f64::INFINITY, f64::min).max(1e-6);
    let hi = vals.iter().cloned().fold(0.0, f64::max).max(lo * 1.01);
    let (llo, lhi) = (lo.log10().floor(), hi.log10().ceil());
    let n = curves.len().max(2) as f64;
    let px = |epoch: usize| l + (epoch as f64 - 1.0) / (n - 1.0) * (w - l - r);
    let py = |v: f64| {
        let v = v.max(lo).log10();
        t + (lhi - v) / (lhi - llo).max(1e-9) * (h - t - b)
    };
    let mut s = crate::reproduce::svg::open(w, h, w / 2.0, title);
    let mut dec = llo;
    while dec <= lhi + 1e-9 {
        let y = py(10f64.powf(dec));
        let _ = writeln!(
            s,
            r##"<line x1="{l}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">1e{}</text>"##,
            w - r,
            l - 6.0,
            y + 4.0,
            dec as i64
        );
        dec += 1.0;
    }
    crate::reproduce::svg::axes(&mut s, (w, h), (l, r, t, b));
    let ticks = 5.min(curves.len());
    for q in 0..=ticks {
        let epoch = 1 + (curves.len().saturating_sub(1)) * q / ticks.max(1);
        let x = px(epoch);
        let _ = writeln!(
            s,
            r#"<text x="{x:.1}" y="{}" text-anchor="middle">{epoch}</text>"#,
            h - b + 18.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">epoch</text><text x="16" y="{}" transform="rotate(-90 16 {})" text-anchor="middle">loss (log scale)</text>"#,
        (l + w - r) / 2.0,
        h - 12.0,
        h / 2.0,
        h / 2.0
    );
    for (name, color, get, dy) in [
        (
            "train",
            "#1f77b4",
            (|e: &EpochLoss| e.train) as fn(&EpochLoss) -> f64,
            0.0,
        ),
        ("held-out", "#d62728", |e: &EpochLoss| e.heldout, 16.0),
    ] {
        let pts: Vec<String> = curves
            .iter()
            .map(|e| format!("{:.1},{:.1}", px(e.epoch), py(get(e))))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{}"/>"#,
            pts.join(" ")
        );
        let _ = writeln!(
            s,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{color}" stroke-width="2"/><text x="{}" y="{}">{name}</text>"#,
            w - r - 110.0,
            t + 10.0 + dy,
            w - r - 85.0,
            t + 10.0 + dy,
            w - r - 80.0,
            t + 14.0 + dy
        );
    }
    s.push_str("</svg>\n");
    s
}
