//! `camdnnd profile`: measures the configured models on this host's
//! processors with their configured engines (one pinned worker thread per
//! processor, as `serve` runs them) and writes the system file the scheduler
//! reads: t_e(i,j,k) for k = 1..n_b (median of `--runs` batches cut from the
//! `--image` frame as the pipeline prepares them, or of zeros of the model's
//! configured input shape, after `--warmup` runs) and t_l(i,j)
//! (median of `--loads` loads), each while the other processors run the
//! models the scheduler's start-up plan puts on them (`background.rs`) and
//! after a run of each other model planned on the same processor, as the
//! pipeline alternates them (`--isolated`: alone, back to back). The header
//! comment records the host: CPU governor, online cores, engine and core of every
//! processor.

mod background;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use camdnn_engine::{DType, EngineError, Tensor, Worker};
use camdnn_policy::spec::{PairSpec, ProfileSpec};
use camdnn_vision::Layout;

use crate::config::DaemonConfig;
use crate::pipeline::config::ModelEntry;

/// t_e and t_l written for an `upstream` detector, which is never run: a
/// negligible cost on every processor (the policy crate needs a positive time).
pub const UPSTREAM_MS: f64 = 0.001;

/// Timed runs per batch size, by default.
pub const RUNS: usize = 30;
/// Untimed warm-up runs per batch size, by default.
pub const WARMUP: usize = 3;
/// Timed loads per model and processor, by default.
pub const LOADS: usize = 5;

/// Options of `camdnnd profile`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The daemon's config file (its processors and models are measured).
    #[arg(long)]
    pub config: PathBuf,
    /// Where to write the profile (the file `[pipeline] profile` names).
    #[arg(long)]
    pub out: PathBuf,
    /// Timed runs per batch size (the median is written).
    #[arg(long, default_value_t = RUNS)]
    pub runs: usize,
    /// Untimed warm-up runs per batch size before the timed ones.
    #[arg(long, default_value_t = WARMUP)]
    pub warmup: usize,
    /// Timed loads per model and processor (the median is written).
    #[arg(long, default_value_t = LOADS)]
    pub loads: usize,
    /// A frame (binary .ppm or .jpg) the models' inputs are cut from as the
    /// pipeline prepares them: some models run slower on real pixels than
    /// on zeros (MTCNN P-Net by half). Default: batches of zeros.
    #[arg(long)]
    pub image: Option<PathBuf>,
    /// Measure each processor alone, the others idle (default: while the
    /// others run the models the scheduler puts on them at start-up, as they
    /// do in the pipeline).
    #[arg(long)]
    pub isolated: bool,
}

/// Runs the measurements and writes the file.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let cfg = DaemonConfig::load(&args.config)?;
    measure_and_write(&cfg, args)
}

/// Measures `cfg`'s processors and models and writes the profile to
/// `args.out` (`camdnnd profile`, and `camdnnd bench --profile-now`, which
/// plans and simulates with a profile of the same hour as its runs).
pub fn measure_and_write(cfg: &DaemonConfig, args: &Args) -> anyhow::Result<()> {
    if args.runs == 0 || args.loads == 0 {
        bail!("--runs and --loads must be at least 1");
    }
    cfg.pipeline
        .check()
        .with_context(|| format!("in config {}", args.config.display()))?;
    let text = profile(cfg, args)?;
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&args.out, text).with_context(|| format!("writing {}", args.out.display()))?;
    eprintln!("wrote {}", args.out.display());
    Ok(())
}

