//! `camdnnd bench`: one run that prints, side by side, frames/s and p50/p99
//! frame delay of
//!
//! 1. the real pipeline (`pipeline::start` + `FrameProcessor::submit`, the
//!    path `serve` drives), closed loop with `max_in_flight` frames inside;
//! 2. a plain sequential Rust loop over the same models and engine (each
//!    object's crop prepared and classified one at a time, no batching, no
//!    concurrency);
//! 3. `scripts/bench_python.py`: the same work written the way a user would
//!    with onnxruntime, Pillow and numpy (run with `.venv/bin/python`);
//!
//! then the pipeline open loop at a camera rate next to the simulator's
//! prediction (`policy::sim` with the config's profile, the same frame stream
//! and the same knobs) and their ratio.
//!
//! Frames are synthetic RGB images carrying upstream detections: scene by
//! scene, R_i boxes of the class routed to each request model (a trace in the
//! `simulate` format, default the paper's Fig. 11 scenes). Configs whose
//! detector is a real model (OCR, faces) are benchmarked on `--image`; their
//! sequential baselines need the graph's decoding logic and are not done yet.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use camdnn_engine::{LoadedModel, Tensor, TensorData};
use camdnn_policy::schedulers;
use camdnn_policy::sim::{simulate, SimConfig, Trace};
use camdnn_policy::stats::Summary;
use camdnn_policy::{ModelId, ProcId, System};
use camdnn_protocol::{ClassRef, Frame, FrameResult, PixelFormat};
use camdnn_vision::{Preprocessor, RgbImage};
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::json;

use super::profile::engine_for;
use crate::config::DaemonConfig;
use crate::pipeline::config::{ModelEntry, OutputSpec};
use crate::pipeline::models::ModelRuntime;
use crate::pipeline::{self, FrameProcessor, Outcome};

/// Options of `camdnnd bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The daemon's config file (engines, models, profile).
    #[arg(long)]
    pub config: PathBuf,
    /// Scene trace (`FRAMES R1 R2 ...`, one count per request model in config
    /// order); default: the paper's Fig. 11 scenes of --frames-per-scene frames.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Frames per scene of the default trace.
    #[arg(long, default_value_t = 5)]
    pub frames_per_scene: usize,
    /// An image (JPEG, or binary PPM) sent as every frame (configs with a real detector).
    #[arg(long)]
    pub image: Option<PathBuf>,
    /// Frames sent with --image.
    #[arg(long, default_value_t = 50)]
    pub frames: usize,
    /// Width of the synthetic frames.
    #[arg(long, default_value_t = 640)]
    pub width: u32,
    /// Height of the synthetic frames.
    #[arg(long, default_value_t = 480)]
    pub height: u32,
    /// Untimed frames (of the heaviest scene) each contender runs first.
    #[arg(long, default_value_t = 3)]
    pub warmup_frames: usize,
    /// Camera rate of the open-loop run compared with the simulator; default:
    /// 70% of the pipeline's closed-loop frames/s.
    #[arg(long)]
    pub fps: Option<f64>,
    /// Processor whose engine the sequential Rust loop uses (default: one loop
    /// per processor with a real engine).
    #[arg(long)]
    pub sequential_processor: Option<String>,
    /// Python with onnxruntime, numpy and Pillow.
    #[arg(long, default_value = ".venv/bin/python")]
    pub python: PathBuf,
    /// The Python baseline script.
    #[arg(long, default_value = "scripts/bench_python.py")]
    pub python_script: PathBuf,
    /// Skip the sequential Rust loops.
    #[arg(long)]
    pub no_sequential: bool,
    /// Skip the Python baseline.
    #[arg(long)]
    pub no_python: bool,
    /// Skip the open-loop run and the simulator comparison.
    #[arg(long)]
    pub no_sim: bool,
    /// Scheduler the simulator runs (the pipeline's dispatcher is camdnn-local).
    #[arg(long, default_value = "camdnn-local")]
    pub sim_scheduler: String,
    /// Also print one JSON object with every figure.
    #[arg(long)]
    pub json: bool,
}

