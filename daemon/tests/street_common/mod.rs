//! Shared by the tests that run the `camdnnd serve` binary on the shipped default config
//! (street_binary, examples): the config with a private socket, metrics port and absolute
//! paths, and the daemon process, killed when dropped.

#![allow(dead_code)] // each test binary uses a subset

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub const PHOTOS: &str = "/usr/share/darknet/data";

/// The shipped default config with our socket, metrics port and absolute paths.
pub fn config_text(socket: &Path, metrics: &str) -> String {
    let text = std::fs::read_to_string(repo().join("config/camdnnd.toml")).expect("config");
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("socket = ") {
            out.push_str(&format!(
                "socket = {:?}\n\n[metrics]\nlisten = {metrics:?}\n",
                socket.display().to_string()
            ));
        } else if let Some(rest) = line.strip_prefix("profile = \"") {
            let p = repo().join("config").join(rest.trim_end_matches('"'));
            out.push_str(&format!("profile = {:?}\n", p.display().to_string()));
        } else if line.starts_with("policy = ") {
            let dir = repo().join("config/policies");
            out.push_str(&format!(
                "policy = {{ onnx = {:?}, sidecar = {:?} }}\n",
                dir.join("host-street.onnx").display().to_string(),
                dir.join("host-street.policy.json").display().to_string()
            ));
        } else if let Some(rest) = line.strip_prefix("path = \"../") {
            let p = repo().join(rest.trim_end_matches('"'));
            assert!(
                p.is_file(),
                "model {} is missing: run scripts/setup.sh",
                p.display()
            );
            out.push_str(&format!("path = {:?}\n", p.display().to_string()));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

pub struct Daemon(pub Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `camdnnd serve` on the shipped default config, serving on its own socket and metrics
/// port; its log and temporary folder live as long as it does.
pub struct Served {
    pub daemon: Daemon,
    pub socket: PathBuf,
    pub log_path: PathBuf,
    pub dir: tempfile::TempDir,
}

impl Served {
    /// Starts the daemon and waits (up to 120 s) for its socket.
    pub fn start() -> Served {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("camdnnd.sock");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let config = dir.path().join("camdnnd.toml");
        std::fs::write(&config, config_text(&socket, &format!("127.0.0.1:{port}"))).unwrap();
        let log_path = dir.path().join("log");
        let log = std::fs::File::create(&log_path).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_camdnnd"))
            .args(["serve", "--config"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start camdnnd");
        let mut served = Served {
            daemon: Daemon(child),
            socket,
            log_path,
            dir,
        };
        let t0 = Instant::now();
        while !served.socket.exists() {
            if let Some(st) = served.daemon.0.try_wait().unwrap() {
                panic!("camdnnd exited early ({st}):\n{}", served.log());
            }
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "camdnnd not serving:\n{}",
                served.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        served
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }
}
