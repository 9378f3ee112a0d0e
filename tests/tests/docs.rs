//! The docs (docs/**/*.md and every README.md) describe the product as it
//! is now: they do not refer to rounds of work, issue or item numbers, "not
//! kept" diaries or dated diary headings (nor do code comments); every
//! relative link and backticked repo path exists; and every `camdnnd` or
//! `ilmodel` command they show uses a subcommand and flags the binary's
//! `--help` lists, every cargo command a package and target that exist.
//!
//! The commands are checked against the built binaries' own `--help`, so
//! the check is exactly what a user typing the command would meet. This
//! crate does not depend on the daemon or ilmodel (linking them would make
//! this test build as heavy as theirs), so it runs the binaries cargo built
//! beside it: `cargo test --workspace` (what `scripts/test.sh` runs) builds
//! them, as the daemon's and ilmodel's integration tests need them. Run
//! alone, this test fails with the command that builds them when they are
//! missing or older than their sources.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use camdnn_tests::docs::commands::{bad_commands, count_commands, Cli, Workspace};
use camdnn_tests::docs::{files_under, history, parse, paths, Problem};
use camdnn_tests::{docs, repo_root};

/// Docs allowed, for now, to keep words about how the project was made.
const HISTORY_ALLOWED_DOCS: [&str; 0] = [];

/// Source folders whose comments may keep such words (none).
const HISTORY_ALLOWED_CODE: [&str; 0] = [];

/// Fewer commands read than this means the check stopped reading the docs'
/// code (the docs show about 140).
const MIN_COMMANDS: usize = 100;

/// This check's own sources, which name the words it looks for.
const THE_CHECK_ITSELF: [&str; 2] = ["tests/src/docs/", "tests/tests/docs.rs"];

fn read(root: &Path, rel: &Path) -> String {
    std::fs::read_to_string(root.join(rel))
        .unwrap_or_else(|e| panic!("reading {}: {e}", rel.display()))
}

/// Fails with every problem, one per line, under `title`.
fn assert_none(title: &str, mut problems: Vec<Problem>) {
    problems.sort();
    problems.dedup();
    let lines: Vec<String> = problems.iter().map(Problem::to_string).collect();
    assert!(
        lines.is_empty(),
        "{title} ({} found):\n{}",
        lines.len(),
        lines.join("\n")
    );
}

#[test]
fn no_doc_refers_to_how_the_project_was_made() {
    let root = repo_root();
    let mut problems = Vec::new();
    let files = docs::doc_files(&root);
    assert!(files.len() >= 10, "too few docs found: {files:?}");
    for file in files {
        if HISTORY_ALLOWED_DOCS.iter().any(|a| file == Path::new(a)) {
            continue;
        }
        let text = read(&root, &file);
        problems.extend(history::words(&file, &text));
        problems.extend(history::dated_headings(&file, &parse(&text)));
    }
    assert_none(
        "docs must say what is true now; history lives in git and lasting decisions in \
         docs/decisions.md",
        problems,
    );
}

#[test]
fn no_code_comment_refers_to_how_the_project_was_made() {
    let root = repo_root();
    let mut problems = Vec::new();
    let files = files_under(&root, |p| history::comment_marker(p).is_some());
    assert!(
        files.len() >= 50,
        "too few source files found: {}",
        files.len()
    );
    for file in files {
        let slash = file.to_string_lossy().replace('\\', "/");
        let allowed = HISTORY_ALLOWED_CODE
            .iter()
            .chain(&THE_CHECK_ITSELF)
            .any(|a| slash.starts_with(a));
        if allowed {
            continue;
        }
        let marker = history::comment_marker(&file).expect("filtered on it");
        problems.extend(history::comment_words(&file, &read(&root, &file), marker));
    }
    assert_none(
        "comments must say what the code does and why; history lives in git",
        problems,
    );
}

#[test]
fn every_link_and_repo_path_in_the_docs_exists() {
    let root = repo_root();
    let mut problems = Vec::new();
    let mut links = 0;
    for file in docs::doc_files(&root) {
        let doc = parse(&read(&root, &file));
        links += doc.links.len();
        problems.extend(paths::broken_links(&root, &file, &doc));
        problems.extend(paths::missing_paths(&root, &file, &doc));
    }
    assert!(
        links >= 20,
        "only {links} links found in the docs: the check is not reading them"
    );
    assert_none("every file a doc links or names must exist", problems);
}

#[test]
fn every_command_in_the_docs_exists() {
    let root = repo_root();
    let clis = [
        cli(&root, "camdnnd", "daemon", "camdnn-daemon"),
        cli(&root, "ilmodel", "ilmodel", "camdnn-ilmodel"),
    ];
    let workspace = Workspace::read(&root).unwrap_or_else(|e| panic!("{e}"));
    let mut problems = Vec::new();
    let mut read_commands = 0;
    for file in docs::doc_files(&root) {
        let doc = parse(&read(&root, &file));
        read_commands += count_commands(&doc, &clis);
        problems.extend(bad_commands(&root, &file, &doc, &clis, &workspace));
    }
    assert!(
        read_commands >= MIN_COMMANDS,
        "the check read only {read_commands} commands in the docs (at least {MIN_COMMANDS} \
         expected): it is not reading the docs' code"
    );
    assert_none(
        "every command a doc shows must run: subcommands and flags as `--help` lists them, \
         packages and targets the workspace has",
        problems,
    );
}

/// The CLI of binary `name`, built from `crate_dir`'s sources by package
/// `package`, read from its `--help`.
fn cli(root: &Path, name: &str, crate_dir: &str, package: &str) -> Cli {
    let bin = built_binary(root, name, crate_dir, package);
    Cli::from_help(name, |args| {
        let out = Command::new(&bin)
            .args(args)
            .output()
            .map_err(|e| format!("running {} {}: {e}", bin.display(), args.join(" ")))?;
        if !out.status.success() {
            return Err(format!(
                "{} {} failed: {}",
                bin.display(),
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The binary cargo built beside this test, checked to be newer than every
/// source file of its crate.
fn built_binary(root: &Path, name: &str, crate_dir: &str, package: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test runs from target/PROFILE/deps");
    let bin = profile_dir.join(name);
    let how = format!(
        "build it first: `cargo build -p {package}` (`cargo test --workspace`, as \
         scripts/test.sh runs, builds it too)"
    );
    let built = std::fs::metadata(&bin)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| {
            panic!(
                "{} is missing; this test reads its --help; {how}",
                bin.display()
            )
        });
    let src = root.join(crate_dir).join("src");
    let newest = files_under(&src, |p| p.extension().is_some_and(|e| e == "rs"))
        .into_iter()
        .filter_map(|f| {
            std::fs::metadata(src.join(&f))
                .and_then(|m| m.modified())
                .ok()
        })
        .max()
        .unwrap_or(SystemTime::UNIX_EPOCH);
    assert!(
        built >= newest,
        "{} is older than {}; this test reads its --help; {how}",
        bin.display(),
        src.display()
    );
    bin
}
