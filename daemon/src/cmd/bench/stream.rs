//! The benchmark's frame stream: synthetic images with upstream boxes scene by scene (or one
//! image file), and feeding it to a pipeline closed loop or at a camera's pace.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use camdnn_policy::sim::Trace;
use camdnn_policy::{ModelId, System};
use camdnn_protocol::{Frame, PixelFormat};
use futures::stream::{FuturesUnordered, StreamExt};

use super::{work, Args, Figures};
use crate::config::DaemonConfig;
use crate::pipeline::{self, FrameProcessor, Outcome};

/// The frames every contender is given.
pub(super) struct Stream {
    /// The measured frames.
    pub frames: Vec<BenchFrame>,
    /// Their scenes, when they carry upstream boxes.
    pub trace: Option<Trace>,
    /// The warm-up frames (copies of the heaviest).
    pub warm: Vec<BenchFrame>,
    /// The detector.
    pub root: ModelId,
    /// Whether the detector runs upstream (frames bring their boxes).
    pub upstream: bool,
}

impl Stream {
    /// Synthetic frames with upstream boxes from the trace (`--trace`, else
    /// the paper's scenes) when the config's detector is upstream, else
    /// `--image` as every frame.
    pub fn of(args: &Args, cfg: &DaemonConfig, system: &System) -> anyhow::Result<Stream> {
        let p = &cfg.pipeline;
        let root = system
            .roots()
            .next()
            .context("the config has no detector")?;
        let upstream = p.models[root.0].output.is_upstream();
        let (frames, trace) = if upstream {
            let trace = trace_of(args, system)?;
            (
                upstream_frames(&trace, system, args.width, args.height)?,
                Some(trace),
            )
        } else {
            let Some(image) = &args.image else {
                bail!(
                    "the detector {:?} of this config is a real model: pass --image FILE (JPEG or binary PPM) to send as every frame",
                    p.models[root.0].name
                );
            };
            (image_frames(image, args.frames)?, None)
        };
        let warm = heaviest(&frames)
            .map(|f| vec![f.clone(); args.warmup_frames])
            .unwrap_or_default();
        Ok(Stream {
            frames,
            trace,
            warm,
            root,
            upstream,
        })
    }
}

/// One frame of the benchmark stream.
#[derive(Clone)]
pub(super) struct BenchFrame {
    pub frame: Frame,
}

pub(super) fn trace_of(args: &Args, system: &System) -> anyhow::Result<Trace> {
    let n_req = system.request_models().count();
    match &args.trace {
        Some(path) => {
            let t = std::fs::read_to_string(path)
                .with_context(|| format!("reading trace {}", path.display()))?;
            Trace::parse(&t, n_req).with_context(|| format!("in trace {}", path.display()))
        }
        None if n_req == 3 => {
            let mut t = Trace::paper_fig11();
            if args.frames_per_scene == 0 {
                bail!("--frames-per-scene must be at least 1");
            }
            for s in &mut t.segments {
                s.frames = args.frames_per_scene;
            }
            Ok(t)
        }
        None => bail!(
            "the default trace is for 3 classifier models and this config has {n_req}: pass --trace"
        ),
    }
}

/// The deterministic synthetic image every contender uses (the Python script
/// draws the same one).
pub(super) fn synthetic_rgb(width: u32, height: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity((width * height * 3) as usize);
    for y in 0..height {
        for x in 0..width {
            for c in 0..3u32 {
                v.push(((x * 3 + y * 5 + c * 7) % 256) as u8);
            }
        }
    }
    v
}

pub(super) fn upstream_frames(
    trace: &Trace,
    system: &System,
    width: u32,
    height: u32,
) -> anyhow::Result<Vec<BenchFrame>> {
    let payload = Bytes::from(synthetic_rgb(width, height));
    let models: Vec<ModelId> = system.request_models().collect();
    let classes: Vec<String> = models
        .iter()
        .map(|&i| {
            system.models[i.0]
                .classes
                .first()
                .cloned()
                .with_context(|| format!("model {:?} has no routed class", system.models[i.0].name))
        })
        .collect::<anyhow::Result<_>>()?;
    let mut out = Vec::new();
    for seg in &trace.segments {
        let dets = super::super::feed::trace_detections(&seg.scene, &classes, width, height);
        for _ in 0..seg.frames {
            out.push(BenchFrame {
                frame: Frame {
                    stream_id: 0,
                    seq: out.len() as u64,
                    capture_ts_us: 0,
                    width,
                    height,
                    pixel_format: PixelFormat::Rgb24,
                    priority: None,
                    deadline: None,
                    detections: Some(dets.clone()),
                    payload: payload.clone(),
                },
            });
        }
    }
    Ok(out)
}

