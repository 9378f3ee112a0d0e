//! The config parser fuzzed on stable Rust as a property test: the shipped configs and test
//! fixtures under structure-aware mutations (lines dropped, repeated or swapped, values replaced
//! by other TOML values, keys renamed, bytes edited) and arbitrary text go through what a start
//! or a SIGHUP reload runs on a file before building anything (parse, `[server]` checks,
//! pipeline cross-checks, the scheduler's system from the profile). Nothing panics; a refusal
//! names what was wrong.
//!
//! Each property runs `CAMDNN_FUZZ_CASES` cases (default 256); the README says how to run it
//! longer.

use std::path::{Path, PathBuf};

use camdnn_daemon::config::DaemonConfig;
use proptest::prelude::*;
use proptest::sample::Index;

fn cases() -> u32 {
    match std::env::var("CAMDNN_FUZZ_CASES") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("CAMDNN_FUZZ_CASES={v:?} is not a number of cases")),
        Err(_) => 256,
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// (text, folder its relative paths resolve against) of every shipped config and fixture.
fn seeds() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for dir in [root().join("config"), root().join("daemon/tests/fixtures")] {
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("directory entry").path())
            .filter(|p| {
                p.extension().is_some_and(|x| x == "toml")
                    && !p.to_string_lossy().ends_with(".profile.toml")
            })
            .collect();
        files.sort();
        for f in files {
            out.push((std::fs::read_to_string(&f).expect("config"), dir.clone()));
        }
    }
    assert!(out.len() >= 5, "too few seed configs");
    out
}

/// What start-up and reload check before building a pipeline; `Err` names the problem.
fn check(text: &str, base: &Path) -> anyhow::Result<()> {
    let cfg: DaemonConfig = toml::from_str(text)?;
    cfg.server.validate()?;
    cfg.pipeline.check()?;
    cfg.pipeline.system(|p| base.join(p))?;
    Ok(())
}

#[derive(Debug, Clone)]
enum Edit {
    DropLine(Index),
    RepeatLine(Index),
    SwapLines(Index, Index),
    /// Replace the value of a `key = value` line.
    Value(Index, &'static str),
    /// Rename a key (unknown keys must be refused, not ignored).
    RenameKey(Index),
    Byte(Index, u8),
    InsertLine(Index, &'static str),
}

const VALUES: &[&str] = &[
    "0",
    "-1",
    "1",
    "4294967296",
    "18446744073709551616",
    "1e309",
    "nan",
    "-inf",
    "0.0",
    "\"\"",
    "\"x\"",
    "[]",
    "[1, \"a\"]",
    "{}",
    "{ kind = \"upstream\" }",
    "true",
    "1979-05-27",
    "0o777777",
    "\"/nonexistent/x.onnx\"",
    "[\"person\", \"person\"]",
];
const LINES: &[&str] = &[
    "[server]",
    "[pipeline]",
    "[[pipeline.model]]",
    "[[pipeline.processor]]",
    "name = \"detector\"",
    "parent = \"nobody\"",
    "classes = [\"person\"]",
    "max_objects = 0",
    "window = 0",
    "handshake_timeout_ms = 0",
    "engine = \"sim\"",
    "output = { kind = \"topk\", k = 0 }",
    "x = 1",
    "[metrics]",
    "listen = \"nope\"",
];

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        2 => any::<Index>().prop_map(Edit::DropLine),
        1 => any::<Index>().prop_map(Edit::RepeatLine),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        4 => (any::<Index>(), proptest::sample::select(VALUES)).prop_map(|(i, v)| Edit::Value(i, v)),
        1 => any::<Index>().prop_map(Edit::RenameKey),
        2 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Byte(i, b)),
        1 => (any::<Index>(), proptest::sample::select(LINES)).prop_map(|(i, l)| Edit::InsertLine(i, l)),
    ]
}

fn apply(text: &str, e: &Edit) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    if lines.is_empty() {
        lines.push(String::new());
    }
    let n = lines.len();
    match e {
        Edit::DropLine(i) => {
            lines.remove(i.index(n));
        }
        Edit::RepeatLine(i) => {
            let l = lines[i.index(n)].clone();
            lines.insert(i.index(n), l);
        }
        Edit::SwapLines(a, b) => lines.swap(a.index(n), b.index(n)),
        Edit::Value(i, v) => {
            let l = &mut lines[i.index(n)];
            if let Some(eq) = l.find('=') {
                *l = format!("{}= {v}", &l[..eq]);
            }
        }
        Edit::RenameKey(i) => {
            let l = &mut lines[i.index(n)];
            if l.contains('=') {
                l.insert(0, 'z');
            }
        }
        Edit::Byte(i, b) => {
            let mut bytes = lines.join("\n").into_bytes();
            if !bytes.is_empty() {
                let k = i.index(bytes.len());
                bytes[k] = *b;
            }
            return String::from_utf8_lossy(&bytes).into_owned();
        }
        Edit::InsertLine(i, l) => lines.insert(i.index(n + 1), (*l).to_owned()),
    }
    lines.join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Mutated configs are refused with a message or accepted; never a panic.
    #[test]
    fn mutated_configs_are_refused_or_accepted(
        seed in proptest::sample::select(seeds()),
        edits in prop::collection::vec(edit(), 1..6),
    ) {
        let (mut text, base) = seed;
        for e in &edits {
            text = apply(&text, e);
        }
        if let Err(e) = check(&text, &base) {
            let message = format!("{e:#}");
            prop_assert!(!message.is_empty());
        }
    }

    /// Arbitrary text is refused with a message; never a panic.
    #[test]
    fn arbitrary_text_is_refused(text in "\\PC{0,300}") {
        prop_assert!(check(&text, &root()).is_err());
    }
}

#[test]
fn every_shipped_config_passes_the_checks() {
    for (text, base) in seeds() {
        check(&text, &base).unwrap();
    }
}
