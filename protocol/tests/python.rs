//! The Python client (clients/python): its unit tests over the shared golden vectors, and a live
//! session against a Rust server on a real Unix socket. Requires `python3`.

mod common;

use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::Command;
use std::thread;

use camdnn_protocol::*;
use common::peer::{answer, frame, Peer};
use common::{golden_dir, MAX};

fn python_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../clients/python")
}

/// Runs `python3` with `args` in clients/python; fails clearly if python3 is missing.
fn python3(args: &[&str]) -> std::process::Output {
    Command::new("python3")
        .args(args)
        .current_dir(python_dir())
        .env("CAMDNN_GOLDEN_DIR", golden_dir())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap_or_else(|e| {
            panic!("these tests need `python3` on PATH to test clients/python (could not run it: {e}); install Python 3")
        })
}

#[test]
fn python_unit_tests_pass_on_the_shared_golden_vectors() {
    let out = python3(&["-m", "unittest", "-v", "test_codec"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "python unittest failed:\n{stderr}");
    // Guard against an empty run passing silently.
    assert!(
        stderr.contains("Ran 14 tests"),
        "unexpected unittest output:\n{stderr}"
    );
}

#[test]
fn python_client_talks_to_a_rust_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("camdnnd.sock");
    let listener = UnixListener::bind(&path).expect("bind");
    const WINDOW: u16 = 2;
    const FRAMES: u64 = 7;
    let server = thread::spawn(move || {
        let (s, _) = listener.accept().expect("accept");
        let mut peer = Peer::new(s);
        let hello = peer.accept(WINDOW, MAX);
        let mut frames = Vec::new();
        let mut unanswered = std::collections::VecDeque::new();
        while let Some(m) = peer.read() {
            match m {
                ClientMessage::Frame(f) => {
                    unanswered.push_back((f.stream_id, f.seq));
                    frames.push(f);
                    if unanswered.len() == WINDOW as usize {
                        let (st, seq) = unanswered.pop_front().expect("non-empty");
                        peer.send(&answer(st, seq));
                    }
                }
                ClientMessage::Bye => {
                    for (st, seq) in unanswered.drain(..) {
                        peer.send(&answer(st, seq));
                    }
                    break;
                }
                ClientMessage::Hello(_) => panic!("second Hello"),
            }
        }
        (hello, frames)
    });
    let script = format!(
        r#"
import camdnn_client as c
with c.Client({path:?}, "py-test", timeout=60) as cl:
    assert cl.welcome["window"] == {WINDOW}, cl.welcome
    answers = []
    for seq in range({FRAMES}):
        cl.send_frame(5, seq, seq * 1000, 2, 1, "bgr24", bytes([seq]) * 6, priority=1, deadline_us=50000)
        assert cl.in_flight(5) <= {WINDOW}
    answers += cl.bye()
for a in answers:
    print(a["type"], a["stream_id"], a["seq"], a.get("reason", ""), a.get("timing", {{}}).get("total_us", ""))
"#,
        path = path.to_str().expect("utf-8 path"),
    );
    let out = python3(&["-c", &script]);
    // Checked before joining: a client that never connected would leave the server waiting.
    assert!(
        out.status.success(),
        "python client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (hello, frames) = server.join().expect("server thread");
    assert_eq!(hello.client_name, "py-test");
    assert_eq!(hello.versions, SUPPORTED_VERSIONS);
    let expected_frames: Vec<Frame> = (0..FRAMES).map(|seq| frame(5, seq)).collect();
    assert_eq!(
        frames, expected_frames,
        "the Rust decoder reads the Python encoder's frames"
    );
    let expected: Vec<String> = (0..FRAMES)
        .map(|seq| match answer(5, seq) {
            ServerMessage::Result(r) => format!("result 5 {seq}  {}", r.timing.total_us),
            ServerMessage::Dropped(_) => format!("dropped 5 {seq} superseded "),
            ServerMessage::Rejected(_) => format!("rejected 5 {seq} unsupported_format "),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().collect::<Vec<_>>(), expected);
}
