//! camdnnd's metrics as a Prometheus user meets them, checked with the real
//! tools of Debian's `prometheus` package (installed by scripts/setup.sh):
//! `promtool check metrics` on a live daemon's /metrics, a real Prometheus
//! scraping a running daemon and agreeing with what a client sent, the
//! shipped rules (`promtool check rules` and `promtool test rules`) and
//! configs, and the Grafana dashboard's expressions against both.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use camdnn_daemon::telemetry::{drop_label, FAMILIES};
use camdnn_protocol::{
    BBox, ClassRef, Client, DropReason, Frame, PixelFormat, ServerMessage, UpstreamDetection,
};

/// The board label the test daemon carries (`[metrics] labels`).
const BOARD: &str = "test-board-7";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A tool of Debian's `prometheus` package, or a failure saying how to get it.
fn tool(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("{name} not found on PATH: run scripts/setup.sh (Debian package prometheus)")
        })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// GET `path` from `addr` over HTTP/1.0 (no chunked answers): status, body.
fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, text.split_once("\r\n\r\n")?.1.to_owned()))
}

/// Polls `f` until it returns `Some`, for at most `secs` seconds.
fn wait_for<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A child process killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `camdnnd serve` on the shipped simulated-RB5 config (sim engines),
/// with a socket and metrics port of its own and a fleet label.
struct Daemon {
    _child: Running,
    dir: tempfile::TempDir,
    socket: PathBuf,
    metrics: String,
}

