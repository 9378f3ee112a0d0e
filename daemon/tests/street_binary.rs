//! The README's first command for real: the `camdnnd serve` binary on the default config
//! (config/camdnnd.toml: CenterNet -> MoveNet -> faceres on tract and ONNX Runtime), fed
//! darknet's JPEG photos by `camdnnd feed --images`: every photo gets a result, the person
//! comes back with her pose and the bicycle with its box.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

const PHOTOS: &str = "/usr/share/darknet/data";

/// The shipped default config with our socket, metrics port and absolute paths.
fn config_text(socket: &Path, metrics: &str) -> String {
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

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serve_and_feed_the_default_config_on_real_photos() {
    let photos = tempfile::tempdir().expect("temp dir");
    for name in ["dog.jpg", "person.jpg"] {
        let src = Path::new(PHOTOS).join(name);
        std::fs::copy(&src, photos.path().join(name)).unwrap_or_else(|e| {
            panic!(
                "{} cannot be read ({e}): run scripts/setup.sh (Debian package darknet)",
                src.display()
            )
        });
    }
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
    let mut daemon = Daemon(child);
    let read_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let t0 = Instant::now();
    while !socket.exists() {
        if let Some(st) = daemon.0.try_wait().unwrap() {
            panic!("camdnnd exited early ({st}):\n{}", read_log());
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "camdnnd not serving:\n{}",
            read_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // 2 fps: one frame in flight at a time on a slow host, so none is superseded.
    let out = Command::new(env!("CARGO_BIN_EXE_camdnnd"))
        .args(["feed", "--fps", "2", "--socket"])
        .arg(&socket)
        .arg("--images")
        .arg(photos.path())
        .output()
        .expect("run feed");
    assert!(
        out.status.success(),
        "feed: {}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        read_log()
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let results: Vec<&serde_json::Value> = lines.iter().filter(|v| v["type"] == "result").collect();
    assert_eq!(results.len(), 2, "one result per photo: {lines:#?}");
    let objects = |seq: u64| -> Vec<&serde_json::Value> {
        let r = results
            .iter()
            .find(|r| r["seq"] == seq)
            .unwrap_or_else(|| panic!("no result for frame {seq}: {lines:#?}"));
        r["objects"].as_array().unwrap().iter().collect()
    };
    // Name order: dog.jpg is frame 0, person.jpg frame 1.
    let dog = objects(0);
    assert!(
        dog.iter().any(|o| o["class"] == "bicycle"),
        "dog.jpg: no bicycle: {dog:#?}"
    );
    let person = objects(1);
    let p = person
        .iter()
        .find(|o| o["class"] == "person")
        .unwrap_or_else(|| panic!("person.jpg: no person: {person:#?}"));
    let pose = p["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["model"] == "movenet")
        .unwrap_or_else(|| panic!("no pose: {p:#?}"));
    let k = &pose["tensors"][0];
    assert_eq!(k["name"], "keypoints");
    assert_eq!(k["dims"], serde_json::json!([17, 3]));
}