pub(super) fn image_frames(path: &Path, n: usize) -> anyhow::Result<Vec<BenchFrame>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let (width, height, format, payload) = if super::super::image_file::is_ppm(path) {
        let rgb =
            camdnn_vision::read_ppm(&bytes).with_context(|| format!("in {}", path.display()))?;
        let (w, h) = (rgb.width(), rgb.height());
        (w, h, PixelFormat::Rgb24, rgb.into_data())
    } else {
        let decoded = camdnn_vision::Frame::jpeg(bytes.clone()).with_context(|| {
            format!(
                "{} is not a JPEG camdnnd can decode (use .jpg or binary .ppm)",
                path.display()
            )
        })?;
        (decoded.width(), decoded.height(), PixelFormat::Jpeg, bytes)
    };
    let payload = Bytes::from(payload);
    Ok((0..n.max(1))
        .map(|s| BenchFrame {
            frame: Frame {
                stream_id: 0,
                seq: s as u64,
                capture_ts_us: 0,
                width,
                height,
                pixel_format: format,
                priority: None,
                deadline: None,
                detections: None,
                payload: payload.clone(),
            },
        })
        .collect())
}

pub(super) fn heaviest(frames: &[BenchFrame]) -> Option<&BenchFrame> {
    frames
        .iter()
        .max_by_key(|f| f.frame.detections.as_ref().map_or(0, Vec::len))
}

/// `n` frames spread evenly over `frames` (all of them when n >= len).
pub(super) fn spread(frames: &[BenchFrame], n: usize) -> Vec<BenchFrame> {
    let len = frames.len();
    if n == 0 || n >= len {
        return frames.to_vec();
    }
    (0..n).map(|k| frames[k * len / n].clone()).collect()
}

/// The mean requests per frame of every model (roots: `root_items`) over a
/// trace, as [`sustainable_fps`] takes them.
pub(super) fn mean_scene(system: &System, trace: &Trace, root_items: u32) -> Vec<f64> {
    let mut scene = vec![0.0; system.models.len()];
    let total: usize = trace.segments.iter().map(|s| s.frames).sum();
    for r in system.roots() {
        scene[r.0] = f64::from(root_items);
    }
    if total == 0 {
        return scene;
    }
    for seg in &trace.segments {
        for (k, i) in system.request_models().enumerate() {
            let n = seg.scene.get(k).copied().unwrap_or(0);
            scene[i.0] += f64::from(n) * seg.frames as f64 / total as f64;
        }
    }
    scene
}

/// How frames are fed to the pipeline.
#[derive(Clone, Copy)]
pub(super) enum Pace {
    /// Keep this many frames inside (closed loop).
    Window(usize),
    /// One frame every 1/fps seconds whatever happens (a camera).
    Fps(f64),
}

/// Feeds `frames` to the pipeline and times every answer from submission;
/// also each frame's delay in frame order (`None`: not processed) and the
/// digest of each frame's answer (0: none).
pub(super) async fn drive(
    built: &pipeline::Built,
    frames: &[BenchFrame],
    pace: Pace,
) -> (Figures, Vec<Option<f64>>, Vec<u64>) {
    let start = Instant::now();
    let mut pending = FuturesUnordered::new();
    let mut by_frame = vec![None; frames.len()];
    let mut digests = vec![0; frames.len()];
    let mut record = |(n, outcome, sent): (usize, Result<Outcome, _>, Instant)| {
        if let Ok(Outcome::Done(r)) = outcome {
            by_frame[n] = Some(sent.elapsed().as_secs_f64() * 1e3);
            digests[n] = work::result_digest(&r);
        }
    };
    for (n, f) in frames.iter().enumerate() {
        match pace {
            Pace::Window(w) => {
                while pending.len() >= w {
                    if let Some(done) = pending.next().await {
                        record(done);
                    }
                }
            }
            Pace::Fps(fps) => {
                let due = start + Duration::from_secs_f64(n as f64 / fps);
                let sleep = tokio::time::sleep_until(due.into());
                tokio::pin!(sleep);
                loop {
                    tokio::select! {
                        _ = &mut sleep => break,
                        Some(done) = pending.next(), if !pending.is_empty() => record(done),
                    }
                }
            }
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = Instant::now();
        let deadline = crate::pipeline::deadline_instant(f.frame.deadline, sent);
        built.pipeline.submit(f.frame.clone(), sent, deadline, tx);
        pending.push(async move { (n, rx.await, sent) });
    }
    while let Some(done) = pending.next().await {
        record(done);
    }
    let seconds = start.elapsed().as_secs_f64();
    let delays: Vec<f64> = by_frame.iter().flatten().copied().collect();
    let figures = Figures {
        name: String::new(),
        frames: delays.len(),
        seconds,
        failed: frames.len() - delays.len(),
        delays_ms: delays,
    };
    (figures, by_frame, digests)
}
