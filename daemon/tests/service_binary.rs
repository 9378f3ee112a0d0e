//! The real `camdnnd serve` binary end to end on the shipped simulated-RB5
//! config (sim engines: no model files needed): Rust and Python clients,
//! /metrics and /health, SIGHUP with a good and a bad config, SIGTERM with
//! frames in flight, and an overload run with bounded memory.

mod daemon_common;

use std::collections::{BTreeMap, HashSet};
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use camdnn_protocol::{
    BBox, ClassRef, Client, ClientError, DropReason, Frame, PixelFormat, ServerMessage,
    UpstreamDetection,
};
use daemon_common::{config_text, proc_status_kib, repo, Daemon};

/// Peak resident memory the daemon may reach in the overload test, MiB.
const RSS_BOUND_MIB: u64 = 512;

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

#[derive(Debug, Default)]
struct Tally {
    results: u64,
    dropped: BTreeMap<&'static str, u64>,
}

impl Tally {
    fn add(&mut self, m: &ServerMessage) {
        match m {
            ServerMessage::Result(r) => {
                self.results += 1;
                assert_eq!(r.objects.len(), 2, "both upstream objects classified");
            }
            ServerMessage::Dropped(d) => {
                *self
                    .dropped
                    .entry(camdnn_daemon::telemetry::drop_label(d.reason))
                    .or_default() += 1
            }
            other => panic!("unexpected answer {other:?}"),
        }
    }
    fn total(&self) -> u64 {
        self.results + self.dropped.values().sum::<u64>()
    }
}

/// Checks /metrics against what clients saw (the daemon's whole life).
fn assert_counters(d: &Daemon, sent: u64, t: &Tally) {
    assert_eq!(d.metric("camdnn_frames_received_total"), sent as f64);
    assert_eq!(
        d.metric("camdnn_frames_total{outcome=\"completed\"}"),
        t.results as f64
    );
    for r in DropReason::ALL {
        let label = camdnn_daemon::telemetry::drop_label(r);
        assert_eq!(
            d.metric(&format!(
                "camdnn_frames_dropped_total{{reason=\"{label}\"}}"
            )),
            t.dropped.get(label).copied().unwrap_or(0) as f64,
            "dropped {label}"
        );
    }
    assert_eq!(d.metric("camdnn_frames_total{outcome=\"rejected\"}"), 0.0);
}

const PYTHON_CLIENT: &str = r#"
import json, sys
sys.path.insert(0, sys.argv[2])
from camdnn_client import Client
counts = {"result": 0, "dropped": 0, "objects": 0}
with Client(sys.argv[1], "python-e2e", timeout=60) as c:
    assert c.welcome["version"] == 3
    for seq in range(20):
        c.send_frame(stream_id=40, seq=seq, capture_ts_us=0, width=32, height=32,
                     pixel_format="rgb24", payload=bytes(32 * 32 * 3),
                     detections=[{"bbox": (0, 0, 8, 8), "class": "bicycle", "score": 0.8}])
    for a in c.bye():
        counts[a["type"]] += 1
        if a["type"] == "result":
            counts["objects"] += len(a["objects"])
print(json.dumps(counts))
"#;

