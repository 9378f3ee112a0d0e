//! `camdnnd track-eval`: what tracking and per-object result reuse save on a clip, and how
//! far the results they serve are from per-frame inference.
//!
//! Runs the config's real graph (the detector, then each object's models) one item at a time
//! on one processor's engine, on every frame of a clip, twice: per-frame inference of
//! everything (the reference), and the tracked pass (`replay.rs`: the detector on every k-th
//! frame, `camdnn_vision::track` following the objects, `camdnn_policy::reuse` deciding per
//! object and model). Prints per model the requests offered, inferred (and why) and reused,
//! the agreement of the served results with the reference (pose keypoint distance over the
//! person's box, gender, age, labels), and on the synthetic pan the track id switches
//! against the objects' known identities. It does not cover the serving pipeline: no
//! batching, no scheduler, no deadlines (`camdnnd bench --capacity` measures the serving
//! pipeline with the same knobs).

mod clip;
mod graph;
mod measure;
mod replay;

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{bail, Context};
use camdnn_policy::reuse::{ReuseConfig, StreamReuse};
use camdnn_policy::sim::{Segment, Trace};
use camdnn_policy::ModelId;
use camdnn_vision::track::StreamTracker;
use camdnn_vision::{BBox, Preprocessor};

use crate::config::DaemonConfig;
use camdnn_vision::track::TrackerConfig;
use clip::{Clip, Pan};
use measure::{median_p90, ModelCounts};
use replay::TrackedPass;

/// `camdnnd track-eval` arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The daemon's config (its graph, engines, `[pipeline.track]` and models' `reuse`;
    /// absent knobs take their defaults).
    #[arg(long)]
    pub config: PathBuf,
    /// A synthetic clip: a slow pan and zoom across this photo (binary PPM), e.g.
    /// testdata/kite.ppm; track id switches are counted against the photo's objects.
    #[arg(long, conflicts_with = "video", required_unless_present = "video")]
    pub pan: Option<PathBuf>,
    /// A real video (decoded by ffmpeg), e.g. testdata/vtest.avi
    /// (scripts/fetch_test_video.sh).
    #[arg(long)]
    pub video: Option<PathBuf>,
    /// Frames of the clip (the pan's length; the video's first frames).
    #[arg(long, default_value_t = 200)]
    pub frames: usize,
    /// Video frames are scaled to this width.
    #[arg(long, default_value_t = 768)]
    pub width: u32,
    /// Video frames are scaled to this height.
    #[arg(long, default_value_t = 576)]
    pub height: u32,
    /// The clip's frame rate (the frames' times, for `reuse.max_age_ms`).
    #[arg(long, default_value_t = 10.0)]
    pub fps: f64,
    /// Replays the frames in a random order with this seed: a stream of unrelated frames.
    #[arg(long)]
    pub shuffle: Option<u64>,
    /// The processor whose engine runs every model (default: the first ORT one).
    #[arg(long)]
    pub processor: Option<String>,
    /// Sets every per-object model's `reuse.reinfer_interval` (models without `reuse` get
    /// the default knobs with it).
    #[arg(long)]
    pub reinfer_interval: Option<u32>,
    /// Sets `pipeline.track.detector_interval`.
    #[arg(long)]
    pub detector_interval: Option<u32>,
    /// Writes the tracked pass's work as a scene trace for `camdnnd simulate --trace`: per
    /// frame, the requests of each request model left to infer after reuse (consecutive
    /// equal frames merged). The simulator runs the detector on every frame.
    #[arg(long, value_name = "FILE")]
    pub write_trace: Option<PathBuf>,
}

