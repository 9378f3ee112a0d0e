//! systemd integration: the units pass `systemd-analyze verify` and rate 2.5
//! or better in `systemd-analyze security`; the daemon adopts a listener
//! passed by socket activation (`systemd-socket-activate`); and it sends
//! READY, STATUS, WATCHDOG, RELOADING and STOPPING to `NOTIFY_SOCKET`. The
//! first two need the systemd tools; without them they say so and pass.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use camdnn_protocol::{Client, ServerMessage};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn have(tool: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(found, "{tool} is not installed: it comes with Debian's systemd package (scripts/setup.sh installs it)");
    found
}

#[test]
fn units_verify_and_rate_well_in_security_analysis() {
    if !have("systemd-analyze") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    for unit in ["camdnnd.service", "camdnnd.socket"] {
        let text = std::fs::read_to_string(repo().join("systemd").join(unit)).expect("unit");
        // verify checks that ExecStart exists: point it at the built binary.
        let text = text.replace("/usr/local/bin/camdnnd", env!("CARGO_BIN_EXE_camdnnd"));
        std::fs::write(dir.path().join(unit), text).expect("write unit");
    }
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(dir.path().join("camdnnd.service"))
        .arg(dir.path().join("camdnnd.socket"))
        .output()
        .expect("systemd-analyze verify");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "verify failed: {stderr}");
    assert!(
        !stderr.contains("camdnnd"),
        "verify complains about our units: {stderr}"
    );

    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(dir.path().join("camdnnd.service"))
        .output()
        .expect("systemd-analyze security");
    let text = String::from_utf8_lossy(&out.stdout);
    let exposure: f64 = text
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for camdnnd.service:")
                .nth(1)
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no exposure level in:\n{text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    eprintln!("systemd-analyze security: exposure {exposure}");
    assert!(exposure <= 2.5, "exposure {exposure} > 2.5:\n{text}");
}

#[test]
fn daemon_adopts_a_socket_activated_listener() {
    if !have("systemd-socket-activate") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let own = dir.path().join("own.sock");
    let activated = dir.path().join("activated.sock");
    let config = sim_config(dir.path(), &own);
    let mut child = Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&activated)
        .arg(env!("CARGO_BIN_EXE_camdnnd"))
        .args(["serve", "--config"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("systemd-socket-activate");
    let t0 = Instant::now();
    while !activated.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no activated socket"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The first connection starts the daemon, which adopts the listener.
    let mut c = Client::connect(&activated, "activation").expect("connect");
    let mut f = camdnn_protocol::Frame {
        stream_id: 1,
        seq: 0,
        capture_ts_us: 0,
        width: 8,
        height: 8,
        pixel_format: camdnn_protocol::PixelFormat::Rgb24,
        priority: None,
        deadline: None,
        detections: Some(Vec::new()),
        payload: bytes::Bytes::from(vec![0u8; 8 * 8 * 3]),
    };
    c.send_frame(&f).expect("send");
    assert!(matches!(c.recv(), Ok(ServerMessage::Result(_))));
    f.seq = 1;
    c.send_frame(&f).expect("send");
    assert!(matches!(c.recv(), Ok(ServerMessage::Result(_))));
    assert!(
        !own.exists(),
        "the configured socket is not created when one is inherited"
    );
    // SAFETY: kill(2) on our own child (exec'd into camdnnd).
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().expect("wait");
    assert!(status.success(), "camdnnd exit: {status}");
}

/// The shipped sim config with `socket`, metrics off and absolute paths, in `dir`.
fn sim_config(dir: &Path, socket: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("config/camdnnd-sim.toml")).expect("config");
    let profile = repo().join("config/profiles/rb5.toml");
    let cfg: String = text
        .lines()
        .map(|l| {
            if l.starts_with("socket = ") {
                format!(
                    "socket = {:?}\n\n[metrics]\nenabled = false\n",
                    socket.display().to_string()
                )
            } else if l.starts_with("profile = ") {
                format!("profile = {:?}\n", profile.display().to_string())
            } else if l.starts_with("policy = ") {
                // The shipped config's paths are relative to its folder.
                l.replace(
                    "\"policies/",
                    &format!("\"{}/", repo().join("config/policies").display()),
                ) + "\n"
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let config = dir.join("camdnnd.toml");
    std::fs::write(&config, cfg).expect("config");
    config
}

#[test]
fn daemon_notifies_ready_status_reloading_watchdog_and_stopping() {
    use std::os::unix::net::UnixDatagram;
    let dir = tempfile::tempdir().expect("temp dir");
    let notify_path = dir.path().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).expect("notify socket");
    notify
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let socket = dir.path().join("camdnnd.sock");
    let config = sim_config(dir.path(), &socket);
    let mut child = Command::new(env!("CARGO_BIN_EXE_camdnnd"))
        .args(["serve", "--config"])
        .arg(&config)
        .env("NOTIFY_SOCKET", &notify_path)
        .env("WATCHDOG_USEC", "200000")
        .env_remove("WATCHDOG_PID")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("camdnnd");
    let mut seen: Vec<String> = Vec::new();
    let wait_for = |seen: &mut Vec<String>, want: &str| {
        let mut buf = [0u8; 4096];
        while !seen.iter().any(|m| m.lines().any(|l| l == want)) {
            let n = notify
                .recv(&mut buf)
                .unwrap_or_else(|e| panic!("no {want:?} from camdnnd ({e}); got {seen:?}"));
            seen.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    };
    wait_for(&mut seen, "READY=1");
    assert!(seen.iter().any(|m| m.contains("STATUS=")), "{seen:?}");
    wait_for(&mut seen, "WATCHDOG=1");
    // SAFETY: kill(2) on our own child.
    let pid = child.id() as i32;
    assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    wait_for(&mut seen, "RELOADING=1");
    wait_for(&mut seen, "STATUS=serving (config reloaded)");
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    wait_for(&mut seen, "STOPPING=1");
    let status = child.wait().expect("wait");
    assert!(status.success(), "camdnnd exit: {status}");
}
