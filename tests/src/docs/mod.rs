//! Checks that keep the docs describing the product: no words about how the
//! project was made, no link or repo path to a file that is not there, no
//! command with a subcommand or flag its binary does not have.
//!
//! Each check returns [`Problem`]s naming the file, the line and what is
//! wrong; `tests/tests/docs.rs` runs them on the repository.

pub mod commands;
pub mod history;
pub mod paths;

use std::fmt;
use std::path::{Path, PathBuf};

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// One thing wrong in one file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    /// The file, relative to the repository root.
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// What is wrong, in words.
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.what)
    }
}

/// Folders never searched for docs or code besides the root `.gitignore`'s
/// anchored entries: git's own folder and package caches.
const ALWAYS_SKIPPED: [&str; 2] = [".git", "node_modules"];

/// Folders (relative to `root`) never searched: [`ALWAYS_SKIPPED`] and every
/// anchored, glob-free entry of the root `.gitignore` (build output, models,
/// virtualenvs, the cross toolchain: whatever `scripts/setup.sh` puts beside
/// the sources).
pub fn not_sources(root: &Path) -> Vec<PathBuf> {
    let ignore = std::fs::read_to_string(root.join(".gitignore")).unwrap_or_default();
    ALWAYS_SKIPPED
        .iter()
        .map(PathBuf::from)
        .chain(ignore.lines().filter_map(|line| {
            let entry = line.trim().strip_prefix('/')?.trim_end_matches('/');
            let plain = !entry.is_empty() && !entry.contains(['*', '?', '[', '!']);
            plain.then(|| PathBuf::from(entry))
        }))
        .collect()
}

/// Every file under `root` whose name satisfies `keep`, relative to `root`,
/// sorted, outside [`not_sources`]; symlinks are not followed.
pub fn files_under(root: &Path, keep: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let skipped = not_sources(root);
    let mut out: Vec<PathBuf> = walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| {
            let rel = e.path().strip_prefix(root).unwrap_or(e.path());
            !skipped.iter().any(|dir| rel.starts_with(dir))
        })
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && keep(e.path()))
        .map(|e| {
            e.path()
                .strip_prefix(root)
                .unwrap_or(e.path())
                .to_path_buf()
        })
        .collect();
    out.sort();
    out
}

/// The docs a user reads: `docs/**/*.md` and every `README.md`.
pub fn doc_files(root: &Path) -> Vec<PathBuf> {
    files_under(root, |p| {
        let rel = p.strip_prefix(root).unwrap_or(p);
        p.file_name().is_some_and(|n| n == "README.md")
            || (rel.starts_with("docs") && p.extension().is_some_and(|e| e == "md"))
    })
}

/// A piece of code a doc shows: an inline code span or one line of a fenced
/// or indented code block (continuation lines joined).
#[derive(Clone, Debug, PartialEq)]
pub struct Snippet {
    /// 1-based line where it starts.
    pub line: usize,
    pub text: String,
    /// From a code block (a whole shell line) rather than a code span.
    pub in_block: bool,
}

/// A link's target as written, with its line.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    pub line: usize,
    pub dest: String,
}

/// What the checks read of one Markdown file.
#[derive(Clone, Debug, Default)]
pub struct Doc {
    /// Every code span and code-block line.
    pub snippets: Vec<Snippet>,
    pub links: Vec<Link>,
    /// Heading lines: (line, text).
    pub headings: Vec<(usize, String)>,
}

/// Parses Markdown (CommonMark with GitHub tables) into what the checks read.
pub fn parse(text: &str) -> Doc {
    let lines = LineIndex::new(text);
    let mut doc = Doc::default();
    let mut block: Option<(usize, String)> = None;
    let mut heading: Option<(usize, String)> = None;
    let parser = Parser::new_ext(text, Options::ENABLE_TABLES).into_offset_iter();
    for (event, range) in parser {
        match event {
            Event::Start(Tag::CodeBlock(kind)) => {
                // A fenced block's text starts on the line after its fence.
                let first = match kind {
                    CodeBlockKind::Fenced(_) => lines.line_of(range.start) + 1,
                    CodeBlockKind::Indented => lines.line_of(range.start),
                };
                block = Some((first, String::new()));
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((first, body)) = block.take() {
                    doc.snippets.extend(block_lines(first, &body));
                }
            }
            Event::Text(t) if block.is_some() => {
                if let Some((_, body)) = block.as_mut() {
                    body.push_str(&t);
                }
            }
            Event::Code(code) => {
                if let Some((_, h)) = heading.as_mut() {
                    h.push_str(&code);
                }
                doc.snippets.push(Snippet {
                    line: lines.line_of(range.start),
                    text: code.to_string(),
                    in_block: false,
                });
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                doc.links.push(Link {
                    line: lines.line_of(range.start),
                    dest: dest_url.to_string(),
                });
            }
            Event::Start(Tag::Heading { .. }) => {
                heading = Some((lines.line_of(range.start), String::new()));
            }
            Event::End(TagEnd::Heading(_)) => doc.headings.extend(heading.take()),
            Event::Text(t) => {
                if let Some((_, h)) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            _ => {}
        }
    }
    doc
}

/// The logical lines of a code block starting at line `first`: a line
/// ending in `\` continues on the next, as in a shell.
fn block_lines(first: usize, body: &str) -> Vec<Snippet> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in body.lines().enumerate() {
        let line = first + i;
        let (start, mut text) = pending.take().unwrap_or((line, String::new()));
        let trimmed = raw.trim_end();
        if let Some(cont) = trimmed.strip_suffix('\\') {
            text.push_str(cont.trim_end());
            text.push(' ');
            pending = Some((start, text));
            continue;
        }
        text.push_str(trimmed);
        out.push(Snippet {
            line: start,
            text,
            in_block: true,
        });
    }
    if let Some((line, text)) = pending {
        out.push(Snippet {
            line,
            text,
            in_block: true,
        });
    }
    out
}

/// Byte offset to 1-based line number.
pub struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    pub fn line_of(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset)
    }
}

#[cfg(test)]
mod tests;
