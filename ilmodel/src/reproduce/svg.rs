//! Hand-written SVG line charts for the reproduction's figures.

use std::fmt::Write;

/// One line of a chart: name, colour, points (x, y); NaN y values break it.
pub struct Series<'a> {
    /// Legend label.
    pub name: &'a str,
    /// Stroke colour (any SVG colour).
    pub color: &'a str,
    /// Points in data units.
    pub points: Vec<(f64, f64)>,
}

/// `s` escaped for SVG text.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A line chart with linear axes, a title, axis labels and a legend.
pub fn line_chart(title: &str, xlabel: &str, ylabel: &str, series: &[Series]) -> String {
    let (w, h, l, r, t, b) = (760.0, 440.0, 70.0, 170.0, 40.0, 50.0);
    let pts = series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|p| p.1.is_finite());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y1 = nice(y1.max(1e-9));
    let px = |x: f64| l + (x - x0) / (x1 - x0) * (w - l - r);
    let py = |y: f64| t + (1.0 - y / y1) * (h - t - b);
    let mut s = open(w, h, (w - r + l) / 2.0, title);
    for k in 0..=5 {
        let y = y1 * k as f64 / 5.0;
        let _ = writeln!(
            s,
            r##"<line x1="{l}" y1="{py:.1}" x2="{}" y2="{py:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{y:.0}</text>"##,
            w - r,
            l - 6.0,
            py(y) + 4.0,
            py = py(y)
        );
        let x = x0 + (x1 - x0) * k as f64 / 5.0;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{x:.0}</text>"#,
            px(x),
            h - b + 16.0
        );
    }
    axes(&mut s, (w, h), (l, r, t, b));
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        (w - r + l) / 2.0,
        h - 12.0,
        esc(xlabel)
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="{}" text-anchor="middle" transform="rotate(-90 16 {})">{}</text>"#,
        (h - b + t) / 2.0,
        (h - b + t) / 2.0,
        esc(ylabel)
    );
    for (n, se) in series.iter().enumerate() {
        let mut d = String::new();
        let mut pen = false;
        for &(x, y) in &se.points {
            if !y.is_finite() {
                pen = false;
                continue;
            }
            let _ = write!(
                d,
                "{}{:.1},{:.1} ",
                if pen { "L" } else { "M" },
                px(x),
                py(y.min(y1))
            );
            pen = true;
        }
        let _ = writeln!(
            s,
            r#"<path d="{}" fill="none" stroke="{}" stroke-width="1.5"/>"#,
            d.trim_end(),
            se.color
        );
        let ly = t + 10.0 + n as f64 * 18.0;
        let _ = writeln!(
            s,
            r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
            w - r + 10.0,
            w - r + 30.0,
            se.color,
            w - r + 36.0,
            ly + 4.0,
            esc(se.name)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// A `w` x `h` SVG document on white with `title` centred on `title_x`,
/// left open for the chart's elements and the closing tag.
pub(crate) fn open(w: f64, h: f64, title_x: f64, title: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{title_x}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
        esc(title)
    );
    s
}

/// The x and y axes of a `w` x `h` chart whose plot area has margins
/// `l`, `r`, `t`, `b`.
pub(crate) fn axes(s: &mut String, (w, h): (f64, f64), (l, r, t, b): (f64, f64, f64, f64)) {
    let _ = writeln!(
        s,
        r#"<line x1="{l}" y1="{}" x2="{}" y2="{}" stroke="black"/><line x1="{l}" y1="{t}" x2="{l}" y2="{}" stroke="black"/>"#,
        h - b,
        w - r,
        h - b,
        h - b
    );
}

/// The smallest of 1, 2, 5 times a power of ten that is >= v.
fn nice(v: f64) -> f64 {
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|&c| c >= v)
        .unwrap_or(10.0 * p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_has_one_path_per_series_and_escapes_text() {
        let svg = line_chart(
            "a < b",
            "x",
            "y",
            &[
                Series {
                    name: "one",
                    color: "red",
                    points: vec![(0.0, 1.0), (1.0, 3.0)],
                },
                Series {
                    name: "two",
                    color: "blue",
                    points: vec![(0.0, 2.0), (1.0, f64::NAN), (2.0, 1.0)],
                },
            ],
        );
        assert_eq!(svg.matches("<path").count(), 2);
        assert!(svg.contains("a &lt; b"));
        assert!(svg.contains("M") && svg.ends_with("</svg>\n"));
    }

    #[test]
    fn nice_rounds_up() {
        assert_eq!(nice(3.0), 5.0);
        assert_eq!(nice(120.0), 200.0);
        assert_eq!(nice(10.0), 10.0);
    }
}