impl Daemon {
    fn start() -> Daemon {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("camdnnd.sock");
        let metrics = format!("127.0.0.1:{}", free_port());
        let config_dir = repo().join("config");
        let text = std::fs::read_to_string(config_dir.join("camdnnd-sim.toml"))
            .expect("config/camdnnd-sim.toml")
            .replace("\"profiles/", &format!("\"{}/profiles/", config_dir.display()))
            .replace("\"policies/", &format!("\"{}/policies/", config_dir.display()))
            .replace(
                "\n[pipeline]\n",
                &format!(
                    "\n[metrics]\nlisten = {metrics:?}\nlabels = {{ board = {BOARD:?} }}\n\n[pipeline]\n"
                ),
            );
        let text: String = text
            .lines()
            .map(|l| match l.starts_with("socket = ") {
                true => format!("socket = {:?}\n", socket.display().to_string()),
                false => format!("{l}\n"),
            })
            .collect();
        // The stem names the config in camdnn_build_info.
        let config = dir.path().join("camdnnd-sim.toml");
        std::fs::write(&config, text).expect("write config");
        let log = std::fs::File::create(dir.path().join("log")).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_camdnnd"))
            .args(["serve", "--config"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start camdnnd");
        Daemon {
            _child: Running(child),
            dir,
            socket,
            metrics,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    fn scrape(&self) -> Option<String> {
        http_get(&self.metrics, "/metrics")
            .filter(|(s, _)| *s == 200)
            .map(|(_, b)| b)
    }

    fn wait_ready(&self) {
        let log = || self.log();
        wait_for(120, "camdnnd ready", || {
            let ready = http_get(&self.metrics, "/health/ready").map(|(s, _)| s) == Some(200);
            (ready && self.socket.exists()).then_some(())
        });
        assert!(!log().contains("ERROR"), "{}", log());
    }
}

/// A 64x48 RGB24 frame carrying one person and one car (skips the detector).
fn frame(stream_id: u32, seq: u64) -> Frame {
    let det = |class: &str, x: f32| UpstreamDetection {
        bbox: BBox {
            x0: x,
            y0: 0.0,
            x1: x + 16.0,
            y1: 16.0,
        },
        class: ClassRef::Name(class.into()),
        score: 0.9,
    };
    Frame {
        stream_id,
        seq,
        capture_ts_us: 0,
        width: 64,
        height: 48,
        pixel_format: PixelFormat::Rgb24,
        priority: None,
        deadline: None,
        detections: Some(vec![det("person", 0.0), det("car", 20.0)]),
        payload: Bytes::from(vec![100u8; 64 * 48 * 3]),
    }
}

/// What the client sent and got back.
#[derive(Debug, Default)]
struct Tally {
    sent: u64,
    results: u64,
    dropped: BTreeMap<&'static str, u64>,
}

impl Tally {
    fn add(&mut self, m: &ServerMessage) {
        match m {
            ServerMessage::Result(_) => self.results += 1,
            ServerMessage::Dropped(d) => {
                *self.dropped.entry(drop_label(d.reason)).or_default() += 1
            }
            other => panic!("unexpected answer {other:?}"),
        }
    }
}

/// Frames one at a time (each answered before the next), then a burst on
/// one stream pipelined within the window (newer frames may supersede
/// waiting ones: drops to count).
fn feed(d: &Daemon) -> Tally {
    let mut t = Tally::default();
    let mut c = Client::connect(&d.socket, "prometheus-test").expect("connect");
    for seq in 0..30 {
        c.send_frame(&frame(1, seq)).expect("send");
        t.sent += 1;
        let m = c.recv().expect("answer");
        t.add(&m);
    }
    for seq in 0..20 {
        c.send_frame(&frame(2, seq)).expect("send");
        t.sent += 1;
    }
    for m in c.bye().expect("bye") {
        t.add(&m);
    }
    assert_eq!(
        t.results + t.dropped.values().sum::<u64>(),
        t.sent,
        "every frame answered once: {t:?}"
    );
    assert!(t.results >= 30, "{t:?}");
    t
}

/// Family names (from `# TYPE`) and sample names of an exposition.
fn families_and_samples(body: &str) -> (BTreeMap<String, String>, BTreeSet<String>) {
    let mut families = BTreeMap::new();
    let mut samples = BTreeSet::new();
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            families.insert(name.to_owned(), kind.to_owned());
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            samples.insert(name.to_owned());
        }
    }
    (families, samples)
}

/// `promtool check metrics` on an exposition: its complaints.
fn promtool_check_metrics(body: &str) -> String {
    let mut child = Command::new(tool("promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(body.as_bytes())
        .expect("write to promtool");
    let out = child.wait_with_output().expect("promtool");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        text
    } else {
        format!("exit {}: {text}", out.status)
    }
}

#[test]
fn live_metrics_pass_promtool_and_every_family_is_there_from_start_up() {
    let d = Daemon::start();
    // The first answer of /metrics: while still loading, camdnn_ready is 0.
    let first = wait_for(60, "first /metrics", || d.scrape());
    let ready_after = http_get(&d.metrics, "/health/ready").map(|(s, _)| s);
    if ready_after == Some(503) {
        assert!(
            first.contains(&format!("camdnn_ready{{board=\"{BOARD}\"}} 0\n")),
            "not ready yet, so camdnn_ready must be 0:\n{first}"
        );
    }
    d.wait_ready();

    // Before any frame: every family of the table, the per-model and
    // per-processor series, and the process metrics.
    let body = d.scrape().expect("metrics");
    let (families, _) = families_and_samples(&body);
    for f in FAMILIES {
        assert!(
            families.contains_key(f.name),
            "{} missing before first use:\n{body}",
            f.name
        );
    }
    for name in [
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_start_time_seconds",
    ] {
        assert!(families.contains_key(name), "{name} missing");
    }
    for series in [
        format!("camdnn_resident_models{{board=\"{BOARD}\",processor=\"gpu\"}}"),
        format!(
            "camdnn_batch_size_count{{board=\"{BOARD}\",model=\"squeezenet\",processor=\"dsp\"}}"
        ),
        format!("camdnn_batch_flushes_total{{board=\"{BOARD}\",reason=\"timer\"}}"),
        format!(
            "camdnn_build_info{{board=\"{BOARD}\",version=\"{}\",config=\"camdnnd-sim\"}} 1",
            env!("CARGO_PKG_VERSION")
        ),
    ] {
        assert!(
            body.lines().any(|l| l.starts_with(&series)),
            "no {series} at start-up:\n{body}"
        );
    }
    let resident: f64 = body
        .lines()
        .filter(|l| l.starts_with("camdnn_resident_models{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(
        resident >= 1.0,
        "the start-up residency is exported:\n{body}"
    );
    assert_eq!(
        promtool_check_metrics(&body),
        "",
        "promtool on a fresh daemon"
    );

    feed(&d);
    let body = d.scrape().expect("metrics");
    assert_eq!(
        promtool_check_metrics(&body),
        "",
        "promtool after traffic:\n{body}"
    );
    let (families, samples) = families_and_samples(&body);
    for (name, kind) in &families {
        assert!(
            body.contains(&format!("# HELP {name} ")),
            "{name} has no HELP: describe it in telemetry::FAMILIES"
        );
        assert_ne!(
            kind, "summary",
            "{name}: summaries cannot be aggregated across boards"
        );
    }
    // Fleet label on every series, and bounded label sets: no series carries
    // a per-frame or per-stream value.
    for line in body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        assert!(
            line.contains(&format!("board=\"{BOARD}\"")),
            "no board label: {line}"
        );
        let labels = line.split_once('{').map_or("", |(_, rest)| rest);
        let labels = labels.split_once('}').map_or(labels, |(l, _)| l);
        assert!(
            !labels.contains("stream") && !labels.contains("seq="),
            "{line}"
        );
    }
    assert!(samples.len() < 400, "{} sample names", samples.len());
}

/// A real Prometheus scraping `target` every second with the shipped rules.
struct Prometheus {
    _child: Running,
    _dir: tempfile::TempDir,
    addr: String,
}

impl Prometheus {
    fn start(target: &str) -> Prometheus {
        let dir = tempfile::tempdir().expect("temp dir");
        let rules = repo().join("config/prometheus/camdnn.rules.yml");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 rule_files:\n  - {:?}\n\
                 scrape_configs:\n  - job_name: camdnn\n    static_configs:\n      - targets: [{target:?}]\n",
                rules.display().to_string()
            ),
        )
        .expect("write prometheus.yml");
        let addr = format!("127.0.0.1:{}", free_port());
        let log = std::fs::File::create(dir.path().join("log")).expect("log");
        let child = Command::new(tool("prometheus"))
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let p = Prometheus {
            _child: Running(child),
            _dir: dir,
            addr,
        };
        wait_for(60, "prometheus ready", || {
            (http_get(&p.addr, "/-/ready").map(|(s, _)| s) == Some(200)).then_some(())
        });
        p
    }

    /// Runs an instant query; the API's JSON answer (status checked).
    fn api(&self, q: &str) -> serde_json::Value {
        let enc: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("query", q)
            .finish();
        let (status, body) =
            http_get(&self.addr, &format!("/api/v1/query?{enc}")).expect("prometheus answers");
        let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(
            (status, v["status"].as_str()),
            (200, Some("success")),
            "{q}: {body}"
        );
        v
    }

    /// The samples of an instant-vector query, by label set.
    fn query(&self, q: &str) -> Vec<(BTreeMap<String, String>, f64)> {
        let v = self.api(q);
        v["data"]["result"]
            .as_array()
            .expect("vector")
            .iter()
            .map(|s| {
                let labels = serde_json::from_value(s["metric"].clone()).expect("labels");
                let value = s["value"][1]
                    .as_str()
                    .expect("value")
                    .parse()
                    .expect("number");
                (labels, value)
            })
            .collect()
    }

    /// The one value of a query that yields one sample.
    fn one(&self, q: &str) -> f64 {
        match self.query(q).as_slice() {
            [(_, v)] => *v,
            other => panic!("{q}: expected one sample, got {other:?}"),
        }
    }
}

#[test]
fn a_real_prometheus_agrees_with_what_the_client_sent() {
    let d = Daemon::start();
    d.wait_ready();
    let p = Prometheus::start(&d.metrics);
    // Scraped, and the counters' first samples are 0 (present from start-up).
    wait_for(60, "first scrape of camdnnd", || {
        let up = p.query("up{job=\"camdnn\"}");
        (up.len() == 1 && up[0].1 == 1.0).then_some(())
    });
    assert_eq!(p.one("camdnn_frames_received_total"), 0.0);
    assert_eq!(p.one("camdnn_ready"), 1.0);
    let t = feed(&d);
    // Wait until a scrape after the last answer has landed.
    std::thread::sleep(Duration::from_millis(1500));
    wait_for(30, "prometheus has the last counts", || {
        (p.one("sum(camdnn_frames_total)") == t.sent as f64).then_some(())
    });
    let sent = t.sent as f64;
    let results = t.results as f64;
    assert_eq!(p.one("camdnn_frames_received_total"), sent);
    assert_eq!(p.one("camdnn_frames_total{outcome=\"completed\"}"), results);
    for r in DropReason::ALL {
        let label = drop_label(r);
        assert_eq!(
            p.one(&format!(
                "camdnn_frames_dropped_total{{reason=\"{label}\"}}"
            )),
            t.dropped.get(label).copied().unwrap_or(0) as f64,
            "dropped {label}"
        );
    }
    // Histograms: one latency observation per result; one person and one
    // car classified per result, in batches.
    assert_eq!(p.one("camdnn_frame_latency_seconds_count"), results);
    assert_eq!(
        p.one("camdnn_frame_latency_seconds_bucket{le=\"+Inf\"}"),
        results
    );
    for model in ["inception_v1", "squeezenet"] {
        assert_eq!(
            p.one(&format!("sum(camdnn_batch_size_sum{{model=\"{model}\"}})")),
            results,
            "{model} requests"
        );
    }
    // Rates over the daemon's whole life: the counters' first sample is 0,
    // so Prometheus extrapolates only past the last scrape, by at most 1.1
    // average scrape intervals: increase <= sent * (1 + 1.1 / (samples - 1)).
    let samples = p.one("count_over_time(camdnn_frames_received_total[10m])");
    assert!(samples >= 3.0, "{samples} scrapes");
    let slack = 1.0 + 1.1 / (samples - 1.0);
    for (q, want) in [
        ("increase(camdnn_frames_received_total[10m])", sent),
        ("increase(camdnn_frame_latency_seconds_count[10m])", results),
        ("sum(increase(camdnn_frames_total[10m]))", sent),
    ] {
        let got = p.one(q);
        assert!(
            got >= want - 1e-9 && got <= want * slack + 1e-9,
            "{q} = {got}, sent {want} (slack {slack})"
        );
    }
    // The shipped recording rules evaluate on the live series.
    wait_for(30, "recording rules evaluated", || {
        (p.query("instance:camdnn_frames_received:rate5m").len() == 1).then_some(())
    });
    assert!(p.one("instance:camdnn_frame_latency_seconds:p99_5m") > 0.0);
    let busy = p.query("processor:camdnn_busy:ratio_rate5m");
    assert_eq!(busy.len(), 3, "one busy share per processor: {busy:?}");
    assert!(
        busy.iter().all(|(_, v)| (0.0..=1.0).contains(v)),
        "{busy:?}"
    );
    // Every dashboard expression parses and runs in this Prometheus.
    for expr in dashboard_exprs() {
        let q = expr
            .replace("$__rate_interval", "1m")
            .replace("$board", ".*")
            .replace("$instance", ".*");
        p.api(&q);
    }
}

/// Every PromQL expression of the Grafana dashboard (panel targets and
/// template variable queries).
fn dashboard_exprs() -> Vec<String> {
    let text =
        std::fs::read_to_string(repo().join("config/grafana/camdnn.json")).expect("dashboard");
    let dash: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
    let mut exprs = Vec::new();
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(e) = m.get("expr").and_then(|e| e.as_str()) {
                    out.push(e.to_owned());
                }
                m.values().for_each(|x| walk(x, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(&dash["panels"], &mut exprs);
    for var in dash["templating"]["list"].as_array().expect("variables") {
        if let Some(q) = var["query"]
            .as_str()
            .and_then(|q| q.strip_prefix("label_values("))
        {
            // label_values(SELECTOR, label): the selector is an expression.
            let selector = q.rsplit_once(',').expect("label_values(sel, label)").0;
            exprs.push(selector.to_owned());
        }
    }
    assert!(exprs.len() > 30, "{} expressions found", exprs.len());
    exprs
}

/// The metric names an expression reads: the identifiers left once strings,
/// label matchers, ranges and grouping clauses (`by (...)`, `on (...)`,
/// ...) are taken out, that are neither calls nor operators.
fn metric_names(expr: &str) -> Vec<String> {
    // 1. Drop strings, `{...}` and `[...]`.
    let mut s = String::new();
    let (mut depth, mut in_str) = (0, false);
    for c in expr.chars() {
        match c {
            '"' => in_str = !in_str,
            _ if in_str => {}
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth -= 1;
                s.push(' ');
            }
            _ if depth > 0 => {}
            _ => s.push(c),
        }
    }
    // 2. Split into identifiers and the rest, then drop grouping clauses,
    //    calls (an identifier before '('), operators and numbers.
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':' || c == '.' || c == '$';
    let mut tokens: Vec<String> = Vec::new();
    for c in s.chars() {
        match tokens.last_mut() {
            Some(t) if ident(c) && t.chars().all(ident) => t.push(c),
            _ if c.is_whitespace() => tokens.push(String::new()),
            _ => tokens.push(c.to_string()),
        }
    }
    tokens.retain(|t| !t.is_empty());
    let grouping = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    // Operators and aggregations (`sum by (le) (...)` puts `by` before '(').
    let operators = [
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "sum",
        "min",
        "max",
        "avg",
        "count",
        "group",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
    ];
    let mut names = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].as_str();
        let next = tokens.get(i + 1).map(String::as_str);
        if grouping.contains(&t) && next == Some("(") {
            i = tokens[i..]
                .iter()
                .position(|x| x == ")")
                .map_or(tokens.len(), |p| i + p + 1);
            continue;
        }
        let first = t.chars().next().unwrap_or('0');
        let is_name = t.chars().all(ident) && (first.is_ascii_alphabetic() || first == '_');
        if is_name && next != Some("(") && !operators.contains(&t) {
            names.push(t.to_owned());
        }
        i += 1;
    }
    names
}

