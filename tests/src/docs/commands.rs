//! Commands a doc shows must exist: a `camdnnd` or `ilmodel` subcommand and
//! each `--flag` after it as the binary's `--help` lists them, and a cargo
//! package, test or bench target the workspace has.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{Doc, Problem};

/// The subcommands of one binary and the long flags of each, as its
/// `--help` lists them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cli {
    pub name: String,
    pub subcommands: BTreeMap<String, BTreeSet<String>>,
}

impl Cli {
    /// Reads `NAME --help` and `NAME SUB --help` for every subcommand
    /// through `help`, which runs the binary with the given arguments.
    pub fn from_help(
        name: &str,
        help: impl Fn(&[&str]) -> Result<String, String>,
    ) -> Result<Cli, String> {
        let top = help(&["--help"])?;
        let names = subcommands(&top);
        if names.is_empty() {
            return Err(format!("`{name} --help` lists no subcommands:\n{top}"));
        }
        let mut subcommands = BTreeMap::new();
        for sub in names.into_iter().filter(|s| s != "help") {
            let flags = long_flags(&help(&[&sub, "--help"])?);
            subcommands.insert(sub, flags);
        }
        Ok(Cli {
            name: name.to_string(),
            subcommands,
        })
    }
}

/// The names under clap's `Commands:` heading.
pub fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Every `--flag` an option line of a `--help` starts with.
pub fn long_flags(help: &str) -> BTreeSet<String> {
    help.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = match l.strip_prefix('-') {
                Some(rest) if !rest.starts_with('-') => rest.split_once(", ")?.1,
                _ => l,
            };
            let flag = l.strip_prefix("--")?;
            let end = flag
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(flag.len());
            (end > 0).then(|| flag[..end].to_string())
        })
        .collect()
}

/// A cargo package of the workspace and its targets.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Package {
    pub dir: PathBuf,
    pub bins: BTreeSet<String>,
    pub tests: BTreeSet<String>,
    pub benches: BTreeSet<String>,
}

/// The workspace's packages by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Workspace {
    pub packages: BTreeMap<String, Package>,
}

impl Workspace {
    /// Reads the members of `root/Cargo.toml` and their manifests.
    pub fn read(root: &Path) -> Result<Workspace, String> {
        let manifest = read_toml(&root.join("Cargo.toml"))?;
        let members = manifest
            .get("workspace")
            .and_then(|w| w.get("members"))
            .and_then(|m| m.as_array())
            .ok_or("Cargo.toml has no [workspace] members")?;
        let mut packages = BTreeMap::new();
        for member in members.iter().filter_map(|m| m.as_str()) {
            let dir = root.join(member);
            let toml = read_toml(&dir.join("Cargo.toml"))?;
            let name = toml
                .get("package")
                .and_then(|p| p.get("name"))
                .and_then(|n| n.as_str())
                .ok_or_else(|| format!("{member}/Cargo.toml has no package name"))?;
            let mut package = Package {
                dir: PathBuf::from(member),
                bins: targets(&toml, "bin"),
                tests: targets(&toml, "test"),
                benches: targets(&toml, "bench"),
            };
            if dir.join("src/main.rs").exists() && package.bins.is_empty() {
                package.bins.insert(name.to_string());
            }
            package.tests.extend(stems(&dir.join("tests")));
            package.benches.extend(stems(&dir.join("benches")));
            packages.insert(name.to_string(), package);
        }
        Ok(Workspace { packages })
    }

    /// The package that builds binary `bin`.
    fn package_of_bin(&self, bin: &str) -> Option<&str> {
        self.packages
            .iter()
            .find(|(_, p)| p.bins.contains(bin))
            .map(|(name, _)| name.as_str())
    }
}

fn read_toml(path: &Path) -> Result<toml::Table, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    text.parse::<toml::Table>()
        .map_err(|e| format!("parsing {}: {e}", path.display()))
}

/// The names of the `[[kind]]` targets of a manifest.
fn targets(toml: &toml::Table, kind: &str) -> BTreeSet<String> {
    toml.get(kind)
        .and_then(|t| t.as_array())
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("name").and_then(|n| n.as_str()))
        .map(str::to_string)
        .collect()
}

/// The stems of the `.rs` files directly in `dir`.
fn stems(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_string()))
        .collect()
}

