//! `ilmodel reproduce`: its options, the policy files it reads and the
//! report it writes.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use super::{PolicyFiles, ReproConfig};
use crate::mlp_cli::read_system;
use crate::reproduce;

/// Options of `ilmodel reproduce`.
#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// System TOML file.
    #[arg(long, default_value = "config/profiles/rb5.toml")]
    pub system: PathBuf,
    /// Learned policy (ONNX); its sidecar is the same path with
    /// `.policy.json` instead of `.onnx`. Default: config/policies/NAME.onnx.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Markdown report to write.
    #[arg(long, default_value = "docs/results.md")]
    pub out: PathBuf,
    /// Folder for the SVG plots (linked from the report by its path
    /// relative to the report's folder).
    #[arg(long, default_value = "docs/results")]
    pub svg_dir: PathBuf,
    /// Smoke test: coarse scene grid, few Table 6 scenes and instances.
    #[arg(long)]
    pub quick: bool,
    /// Worker threads; default: every core.
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Deadline of the real-time measures, ms (default: two frame periods).
    #[arg(long)]
    pub deadline_ms: Option<f64>,
}

/// Runs `ilmodel reproduce`.
pub fn run(args: &ReproduceArgs) -> Result<()> {
    let (_, system) = read_system(&args.system)?;
    let onnx_path = args.policy.clone().unwrap_or_else(|| {
        args.system
            .parent()
            .unwrap_or(Path::new("."))
            .join("..")
            .join("policies")
            .join(format!("{}.onnx", system.name))
    });
    let side_path = crate::export::sidecar_path(&onnx_path);
    let policy = PolicyFiles {
        onnx: std::fs::read(&onnx_path)
            .with_context(|| format!("reading the policy {}", onnx_path.display()))?,
        sidecar: std::fs::read_to_string(&side_path)
            .with_context(|| format!("reading the policy sidecar {}", side_path.display()))?,
    };
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if let Some(d) = args.deadline_ms {
        if !(d.is_finite() && d > 0.0) {
            bail!("--deadline-ms {d}: must be a positive number of ms");
        }
    }
    let config = ReproConfig {
        deadline_ms: args.deadline_ms,
        ..if args.quick {
            ReproConfig::quick(jobs)
        } else {
            ReproConfig::full(jobs)
        }
    };
    let start = std::time::Instant::now();
    let results = reproduce::run(&system, &policy, &config, |stage| {
        eprintln!("[{:6.1} s] {stage}", start.elapsed().as_secs_f64());
    })?;
    let link = relative_link(&args.out, &args.svg_dir);
    let command = format!(
        "ilmodel reproduce --system {}{}{}",
        args.system.display(),
        if args.quick { " --quick" } else { "" },
        args.deadline_ms
            .map_or(String::new(), |d| format!(" --deadline-ms {d}"))
    );
    reproduce::report::write(&results, &system, &command, &args.out, &args.svg_dir, &link)
        .with_context(|| format!("writing {}", args.out.display()))?;
    reproduce::report::print_summary(&results);
    println!(
        "wrote {} and {}/*.svg in {:.0} s",
        args.out.display(),
        args.svg_dir.display(),
        results.wall_s
    );
    Ok(())
}

/// The SVG folder as seen from the report's folder (plain relative paths).
fn relative_link(doc: &Path, svg_dir: &Path) -> String {
    let doc_dir = doc.parent().unwrap_or(Path::new(""));
    match svg_dir.strip_prefix(doc_dir) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => svg_dir.display().to_string(),
    }
}