/// Delay figures of one contender.
#[derive(Debug, Clone)]
struct Figures {
    name: String,
    frames: usize,
    seconds: f64,
    delays_ms: Vec<f64>,
    failed: usize,
}

impl Figures {
    fn fps(&self) -> f64 {
        self.frames as f64 / self.seconds.max(1e-9)
    }
    fn summary(&self) -> Summary {
        Summary::of(&self.delays_ms)
    }
    fn json(&self) -> serde_json::Value {
        let s = self.summary();
        json!({"name": self.name, "frames": self.frames, "seconds": self.seconds,
               "fps": self.fps(), "p50_ms": s.p50, "p99_ms": s.p99, "mean_ms": s.mean,
               "failed": self.failed})
    }
}

/// One frame of the benchmark stream.
#[derive(Clone)]
struct BenchFrame {
    frame: Frame,
}

/// Runs the benchmark and prints its figures.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let cfg = DaemonConfig::load(&args.config)?;
    let system =
        pipeline::check(&cfg).with_context(|| format!("in config {}", args.config.display()))?;
    let p = &cfg.pipeline;
    let root = system
        .roots()
        .next()
        .context("the config has no detector")?;
    let upstream = p.models[root.0].output.is_upstream();
    let (frames, trace) = if upstream {
        let trace = trace_of(args, &system)?;
        (
            upstream_frames(&trace, &system, args.width, args.height)?,
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
    let warm: Vec<BenchFrame> = heaviest(&frames)
        .map(|f| vec![f.clone(); args.warmup_frames])
        .unwrap_or_default();
    let objects: usize = frames
        .iter()
        .map(|f| f.frame.detections.as_ref().map_or(0, Vec::len))
        .sum();
    println!(
        "camdnnd bench: config {}, {} frames ({}), {}x{}, {:.1} upstream objects per frame, {} warm-up frames each; host: {} online cores, governor {}; {}",
        args.config.display(),
        frames.len(),
        trace
            .as_ref()
            .map_or_else(|| "image".to_string(), |t| format!("{} scenes", t.segments.len())),
        frames[0].frame.width,
        frames[0].frame.height,
        objects as f64 / frames.len() as f64,
        warm.len(),
        super::profile::online_cores(),
        super::profile::governors(),
        super::profile::utc_now(),
    );
    for proc in &p.processors {
        println!(
            "  processor {}: engine {}, intra_threads {}, core {}",
            proc.name,
            proc.engine.as_str(),
            proc.intra_threads,
            proc.core
                .map_or_else(|| "not pinned".to_string(), |c| c.to_string())
        );
    }

    // 1. The real pipeline, closed loop.
    eprintln!("starting the pipeline ...");
    let built = pipeline::start(&cfg)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a runtime")?;
    let window = built.pipeline.max_in_flight().max(1);
    eprintln!("pipeline: warm-up, then closed loop with {window} frames in flight ...");
    rt.block_on(drive(&built, &warm, Pace::Window(window)));
    let (pipe, _, sample) = rt.block_on(drive(&built, &frames, Pace::Window(window)));
    // A graph with a real detector: the scene the simulator gets is what the
    // detector found in the image (objects reported with each model's output).
    let trace = match (trace, &sample) {
        (Some(t), _) => Some(t),
        (None, Some(r)) => Some(found_scene(&system, r, frames.len())),
        (None, None) => None,
    };
    let pipe = Figures {
        name: format!("camdnnd pipeline ({window} in flight)"),
        ..pipe
    };

    // 4. Open loop at a camera rate, next to the simulator.
    let open = if args.no_sim {
        None
    } else {
        let fps = args.fps.unwrap_or(0.7 * pipe.fps());
        if !(fps.is_finite() && fps > 0.0) {
            bail!("--fps must be a positive number, got {fps}");
        }
        eprintln!("pipeline: open loop at {fps:.2} fps ...");
        let (f, by_frame, _) = rt.block_on(drive(&built, &frames, Pace::Fps(fps)));
        Some((fps, f, by_frame))
    };
    drop(built);

    // 2. Sequential Rust loops, one per processor's engine (or the one asked for).
    let mut seq = Vec::new();
    let mut crop_ms = None;
    if upstream && !args.no_sequential {
        for (j, proc) in p.processors.iter().enumerate() {
            let wanted = match &args.sequential_processor {
                Some(name) => name == &proc.name,
                None => proc.engine != camdnn_engine::EngineKind::Sim,
            };
            if !wanted {
                continue;
            }
            eprintln!(
                "sequential Rust loop on {} ({}) ...",
                proc.name,
                proc.engine.as_str()
            );
            let (f, c) = sequential(&cfg, &system, j, &warm, &frames)?;
            seq.push(f);
            crop_ms.get_or_insert(c);
        }
        if let (Some(name), true) = (&args.sequential_processor, seq.is_empty()) {
            bail!("--sequential-processor {name:?} is not in the config");
        }
    }

    // 3. Python.
    let py = if upstream && !args.no_python {
        eprintln!("Python baseline ...");
        Some(python(&cfg, &system, args, &warm, &frames)?)
    } else {
        None
    };

    println!(
        "\n{:<50} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "contender", "frames/s", "p50 ms", "p99 ms", "mean ms", "failed"
    );
    let mut all = vec![&pipe];
    all.extend(seq.iter());
    all.extend(py.iter());
    for f in &all {
        let s = f.summary();
        println!(
            "{:<50} {:>9.2} {:>9.1} {:>9.1} {:>9.1} {:>7}",
            f.name,
            f.fps(),
            s.p50,
            s.p99,
            s.mean,
            f.failed
        );
    }
    if !upstream {
        println!("(sequential Rust and Python baselines for graphs with a real detector: not implemented yet)");
    } else if args.no_python {
        println!("(Python baseline skipped: --no-python)");
    }
    for seq in &seq {
        println!(
            "pipeline speed-up over {}: {:.2}x frames/s",
            seq.name,
            pipe.fps() / seq.fps()
        );
    }
    if let Some(py) = &py {
        println!(
            "pipeline speed-up over sequential Python: {:.2}x frames/s",
            pipe.fps() / py.fps()
        );
    }

    let mut sim_json = serde_json::Value::Null;
    if let Some((fps, open, by_frame)) = &open {
        let measured = open.summary();
        match &trace {
            Some(trace) => {
                let crop = crop_ms.unwrap_or(0.5);
                let crop_src = if crop_ms.is_some() {
                    "measured"
                } else {
                    "default"
                };
                let sim = simulate_frames(&system, trace, args, &cfg, *fps, crop)?;
                let predicted =
                    Summary::of(&sim.iter().flatten().copied().collect::<Vec<_>>()).mean;
                print_scenes(trace, by_frame, &sim);
                println!(
                    "\nopen loop at {fps:.2} fps, {} frames: measured mean frame delay {:.1} ms (p50 {:.1}, p99 {:.1}); \
                     simulator ({}, profile {}, crop_ms {crop:.2} {crop_src}): {:.1} ms; measured / simulated = {:.3}",
                    open.frames,
                    measured.mean,
                    measured.p50,
                    measured.p99,
                    args.sim_scheduler,
                    cfg.resolve(&p.profile).display(),
                    predicted,
                    measured.mean / predicted
                );
                if p.models[root.0].input.pyramid.is_some() {
                    println!(
                        "note: the detector runs one item per pyramid scale and rejected candidates are not reported; \
                         the simulator runs the detector once per frame on the reported objects, so it under-predicts"
                    );
                }
                sim_json = json!({"fps": fps, "measured_mean_ms": measured.mean,
                    "simulated_mean_ms": predicted, "ratio": measured.mean / predicted,
                    "crop_ms": crop, "scheduler": args.sim_scheduler});
            }
            None => println!(
                "\nopen loop at {fps:.2} fps: measured mean frame delay {:.1} ms (p99 {:.1}); \
                 no frame was processed, so there is no scene to simulate",
                measured.mean, measured.p99
            ),
        }
    }
    if args.json {
        println!(
            "{}",
            json!({"config": args.config.display().to_string(),
                   "contenders": all.iter().map(|f| f.json()).collect::<Vec<_>>(),
                   "sim": sim_json})
        );
    }
    Ok(())
}

fn trace_of(args: &Args, system: &System) -> anyhow::Result<Trace> {
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
fn synthetic_rgb(width: u32, height: u32) -> Vec<u8> {
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

/// The class each request model is fed through (its first routed class).
fn class_of(system: &System, p: &[ModelEntry], i: ModelId) -> anyhow::Result<String> {
    p[i.0].classes.first().cloned().with_context(|| {
        format!(
            "model {:?} has no `classes`, so upstream boxes cannot be routed to it",
            system.models[i.0].name
        )
    })
}

fn upstream_frames(
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
        let dets = super::feed::trace_detections(&seg.scene, &classes, width, height);
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

fn image_frames(path: &Path, n: usize) -> anyhow::Result<Vec<BenchFrame>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let is_ppm = path.extension().and_then(|e| e.to_str()) == Some("ppm");
    let (width, height, format, payload) = if is_ppm {
        let (w, h, rgb) = parse_ppm(&bytes).with_context(|| format!("in {}", path.display()))?;
        (w, h, PixelFormat::Rgb24, rgb)
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

/// A binary PPM (`P6`, maxval 255): width, height and the RGB bytes.
fn parse_ppm(bytes: &[u8]) -> anyhow::Result<(u32, u32, Vec<u8>)> {
    let mut fields = Vec::new();
    let mut at = 0;
    while fields.len() < 4 {
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        if bytes.get(at) == Some(&b'#') {
            while at < bytes.len() && bytes[at] != b'\n' {
                at += 1;
            }
            continue;
        }
        let start = at;
        while at < bytes.len() && !bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        if start == at {
            bail!("truncated PPM header");
        }
        fields.push(String::from_utf8_lossy(&bytes[start..at]).into_owned());
    }
    if fields[0] != "P6" || fields[3] != "255" {
        bail!("not a binary PPM with maxval 255 (P6 ... 255)");
    }
    let w: u32 = fields[1].parse().context("PPM width")?;
    let h: u32 = fields[2].parse().context("PPM height")?;
    let data = &bytes[(at + 1).min(bytes.len())..];
    let need = w as usize * h as usize * 3;
    if data.len() < need {
        bail!(
            "PPM says {w}x{h} but has {} of {need} pixel bytes",
            data.len()
        );
    }
    Ok((w, h, data[..need].to_vec()))
}

fn heaviest(frames: &[BenchFrame]) -> Option<&BenchFrame> {
    frames
        .iter()
        .max_by_key(|f| f.frame.detections.as_ref().map_or(0, Vec::len))
}

/// How frames are fed to the pipeline.
#[derive(Clone, Copy)]
enum Pace {
    /// Keep this many frames inside (closed loop).
    Window(usize),
    /// One frame every 1/fps seconds whatever happens (a camera).
    Fps(f64),
}

/// Feeds `frames` to the pipeline and times every answer from submission;
/// also each frame's delay in frame order (`None`: not processed) and the
/// first result.
async fn drive(
    built: &pipeline::Built,
    frames: &[BenchFrame],
    pace: Pace,
) -> (Figures, Vec<Option<f64>>, Option<FrameResult>) {
    let start = Instant::now();
    let mut pending = FuturesUnordered::new();
    let mut by_frame = vec![None; frames.len()];
    let mut sample = None;
    let mut record = |(n, outcome, sent): (usize, Result<Outcome, _>, Instant)| {
        if let Ok(Outcome::Done(r)) = outcome {
            by_frame[n] = Some(sent.elapsed().as_secs_f64() * 1e3);
            sample.get_or_insert(r);
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
        built.pipeline.submit(f.frame.clone(), sent, tx);
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
    (figures, by_frame, sample)
}

fn argmax(outputs: &[Tensor]) -> usize {
    match outputs.first().map(Tensor::data) {
        Some(TensorData::F32(v)) => v
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map_or(0, |(i, _)| i),
        _ => 0,
    }
}

/// The plain loop: decode, then every object's crop prepared and classified
/// one at a time on one engine. Also returns the mean crop preparation time.
fn sequential(
    cfg: &DaemonConfig,
    system: &System,
    j: usize,
    warm: &[BenchFrame],
    frames: &[BenchFrame],
) -> anyhow::Result<(Figures, f64)> {
    let p = &cfg.pipeline;
    let proc = &p.processors[j];
    let engine = engine_for(proc)?;
    let pcfg = proc.engine_config();
    let mut loaded: BTreeMap<usize, (Box<dyn LoadedModel>, ModelRuntime)> = BTreeMap::new();
    for i in system.request_models() {
        let m = &p.models[i.0];
        if !system.supports(i, ProcId(j)) {
            bail!(
                "the sequential loop runs every model on {:?}, which the profile says cannot run {:?}; pick a processor with --sequential-processor",
                proc.name,
                m.name
            );
        }
        if !matches!(m.output, OutputSpec::Topk { .. }) {
            bail!(
                "the sequential loop supports classifier (topk) children only; {:?} is not one",
                m.name
            );
        }
        let h = engine
            .load(&m.source(|f| cfg.resolve(f)), &pcfg)
            .with_context(|| format!("loading {} on {}", m.name, proc.name))?;
        loaded.insert(i.0, (h, ModelRuntime::new(m, &|f| cfg.resolve(f))?));
    }
    let mut pre = Preprocessor::new();
    let mut crop_total = Duration::ZERO;
    let mut crops = 0usize;
    let mut one =
        |f: &BenchFrame, crop_total: &mut Duration, crops: &mut usize| -> anyhow::Result<()> {
            let fr = &f.frame;
            let image: RgbImage = camdnn_vision::Frame::new(
                fr.width,
                fr.height,
                camdnn_vision::PixelFormat::Rgb24,
                fr.payload.to_vec(),
            )?
            .to_rgb()?;
            for d in fr.detections.iter().flatten() {
                let ClassRef::Name(class) = &d.class else {
                    continue;
                };
                let Some(i) = system.route(class) else {
                    continue;
                };
                let (h, rt) = loaded.get_mut(&i.0).context("routed model not loaded")?;
                let t0 = Instant::now();
                let bbox = camdnn_vision::BBox::new(d.bbox.x0, d.bbox.y0, d.bbox.x1, d.bbox.y1);
                let (t, _) = rt.input.prepare(&mut pre, &image, Some(bbox), false)?;
                *crop_total += t0.elapsed();
                *crops += 1;
                let out = h.run(&[t])?;
                std::hint::black_box(argmax(&out));
            }
            Ok(())
        };
    let (mut warm_time, mut warm_crops) = (Duration::ZERO, 0);
    for f in warm {
        one(f, &mut warm_time, &mut warm_crops)?;
    }
    let start = Instant::now();
    let mut delays = Vec::with_capacity(frames.len());
    for f in frames {
        let t0 = Instant::now();
        one(f, &mut crop_total, &mut crops)?;
        delays.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let fig = Figures {
        name: format!(
            "sequential Rust ({} engine of {})",
            proc.engine.as_str(),
            proc.name
        ),
        frames: frames.len(),
        seconds: start.elapsed().as_secs_f64(),
        delays_ms: delays,
        failed: 0,
    };
    let crop_ms = if crops == 0 {
        0.5
    } else {
        crop_total.as_secs_f64() * 1e3 / crops as f64
    };
    Ok((fig, crop_ms))
}

/// Runs `scripts/bench_python.py` on a job file describing the same frames
/// and models; parses the JSON line it prints.
fn python(
    cfg: &DaemonConfig,
    system: &System,
    args: &Args,
    warm: &[BenchFrame],
    frames: &[BenchFrame],
) -> anyhow::Result<Figures> {
    let p = &cfg.pipeline;
    let mut models = serde_json::Map::new();
    let threads = p.processors.first().map_or(1, |x| x.intra_threads);
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
    let out = Command::new(&args.python)
        .arg(&args.python_script)
        .arg(&job_path)
        .output()
        .with_context(|| {
            format!(
                "running {} {} (use --python, or --no-python to skip)",
                args.python.display(),
                args.python_script.display()
            )
        })?;
    let _ = std::fs::remove_dir_all(&dir);
    if !out.status.success() {
        bail!(
            "{} failed ({}): {}",
            args.python_script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .context("the Python baseline printed no JSON result")?;
    let v: serde_json::Value =
        serde_json::from_str(line).context("parsing the Python baseline's result")?;
    let delays: Vec<f64> = v["delays_ms"]
        .as_array()
        .context("no delays_ms in the Python result")?
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .collect();
    Ok(Figures {
        name: format!(
            "sequential Python (onnxruntime {}, {} thread)",
            v["onnxruntime"].as_str().unwrap_or("?"),
            threads
        ),
        frames: delays.len(),
        seconds: v["seconds"]
            .as_f64()
            .context("no seconds in the Python result")?,
        delays_ms: delays,
        failed: 0,
    })
}

/// One scene of `frames` frames with, per request model, the objects the
/// pipeline reported with that model's output. Candidates a model rejected
/// (MTCNN R-Net / O-Net) are not reported, so for such graphs this is a lower
/// bound of the real load.
fn found_scene(system: &System, r: &FrameResult, frames: usize) -> Trace {
    let scene = system
        .request_models()
        .map(|i| {
            let name = &system.models[i.0].name;
            r.objects
                .iter()
                .filter(|o| o.outputs.iter().any(|x| &x.model == name))
                .count() as u32
        })
        .collect();
    Trace {
        segments: vec![camdnn_policy::sim::Segment {
            frames: frames.max(1),
            scene,
        }],
    }
}

/// Per scene: objects, measured and simulated mean delay.
fn print_scenes(trace: &Trace, measured: &[Option<f64>], simulated: &[Option<f64>]) {
    println!(
        "\nper scene (open loop): objects per model, measured / simulated mean frame delay, ms"
    );
    let mean = |v: &[Option<f64>]| {
        let d: Vec<f64> = v.iter().flatten().copied().collect();
        Summary::of(&d).mean
    };
    let mut at = 0;
    for seg in &trace.segments {
        let end = (at + seg.frames).min(measured.len()).min(simulated.len());
        let (m, s) = (mean(&measured[at..end]), mean(&simulated[at..end]));
        println!(
            "  {:<14} {:>9.1} {:>9.1}  {:.2}x",
            format!("{:?}", seg.scene),
            m,
            s,
            m / s
        );
        at = end;
    }
}

/// The simulator's delay of every frame for the same stream and knobs
/// (`None`: dropped).
fn simulate_frames(
    system: &System,
    trace: &Trace,
    args: &Args,
    cfg: &DaemonConfig,
    fps: f64,
    crop_ms: f64,
) -> anyhow::Result<Vec<Option<f64>>> {
    let p = &cfg.pipeline;
    let Some(mut s) = schedulers::by_name(system, &args.sim_scheduler, p.wait_ms) else {
        bail!("unknown scheduler {:?}", args.sim_scheduler);
    };
    let sim_cfg = SimConfig {
        fps,
        epoch_ms: p.epoch_ms,
        crop_ms,
        crop_threads: p.prep_threads,
        // The benchmark submits every frame (no admission in front), so none is dropped.
        drop_behind_ms: Some(f64::MAX),
    };
    let report = simulate(system, s.as_mut(), trace, &sim_cfg)?;
    Ok(report.frames.iter().map(|f| f.delay_ms).collect())
}
