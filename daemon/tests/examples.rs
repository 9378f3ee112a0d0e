//! Every example marked runnable in the README, docs/ and the Python client's README runs as
//! written against the shipped default (`camdnnd serve --config config/camdnnd.toml`) and
//! shows results. A runnable example is a fenced block whose info string is `sh example`
//! (run by bash from the repository root) or `python example` (run by python3 beside a copy of
//! `camdnn_client.py`, as its README says to use it).
//!
//! Three things are swapped so the test can run beside other tests, and nothing else: the
//! daemon's socket `/tmp/camdnnd.sock` for a private one, `cargo run --release -p
//! camdnn-daemon --` for the `camdnnd` binary this test was built with, and
//! `/tmp/camdnn-pictures` for a private folder.

mod street_common;

use std::path::{Path, PathBuf};
use std::process::Command;

use street_common::{repo, Served};

/// One runnable example.
#[derive(Debug)]
struct Example {
    /// `file:line` of its opening fence.
    at: String,
    /// `sh` or `python`.
    lang: String,
    code: String,
}

/// The runnable examples of one Markdown file.
fn examples_in(path: &Path) -> Vec<Example> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    let mut open: Option<Example> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => {
                let mut words = info.split_whitespace();
                let lang = words.next().unwrap_or("").to_owned();
                if words.any(|w| w == "example") {
                    open = Some(Example {
                        at: format!("{}:{}", path.display(), i + 1),
                        lang,
                        code: String::new(),
                    });
                } else if !info.trim().is_empty() {
                    // Another fenced block: skip to its end.
                    open = Some(Example {
                        at: String::new(),
                        lang: String::new(),
                        code: String::new(),
                    });
                }
            }
            (Some(ex), Some(_)) => {
                let ex = std::mem::replace(
                    ex,
                    Example {
                        at: String::new(),
                        lang: String::new(),
                        code: String::new(),
                    },
                );
                open = None;
                if !ex.at.is_empty() {
                    out.push(ex);
                }
            }
            (Some(ex), None) => {
                ex.code.push_str(line);
                ex.code.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// Every runnable example, with the count per file checked so none goes missing unnoticed.
fn all_examples() -> Vec<Example> {
    let root = repo();
    let mut files = vec![
        root.join("README.md"),
        root.join("clients/python/README.md"),
    ];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let all: Vec<Example> = files.iter().flat_map(|f| examples_in(f)).collect();
    for (file, at_least) in [("README.md", 1), ("clients/python/README.md", 2)] {
        let n = all
            .iter()
            .filter(|e| e.at.starts_with(&root.join(file).display().to_string()))
            .count();
        assert!(
            n >= at_least,
            "{file} has {n} runnable examples, expected at least {at_least}: {all:#?}"
        );
    }
    all
}

/// The example's code with the socket, the binary and the pictures folder swapped.
fn localised(code: &str, socket: &Path, pictures: &Path) -> String {
    code.replace(
        "cargo run --release -p camdnn-daemon --",
        env!("CARGO_BIN_EXE_camdnnd"),
    )
    .replace("/tmp/camdnnd.sock", &socket.display().to_string())
    .replace("/tmp/camdnn-pictures", &pictures.display().to_string())
}

#[test]
fn fences_marked_example_are_found_with_their_language() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("x.md");
    std::fs::write(
        &md,
        "text\n```sh\nnot run\n```\n```sh example\necho one\n```\n```python example\nprint(2)\n```\n",
    )
    .unwrap();
    let ex = examples_in(&md);
    assert_eq!(ex.len(), 2, "{ex:#?}");
    assert_eq!(
        (ex[0].lang.as_str(), ex[0].code.as_str()),
        ("sh", "echo one\n")
    );
    assert_eq!(
        (ex[1].lang.as_str(), ex[1].code.as_str()),
        ("python", "print(2)\n")
    );
    assert!(ex[0].at.ends_with("x.md:5"), "{}", ex[0].at);
}

#[test]
fn every_runnable_example_runs_as_written_against_the_shipped_default() {
    let examples = all_examples();
    let served = Served::start();
    let pictures = served.dir.path().join("pictures");
    let client = repo().join("clients/python/camdnn_client.py");
    for ex in &examples {
        let code = localised(&ex.code, &served.socket, &pictures);
        let out = match ex.lang.as_str() {
            "sh" => Command::new("bash")
                .args(["-euo", "pipefail", "-c", &code])
                .current_dir(repo())
                .output(),
            "python" => {
                let dir = tempfile::tempdir().unwrap();
                std::fs::copy(&client, dir.path().join("camdnn_client.py")).unwrap();
                let script = dir.path().join("example.py");
                std::fs::write(&script, &code).unwrap();
                Command::new("python3")
                    .arg(&script)
                    .current_dir(dir.path())
                    .output()
            }
            other => panic!("{}: no runner for `{other} example`", ex.at),
        }
        .unwrap_or_else(|e| panic!("{}: cannot run {}: {e}", ex.at, ex.lang));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let context = format!(
            "{}:\n{code}\nstdout:\n{stdout}\nstderr:\n{stderr}\nserver log:\n{}",
            ex.at,
            served.log()
        );
        assert!(out.status.success(), "the example failed: {context}");
        assert!(
            !stdout.trim().is_empty() || !stderr.trim().is_empty(),
            "the example showed nothing: {context}"
        );
        // An example that talks to the daemon shows what it found.
        if code.contains(&served.socket.display().to_string()) {
            assert!(
                stdout.contains("person"),
                "no person in the answers: {context}"
            );
            assert!(
                !stdout.contains("superseded") && !stdout.contains("rejected"),
                "frames were lost: {context}"
            );
        }
    }
    // The README's feed example drew its answers.
    let drawn = std::fs::read_dir(&pictures).map_or(0, |d| d.count());
    assert!(drawn >= 5, "{drawn} pictures in {}", pictures.display());
}
