//! Both clients reconnect after the daemon restarts (opt-in): `camdnnd feed
//! --reconnect` and the Python `ReconnectingClient` keep sending across a
//! kill -9 and a restart of the real binary; every frame they sent is
//! answered or reported lost with its connection, and each reconnected.

mod daemon_common;

use std::process::{Command, Stdio};

use daemon_common::{repo, Daemon};

const PYTHON_CLIENT: &str = r#"
import json, sys, time
sys.path.insert(0, sys.argv[2])
from camdnn_client import ReconnectingClient
counts = {"result": 0, "dropped": 0, "rejected": 0, "error": 0, "lost": 0}
with ReconnectingClient(sys.argv[1], "python-reconnect", timeout=60) as c:
    for seq in range(100):
        c.send_frame(stream_id=9, seq=seq, capture_ts_us=0, width=32, height=32,
                     pixel_format="rgb24", payload=bytes(32 * 32 * 3),
                     detections=[{"bbox": (0, 0, 8, 8), "class": "car", "score": 0.8}])
        while c.in_flight(9) > 0:
            counts[c.recv()["type"]] += 1
        time.sleep(0.05)
    for a in c.bye():
        counts[a["type"]] += 1
    counts["reconnects"] = c.reconnects
print(json.dumps(counts))
"#;

#[test]
fn both_clients_reconnect_after_the_daemon_restarts() {
    let mut d = Daemon::start();
    let feed = Command::new(env!("CARGO_BIN_EXE_camdnnd"))
        .args([
            "feed",
            "--synthetic",
            "100",
            "--fps",
            "20",
            "--quiet",
            "--reconnect",
        ])
        .arg("--socket")
        .arg(&d.socket)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("camdnnd feed");
    let python = Command::new("python3")
        .args(["-c", PYTHON_CLIENT])
        .arg(&d.socket)
        .arg(repo().join("clients/python"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    // Both clients connected and frames flowing before the restart.
    d.wait_for(|| {
        d.metric("camdnn_connections_open") >= 2.0
            && d.metric("camdnn_frames_received_total") >= 20.0
    });
    d.restart();
    d.wait_ready();

    let out = feed.wait_with_output().expect("feed");
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "feed failed: {summary}");
    let line = summary.lines().last().expect("a summary line");
    let s: serde_json::Value = serde_json::from_str(line).expect("summary JSON");
    let count = |v: &serde_json::Value| -> u64 {
        v.as_u64().unwrap_or_else(|| {
            v.as_object()
                .map_or(0, |o| o.values().filter_map(|x| x.as_u64()).sum())
        })
    };
    assert_eq!(s["sent"], 100, "{summary}");
    assert_eq!(
        count(&s["results"]) + count(&s["dropped"]) + count(&s["rejected"]) + count(&s["lost"]),
        100,
        "every frame answered or lost: {summary}"
    );
    assert!(count(&s["reconnects"]) >= 1, "{summary}");

    let out = python.wait_with_output().expect("python");
    assert!(
        out.status.success(),
        "python client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).expect("python output");
    let answered: u64 = ["result", "dropped", "rejected", "lost"]
        .iter()
        .map(|k| count(&p[k]))
        .sum();
    assert_eq!(answered, 100, "{p}");
    assert!(count(&p["reconnects"]) >= 1, "{p}");
}