/// Every command in `doc`'s code that names a subcommand, flag, package or
/// target that does not exist.
pub fn bad_commands(
    root: &Path,
    file: &Path,
    doc: &Doc,
    clis: &[Cli],
    workspace: &Workspace,
) -> Vec<Problem> {
    let mut out = Vec::new();
    for snippet in &doc.snippets {
        for segment in segments(&snippet.text) {
            let wrong = check_segment(root, &segment, clis, workspace);
            out.extend(wrong.into_iter().map(|what| Problem {
                file: file.to_path_buf(),
                line: snippet.line,
                what: format!("`{}`: {what}", shorten(&segment.join(" "))),
            }));
        }
    }
    out
}

fn shorten(command: &str) -> String {
    const MAX: usize = 100;
    match command.char_indices().nth(MAX) {
        Some((at, _)) => format!("{} ...", &command[..at]),
        None => command.to_string(),
    }
}

/// The simple commands of one line of shell: comments and a `$ ` prompt
/// dropped, split at `|`, `;`, `&&` and `&`. A `|` inside brackets or
/// parentheses separates alternatives of a usage line and does not split.
pub fn segments(line: &str) -> Vec<Vec<String>> {
    let line = line.trim_start();
    let line = line.strip_prefix("$ ").unwrap_or(line);
    let line = match line.find('#') {
        Some(0) => "",
        Some(at) if line[..at].ends_with(char::is_whitespace) => &line[..at],
        _ => line,
    };
    let words =
        shlex::split(line).unwrap_or_else(|| line.split_whitespace().map(str::to_string).collect());
    let mut out = vec![Vec::new()];
    let mut depth = 0i32;
    for word in words {
        let opens = word.matches(['(', '[']).count() as i32;
        let closes = word.matches([')', ']']).count() as i32;
        let inside = depth + opens > 0;
        depth = (depth + opens - closes).max(0);
        let parts: Vec<&str> = if inside {
            vec![word.as_str()]
        } else {
            word.split('|').collect()
        };
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                out.push(Vec::new());
            }
            let ends = !inside && (part.ends_with(';') || *part == "&&" || *part == "&");
            let token = part
                .trim_end_matches(';')
                .trim_matches(|c: char| "()[],".contains(c));
            if !(token.is_empty() || token == "&&" || token == "&" || inside && token == "|") {
                out.last_mut()
                    .expect("one segment at least")
                    .push(token.to_string());
            }
            if ends {
                out.push(Vec::new());
            }
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// How many commands in `doc`'s code the check reads: a `camdnnd` or
/// `ilmodel` run (directly or after a `--`) or a cargo command. A floor on
/// it keeps the check from passing by reading nothing.
pub fn count_commands(doc: &Doc, clis: &[Cli]) -> usize {
    doc.snippets
        .iter()
        .flat_map(|s| segments(&s.text))
        .filter(|words| {
            let start = program_at(words);
            match words.get(start) {
                Some(program) if program == "cargo" => true,
                Some(_) => binary_at(words, start, clis).is_some(),
                None => false,
            }
        })
        .count()
}

/// Where the program of a simple command is, after [`PREFIXES`] and
/// variable assignments.
fn program_at(words: &[String]) -> usize {
    words
        .iter()
        .position(|w| !(PREFIXES.contains(&w.as_str()) || is_assignment(w)))
        .unwrap_or(words.len())
}

/// The binary a command runs and its position: the program itself, or the
/// word after a `--` (`perf record ... -- camdnnd ...`).
fn binary_at<'a>(words: &[String], start: usize, clis: &'a [Cli]) -> Option<(&'a Cli, usize)> {
    (start..words.len()).find_map(|i| {
        let cli = cli_named(clis, &words[i])?;
        (i == start || words[i - 1] == "--").then_some((cli, i))
    })
}

/// Words a command may start with before the program it runs.
const PREFIXES: [&str; 7] = [
    "sudo",
    "nice",
    "time",
    "/usr/bin/time",
    "env",
    "exec",
    "nohup",
];

/// What is wrong with one simple command.
fn check_segment(root: &Path, words: &[String], clis: &[Cli], ws: &Workspace) -> Vec<String> {
    let start = program_at(words);
    let Some(program) = words.get(start) else {
        return Vec::new();
    };
    if program == "cargo" {
        return check_cargo(root, &words[start + 1..], clis, ws);
    }
    match binary_at(words, start, clis) {
        Some((cli, i)) => check_args(cli, &words[i + 1..]),
        None => Vec::new(),
    }
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The CLI a program word runs: its name, or a path ending in it.
fn cli_named<'a>(clis: &'a [Cli], word: &str) -> Option<&'a Cli> {
    clis.iter()
        .find(|c| word == c.name || word.ends_with(&format!("/{}", c.name)))
}

