//! Which contenders a run compares: the pipeline (and the same pipeline with ONNX Runtime on
//! every processor), Rust ONNX Runtime workers, the sequential loop per engine, and Python as a
//! user would write it.

use anyhow::{bail, Context};
use camdnn_policy::System;

use super::contenders::{Contender, Kind};
use super::python;
use super::sequential::Pool;
use super::stream::Stream;
use super::Args;
use crate::config::DaemonConfig;
use crate::pipeline;
use crate::pipeline::config::ProcessorEntry;

/// The contenders, in the order each round runs them; the first, the
/// pipeline, is the reference every ratio is taken to.
pub(super) fn contenders<'a>(
    args: &Args,
    cfg: &DaemonConfig,
    system: &'a System,
    ort: Option<(&DaemonConfig, &'a System)>,
    stream: &Stream,
    workers: usize,
) -> anyhow::Result<Vec<Contender<'a>>> {
    let p = &cfg.pipeline;
    let mut contenders: Vec<Contender> = Vec::new();
    eprintln!("starting the pipeline ...");
    let engines: Vec<&str> = p.processors.iter().map(|q| q.engine.as_str()).collect();
    contenders.push(Contender::pipeline(cfg, system, |window| {
        format!("camdnn ({}, {window} in flight)", engines.join(" + "))
    })?);
    // (c) camdnn with ORT on every processor.
    if let Some((c, s)) = ort {
        eprintln!("starting the all-ORT pipeline ...");
        contenders.push(Contender::pipeline(c, s, |window| {
            format!("camdnn (ort on every processor, {window} in flight)")
        })?);
    }
    if !args.no_sequential {
        rust_contenders(args, cfg, system, workers, &mut contenders)?;
    }
    for c in &mut contenders {
        if let Kind::Pool(pool) = &mut c.kind {
            pool.name = c.name.clone();
        }
    }
    // Python: N processes round robin, and the one-process loop (on
    // upstream boxes, or an image graph through its registry package).
    let graph = python::graph_kind(&p.models[stream.root.0]).filter(|_| args.image.is_some());
    if !args.no_python && (stream.upstream || graph.is_some()) {
        let prefix = graph.map_or_else(|| "Python".to_string(), |k| format!("Python {k}"));
        let upstream = stream.upstream;
        let kind = |workers, threads| match graph.filter(|_| !upstream) {
            Some(kind) => Kind::PythonGraph {
                kind,
                images: python::Images::TheImage,
                workers,
                threads,
            },
            None => Kind::PythonUpstream { workers, threads },
        };
        contenders.push(Contender::new(
            format!("{prefix}, {workers} single-thread processes round robin"),
            kind(workers, 1),
            true,
        ));
        contenders.push(Contender::new(
            format!(
                "{prefix}, one process, {}",
                python::threads_label(args.python_threads)
            ),
            kind(1, args.python_threads),
            args.open_all,
        ));
    }
    Ok(contenders)
}

/// (a), (b): Rust ORT workers sharing one queue and ORT with N intra-op threads;
/// (d) the sequential loop on each processor's own engine.
pub(super) fn rust_contenders<'a>(
    args: &Args,
    cfg: &DaemonConfig,
    system: &'a System,
    workers: usize,
    contenders: &mut Vec<Contender<'a>>,
) -> anyhow::Result<()> {
    let p = &cfg.pipeline;
    let template = ort_template(cfg);
    let mut one = template.clone();
    one.intra_threads = 1;
    contenders.push(Contender::new(
        format!("Rust ORT, {workers} single-thread workers, one queue"),
        Kind::Pool(Pool::load(cfg, system, &one, None, workers, String::new())?),
        true,
    ));
    let mut many = template;
    many.intra_threads = workers;
    contenders.push(Contender::new(
        format!("Rust ORT, {workers} intra-op threads, one frame at a time"),
        Kind::Pool(Pool::load(cfg, system, &many, None, 1, String::new())?),
        true,
    ));
    if let Some(name) = &args.sequential_processor {
        if !p.processors.iter().any(|q| &q.name == name) {
            bail!("--sequential-processor {name:?} is not in the config");
        }
    }
    for (j, proc) in p.processors.iter().enumerate() {
        let wanted = match &args.sequential_processor {
            Some(name) => name == &proc.name,
            None => proc.engine != camdnn_engine::EngineKind::Sim,
        };
        if wanted {
            contenders.push(Contender::new(
                format!(
                    "sequential Rust ({} engine of {}, {} thread)",
                    proc.engine.as_str(),
                    proc.name,
                    proc.intra_threads
                ),
                Kind::Pool(Pool::load(cfg, system, proc, Some(j), 1, String::new())?),
                args.open_all,
            ));
        }
    }
    Ok(())
}

/// The config with every processor on ONNX Runtime's CPU provider (`None`
/// when all already are, or one is simulated); with --profile-now its own
/// profile is measured (written beside --profile-out), else it plans with the
/// config's profile, measured on the other engines.
pub(super) fn all_ort(cfg: &DaemonConfig, args: &Args) -> anyhow::Result<Option<DaemonConfig>> {
    use camdnn_engine::EngineKind;
    let procs = &cfg.pipeline.processors;
    if procs.iter().all(|q| q.engine == EngineKind::Ort)
        || procs.iter().any(|q| q.engine == EngineKind::Sim)
    {
        return Ok(None);
    }
    let mut c = cfg.clone();
    for q in &mut c.pipeline.processors {
        if q.engine != EngineKind::Ort {
            q.engine = EngineKind::Ort;
            q.provider = Some(camdnn_engine::OrtProvider::Cpu);
            q.qnn = None;
        }
    }
    if args.profile_now {
        let out = args.profile_out.with_extension("ort.toml");
        eprintln!(
            "measuring the all-ORT variant's profile ({}) ...",
            out.display()
        );
        let measure = crate::cmd::profile::Args {
            config: args.config.clone(),
            out: out.clone(),
            runs: args.profile_runs,
            warmup: crate::cmd::profile::WARMUP,
            loads: crate::cmd::profile::LOADS,
            image: args.image.clone(),
            isolated: false,
        };
        crate::cmd::profile::measure_and_write(&c, &measure)?;
        c.pipeline.profile =
            std::path::absolute(&out).with_context(|| format!("resolving {}", out.display()))?;
        let measured = c
            .pipeline
            .system(|f| c.resolve(f))
            .context("the all-ORT variant's measured profile")?;
        if let Some(why) = pipeline::drop_unfit_policy(&mut c.pipeline, &measured) {
            println!("note: camdnn with ort on every processor runs without the learned policy (trained for the configured engines): {why}");
        }
    } else {
        println!(
            "note: camdnn with ort on every processor plans with {} (measured with the config's engines); pass --profile-now for its own",
            cfg.resolve(&cfg.pipeline.profile).display()
        );
    }
    Ok(Some(c))
}

/// The processor the ORT baselines copy: the config's first ORT processor,
/// else its first processor switched to ORT's CPU provider; unpinned (a
/// user's process is not).
pub(super) fn ort_template(cfg: &DaemonConfig) -> ProcessorEntry {
    use camdnn_engine::EngineKind;
    let procs = &cfg.pipeline.processors;
    let mut t = procs
        .iter()
        .find(|q| q.engine == EngineKind::Ort)
        .unwrap_or(&procs[0])
        .clone();
    if t.engine != EngineKind::Ort {
        t.engine = EngineKind::Ort;
        t.provider = Some(camdnn_engine::OrtProvider::Cpu);
        t.qnn = None;
    }
    t.core = None;
    t
}