#[test]
fn metric_names_are_read_out_of_promql() {
    let names = metric_names(
        "histogram_quantile(0.99, sum by (le, board) (rate(camdnn_frame_latency_seconds_bucket{board=~\"$board\",x=\"a b\"}[$__rate_interval]))) / on (instance) group_left (version) camdnn_build_info > 0.5",
    );
    assert_eq!(
        names,
        ["camdnn_frame_latency_seconds_bucket", "camdnn_build_info"]
    );
    assert_eq!(
        metric_names("sum(rate(process_cpu_seconds_total[5m])) or vector(0)"),
        ["process_cpu_seconds_total"]
    );
}

#[test]
fn the_dashboard_queries_only_metrics_the_daemon_exports() {
    let d = Daemon::start();
    d.wait_ready();
    // Before traffic: a dashboard opened on a fresh daemon finds every series.
    let body = d.scrape().expect("metrics");
    let (_, exported) = families_and_samples(&body);
    let mut missing = BTreeSet::new();
    let mut used = BTreeSet::new();
    for expr in dashboard_exprs() {
        for name in metric_names(&expr) {
            if !exported.contains(&name) {
                missing.insert(name.clone());
            }
            used.insert(name);
        }
    }
    assert!(
        missing.is_empty(),
        "the dashboard queries metrics camdnnd does not export: {missing:?}"
    );
    // What the dashboard must show: busy share, per-stage latency, batch
    // flushes and the rest of the operator's view.
    for needed in [
        "camdnn_processor_busy_seconds_sum",
        "camdnn_frame_stage_seconds_sum",
        "camdnn_batch_flushes_total",
        "camdnn_model_loads_total",
        "camdnn_frames_dropped_total",
        "camdnn_global_step_reallocations_total",
        "camdnn_batch_size_count",
        "process_resident_memory_bytes",
    ] {
        assert!(
            used.contains(needed),
            "the dashboard does not show {needed}"
        );
    }
    let text =
        std::fs::read_to_string(repo().join("config/grafana/camdnn.json")).expect("dashboard");
    let dash: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let panels = dash["panels"].as_array().expect("panels");
    assert!(
        panels
            .iter()
            .any(|p| p["type"] == "row" && p["repeat"] == "board"),
        "a row repeated per board (fleet view)"
    );
}

#[test]
fn shipped_rules_and_configs_pass_promtool() {
    let dir = repo().join("config/prometheus");
    let run = |args: &[&str]| {
        let out = Command::new(tool("promtool"))
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("run promtool");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "promtool {args:?}:\n{text}");
        text
    };
    let checked = run(&["check", "rules", "camdnn.rules.yml"]);
    assert!(checked.contains("SUCCESS: 12 rules found"), "{checked}");
    let tested = run(&["test", "rules", "camdnn.rules.test.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
    for config in ["prometheus.yml", "federation.yml"] {
        run(&["check", "config", config]);
    }
    // Every alert the issue asks for is there.
    let rules = std::fs::read_to_string(dir.join("camdnn.rules.yml")).expect("rules");
    for alert in [
        "CamdnnFramesDropped",
        "CamdnnLatencyP99High",
        "CamdnnProcessorOffProfile",
        "CamdnnReloadFailed",
        "CamdnnNotReady",
    ] {
        assert!(rules.contains(&format!("alert: {alert}\n")), "{alert}");
    }
}
