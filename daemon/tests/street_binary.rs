//! The README's first command for real: the `camdnnd serve` binary on the default config
//! (config/camdnnd.toml: CenterNet -> MoveNet -> faceres on tract and ONNX Runtime), fed
//! darknet's JPEG photos by `camdnnd feed --images`: every photo gets a result named by its
//! file, the person comes back with her named keypoints and the bicycle with its box; bad files
//! in the folder are reported and skipped, the rest answered, and the run fails.

mod street_common;

use std::path::Path;
use std::process::Command;

use street_common::{Served, PHOTOS};

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
    let served = Served::start();
    let (socket, read_log) = (&served.socket, || served.log());
    // 2 fps: one frame in flight at a time on a slow host, so none is superseded.
    let out = Command::new(env!("CARGO_BIN_EXE_camdnnd"))
        .args(["feed", "--fps", "2", "--socket"])
        .arg(socket)
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
    // Each answer names its photo.
    let objects = |name: &str| -> Vec<&serde_json::Value> {
        let r = results
            .iter()
            .find(|r| r["source"] == name)
            .unwrap_or_else(|| panic!("no result for {name}: {lines:#?}"));
        r["objects"].as_array().unwrap().iter().collect()
    };
    let dog = objects("dog.jpg");
    assert!(
        dog.iter().any(|o| o["class"] == "bicycle"),
        "dog.jpg: no bicycle: {dog:#?}"
    );
    let person = objects("person.jpg");
    let p = person
        .iter()
        .find(|o| o["class"] == "person")
        .unwrap_or_else(|| panic!("person.jpg: no person: {person:#?}"));
    // Keypoints are named: x, y, score each.
    let nose = &p["outputs"]["movenet"]["keypoints"]["nose"];
    assert_eq!(nose.as_array().map(Vec::len), Some(3), "{p:#?}");
    assert!(p["outputs"]["movenet"]["keypoints"]["right_ankle"].is_array());
}

#[test]
fn bad_files_are_reported_and_skipped_and_the_rest_are_answered() {
    let photos = tempfile::tempdir().expect("temp dir");
    let src = Path::new(PHOTOS).join("dog.jpg");
    std::fs::copy(&src, photos.path().join("a-dog.jpg")).unwrap_or_else(|e| {
        panic!(
            "{} cannot be read ({e}): run scripts/setup.sh (Debian package darknet)",
            src.display()
        )
    });
    std::fs::write(photos.path().join("b-broken.jpg"), b"not a JPEG at all").unwrap();
    std::fs::write(photos.path().join("c-still.gif"), b"GIF89a").unwrap();
    std::fs::write(photos.path().join("notes.txt"), b"not an image").unwrap();
    // A PNG (read and sent as RGB24) and a valid 10000x1500 JPEG (over the 8192 side limit).
    for (name, size) in [("d-dog.png", None), ("e-wide.jpg", Some("10000x1500"))] {
        let mut cmd = Command::new("ffmpeg");
        cmd.args(["-v", "error", "-y"]);
        match size {
            None => cmd.arg("-i").arg(&src),
            Some(s) => cmd.args(["-f", "lavfi", "-i", &format!("color=gray:s={s}")]),
        };
        let ok = cmd
            .args(["-frames:v", "1"])
            .arg(photos.path().join(name))
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "ffmpeg could not write {name}: is ffmpeg installed? run scripts/setup.sh"
        );
    }
    let served = Served::start();
    let out = Command::new(env!("CARGO_BIN_EXE_camdnnd"))
        .args(["feed", "--fps", "2", "--format", "text", "--socket"])
        .arg(&served.socket)
        .arg("--images")
        .arg(photos.path())
        .output()
        .expect("run feed");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let context = format!(
        "stdout:\n{stdout}\nstderr:\n{stderr}\nserver log:\n{}",
        served.log()
    );
    assert!(
        !out.status.success(),
        "a bad file must fail the run: {context}"
    );
    assert!(
        stderr.contains("could not be read, or were refused"),
        "{context}"
    );
    // The good files are answered, each by name; the PNG as well as the JPEG.
    for name in ["a-dog.jpg", "d-dog.png"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no answer for {name}: {context}"));
        assert!(line.contains("object"), "{line}: {context}");
    }
    assert!(stdout.contains("  bicycle "), "{context}");
    // The bad ones are named with what was wrong.
    assert!(
        stdout.contains("b-broken.jpg: not sent: not a JPEG file"),
        "{context}"
    );
    assert!(
        stdout.contains("c-still.gif: not sent: .gif images are not read"),
        "{context}"
    );
    assert!(
        stdout.contains("e-wide.jpg: refused (too_large): JPEG frame 10000x1500 is larger than the 8192-pixel side limit"),
        "{context}"
    );
    // A file that is not an image is counted in the summary, not sent.
    assert!(
        stderr.contains("\"ignored_not_images\":[\"notes.txt\"]"),
        "{context}"
    );
}
