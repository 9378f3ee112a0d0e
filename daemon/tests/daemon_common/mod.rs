//! The real `camdnnd serve` binary for end-to-end tests: started on the
//! shipped simulated-RB5 config (sim engines, no model files) with its own
//! socket, metrics port and log in a temporary folder.

#![allow(dead_code)] // each test binary uses a subset

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use camdnn_protocol::{BBox, ClassRef, Frame, PixelFormat, UpstreamDetection};

/// A running daemon; killed when dropped.
pub struct Daemon {
    pub child: Child,
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub config: PathBuf,
    pub metrics: String,
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The shipped sim config with our socket, metrics port and absolute paths.
pub fn config_text(socket: &Path, metrics: &str, wait_ms: f64) -> String {
    let text = std::fs::read_to_string(repo().join("config/camdnnd-sim.toml")).expect("sim config");
    let profile = repo().join("config/profiles/rb5.toml");
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("socket = ") {
            out.push_str(&format!(
                "socket = {:?}\ndrain_timeout_ms = 10000\n\n[metrics]\nlisten = {metrics:?}\n",
                socket.display().to_string()
            ));
        } else if line.starts_with("profile = ") {
            out.push_str(&format!("profile = {:?}\n", profile.display().to_string()));
        } else if line.starts_with("policy = ") {
            let dir = repo().join("config/policies");
            out.push_str(&format!(
                "policy = {{ onnx = {:?}, sidecar = {:?} }}\n",
                dir.join("rb5.onnx").display().to_string(),
                dir.join("rb5.policy.json").display().to_string()
            ));
        } else if line.starts_with("wait_ms = ") {
            out.push_str(&format!("wait_ms = {wait_ms:?}\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// `text` with `line` added after the `name = "model"` line of `model`.
pub fn with_model_line(text: &str, model: &str, line: &str) -> String {
    let at = format!("name = \"{model}\"\n");
    assert!(text.contains(&at), "no model {model}");
    text.replacen(&at, &format!("{at}{line}\n"), 1)
}

/// A 64x48 frame carrying `classes` as upstream detections (`None`: the
/// server's detector runs).
pub fn frame(stream_id: u32, seq: u64, classes: Option<&[&str]>) -> Frame {
    let detections = classes.map(|cs| {
        cs.iter()
            .enumerate()
            .map(|(n, c)| UpstreamDetection {
                bbox: BBox {
                    x0: 20.0 * n as f32,
                    y0: 0.0,
                    x1: 20.0 * n as f32 + 16.0,
                    y1: 16.0,
                },
                class: ClassRef::Name((*c).into()),
                score: 0.9,
            })
            .collect()
    });
    Frame {
        stream_id,
        seq,
        capture_ts_us: 0,
        width: 64,
        height: 48,
        pixel_format: PixelFormat::Rgb24,
        priority: None,
        deadline: None,
        detections,
        payload: Bytes::from(vec![100u8; 64 * 48 * 3]),
    }
}

/// A `/proc/PID/status` field in KiB (`VmRSS`: resident now, `VmHWM`: the peak).
pub fn proc_status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let prefix = format!("{field}:");
    status
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

impl Daemon {
    pub fn start() -> Daemon {
        Daemon::start_with("camdnnd.sock", |socket, metrics| {
            config_text(socket, metrics, 5.0)
        })
    }

    /// Starts on the config `text(socket, metrics address)` with the socket
    /// at `socket` inside a fresh temporary folder, and waits until it is
    /// ready.
    pub fn start_with(socket: &str, text: impl FnOnce(&Path, &str) -> String) -> Daemon {
        let mut d = Daemon::spawn(socket, text, |_| {});
        d.wait_ready();
        d
    }

    /// Starts it as [`Daemon::start_with`] does, after `adjust` had its say
    /// on the command, and returns at once.
    pub fn spawn(
        socket: &str,
        text: impl FnOnce(&Path, &str) -> String,
        adjust: impl FnOnce(&mut Command),
    ) -> Daemon {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join(socket);
        let metrics = format!("127.0.0.1:{}", free_port());
        let config = dir.path().join("camdnnd.toml");
        std::fs::write(&config, text(&socket, &metrics)).expect("write config");
        let log = std::fs::File::create(dir.path().join("log")).expect("log file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_camdnnd"));
        cmd.args(["serve", "--config"])
            .arg(&config)
            .env("CAMDNN_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log);
        adjust(&mut cmd);
        let child = cmd.spawn().expect("start camdnnd");
        Daemon {
            child,
            dir,
            socket,
            config,
            metrics,
        }
    }

    /// Kills the daemon (SIGKILL: no drain, its socket file left behind)
    /// and starts it again on the same config, socket and log.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.path().join("log"))
            .expect("log file");
        self.child = Command::new(env!("CARGO_BIN_EXE_camdnnd"))
            .args(["serve", "--config"])
            .arg(&self.config)
            .env("CAMDNN_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start camdnnd");
    }

    /// Waits (up to 120 s) until /health/ready answers 200 and the socket exists.
    pub fn wait_ready(&mut self) {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().expect("wait") {
                panic!("camdnnd exited early ({st}):\n{}", self.log());
            }
            if self.get("/health/ready").map(|(s, _)| s) == Some(200) && self.socket.exists() {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "camdnnd not ready:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    pub fn signal(&self, sig: i32) {
        let pid = i32::try_from(self.child.id()).expect("pid");
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }

    /// GET `path` on the metrics listener: (status, body).
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        let mut s = TcpStream::connect(&self.metrics).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
        let mut text = String::new();
        s.read_to_string(&mut text).ok()?;
        let status = text.split_whitespace().nth(1)?.parse().ok()?;
        let body = text.split_once("\r\n\r\n")?.1.to_owned();
        Some((status, body))
    }

    /// The value of the sample `name` (with labels, as rendered).
    pub fn metric(&self, name: &str) -> f64 {
        let (_, body) = self.get("/metrics").expect("metrics");
        body.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no sample {name} in /metrics:\n{body}"))
    }

    /// The sum of every sample of the family `name` (any labels).
    pub fn metric_sum(&self, name: &str) -> f64 {
        let (_, body) = self.get("/metrics").expect("metrics");
        body.lines()
            .filter(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// Waits (up to 60 s) for exit; the exit code.
    pub fn wait_exit(&mut self) -> i32 {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().expect("wait") {
                return st.code().unwrap_or(-1);
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "camdnnd did not exit:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (up to 60 s) until `cond` holds, failing with the log.
    pub fn wait_for(&self, mut cond: impl FnMut() -> bool) {
        let t0 = Instant::now();
        while !cond() {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "condition not met in time; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
