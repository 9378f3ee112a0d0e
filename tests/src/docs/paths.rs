//! Relative links and repo paths a doc names must exist.

use std::path::{Component, Path, PathBuf};

use super::{Doc, Problem};

/// Where paths in docs may point without being in a clean clone: build
/// output, what `scripts/setup.sh` downloads, and scratch folders.
const GENERATED: [&str; 6] = [
    "target",
    "models",
    "testdata",
    ".venv",
    ".venv-litert",
    ".cross",
];

/// Every relative link of `doc` (in `file`, relative to `root`) whose file
/// or folder does not exist.
pub fn broken_links(root: &Path, file: &Path, doc: &Doc) -> Vec<Problem> {
    let dir = file.parent().unwrap_or(Path::new(""));
    doc.links
        .iter()
        .filter_map(|link| {
            let dest = link_path(&link.dest)?;
            let target = normalise(&dir.join(dest))?;
            (!root.join(&target).exists()).then(|| Problem {
                file: file.to_path_buf(),
                line: link.line,
                what: format!(
                    "links {:?}, and {} does not exist",
                    link.dest,
                    target.display()
                ),
            })
        })
        .collect()
}

/// The file part of a link's target, or `None` for a web address, an
/// anchor in the same page or a mail address.
fn link_path(dest: &str) -> Option<&str> {
    if dest.is_empty()
        || dest.starts_with('#')
        || dest.contains("://")
        || dest.starts_with("mailto:")
    {
        return None;
    }
    let path = dest.split(['#', '?']).next().unwrap_or(dest);
    (!path.is_empty()).then_some(path)
}

/// `a/./b/../c` as `a/c`; `None` when it climbs out of the repository or is
/// absolute.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Every path in `doc`'s code (spans and code-block words) that names a
/// file or folder of the repository that does not exist. A word counts as a
/// repo path when its first component exists at the repository root or
/// beside the doc; placeholders (`DIR`, `gen-SEED.toml`, `{a,b}`, `*`) and
/// generated folders ([`GENERATED`]) are left alone.
pub fn missing_paths(root: &Path, file: &Path, doc: &Doc) -> Vec<Problem> {
    let dir = file.parent().unwrap_or(Path::new(""));
    let mut out = Vec::new();
    for snippet in &doc.snippets {
        for word in snippet.text.split_whitespace() {
            let Some(path) = path_word(word) else {
                continue;
            };
            if let Some(missing) = missing(root, dir, path) {
                out.push(Problem {
                    file: file.to_path_buf(),
                    line: snippet.line,
                    what: format!("names `{path}`, and {} does not exist", missing.display()),
                });
            }
        }
    }
    out
}

/// The path a code word names, trimmed of quotes, punctuation, a `:LINE`
/// or `::item` suffix and an assignment's left side; `None` when the word
/// is not a relative path with a folder in it or is a placeholder.
fn path_word(word: &str) -> Option<&str> {
    let word = word.rsplit_once('=').map_or(word, |(_, value)| value);
    let word = word.trim_matches(|c: char| "\"'`(),;".contains(c));
    if is_placeholder(word) {
        return None;
    }
    let word = word.split("::").next().unwrap_or(word);
    let word = strip_line_suffix(word.trim_end_matches([':', '.']));
    if !word.contains('/') || word.starts_with('/') || word.starts_with('-') || word.contains("://")
    {
        return None;
    }
    let word = word.trim_start_matches("./");
    let first = word.split('/').next().unwrap_or(word);
    if GENERATED.contains(&first) {
        return None;
    }
    Some(word.trim_end_matches('/'))
}

/// `file.rs:123` as `file.rs`.
fn strip_line_suffix(word: &str) -> &str {
    match word.rsplit_once(':') {
        Some((path, line)) if !line.is_empty() && line.chars().all(|c| c.is_ascii_digit()) => path,
        _ => word,
    }
}

/// A word standing for a value the reader fills in: a glob or brace list,
/// a shell variable, an ellipsis, or a component with an upper-case word
/// (`DIR`, `gen-SEED.toml`, `host-X.toml`) other than a file's usual name.
fn is_placeholder(word: &str) -> bool {
    if word.contains(['*', '?', '{', '}', '<', '>', '$', '|', '[', ']']) || word.contains("...") {
        return true;
    }
    word.split(['/', '-', '_', '.']).any(|part| {
        !part.is_empty()
            && part
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            && part.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && !["README", "LICENSE", "CHANGELOG"].contains(&part)
    })
}

/// The missing path `path` names, relative to the repository root, when
/// its first component is at the root or beside the doc (in `dir`).
fn missing(root: &Path, dir: &Path, path: &str) -> Option<PathBuf> {
    let first = Path::new(path).components().next()?;
    let bases: Vec<PathBuf> = [PathBuf::new(), dir.to_path_buf()]
        .into_iter()
        .filter(|base| root.join(base).join(first).exists())
        .collect();
    if bases.is_empty() {
        return None;
    }
    let candidates: Vec<PathBuf> = bases
        .iter()
        .filter_map(|base| normalise(&base.join(path)))
        .collect();
    if candidates.iter().any(|c| root.join(c).exists()) {
        None
    } else {
        candidates.into_iter().next()
    }
}