/// The configured input shape of a model for a batch of `k`.
pub fn input_dims(m: &ModelEntry, k: usize) -> Vec<usize> {
    let (w, h) = (m.input.width as usize, m.input.height as usize);
    match m.input.norm.layout {
        Layout::Nchw => vec![k, 3, h, w],
        Layout::Nhwc => vec![k, h, w, 3],
        Layout::Nwhc => vec![k, w, h, 3],
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Rounded to 1 us: finer digits are noise and clutter the file.
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Per model (index = config order), the batch-1 inputs it is measured on,
/// used in turn: from the `--image` frame as the pipeline prepares it (every
/// item of the detector, i.e. each canvas of pyramid scales, as the pipeline runs them
/// all; a per-object model's crops of [`distinct_boxes`] of the frame), or
/// zeros of the configured shape.
///
/// A batch must hold *different* items: ONNX Runtime ran a batch of 8
/// copies of one MTCNN R-Net crop in 0.46 ms and 8 different crops in
/// 0.78 ms on this host, so batches of copies made batching look twice as
/// good as the pipeline, whose crops all differ, finds it (docs/decisions.md).
/// Each per-object model therefore gets a full batch of crops of distinct
/// regions. A detector keeps the items the pipeline gives it, the frame or
/// its pyramid's scales: crops would be inputs it never runs (the OCR
/// detector ran 66 ms on the page and 77-80 ms with crops of it mixed in).
fn sample_inputs(cfg: &DaemonConfig, image: Option<&Path>) -> anyhow::Result<Vec<Vec<Tensor>>> {
    let image = image.map(super::image_file::read_image).transpose()?;
    let mut pre = camdnn_vision::Preprocessor::new();
    let wanted = cfg.pipeline.max_batch.max(1);
    let mut out = Vec::new();
    for m in &cfg.pipeline.models {
        let mut items = Vec::new();
        if let Some(img) = image.as_ref().filter(|_| !m.output.is_upstream()) {
            let prep = crate::pipeline::models::ModelRuntime::new(m, &|f| cfg.resolve(f))?.input;
            if m.parent.is_none() {
                items.extend(
                    prep.prepare_frame(&mut pre, img)?
                        .into_iter()
                        .map(|(t, _)| t),
                );
            }
            if m.parent.is_some() {
                for bbox in distinct_boxes(img.width() as f32, img.height() as f32, wanted) {
                    items.push(prep.prepare(&mut pre, img, Some(bbox), false)?.0);
                }
            }
        }
        if items.is_empty() {
            items.push(Tensor::zeros("", DType::F32, input_dims(m, 1)));
        }
        out.push(items);
    }
    Ok(out)
}

/// `n` different regions of a `w` x `h` frame, the whole frame first: squares
/// of 100% to 25% of the shorter side, spread over the frame by two coprime
/// strides (deterministic: the same frame gives the same profile inputs).
fn distinct_boxes(w: f32, h: f32, n: usize) -> Vec<camdnn_vision::BBox> {
    const SIDES: [f32; 5] = [0.9, 0.7, 0.5, 0.35, 0.25];
    (0..n)
        .map(|i| {
            if i == 0 {
                return camdnn_vision::BBox::new(0.0, 0.0, w, h);
            }
            let side = SIDES[i % SIDES.len()] * w.min(h);
            let fx = ((i * 37) % 101) as f32 / 100.0;
            let fy = ((i * 61) % 101) as f32 / 100.0;
            let (x0, y0) = ((w - side) * fx, (h - side) * fy);
            camdnn_vision::BBox::new(x0, y0, x0 + side, y0 + side)
        })
        .collect()
}

/// A batch of `k` of `items`, taken in turn from the `n`-th batch's start.
fn batch_of(items: &[Tensor], k: usize, n: usize) -> anyhow::Result<Tensor> {
    let picked: Vec<Tensor> = (0..k)
        .map(|x| items[(n * k + x) % items.len()].clone())
        .collect();
    Ok(Tensor::concat_batch(&picked)?)
}

/// How many runs and loads each measurement takes.
#[derive(Clone, Copy, Debug)]
struct Counts {
    runs: usize,
    warmup: usize,
    loads: usize,
}

/// Measures every (model, processor) pair; the file's text.
///
/// Under load, the other processors run the models the scheduler puts on
/// them at start-up, as the pipeline does: that plan comes from a quick
/// isolated pass (a few runs each), since it needs a profile itself.
fn profile(cfg: &DaemonConfig, args: &Args) -> anyhow::Result<String> {
    let p = &cfg.pipeline;
    let board = args
        .out
        .file_stem()
        .map_or_else(|| "host".to_string(), |s| s.to_string_lossy().into_owned());
    let counts = Counts {
        runs: args.runs,
        warmup: args.warmup,
        loads: args.loads,
    };
    let samples = sample_inputs(cfg, args.image.as_deref())?;
    let (table, notes) = if args.isolated {
        measure(cfg, counts, &samples, None)?
    } else {
        eprintln!("quick isolated pass, for the start-up plan that decides the background load:");
        let quick = Counts {
            runs: 5,
            warmup: 1,
            loads: 1,
        };
        let (table, _) = measure(cfg, quick, &samples, None)?;
        let system = camdnn_policy::System::from_spec(&p.system_spec(board.clone(), table))
            .context("the quick profile is not a valid system")?;
        // A committed policy fits the old profile, not this quick one:
        // re-profiling must not need it, so the start-up plan is then made
        // without it (it only decides which models load the other units).
        let mut planning = cfg.clone();
        if let Some(why) = crate::pipeline::drop_unfit_policy(&mut planning.pipeline, &system) {
            eprintln!("note: {why}; the start-up plan is made without the policy");
        }
        let mut scheduler = crate::pipeline::scheduler(&planning.pipeline, &system)?;
        let plan = scheduler.initial_plan(&system);
        let on: Vec<Vec<String>> = system
            .proc_ids()
            .map(|j| {
                system
                    .model_ids()
                    .filter(|&i| plan.resident(i, j))
                    .map(|i| system.models[i.0].name.clone())
                    .collect()
            })
            .collect();
        for (proc, models) in p.processors.iter().zip(&on) {
            eprintln!("background on {}: {}", proc.name, models.join(", "));
        }
        eprintln!("measuring:");
        measure(cfg, counts, &samples, Some(&on))?
    };
    let spec = p.system_spec(board, table);
    // The written file must be one the scheduler accepts.
    camdnn_policy::System::from_spec(&spec)
        .context("the measured profile is not a valid system")?;
    Ok(format!("{}{}", header(cfg, args, &notes), spec.to_toml()))
}

/// Measures every (model, processor) pair on batches of its `samples` entry,
/// each processor alone (`background` = `None`) or while every other
/// processor runs the models `background` lists for it; the table and notes
/// on refused models.
fn measure(
    cfg: &DaemonConfig,
    counts: Counts,
    samples: &[Vec<Tensor>],
    background: Option<&[Vec<String>]>,
) -> anyhow::Result<(ProfileSpec, Vec<String>)> {
    let p = &cfg.pipeline;
    let mut table = ProfileSpec::new();
    let mut notes = Vec::new();
    for (j, proc) in p.processors.iter().enumerate() {
        let _background = background
            .map(|on| background::Background::start(cfg, j, on, samples))
            .transpose()?;
        let engine = crate::pipeline::real_engine(proc)?;
        let worker = Worker::spawn(proc.engine_config(), engine)
            .with_context(|| format!("starting processor {:?}", proc.name))?;
        let h = worker.handle();
        // Under load, each timed run follows one run of each of this
        // processor's other models (those the start-up plan puts here), as
        // the pipeline alternates them: a model's weights and buffers are not
        // still in the caches from its own previous run. Loaded under other
        // names beside the measured model.
        let mut neighbours = Vec::new();
        for (m, sample) in p.models.iter().zip(samples) {
            if !m.output.is_upstream() && background.is_some_and(|on| on[j].contains(&m.name)) {
                let mut source = m.source(|f| cfg.resolve(f), 1);
                source.name = format!("{} (neighbour)", m.name).into();
                if h.load_blocking(source.clone()).is_ok() {
                    neighbours.push((m.name.clone(), source.name, sample[0].clone()));
                }
            }
        }
        let run_neighbours = |measured: &str| -> anyhow::Result<()> {
            for (_, alias, input) in neighbours.iter().filter(|(n, _, _)| n != measured) {
                h.run_blocking(alias, vec![input.clone()])
                    .with_context(|| format!("running {alias} on {}", proc.name))?;
            }
            Ok(())
        };
        for (m, sample) in p.models.iter().zip(samples) {
            if m.output.is_upstream() {
                table.entry(m.name.clone()).or_default().insert(
                    proc.name.clone(),
                    PairSpec {
                        exec_ms: vec![UPSTREAM_MS],
                        load_ms: UPSTREAM_MS,
                        size_mb: None,
                    },
                );
                continue;
            }
            let source = m.source(|f| cfg.resolve(f), cfg.pipeline.max_batch);
            let size_mb = std::fs::metadata(&source.path)
                .with_context(|| format!("model {:?}: {}", m.name, source.path.display()))?
                .len() as f64
                / 1e6;
            eprint!("{} on {}: loading x{} ...", m.name, proc.name, counts.loads);
            let mut loads = Vec::new();
            let mut refused = None;
            for n in 0..counts.loads {
                match h.load_blocking(source.clone()) {
                    Ok(r) => loads.push(ms(r.finished.duration_since(r.started))),
                    Err(e @ EngineError::UnsupportedOps { .. }) => {
                        refused = Some(e);
                        break;
                    }
                    Err(e) => {
                        eprintln!();
                        return Err(e)
                            .with_context(|| format!("loading {} on {}", m.name, proc.name));
                    }
                }
                if n + 1 < counts.loads {
                    h.unload_blocking(&m.name)?;
                }
            }
            if let Some(e) = refused {
                eprintln!(" unsupported ({e}); left out of the profile");
                notes.push(format!("{} on {}: unsupported: {e}", m.name, proc.name));
                continue;
            }
            let load_ms = round3(median(loads)).max(0.001);
            eprint!(" {load_ms:.1} ms; exec");
            let mut exec_ms = Vec::with_capacity(p.max_batch);
            for k in 1..=p.max_batch {
                for n in 0..counts.warmup {
                    run_neighbours(&m.name)?;
                    h.run_blocking(&m.name, vec![batch_of(sample, k, n)?])
                        .with_context(|| format!("running {} on {} (k={k})", m.name, proc.name))?;
                }
                let mut times = Vec::with_capacity(counts.runs);
                for n in 0..counts.runs {
                    run_neighbours(&m.name)?;
                    let input = batch_of(sample, k, counts.warmup + n)?;
                    let r = h
                        .run_blocking(&m.name, vec![input])
                        .with_context(|| format!("running {} on {} (k={k})", m.name, proc.name))?;
                    times.push(ms(r.exec_time()));
                }
                let t = round3(median(times)).max(0.001);
                eprint!(" k={k} {t:.2}");
                exec_ms.push(t);
            }
            eprintln!(" ms");
            h.unload_blocking(&m.name)?;
            table.entry(m.name.clone()).or_default().insert(
                proc.name.clone(),
                PairSpec {
                    exec_ms,
                    load_ms,
                    size_mb: Some(round3(size_mb)),
                },
            );
        }
        worker.shutdown();
    }
    for m in &p.models {
        if !table.contains_key(&m.name) {
            bail!(
                "model {:?} runs on none of the processors:\n  {}",
                m.name,
                notes.join("\n  ")
            );
        }
    }
    Ok((table, notes))
}

/// `cpu0=performance cpu1=performance`, or "unknown" when cpufreq is absent.
pub fn governors() -> String {
    let mut out = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/sys/devices/system/cpu") {
        let mut cpus: Vec<(usize, PathBuf)> = dir
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                let n = name.strip_prefix("cpu")?.parse().ok()?;
                Some((n, e.path()))
            })
            .collect();
        cpus.sort();
        for (n, path) in cpus {
            if let Ok(g) = std::fs::read_to_string(path.join("cpufreq/scaling_governor")) {
                out.push(format!("cpu{n}={}", g.trim()));
            }
        }
    }
    if out.is_empty() {
        "unknown".into()
    } else {
        out.join(" ")
    }
}