/// The knobs the run uses: the config's, defaults where absent, the flags over both.
fn knobs(
    cfg: &DaemonConfig,
    args: &Args,
) -> anyhow::Result<(TrackerConfig, Vec<Option<ReuseConfig>>)> {
    let p = &cfg.pipeline;
    let mut track = p.track.unwrap_or_default();
    if let Some(k) = args.detector_interval {
        track.detector_interval = k;
    }
    track.check("pipeline.track")?;
    let reuse = p
        .models
        .iter()
        .map(|m| {
            let mut r = match (&m.reuse, &m.parent) {
                (_, None) => return Ok(None),
                (Some(r), _) => r.clone(),
                (None, _) => ReuseConfig::default(),
            };
            if let Some(n) = args.reinfer_interval {
                r.reinfer_interval = n;
            }
            r.check("reuse")
                .map_err(|e| anyhow::anyhow!("model {:?}: {e}", m.name))?;
            Ok(Some(r))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok((track, reuse))
}

/// Identity of the pan's objects: each box mapped back to the photo and matched with the
/// detector's objects on the photo itself.
struct Identities {
    base: Vec<BBox>,
    last: HashMap<usize, u32>,
    owner: HashMap<u32, usize>,
    switches: u64,
    transfers: u64,
    matched: u64,
}

impl Identities {
    fn see(&mut self, base_box: BBox, track: u32) {
        let Some((gt, _)) = self
            .base
            .iter()
            .enumerate()
            .map(|(i, b)| (i, b.iou(&base_box)))
            .filter(|(_, iou)| *iou >= 0.3)
            .max_by(|a, b| a.1.total_cmp(&b.1))
        else {
            return;
        };
        self.matched += 1;
        if self.last.insert(gt, track).is_some_and(|p| p != track) {
            self.switches += 1;
        }
        if self.owner.insert(track, gt).is_some_and(|p| p != gt) {
            self.transfers += 1;
        }
    }
}

/// Runs the evaluation and prints its report.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let cfg = DaemonConfig::load(&args.config)?;
    let system = crate::pipeline::check(&cfg.pipeline)
        .with_context(|| format!("in config {}", args.config.display()))?;
    if !(args.fps.is_finite() && args.fps > 0.0) {
        bail!(
            "--fps must be a positive number of frames per second, got {}",
            args.fps
        );
    }
    let (track, reuse) = knobs(&cfg, args)?;
    let mut graph = graph::Graph::load(&cfg, system, args.processor.as_deref())?;
    let (clip, name) = match (&args.pan, &args.video) {
        (Some(p), _) => (
            Clip::Pan(Pan::new(p, args.frames)?),
            format!("pan across {}", p.display()),
        ),
        (None, Some(v)) => (
            Clip::video(v, args.width, args.height, args.frames)?,
            v.display().to_string(),
        ),
        (None, None) => bail!("give --pan PHOTO.ppm or --video FILE"),
    };
    let mut ids = match &clip {
        Clip::Pan(p) => Some(Identities {
            base: graph
                .detect(p.base())?
                .iter()
                .map(|f| f.detection.bbox)
                .collect(),
            last: HashMap::new(),
            owner: HashMap::new(),
            switches: 0,
            transfers: 0,
            matched: 0,
        }),
        Clip::Video(_) => None,
    };
    let n_models = graph.system.models.len();
    let mut pass = TrackedPass {
        tracker: StreamTracker::new(track)?,
        reuse: StreamReuse::new(track.max_tracks * n_models),
        configs: reuse.clone(),
        detector_interval: track.detector_interval,
        counts: vec![ModelCounts::default(); n_models],
        tracker_us: Vec::new(),
        detector_frames: 0,
    };
    graph.runs.iter_mut().for_each(|r| *r = 0);
    let order = clip::order(clip.frame_count(), args.shuffle);
    let mut pre = Preprocessor::new();
    let mut max_live = 0usize;
    let mut work = Vec::with_capacity(order.len());
    for (i, &t) in order.iter().enumerate() {
        let image = clip.frame(&mut pre, t)?;
        let refs = replay::reference(&mut graph, &image)?;
        let before: Vec<u64> = pass
            .counts
            .iter()
            .map(ModelCounts::inferred_total)
            .collect();
        let objects = pass.frame(&mut graph, &image, i as f64 * 1e3 / args.fps, &refs)?;
        work.push(
            graph
                .system
                .request_models()
                .map(|m| (pass.counts[m.0].inferred_total() - before[m.0]) as u32)
                .collect(),
        );
        max_live = max_live.max(pass.tracker.live());
        if let (Some(ids), Clip::Pan(p)) = (&mut ids, &clip) {
            for o in objects.iter().filter(|o| o.box_age == 0) {
                if let Some(tr) = o.track.filter(|t| t.confirmed) {
                    ids.see(p.to_base(t, o.bbox), tr.id);
                }
            }
        }
    }
    let order_name = args
        .shuffle
        .map_or("clip order".to_string(), |s| format!("shuffled, seed {s}"));
    println!(
        "track-eval: {name}, {} frames in {order_name}, detector every {} frame(s)",
        clip.frame_count(),
        track.detector_interval
    );
    println!(
        "tracker: min_iou {} birth_hits {} max_misses {} max_tracks {}",
        track.min_iou, track.birth_hits, track.max_misses, track.max_tracks
    );
    for (m, r) in reuse.iter().enumerate() {
        if let Some(r) = r {
            println!("reuse {}: {r:?}", graph.name(ModelId(m)));
        }
    }
    report(&graph, &pass, &reuse);
    let (med, p90) = median_p90(
        &pass
            .tracker_us
            .iter()
            .map(|v| *v as f32)
            .collect::<Vec<_>>(),
    )
    .unwrap_or((0.0, 0.0));
    println!("\ntracker: {med:.0} us per frame median ({p90:.0} p90), at most {max_live} live tracks; detector frames {} of {}", pass.detector_frames, clip.frame_count());
    let runs: Vec<String> = graph
        .runs
        .iter()
        .enumerate()
        .map(|(m, n)| format!("{} {n}", graph.name(ModelId(m))))
        .collect();
    println!(
        "engine runs (per-frame inference, and the tracked pass on boxes it did not run): {}",
        runs.join(", ")
    );
    if let Some(path) = &args.write_trace {
        std::fs::write(path, work_trace(work).to_text())
            .with_context(|| format!("writing {}", path.display()))?;
        println!(
            "wrote the tracked pass's work per frame to {}",
            path.display()
        );
    }
    if let Some(ids) = ids {
        println!(
            "identities (pan): {} objects in the photo; {} confirmed boxes matched to one; id switches {}, id transfers {}",
            ids.base.len(),
            ids.matched,
            ids.switches,
            ids.transfers
        );
    }
    Ok(())
}

/// Per-frame scenes as a trace, runs of equal frames merged into one segment.
fn work_trace(frames: Vec<Vec<u32>>) -> Trace {
    let mut segments: Vec<Segment> = Vec::new();
    for scene in frames {
        match segments.last_mut() {
            Some(last) if last.scene == scene => last.frames += 1,
            _ => segments.push(Segment { frames: 1, scene }),
        }
    }
    Trace { segments }
}

fn report(graph: &graph::Graph, pass: &TrackedPass, reuse: &[Option<ReuseConfig>]) {
    println!("\n| model | reinfer interval | offered | inferred | reused | saved | inferred because | reused: agree | all served: agree | pose err median (p90) | gender agree | age diff median | unmatched |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (m, c) in pass.counts.iter().enumerate() {
        if c.offered == 0 {
            continue;
        }
        let pct = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{:.1} %", v * 100.0));
        let why: Vec<String> = c.inferred.iter().map(|(w, n)| format!("{w} {n}")).collect();
        let r = &c.reused_agreement;
        let pose = median_p90(&r.pose).map_or("-".into(), |(a, b)| format!("{a:.3} ({b:.3})"));
        let gender = (!r.gender.is_empty())
            .then(|| r.gender.iter().filter(|g| **g).count() as f64 / r.gender.len() as f64);
        let age = median_p90(&r.age).map_or("-".into(), |(a, _)| format!("{a:.1} y"));
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} ({}) | {} ({}) | {pose} | {} | {age} | {} |",
            graph.name(ModelId(m)),
            reuse[m]
                .as_ref()
                .map_or("-".into(), |r| r.reinfer_interval.to_string()),
            c.offered,
            c.inferred_total(),
            c.reused,
            pct(Some(c.reused as f64 / c.offered as f64)),
            why.join(", "),
            pct(r.share()),
            r.compared(),
            pct(c.all_agreement.share()),
            c.all_agreement.compared(),
            pct(gender),
            c.all_agreement.unmatched,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_work_trace_merges_runs_of_equal_frames_and_reads_back() {
        let frames = vec![vec![3, 1], vec![3, 1], vec![0, 0], vec![3, 1]];
        let trace = work_trace(frames);
        let runs: Vec<(usize, Vec<u32>)> = trace
            .segments
            .iter()
            .map(|s| (s.frames, s.scene.clone()))
            .collect();
        assert_eq!(
            runs,
            vec![(2, vec![3, 1]), (1, vec![0, 0]), (1, vec![3, 1])]
        );
        assert_eq!(Trace::parse(&trace.to_text(), 2).unwrap(), trace);
    }
}