/// Checks the arguments of a binary: its subcommand and every `--flag`.
pub fn check_args(cli: &Cli, args: &[String]) -> Vec<String> {
    let name = &cli.name;
    let Some(sub) = args.first() else {
        return Vec::new();
    };
    if sub.starts_with('-') {
        return match sub.as_str() {
            "--help" | "-h" | "--version" | "-V" => Vec::new(),
            _ => vec![format!(
                "{name} takes no option {sub} before its subcommand"
            )],
        };
    }
    if is_placeholder_word(sub) {
        return Vec::new();
    }
    let Some(flags) = cli.subcommands.get(sub) else {
        let known: Vec<&str> = cli.subcommands.keys().map(String::as_str).collect();
        return vec![format!(
            "`{name} --help` lists no subcommand `{sub}` (it lists {})",
            known.join(", ")
        )];
    };
    args[1..]
        .iter()
        .take_while(|a| *a != "--")
        .filter_map(|a| a.strip_prefix("--"))
        .map(|a| a.split('=').next().unwrap_or(a))
        .filter(|f| !f.is_empty() && !["help", "version"].contains(f) && !flags.contains(*f))
        .map(|f| format!("`{name} {sub} --help` lists no flag --{f}"))
        .collect()
}

/// A word the reader replaces (`SUB`, `COMMAND`).
fn is_placeholder_word(word: &str) -> bool {
    word.chars()
        .all(|c| c.is_ascii_uppercase() || c == '_' || c == '-')
}

/// Checks `cargo run|test|bench|build ...`: the packages, the test or
/// bench target, a test filter, and for `run` the binary's own arguments.
fn check_cargo(root: &Path, words: &[String], clis: &[Cli], ws: &Workspace) -> Vec<String> {
    let values = |flags: &[&str]| -> Vec<String> {
        words
            .windows(2)
            .take_while(|w| w[0] != "--")
            .filter(|w| flags.contains(&w[0].as_str()) && !is_placeholder_word(&w[1]))
            .map(|w| w[1].clone())
            .collect()
    };
    let mut wrong: Vec<String> = values(&["-p", "--package"])
        .iter()
        .filter(|name| !ws.packages.contains_key(*name))
        .map(|name| format!("the workspace has no package {name}"))
        .collect();
    if !wrong.is_empty() {
        return wrong;
    }
    let package = values(&["-p", "--package"]).into_iter().next();
    let pkg = package.as_ref().and_then(|name| ws.packages.get(name));
    let name = package.as_deref().unwrap_or("");
    if let (Some(p), Some(test)) = (pkg, values(&["--test"]).into_iter().next()) {
        if !p.tests.contains(&test) {
            wrong.push(format!("{name} has no test target {test}"));
        } else if let Some(filter) = test_filter(words) {
            let file = p.dir.join("tests").join(format!("{test}.rs"));
            let text = std::fs::read_to_string(root.join(&file)).unwrap_or_default();
            if !text.contains(&filter) {
                wrong.push(format!(
                    "no test in {} matches the filter {filter}",
                    file.display()
                ));
            }
        }
    }
    if let (Some(p), Some(bench)) = (pkg, values(&["--bench"]).into_iter().next()) {
        if !p.benches.contains(&bench) {
            wrong.push(format!("{name} has no bench target {bench}"));
        }
    }
    if words.first().is_some_and(|w| w == "run") {
        let bin = values(&["--bin"]).into_iter().next().or_else(|| {
            let p = pkg?;
            (p.bins.len() == 1).then(|| p.bins.iter().next().cloned())?
        });
        let args_at = words
            .iter()
            .position(|w| w == "--")
            .map_or(words.len(), |i| i + 1);
        match bin
            .as_deref()
            .and_then(|b| clis.iter().find(|c| c.name == b))
        {
            Some(cli) => wrong.extend(check_args(cli, &words[args_at..])),
            None => {
                if let Some(b) = bin.filter(|b| ws.package_of_bin(b).is_none()) {
                    wrong.push(format!("the workspace has no binary {b}"));
                }
            }
        }
    }
    wrong
}

/// The filter of `cargo test ... --test NAME FILTER`: the first word after
/// the test's name that is not a flag, before `--`.
fn test_filter(words: &[String]) -> Option<String> {
    let at = words.iter().position(|w| w == "--test")? + 2;
    words
        .get(at..)?
        .iter()
        .take_while(|w| *w != "--")
        .find(|w| !w.starts_with('-'))
        .cloned()
}
