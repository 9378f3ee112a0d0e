//! The TF.js -> ONNX converter (scripts/tfjs_to_onnx.py) against its independent reference
//! (scripts/tfjs_reference.py, a numpy executor of the TF.js graph) on the three models of
//! the default config, straight from the npm package scripts/fetch_models.sh downloaded: each
//! output within 1e-4 of its scale on a darknet photo and on random pixels.

use std::path::Path;
use std::process::Command;

use camdnn_tests::repo_root;

const HUMAN: &str = "models/.downloads/vladmandic-human-3.3.6.tgz";

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

#[test]
fn converted_models_match_the_numpy_reference() {
    let root = repo_root();
    let python = root.join(".venv/bin/python");
    let tgz = root.join(HUMAN);
    assert!(
        python.is_file() && tgz.is_file(),
        "{} or {} is missing: run scripts/setup.sh",
        python.display(),
        tgz.display()
    );
    let photos = Path::new("/usr/share/darknet/data");
    assert!(
        photos.join("dog.jpg").is_file(),
        "{}/dog.jpg is missing: run scripts/setup.sh (Debian package darknet)",
        photos.display()
    );
    let dir = tempfile::tempdir().unwrap();
    for m in ["centernet", "movenet-lightning", "faceres"] {
        run(Command::new("tar")
            .arg("-xzf")
            .arg(&tgz)
            .arg("-C")
            .arg(dir.path())
            .args([
                format!("package/models/{m}.json"),
                format!("package/models/{m}.bin"),
            ]));
        let json = dir.path().join(format!("package/models/{m}.json"));
        let onnx = dir.path().join(format!("{m}.onnx"));
        run(Command::new(&python)
            .arg(root.join("scripts/tfjs_to_onnx.py"))
            .arg(&json)
            .arg(&onnx)
            .arg("--float-inputs"));
        let photo = if m == "movenet-lightning" {
            "person.jpg"
        } else {
            "dog.jpg"
        };
        for source in [
            vec![
                "--image".to_string(),
                photos.join(photo).display().to_string(),
            ],
            vec!["--random".to_string(), "7".to_string()],
        ] {
            let text = run(Command::new(&python)
                .arg(root.join("scripts/tfjs_reference.py"))
                .arg(&json)
                .arg(&onnx)
                .args(&source)
                .args(["--tolerance", "1e-4"]));
            assert!(text.contains(": ok"), "{m}: {text}");
        }
    }
}
