//! `camdnnd suite` runs every scheduler over generated boards x shapes and
//! prints the tallies; it writes board files for training; bad input is a
//! clear error.

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn camdnnd(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_camdnnd"))
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn two_boards_two_shapes_print_every_case_and_the_tallies() {
    let (ok, out, err) = camdnnd(&[
        "suite",
        "--boards",
        "2",
        "--shapes",
        "paper,bursts",
        "--cases",
    ]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("2 boards x 2 shapes = 4 cases"), "{out}");
    for case in [
        "gen-1    paper",
        "gen-1    bursts",
        "gen-2    paper",
        "gen-2    bursts",
    ] {
        assert!(out.contains(case), "no case {case}:\n{out}");
    }
    assert!(out.contains("no learned policy"), "{out}");
    let tally = out
        .split("camdnn-greedy against each scheduler over the 4 cases")
        .nth(1)
        .unwrap_or_else(|| panic!("no tally:\n{out}"));
    for name in ["camdnn-local", "heft", "cq", "static-dist", "ltf"] {
        let row = tally
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no tally row for {name}:\n{out}"));
        // wins + ties + losses = the 4 cases.
        let n: Vec<usize> = row
            .split_whitespace()
            .skip(1)
            .take(3)
            .map(|w| w.parse().unwrap())
            .collect();
        assert_eq!(n.iter().sum::<usize>(), 4, "{row}");
    }
}

#[test]
fn the_shipped_profile_runs_with_its_learned_policy() {
    let (ok, out, err) = camdnnd(&[
        "suite",
        "--boards",
        "0",
        "--system",
        "config/profiles/rb5.toml",
        "--shapes",
        "paper",
    ]);
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("camdnn against each scheduler over the 1 cases"),
        "{out}"
    );
}

#[test]
fn writes_board_files_that_load() {
    let dir = std::env::temp_dir().join(format!("camdnn-suite-{}", std::process::id()));
    let (ok, out, err) = camdnnd(&[
        "suite",
        "--boards",
        "2",
        "--first-seed",
        "7",
        "--write-boards",
        dir.to_str().unwrap(),
    ]);
    assert!(ok, "{out}\n{err}");
    for name in ["gen-7.toml", "gen-8.toml"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let system = camdnn_policy::System::from_toml(&text).unwrap();
        assert_eq!(
            system,
            camdnn_policy::System::from_spec(&camdnn_policy::gen::board(
                name[4..5].parse().unwrap()
            ))
            .unwrap()
        );
        // Each shape's trace, readable by `camdnnd simulate --trace`.
        let seed: u64 = name[4..5].parse().unwrap();
        let heavy = camdnn_policy::gen::heavy_count(&system, 14.0);
        for shape in camdnn_policy::gen::Shape::ALL {
            let path = dir.join(format!("gen-{seed}-{}.txt", shape.name()));
            let text = std::fs::read_to_string(&path).unwrap();
            let trace =
                camdnn_policy::sim::Trace::parse(&text, system.request_models().count()).unwrap();
            assert_eq!(
                trace,
                shape.trace(&system, seed, heavy),
                "{}",
                path.display()
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unknown_shape_is_named() {
    let (ok, _, err) = camdnnd(&["suite", "--boards", "1", "--shapes", "sideways"]);
    assert!(!ok);
    assert!(err.contains("unknown shape \"sideways\""), "{err}");
}

#[test]
fn rules_ablated_together_are_one_row_and_an_unknown_rule_is_named() {
    let (ok, out, err) = camdnnd(&[
        "suite",
        "--boards",
        "1",
        "--shapes",
        "bursts",
        "--ablate",
        "--ablate-together",
        "stream-split,finish-time,lookahead",
    ]);
    assert!(ok, "{out}\n{err}");
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("| camdnn-greedy"))
        .collect();
    assert_eq!(
        rows.len(),
        1,
        "one variant, the three rules at once:\n{out}"
    );
    assert!(rows[0].starts_with("| camdnn-greedy-3-rules |"), "{out}");

    let (ok, _, err) = camdnnd(&[
        "suite",
        "--boards",
        "1",
        "--ablate",
        "--ablate-together",
        "lookahed",
    ]);
    assert!(!ok);
    assert!(err.contains("unknown rule \"lookahed\""), "{err}");
    assert!(
        err.contains("lookahead"),
        "the known rules are listed: {err}"
    );
}
