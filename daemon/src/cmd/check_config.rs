//! `camdnnd check-config`: validates a daemon config without serving. Parses
//! it (unknown fields are errors), validates `[server]` and the pipeline
//! (`pipeline::check`: graph, profile, pre/post-processing files), then, for
//! every real engine, loads each model on each processor the profile says
//! supports it and runs one batch-1 input of the configured shape, so a model
//! with operators the engine lacks, or an input size it does not accept, is
//! refused here rather than at start-up.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use camdnn_engine::{EngineKind, Tensor};
use camdnn_policy::{ModelId, ProcId};

use super::profile::input_dims;
use crate::config::DaemonConfig;
use crate::pipeline::real_engine as engine_for;

/// Options of `camdnnd check-config`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The daemon's config file.
    #[arg(long, default_value = "/etc/camdnn/camdnnd.toml")]
    pub config: PathBuf,
    /// Only parse and validate; do not load models into the engines.
    #[arg(long)]
    pub no_load: bool,
}

/// Runs the checks; prints a summary and returns an error naming every
/// problem found.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let summary = check(args)?;
    println!("{summary}");
    Ok(())
}

/// The checks of [`run`]; the summary on success.
pub fn check(args: &Args) -> anyhow::Result<String> {
    let path = &args.config;
    let cfg = DaemonConfig::load(path)?;
    cfg.server
        .validate()
        .with_context(|| format!("in config {}", path.display()))?;
    let system = crate::pipeline::check(&cfg.pipeline)
        .with_context(|| format!("in config {}", path.display()))?;
    let p = &cfg.pipeline;
    let mut loaded = Vec::new();
    let mut problems = Vec::new();
    if !args.no_load {
        for (j, proc) in p.processors.iter().enumerate() {
            if proc.engine == EngineKind::Sim {
                continue;
            }
            let engine = match engine_for(proc) {
                Ok(e) => e,
                Err(e) => {
                    problems.push(format!("{e:#}"));
                    continue;
                }
            };
            let pcfg = proc.engine_config();
            if let Err(e) = engine.check_processor(&pcfg) {
                problems.push(format!("{e}"));
                continue;
            }
            for (i, m) in p.models.iter().enumerate() {
                if m.output.is_upstream() || !system.supports(ModelId(i), ProcId(j)) {
                    continue;
                }
                let started = Instant::now();
                let result = engine
                    .load(&m.source(|f| cfg.resolve(f), 1), &pcfg)
                    .map_err(anyhow::Error::from)
                    .and_then(|mut h| {
                        let t = Tensor::zeros("", camdnn_engine::DType::F32, input_dims(m, 1));
                        h.run(&[t]).with_context(|| {
                            format!(
                                "running a batch-1 input of the configured shape {:?}",
                                input_dims(m, 1)
                            )
                        })?;
                        Ok(())
                    });
                match result {
                    Ok(()) => loaded.push(format!(
                        "{} on {} ({:.0} ms)",
                        m.name,
                        proc.name,
                        started.elapsed().as_secs_f64() * 1e3
                    )),
                    Err(e) => problems.push(format!(
                        "model {:?} on processor {:?} ({} engine): {e:#}",
                        m.name,
                        proc.name,
                        proc.engine.as_str()
                    )),
                }
            }
        }
    }
    if !problems.is_empty() {
        bail!(
            "config {} is not valid:\n  - {}",
            path.display(),
            problems.join("\n  - ")
        );
    }
    let engines: Vec<String> = p
        .processors
        .iter()
        .map(|x| format!("{}={}", x.name, x.engine.as_str()))
        .collect();
    let mut s = format!(
        "config {} is valid: {} processors ({}), {} models, max_batch {}",
        path.display(),
        p.processors.len(),
        engines.join(", "),
        p.models.len(),
        p.max_batch
    );
    if args.no_load {
        s.push_str("; models not loaded (--no-load)");
    } else {
        s.push_str(&format!(
            "; loaded and ran {} model/processor pairs: {}",
            loaded.len(),
            loaded.join(", ")
        ));
    }
    Ok(s)
}