#[test]
fn real_binary_serves_rust_and_python_clients_reloads_and_drains() {
    let mut d = Daemon::start();
    assert_eq!(d.get("/health/live").map(|x| x.0), Some(200));
    assert_eq!(d.get("/nope").map(|x| x.0), Some(404));
    let mut tally = Tally::default();
    let mut sent = 0u64;

    // Rust client: 2 streams, pipelined within the window.
    let mut c = Client::connect(&d.socket, "rust-e2e").expect("connect");
    for seq in 0..25 {
        for s in 0..2 {
            c.send_frame(&frame(s, seq)).expect("send");
            sent += 1;
        }
    }
    let answers = c.bye().expect("bye");
    let keys: HashSet<_> = answers
        .iter()
        .map(|m| match m {
            ServerMessage::Result(r) => (r.stream_id, r.seq),
            ServerMessage::Dropped(x) => (x.stream_id, x.seq),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(keys.len(), 50, "every frame answered exactly once");
    answers.iter().for_each(|m| tally.add(m));
    assert!(tally.results >= 2, "results come back: {tally:?}");

    // Python client.
    let out = Command::new("python3")
        .args(["-c", PYTHON_CLIENT])
        .arg(&d.socket)
        .arg(repo().join("clients/python"))
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "python client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let py: serde_json::Value = serde_json::from_slice(&out.stdout).expect("python output");
    let (py_res, py_drop) = (
        py["result"].as_u64().unwrap(),
        py["dropped"].as_u64().unwrap(),
    );
    assert_eq!(py_res + py_drop, 20);
    assert!(py_res >= 1);
    assert_eq!(
        py["objects"].as_u64().unwrap(),
        py_res,
        "one bicycle per result"
    );
    sent += 20;
    tally.results += py_res;
    // The Python tally only knows how many were dropped; with one stream
    // pipelined within the window the only reason is superseded.
    if py_drop > 0 {
        *tally.dropped.entry("superseded").or_default() += py_drop;
    }
    // `camdnnd feed` replaying a scene trace: one JSON line per frame.
    let trace = d.dir.path().join("scenes.txt");
    std::fs::write(&trace, "6 1 1 0\n6 0 0 1\n").expect("trace");
    let lines = feed(&d, &["--stream", "30", "--trace", trace.to_str().unwrap()]);
    assert_eq!(lines.len(), 12, "one line per frame");
    tally_lines(&lines, &mut tally, |n| n == 1 || n == 2);
    sent += 12;
    // ... and a video (decoded by ffmpeg; scripts/setup.sh installs it).
    let video = d.dir.path().join("clip.avi");
    let made = Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-f",
            "lavfi",
            "-i",
            "testsrc=size=160x120:rate=10",
        ])
        .args(["-t", "1", "-c:v", "mjpeg"])
        .arg(&video)
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        made,
        "ffmpeg could not make a test video: is ffmpeg installed? run scripts/setup.sh"
    );
    {
        let lines = feed(&d, &["--stream", "31", "--video", video.to_str().unwrap()]);
        assert_eq!(lines.len(), 10, "one line per video frame");
        // Without upstream detections the detector runs; on zero sim outputs it finds nothing.
        tally_lines(&lines, &mut tally, |n| n == 0);
        sent += 10;
        // A folder of images: JPEG files (sent as JPEG) and a PPM (sent as RGB24).
        let images = d.dir.path().join("images");
        std::fs::create_dir(&images).expect("image folder");
        for (pattern, n) in [("f%03d.jpg", "3"), ("g%03d.ppm", "1")] {
            let ok = Command::new("ffmpeg")
                .args(["-v", "error", "-i"])
                .arg(&video)
                .args(["-frames:v", n])
                .arg(images.join(pattern))
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "ffmpeg extracting {pattern}");
        }
        let lines = feed(
            &d,
            &["--stream", "32", "--images", images.to_str().unwrap()],
        );
        assert_eq!(lines.len(), 4, "one line per image");
        tally_lines(&lines, &mut tally, |n| n == 0);
        sent += 4;
    }
    assert_counters(&d, sent, &tally);
    dashboard_metrics_exist(&d);

    // SIGHUP with a bad config: kept, reported, still serving.
    let good = std::fs::read_to_string(&d.config).expect("config");
    std::fs::write(&d.config, format!("{good}\n[bogus]\nx = 1\n")).expect("write");
    d.signal(libc::SIGHUP);
    d.wait_for(|| d.metric("camdnn_config_reloads_total{result=\"error\"}") == 1.0);
    assert_eq!(d.metric("camdnn_config_reloads_total{result=\"ok\"}"), 0.0);
    // SIGHUP with a good config (a different batcher wait time) while a
    // client streams: the switch drops no frame (only newest-wins supersedes).
    std::fs::write(&d.config, config_text(&d.socket, &d.metrics, 3.0)).expect("write");
    let socket = d.socket.clone();
    let streaming = std::thread::spawn(move || {
        let mut c = Client::connect(&socket, "during-reload").expect("connect");
        for seq in 0..150 {
            c.send_frame(&frame(20, seq)).expect("send");
            std::thread::sleep(Duration::from_millis(10));
        }
        c.bye().expect("bye")
    });
    std::thread::sleep(Duration::from_millis(100));
    d.signal(libc::SIGHUP);
    d.wait_for(|| d.metric("camdnn_config_reloads_total{result=\"ok\"}") == 1.0);
    let answers = streaming.join().expect("streaming client");
    assert_eq!(answers.len(), 150);
    for m in &answers {
        tally.add(m);
        if let ServerMessage::Dropped(x) = m {
            assert_eq!(x.reason, DropReason::Superseded, "{m:?}");
        }
    }
    sent += 150;
    assert!(d.log().contains("config reload failed"), "{}", d.log());
    let mut c = Client::connect(&d.socket, "after-reload").expect("connect");
    c.send_frame(&frame(7, 0)).expect("send");
    let m = c.recv().expect("answer");
    tally.add(&m);
    sent += 1;
    assert!(matches!(m, ServerMessage::Result(_)), "{m:?}");

    // SIGTERM with frames in flight: every frame answered, exit 0.
    let mut c = Client::connect(&d.socket, "drain").expect("connect");
    let window = u64::from(c.welcome().window);
    for s in 10..14 {
        for seq in 0..window {
            c.send_frame(&frame(s, seq)).expect("send");
            sent += 1;
        }
    }
    d.signal(libc::SIGTERM);
    let mut answered = 0;
    loop {
        match c.recv() {
            Ok(m) => {
                tally.add(&m);
                answered += 1;
            }
            Err(ClientError::Closed) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(answered, 4 * window, "every frame in flight answered");
    assert_eq!(d.wait_exit(), 0, "clean exit:\n{}", d.log());
    assert!(!d.socket.exists(), "socket file removed");
    assert_eq!(tally.total(), sent);
}

#[test]
fn overload_is_answered_frame_for_frame_with_bounded_memory() {
    let d = Daemon::start();
    // 6 clients x 2 streams of 640x480 frames, each as fast as its window
    // allows, for 3 s: far above the simulated board's capacity.
    let big = |s: u32, seq: u64| {
        let mut f = frame(s, seq);
        f.width = 640;
        f.height = 480;
        f.payload = Bytes::from(vec![90u8; 640 * 480 * 3]);
        f
    };
    let stop = Instant::now() + Duration::from_secs(3);
    let threads: Vec<_> = (0..6u32)
        .map(|i| {
            let socket = d.socket.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(&socket, &format!("load{i}")).expect("connect");
                let mut sent = 0u64;
                let mut seq = 0;
                while Instant::now() < stop {
                    for s in [2 * i, 2 * i + 1] {
                        c.send_frame(&big(s, seq)).expect("send");
                        sent += 1;
                    }
                    seq += 1;
                }
                let answers = c.bye().expect("bye");
                (sent, answers)
            })
        })
        .collect();
    let mut tally = Tally::default();
    let mut sent = 0;
    for t in threads {
        let (n, answers) = t.join().expect("client");
        assert_eq!(answers.len() as u64, n, "every frame answered");
        sent += n;
        answers.iter().for_each(|m| tally.add(m));
    }
    assert!(
        tally.dropped.get("superseded").copied().unwrap_or(0) > tally.results,
        "overloaded: most frames superseded ({tally:?}, sent {sent})"
    );
    assert_counters(&d, sent, &tally);
    let peak_mib = proc_status_kib(d.child.id(), "VmHWM") / 1024;
    eprintln!("overload: sent {sent}, {tally:?}, peak RSS {peak_mib} MiB");
    assert!(
        peak_mib < RSS_BOUND_MIB,
        "peak RSS {peak_mib} MiB over the {RSS_BOUND_MIB} MiB bound"
    );
}