/// `/sys/devices/system/cpu/online` (e.g. `0-3`), "unknown" when absent.
pub fn online_cores() -> String {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn header(cfg: &DaemonConfig, args: &Args, notes: &[String]) -> String {
    let p = &cfg.pipeline;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Measured by `camdnnd profile` {} on host {:?}, {}",
        env!("CARGO_PKG_VERSION"),
        hostname(),
        utc_now()
    );
    let _ = writeln!(s, "# config: {}", args.config.display());
    let _ = writeln!(s, "# cpu governor: {}", governors());
    let _ = writeln!(s, "# online cores: {}", online_cores());
    let _ = writeln!(
        s,
        "# t_e: median of {} runs of a batch of {} after {} warm-up runs; \
         t_l: median of {} loads; size_mb: model file size / 1e6",
        args.runs,
        args.image.as_ref().map_or_else(
            || "zeros of the configured input shape".to_string(),
            |i| format!(
                "inputs cut from {} as the pipeline prepares them",
                i.display()
            )
        ),
        args.warmup,
        args.loads
    );
    let _ = writeln!(
        s,
        "# {}",
        if args.isolated {
            "each processor measured alone (--isolated)"
        } else {
            "each processor measured while the others ran, one item at a time, the models the scheduler's start-up plan puts on them (from a quick isolated pass of 5 runs each), and each timed run after one run of each other model the plan puts on its own processor"
        }
    );
    let _ = writeln!(
        s,
        "# upstream detectors (never loaded or run) get {UPSTREAM_MS} ms"
    );
    for proc in &p.processors {
        let _ = writeln!(
            s,
            "# processor {}: engine {}{}, intra_threads {}, core {}",
            proc.name,
            proc.engine.as_str(),
            proc.provider
                .map(|x| format!(" ({})", x.ort_name()))
                .unwrap_or_default(),
            proc.intra_threads,
            proc.core
                .map_or_else(|| "not pinned".to_string(), |c| c.to_string())
        );
    }
    for n in notes {
        let _ = writeln!(s, "# {n}");
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_boxes_are_different_regions_inside_the_frame_the_whole_frame_first() {
        let boxes = distinct_boxes(640.0, 480.0, 16);
        assert_eq!(boxes.len(), 16);
        assert_eq!(boxes[0], camdnn_vision::BBox::new(0.0, 0.0, 640.0, 480.0));
        for (i, b) in boxes.iter().enumerate() {
            assert!(
                b.x0 >= 0.0 && b.y0 >= 0.0 && b.x1 <= 640.0 && b.y1 <= 480.0 && b.x1 > b.x0,
                "box {i} {b:?} leaves the frame"
            );
            for (k, c) in boxes.iter().enumerate().skip(i + 1) {
                assert_ne!(b, c, "boxes {i} and {k} are the same region");
            }
        }
        assert_eq!(boxes, distinct_boxes(640.0, 480.0, 16), "deterministic");
        assert!(distinct_boxes(640.0, 480.0, 0).is_empty());
    }

    /// The shipped faces config on the astronaut photo: every per-object
    /// model gets a full batch of pairwise different crops; the detector the
    /// canvases its pyramid's scales are packed on, as the pipeline runs them
    /// (2 for a 512x512 frame; a batch of more repeats them).
    #[test]
    fn every_model_is_profiled_on_batches_of_different_items() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let cfg = DaemonConfig::load(&root.join("config/camdnnd-faces.toml"))
            .expect("the shipped faces config loads (models: run scripts/setup.sh)");
        let samples = sample_inputs(&cfg, Some(&root.join("testdata/astronaut.ppm")))
            .expect("inputs cut from the test photo (models: run scripts/setup.sh)");
        let wanted = cfg.pipeline.max_batch;
        for (m, items) in cfg.pipeline.models.iter().zip(&samples) {
            let distinct = if m.parent.is_none() {
                assert_eq!(items.len(), 2, "{}: the pyramid's 2 canvases", m.name);
                2
            } else {
                assert!(items.len() >= wanted, "{}: {} items", m.name, items.len());
                wanted
            };
            for i in 0..distinct {
                for k in i + 1..distinct {
                    assert_ne!(
                        items[i], items[k],
                        "{}: items {i} and {k} are equal",
                        m.name
                    );
                }
            }
            // And a batch of them is a batch of different rows.
            let b = batch_of(items, cfg.pipeline.max_batch, 1).unwrap();
            assert_eq!(b.shape()[0], cfg.pipeline.max_batch, "{}", m.name);
        }
    }
}
