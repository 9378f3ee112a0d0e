//! The Grafana dashboard's batch-size p50 reads the batch size: its exact
//! expression, evaluated by `promtool test rules` on buckets as the daemon
//! exports them (`COUNT_BUCKETS`), gives 1 when every batch is 1 (it read
//! 0.5: interpolation inside the lowest bucket), 3 when every batch is 3,
//! and 1, the lower median, when batches of 1 and 3 come half and half.

use std::path::{Path, PathBuf};
use std::process::Command;

use camdnn_daemon::telemetry::COUNT_BUCKETS;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A tool of Debian's `prometheus` package, or a failure saying how to get it.
fn promtool() -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("promtool"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("promtool not found on PATH: run scripts/setup.sh (Debian package prometheus)")
        })
}

/// The dashboard's expression of the panel titled `title`.
fn panel_expr(title: &str) -> String {
    let text =
        std::fs::read_to_string(repo().join("config/grafana/camdnn.json")).expect("dashboard");
    let dash: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    fn find(v: &serde_json::Value, title: &str) -> Option<String> {
        match v {
            serde_json::Value::Object(o) => {
                if o.get("title").and_then(|t| t.as_str()) == Some(title) {
                    return o["targets"][0]["expr"].as_str().map(str::to_owned);
                }
                o.values().find_map(|x| find(x, title))
            }
            serde_json::Value::Array(a) => a.iter().find_map(|x| find(x, title)),
            _ => None,
        }
    }
    find(&dash, title).unwrap_or_else(|| panic!("no panel {title:?}"))
}

/// Input series of `model`: `sizes` holds (batch size, batches per minute).
fn buckets(model: &str, sizes: &[(f64, u64)]) -> String {
    let les = COUNT_BUCKETS
        .iter()
        .map(|b| b.to_string())
        .chain(std::iter::once("+Inf".to_owned()));
    les.map(|le| {
        let bound: f64 = le.parse().unwrap_or(f64::INFINITY);
        let per_min: u64 = sizes
            .iter()
            .filter(|(size, _)| *size <= bound)
            .map(|(_, n)| n)
            .sum();
        format!(
            "      - series: 'camdnn_batch_size_bucket{{model=\"{model}\",processor=\"cpu\",le=\"{le}\"}}'\n        values: '0+{per_min}x20'\n"
        )
    })
    .collect()
}

#[test]
fn the_batch_size_p50_reads_whole_batch_sizes() {
    let expr = panel_expr("Batch size p50 by model")
        .replace("$board", ".*")
        .replace("$instance", ".*")
        .replace("$__rate_interval", "5m");
    let test = format!(
        "rule_files: []\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{}{}{}    promql_expr_test:\n      - expr: '{}'\n        eval_time: 10m\n        exp_samples:\n          - labels: '{{model=\"ones\"}}'\n            value: 1\n          - labels: '{{model=\"threes\"}}'\n            value: 3\n          - labels: '{{model=\"mixed\"}}'\n            value: 1\n",
        buckets("ones", &[(1.0, 60)]),
        buckets("threes", &[(3.0, 60)]),
        buckets("mixed", &[(1.0, 30), (3.0, 30)]),
        expr.replace('\'', "''"),
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("batch_size.test.yml");
    std::fs::write(&file, test).expect("write");
    let out = Command::new(promtool())
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .expect("run promtool");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