/// Every metric the Grafana dashboard queries is exported (after traffic).
/// Those the pipeline records when residency changes (global step every
/// `epoch_ms` = 5 s, model loads, resident models) may not exist yet.
fn dashboard_metrics_exist(d: &Daemon) {
    let dash =
        std::fs::read_to_string(repo().join("config/grafana/camdnn.json")).expect("dashboard");
    let (_, body) = d.get("/metrics").expect("metrics");
    let exported: HashSet<&str> = body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let mut missing = Vec::new();
    for (i, _) in dash.match_indices("camdnn_") {
        let name: String = dash[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let later = [
            "camdnn_global_step",
            "camdnn_model_load",
            "camdnn_resident_models",
        ];
        if name == "camdnn_" || later.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(&name);
        let found = exported.contains(name.as_str())
            || ["_bucket", "_sum", "_count"]
                .iter()
                .any(|s| exported.contains(format!("{base}{s}").as_str()));
        if !found {
            missing.push(name);
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "dashboard metrics not exported: {missing:?}"
    );
}

/// Runs `camdnnd feed` against the daemon; its JSON lines.
fn feed(d: &Daemon, args: &[&str]) -> Vec<serde_json::Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_camdnnd"))
        .args(["feed", "--fps", "50", "--width", "64", "--height", "48"])
        .arg("--socket")
        .arg(&d.socket)
        .args(args)
        .output()
        .expect("run feed");
    assert!(
        out.status.success(),
        "feed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

/// Adds feed's JSON lines to `tally`; results must have an object count `ok_objects` accepts.
fn tally_lines(lines: &[serde_json::Value], tally: &mut Tally, ok_objects: impl Fn(usize) -> bool) {
    for v in lines {
        match v["type"].as_str() {
            Some("result") => {
                tally.results += 1;
                let n = v["objects"].as_array().expect("objects").len();
                assert!(ok_objects(n), "unexpected object count: {v}");
            }
            Some("dropped") => {
                let r = v["reason"].as_str().expect("reason");
                let label = DropReason::ALL
                    .into_iter()
                    .map(camdnn_daemon::telemetry::drop_label)
                    .find(|l| *l == r)
                    .expect("known reason");
                *tally.dropped.entry(label).or_default() += 1;
            }
            other => panic!("unexpected line type {other:?}: {v}"),
        }
    }
}

/// How often `needle` occurs in `hay`.
fn occurrences(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// The "needs restart" warnings compare with the config running (a second
/// reload of the same change names it again while it is not in effect) and
/// follow applied reloads only (none for a reload that failed).
#[test]
fn restart_warnings_compare_with_the_running_config_and_follow_applied_reloads_only() {
    let d = Daemon::start();
    let warning = "[server] window changed: takes effect at the next restart";
    let good = std::fs::read_to_string(&d.config).expect("config");
    let wider = good.replacen("[server]\n", "[server]\nwindow = 8\n", 1);
    assert_ne!(wider, good);
    // Parses, but its pipeline cannot be built (no such scheduler).
    let broken = wider.replacen(
        "[pipeline]\n",
        "[pipeline]\nscheduler = \"no-such-scheduler\"\n",
        1,
    );
    std::fs::write(&d.config, &broken).expect("write");
    d.signal(libc::SIGHUP);
    d.wait_for(|| d.metric("camdnn_config_reloads_total{result=\"error\"}") == 1.0);
    assert_eq!(occurrences(&d.log(), warning), 0, "{}", d.log());

    std::fs::write(&d.config, &wider).expect("write");
    for applied in 1..=2 {
        d.signal(libc::SIGHUP);
        d.wait_for(|| d.metric("camdnn_config_reloads_total{result=\"ok\"}") == f64::from(applied));
        assert_eq!(
            occurrences(&d.log(), warning),
            applied as usize,
            "the running window is still 4 at reload {applied}:\n{}",
            d.log()
        );
    }
}

/// Chaos: under steady load from two clients, an engine panics
/// (its worker restarts and reloads its models), the reload of the model
/// that panicked fails five times (the pair is out of service with
/// backed-off retries and /health/ready says why), a SIGHUP changes the
/// models, and the socket's folder did not exist at start. Every frame is
/// answered and counted, and the daemon is ready again.
#[test]
fn chaos_every_frame_is_answered_and_counted_and_the_daemon_recovers() {
    let faults = "sim_faults = { panic_on_runs = [30], fail_loads = [2, 3, 4, 5, 6] }";
    let d = Daemon::start_with("missing/run/camdnnd.sock", |socket, metrics| {
        config_text(socket, metrics, 5.0).replacen(
            "name = \"inception_v1\"\n",
            &format!("name = \"inception_v1\"\n{faults}\n"),
            1,
        )
    });
    assert!(
        std::fs::read_to_string(&d.config)
            .unwrap()
            .contains("sim_faults"),
        "the faults are in the config"
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..2u32)
        .map(|stream| {
            let (socket, stop) = (d.socket.clone(), std::sync::Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut c = Client::connect(&socket, "chaos").expect("connect");
                let mut sent = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    c.send_frame(&frame(stream, sent)).expect("send");
                    sent += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                (sent, c.bye().expect("bye"))
            })
        })
        .collect();

    // The panic, then the model out of service with a reason.
    d.wait_for(|| d.metric_sum("camdnn_engine_panics_total") >= 1.0);
    d.wait_for(|| {
        d.get("/health/ready")
            .is_some_and(|(s, body)| s == 503 && body.contains("out of service"))
    });
    // Recovery: the sixth retry loads it; ready again.
    d.wait_for(|| {
        d.metric_sum("camdnn_model_load_failures_total") >= 5.0
            && d.metric_sum("camdnn_model_unavailable") == 0.0
            && d.get("/health/ready").is_some_and(|(s, _)| s == 200)
    });
    // A reload that changes the models (no faults, five classes per classifier).
    let text = std::fs::read_to_string(&d.config).expect("config");
    let changed = text
        .replace(&format!("{faults}\n"), "")
        .replace("kind = \"topk\", k = 3", "kind = \"topk\", k = 5");
    assert_ne!(changed, text);
    std::fs::write(&d.config, changed).expect("write");
    d.signal(libc::SIGHUP);
    d.wait_for(|| d.metric("camdnn_config_reloads_total{result=\"ok\"}") == 1.0);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);

    let mut tally = Tally::default();
    let mut sent = 0;
    for c in clients {
        let (n, answers) = c.join().expect("client");
        assert_eq!(answers.len() as u64, n, "one answer per frame");
        for m in &answers {
            tally.add(m);
        }
        sent += n;
    }
    assert!(tally.results > 0, "{tally:?}");
    assert_counters(&d, sent, &tally);
    assert_eq!(
        d.get("/health/ready").map(|x| x.0),
        Some(200),
        "ready again"
    );
    let log = d.log();
    assert!(log.contains("engine panicked"), "{log}");
    assert!(log.contains("model load failed; retrying later"), "{log}");
}
