//! docs/operations.md's quick start, run as written: the shell block under
//! "Try it without any model files", with only what a test must change
//! (this build's binary instead of `cargo build --release`, and a socket,
//! port and scene file of its own so parallel runs do not collide). The
//! block waits for readiness before `feed` starts, and every frame is
//! answered.

mod daemon_common;

use std::process::Command;

use daemon_common::{config_text, free_port, repo};

/// The first `sh` block after `marker` in `text`.
fn sh_block_after(text: &str, marker: &str) -> String {
    let rest = &text[text.find(marker).expect("marker")..];
    let start = rest.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let len = rest[start..].find("```").expect("closed");
    rest[start..start + len].to_owned()
}

#[test]
fn the_quick_start_runs_as_written() {
    let doc = std::fs::read_to_string(repo().join("docs/operations.md")).expect("docs");
    let block = sh_block_after(&doc, "Try it without any model files");
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("camdnnd-sim.sock");
    let metrics = format!("127.0.0.1:{}", free_port());
    let config = dir.path().join("camdnnd-sim.toml");
    std::fs::write(&config, config_text(&socket, &metrics, 5.0)).expect("config");
    let scenes = dir.path().join("scenes.txt");
    let bin = env!("CARGO_BIN_EXE_camdnnd");
    let script: String = block
        .lines()
        .filter(|l| !l.starts_with("cargo build"))
        .map(|l| {
            l.replace("target/release/camdnnd", bin)
                .replace("config/camdnnd-sim.toml", &config.display().to_string())
                .replace("/tmp/camdnnd-sim.sock", &socket.display().to_string())
                .replace("127.0.0.1:9464", &metrics)
                .replace("/tmp/scenes.txt", &scenes.display().to_string())
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(script, block, "the block names what the test replaces");
    // `wait`: the drain ends before the shell does.
    let out = Command::new("bash")
        .args(["-ec", &format!("{script}\nwait\n")])
        .current_dir(repo())
        .output()
        .expect("bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("camdnn_frames_received_total 100"),
        "{stdout}\n{stderr}"
    );
    let answers = stdout.lines().filter(|l| l.starts_with('{')).count();
    assert_eq!(answers, 100, "one JSON line per frame: {stdout}");
}
