//! Each check on small hand-written docs: what it must flag and what it
//! must leave alone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::commands::{self, Cli, Package, Workspace};
use super::{history, parse, paths};

fn whats(problems: &[super::Problem]) -> Vec<String> {
    problems
        .iter()
        .map(|p| format!("{}: {}", p.line, p.what))
        .collect()
}

#[test]
fn code_spans_blocks_links_and_headings_are_found_with_their_lines() {
    let text = "# Title `x`\n\nSee [ops](docs/operations.md) and `camdnnd serve`.\n\n\
        | a | b |\n|---|---|\n| `feed (--images DIR \\| --trace F)` | c |\n\n\
        ```sh\ncamdnnd suite \\\n  --boards 3\n# a comment\n```\n";
    let doc = parse(text);
    assert_eq!(doc.headings, [(1, "Title x".to_string())]);
    assert_eq!(doc.links.len(), 1);
    assert_eq!(
        (doc.links[0].line, doc.links[0].dest.as_str()),
        (3, "docs/operations.md")
    );
    let snippets: Vec<(usize, &str, bool)> = doc
        .snippets
        .iter()
        .map(|s| (s.line, s.text.as_str(), s.in_block))
        .collect();
    assert_eq!(
        snippets,
        [
            (1, "x", false),
            (3, "camdnnd serve", false),
            (7, "feed (--images DIR | --trace F)", false),
            (10, "camdnnd suite   --boards 3", true),
            (12, "# a comment", true),
        ]
    );
}

#[test]
fn words_about_rounds_of_work_issues_items_and_diaries_are_flagged() {
    let text = "As the fifteenth session found,\nissue 13's floor\nitem 4 stands\n\
        measured, not kept\nthe 3rd session\nan ONNX Runtime session per model\n\
        items per model\n";
    let found = whats(&history::words(Path::new("d.md"), text));
    assert_eq!(found.len(), 5, "{found:#?}");
    for (line, word) in [
        (1, "fifteenth session"),
        (2, "issue 13"),
        (3, "item 4"),
        (4, "not kept"),
    ] {
        assert!(
            found
                .iter()
                .any(|f| f.starts_with(&format!("{line}:")) && f.contains(word)),
            "line {line} ({word}) not flagged: {found:#?}"
        );
    }
}

#[test]
fn a_dated_heading_is_flagged_and_a_date_in_prose_is_not() {
    let doc = parse("# Results (2026-11-24)\n\nMeasured 2026-11-23.\n\n## Now\n");
    let found = whats(&history::dated_headings(Path::new("d.md"), &doc));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].starts_with("1: a dated diary heading (2026-11-24)"));
}

#[test]
fn only_comments_are_read_in_source_files() {
    let text = "let issue = 3; // fine\n/// issue 14: the old bug\nprintln!(\"item 4\");\n";
    let found = whats(&history::comment_words(Path::new("a.rs"), text, "//"));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].starts_with("2: "));
    assert_eq!(history::comment_marker(Path::new("x.toml")), Some("#"));
    assert_eq!(history::comment_marker(Path::new("x.md")), None);
}

/// A repository with `docs/ops.md`, `config/a.toml` and `deploy/k8s/job.yaml`.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for file in [
        "docs/ops.md",
        "config/a.toml",
        "deploy/k8s/job.yaml",
        "README.md",
    ] {
        let path = dir.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "").unwrap();
    }
    dir
}

#[test]
fn a_link_to_a_missing_file_is_flagged_with_where_it_resolves() {
    let root = repo();
    let doc =
        parse("[a](ops.md) [b](../config/a.toml#x) [c](gone.md) [d](https://x.org/y) [e](#top)\n");
    let found = whats(&paths::broken_links(
        root.path(),
        Path::new("docs/x.md"),
        &doc,
    ));
    assert_eq!(
        found,
        ["1: links \"gone.md\", and docs/gone.md does not exist"]
    );
}

#[test]
fn a_backticked_repo_path_that_does_not_exist_is_flagged() {
    let root = repo();
    let doc = parse(
        "`config/a.toml` `config/b.toml` `config/host-X.toml` `k8s/job.yaml` \
         `k8s/gone.yaml` `target/release/camdnnd` `W/T/L` `docs/ops.md:12` \
         `policy::suite::report`\n\n```sh\nrun --config config/a.toml --out config/c.toml\n```\n",
    );
    let found = whats(&paths::missing_paths(
        root.path(),
        Path::new("deploy/README.md"),
        &doc,
    ));
    assert_eq!(
        found,
        [
            "1: names `config/b.toml`, and config/b.toml does not exist",
            "1: names `k8s/gone.yaml`, and deploy/k8s/gone.yaml does not exist",
            "4: names `config/c.toml`, and config/c.toml does not exist",
        ]
    );
}

