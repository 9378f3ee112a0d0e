//! Words about how the project was made, not about the product: rounds of
//! work counted by ordinal (see `ORDINALS`), issue and item numbers,
//! "not kept" diaries and dated diary headings. History lives in git.

use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

use super::{Doc, Problem};

/// Ordinals a round of work was counted by.
const ORDINALS: &str = "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\
    eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|\
    nineteenth|twentieth|\\d+(?:st|nd|rd|th)";

/// Each pattern with the words a failure names it by.
static PATTERNS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    let rounds = format!(r"(?i)\b(?:{ORDINALS}|this|that|last|previous|next) sessions?\b");
    [
        (rounds.as_str(), "a round of work by ordinal"),
        (r"(?i)\bsessions? (?:before|after)\b", "a round of work"),
        (r"(?i)\brounds? of work\b", "a round of work"),
        (r"(?i)\bissues? #?\d+", "an issue number"),
        (r"(?i)\bitems? \d+\b", "an item number"),
        (r"(?i)\b(?:not|none) kept\b", "a \"not kept\" diary"),
    ]
    .into_iter()
    .map(|(re, what)| (Regex::new(re).expect("valid pattern"), what))
    .collect()
});

/// A date as a diary heading carries it.
static DATE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b20\d\d-\d\d-\d\d\b").expect("valid pattern"));

/// Every line of `text` that refers to how the project was made.
pub fn words(file: &Path, text: &str) -> Vec<Problem> {
    text.lines()
        .enumerate()
        .flat_map(|(i, line)| line_words(file, i + 1, line))
        .collect()
}

/// The same for one line.
fn line_words(file: &Path, line: usize, text: &str) -> Vec<Problem> {
    PATTERNS
        .iter()
        .filter_map(|(re, what)| {
            re.find(text).map(|m| Problem {
                file: file.to_path_buf(),
                line,
                what: format!(
                    "refers to how the project was made ({what}): {:?}",
                    m.as_str()
                ),
            })
        })
        .collect()
}

/// Headings that date a section, as a diary does.
pub fn dated_headings(file: &Path, doc: &Doc) -> Vec<Problem> {
    doc.headings
        .iter()
        .filter_map(|(line, heading)| {
            DATE.find(heading).map(|m| Problem {
                file: file.to_path_buf(),
                line: *line,
                what: format!(
                    "a dated diary heading ({}): say what is true now and cite the command",
                    m.as_str()
                ),
            })
        })
        .collect()
}

/// The comment marker of a source file by its extension, when it has one
/// the check reads.
pub fn comment_marker(path: &Path) -> Option<&'static str> {
    match path.extension()?.to_str()? {
        "rs" => Some("//"),
        "sh" | "py" | "toml" | "yml" | "yaml" => Some("#"),
        _ => None,
    }
}

/// Every comment line of a source file (the text from `marker` on) that
/// refers to how the project was made.
pub fn comment_words(file: &Path, text: &str, marker: &str) -> Vec<Problem> {
    text.lines()
        .enumerate()
        .filter_map(|(i, line)| line.find(marker).map(|at| (i + 1, &line[at..])))
        .flat_map(|(line, comment)| line_words(file, line, comment))
        .collect()
}