#[test]
fn shell_lines_split_into_commands_but_not_at_alternatives() {
    let words = |s: &[&str]| s.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    assert_eq!(
        commands::segments("$ A=1 camdnnd suite --cases | head; ls && pwd # note"),
        [
            words(&["A=1", "camdnnd", "suite", "--cases"]),
            words(&["head"]),
            words(&["ls"]),
            words(&["pwd"])
        ]
    );
    assert_eq!(
        commands::segments("camdnnd feed (--images DIR | --trace F) --fps 14 &"),
        [words(&[
            "camdnnd", "feed", "--images", "DIR", "--trace", "F", "--fps", "14"
        ])]
    );
    assert_eq!(
        commands::segments("camdnnd bench --rates '' [--drill P:F]"),
        [words(&["camdnnd", "bench", "--rates", "--drill", "P:F"])]
    );
}

#[test]
fn clap_help_gives_subcommands_and_long_flags() {
    let top = "Usage: camdnnd <COMMAND>\n\nCommands:\n  simulate  Runs\n  suite     Runs\n  help      Print\n\nOptions:\n  -h, --help  Print help\n";
    assert_eq!(commands::subcommands(top), ["simulate", "suite", "help"]);
    let sub = "Options:\n      --boards <BOARDS>\n          Generated boards\n  -h, --help\n      --no-drop\n";
    let flags: Vec<String> = commands::long_flags(sub).into_iter().collect();
    assert_eq!(flags, ["boards", "help", "no-drop"]);
}

fn camdnnd() -> Cli {
    let set = |f: &[&str]| f.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    Cli {
        name: "camdnnd".into(),
        subcommands: BTreeMap::from([
            ("suite".to_string(), set(&["boards", "cases"])),
            ("serve".to_string(), set(&["config"])),
        ]),
    }
}

fn workspace() -> Workspace {
    let set = |f: &[&str]| f.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    Workspace {
        packages: BTreeMap::from([(
            "camdnn-daemon".to_string(),
            Package {
                dir: PathBuf::from("daemon"),
                bins: set(&["camdnnd"]),
                tests: set(&["service_binary"]),
                benches: BTreeSet::new(),
            },
        )]),
    }
}

#[test]
fn an_unknown_subcommand_or_flag_is_flagged_and_known_ones_pass() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("daemon/tests")).unwrap();
    std::fs::write(
        root.path().join("daemon/tests/service_binary.rs"),
        "fn overload() {}",
    )
    .unwrap();
    let doc = parse(
        "`camdnnd suite --boards 30 --cases`\n`target/release/camdnnd suite --jobs 2`\n\
         `camdnnd simulat`\n`cargo run --release -p camdnn-daemon -- serve --config c --port 1`\n\
         `systemctl reload camdnnd`\n`camdnnd SUB --help`\n\
         `cargo test -p camdnn-daemon --test service_binary overload`\n\
         `cargo test -p camdnn-daemon --test service_binary chaos`\n\
         `cargo test -p camdnn-daemon --test service_bin`\n`cargo bench -p camdnn-polic`\n",
    );
    assert_eq!(
        commands::count_commands(&doc, &[camdnnd()]),
        9,
        "all but systemctl's line"
    );
    let found = whats(&commands::bad_commands(
        root.path(),
        Path::new("d.md"),
        &doc,
        &[camdnnd()],
        &workspace(),
    ));
    let expect = [
        "2: `target/release/camdnnd suite --jobs 2`: `camdnnd suite --help` lists no flag --jobs",
        "3: `camdnnd simulat`: `camdnnd --help` lists no subcommand `simulat` (it lists serve, suite)",
        "4: `cargo run --release -p camdnn-daemon -- serve --config c --port 1`: `camdnnd serve --help` lists no flag --port",
        "8: `cargo test -p camdnn-daemon --test service_binary chaos`: no test in daemon/tests/service_binary.rs matches the filter chaos",
        "9: `cargo test -p camdnn-daemon --test service_bin`: camdnn-daemon has no test target service_bin",
        "10: `cargo bench -p camdnn-polic`: the workspace has no package camdnn-polic",
    ];
    assert_eq!(found, expect);
}

#[test]
fn folders_the_root_gitignore_anchors_are_not_searched() {
    let root = tempfile::tempdir().unwrap();
    let write = |rel: &str| {
        let path = root.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "# x\n").unwrap();
    };
    std::fs::write(root.path().join(".gitignore"), "/.cross/\n/out\n*.log\n").unwrap();
    for rel in [
        "README.md",
        ".cross/venv/README.md",
        "out/README.md",
        "docs/README.md",
    ] {
        write(rel);
    }
    assert_eq!(
        super::doc_files(root.path()),
        [PathBuf::from("README.md"), PathBuf::from("docs/README.md")]
    );
}
