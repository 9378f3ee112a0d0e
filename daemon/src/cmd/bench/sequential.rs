//! The plain sequential Rust loop `camdnnd bench` measures the pipeline
//! against: every model of the graph loaded on one engine, and per frame the
//! graph walked one item at a time (detector items, then each object's crop
//! through each model under it), with the pipeline's own pre- and
//! post-processing (`ModelRuntime`) but no batching, no second processor and
//! no overlap between frames.
//!
//! A [`Pool`] of such walkers is the baseline a user with N cores runs
//! instead: N single-threaded workers taking frames from one shared queue
//! (as Frigate's detector processes take every camera's frames), or one
//! walker whose engine has N intra-op threads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use camdnn_engine::LoadedModel;
use camdnn_policy::{ModelId, ProcId, System};
use camdnn_protocol::ClassRef;
use camdnn_vision::{BBox, Detection, Preprocessor, RgbImage, Transform};

use super::stream::BenchFrame;
use super::work::{self, Answers, Work};
use super::Figures;
use crate::config::DaemonConfig;
use crate::pipeline::config::ProcessorEntry;
use crate::pipeline::models::{Decoded, Found, ItemContext, ModelRuntime, Verdict};
use crate::pipeline::prep;
use crate::pipeline::real_engine as engine_for;

/// What one run of a contender measured.
pub(super) struct Run {
    /// Frames/s and delays.
    pub figures: Figures,
    /// What it did.
    pub work: Work,
}

/// An object while its frame is walked.
struct Object {
    bbox: BBox,
    score: f32,
    rejected: bool,
    /// Models that produced an output for it.
    seen_by: Vec<ModelId>,
    /// Its class, for the digest.
    class: String,
    /// (model, answer) for the digest.
    answers: Vec<(String, String)>,
}

/// The graph's models loaded on processor `j`'s engine, ready to walk frames.
struct Walker<'a> {
    system: &'a System,
    root: ModelId,
    /// Per model: its handle (`None`: upstream, never run) and runtime.
    models: Vec<(Option<Box<dyn LoadedModel>>, ModelRuntime)>,
    pre: Preprocessor,
    /// Work done since the last [`Walker::take_work`].
    work: Work,
}

impl<'a> Walker<'a> {
    /// Every model on `proc`'s engine; `j`: the config's processor whose
    /// profile must support every model (`None`: not checked, a CPU engine
    /// outside the config).
    fn load(
        cfg: &DaemonConfig,
        system: &'a System,
        proc: &ProcessorEntry,
        j: Option<usize>,
    ) -> anyhow::Result<Self> {
        let p = &cfg.pipeline;
        let engine = engine_for(proc)?;
        let pcfg = proc.engine_config();
        let root = system
            .roots()
            .next()
            .context("the config has no detector")?;
        let mut models = Vec::with_capacity(p.models.len());
        for (i, m) in p.models.iter().enumerate() {
            let rt = ModelRuntime::new(m, &|f| cfg.resolve(f))?;
            let handle = if rt.decoder.is_upstream() {
                None
            } else {
                if j.is_some_and(|j| !system.supports(ModelId(i), ProcId(j))) {
                    bail!(
                        "the sequential loop runs every model on {:?}, which the profile says cannot run {:?}; pick a processor with --sequential-processor",
                        proc.name,
                        m.name
                    );
                }
                Some(
                    engine
                        .load(&m.source(|f| cfg.resolve(f), 1), &pcfg)
                        .with_context(|| format!("loading {} on {}", m.name, proc.name))?,
                )
            };
            models.push((handle, rt));
        }
        Ok(Walker {
            system,
            root,
            models,
            pre: Preprocessor::new(),
            work: Work::default(),
        })
    }

    /// The work counted since the last call (the digest is set by the caller).
    fn take_work(&mut self) -> Work {
        std::mem::take(&mut self.work)
    }

    fn run(
        &mut self,
        i: ModelId,
        input: camdnn_engine::Tensor,
    ) -> anyhow::Result<Vec<camdnn_engine::Tensor>> {
        let name = &self.system.models[i.0].name;
        let h = self.models[i.0]
            .0
            .as_mut()
            .with_context(|| format!("model {name:?} is upstream and cannot run"))?;
        h.run(&[input]).with_context(|| format!("running {name}"))
    }

    /// The detector's objects: the frame's upstream detections, or the
    /// detector run on every item of the frame (pyramid scales) and merged.
    fn detect(&mut self, frame: &BenchFrame, image: &RgbImage) -> anyhow::Result<Vec<Found>> {
        let root = self.root;
        if self.models[root.0].1.decoder.is_upstream() {
            return Ok(frame
                .frame
                .detections
                .iter()
                .flatten()
                .filter_map(|d| match &d.class {
                    ClassRef::Name(class) => Some(Found {
                        detection: Detection {
                            bbox: BBox::new(d.bbox.x0, d.bbox.y0, d.bbox.x1, d.bbox.y1),
                            score: d.score,
                            class_id: 0,
                        },
                        class: class.clone(),
                    }),
                    ClassRef::Id(_) => None,
                })
                .collect());
        }
        let items = self.models[root.0]
            .1
            .input
            .prepare_frame(&mut self.pre, image)?;
        let mut found = Vec::new();
        for (t, regions) in items {
            self.work.detector_runs += 1;
            let out = self.run(root, t)?;
            let ctx = ItemContext {
                regions: &regions,
                bbox: None,
            };
            match self.models[root.0].1.decoder.decode(&out, &ctx)? {
                Decoded::Objects(f) => found.extend(f),
                Decoded::Output { .. } => bail!(
                    "the detector {:?} gave a per-object output",
                    self.system.models[root.0].name
                ),
            }
        }
        Ok(self.models[root.0].1.decoder.merge(found))
    }

    /// One frame through the whole graph; returns the digest of its answer.
    fn frame(&mut self, frame: &BenchFrame) -> anyhow::Result<u64> {
        let image = prep::decode(&frame.frame)
            .map_err(|(reason, msg)| anyhow::anyhow!("frame rejected ({reason:?}): {msg}"))?;
        let found = self.detect(frame, &image)?;
        let mut objects = Vec::with_capacity(found.len());
        // (object, model, box, rotate) still to run, depth first.
        let mut todo: Vec<(usize, ModelId, BBox, bool)> = Vec::new();
        for (k, o) in found.into_iter().enumerate() {
            let bbox = o.detection.bbox;
            let class = o.class.clone();
            if let Some(m) = self.system.route(&o.class) {
                if self.system.models[m.0].parent == Some(self.root) {
                    todo.push((k, m, bbox, false));
                }
            }
            objects.push(Object {
                bbox,
                score: o.detection.score,
                rejected: false,
                seen_by: Vec::new(),
                class,
                answers: Vec::new(),
            });
        }
        todo.reverse();
        let identity = Transform::identity(image.width(), image.height());
        while let Some((k, m, bbox, rotate)) = todo.pop() {
            let (input, _) =
                self.models[m.0]
                    .1
                    .input
                    .prepare(&mut self.pre, &image, Some(bbox), rotate)?;
            *self
                .work
                .crops
                .entry(self.system.models[m.0].name.clone())
                .or_default() += 1;
            let out = self.run(m, input)?;
            let ctx = ItemContext {
                regions: std::slice::from_ref(&identity),
                bbox: Some(bbox),
            };
            let Decoded::Output {
                value,
                rotate,
                verdict,
            } = self.models[m.0].1.decoder.decode(&out, &ctx)?
            else {
                bail!(
                    "model {:?} under the detector gave objects",
                    self.system.models[m.0].name
                );
            };
            let obj = &mut objects[k];
            obj.answers
                .push((self.system.models[m.0].name.clone(), work::answer(&value)));
            obj.seen_by.push(m);
            match verdict {
                Verdict::Keep | Verdict::Part(_) => {}
                Verdict::Refine { bbox, score } => {
                    obj.bbox = bbox;
                    obj.score = score;
                }
                Verdict::Reject => obj.rejected = true,
            }
            if let Some(crop) = verdict.child_crop(obj.bbox) {
                for &c in self.system.models[m.0].children.iter().rev() {
                    todo.push((k, c, crop, rotate));
                }
            }
        }
        self.suppress(&mut objects);
        Ok(work::frame_digest(
            objects.iter().filter(|o| !o.rejected).map(|o| {
                work::object_digest(
                    &o.class,
                    [o.bbox.x0, o.bbox.y0, o.bbox.x1, o.bbox.y1],
                    &o.answers,
                )
            }),
        ))
    }

    /// The frame-wide suppression some models ask for (MTCNN's last step).
    fn suppress(&self, objects: &mut [Object]) {
        for (i, (_, rt)) in self.models.iter().enumerate() {
            let Some(overlap) = rt.decoder.final_suppression() else {
                continue;
            };
            let candidates: Vec<(usize, BBox, f32)> = objects
                .iter()
                .enumerate()
                .filter(|(_, o)| !o.rejected && o.seen_by.contains(&ModelId(i)))
                .map(|(n, o)| (n, o.bbox, o.score))
                .collect();
            for n in camdnn_vision::mtcnn::nested_losers(&candidates, overlap) {
                objects[n].rejected = true;
            }
        }
    }
}

/// One worker's start and, per frame it walked, (index, delay ms, digest).
type WorkerRun = (Instant, Vec<(usize, f64, u64)>);

/// A baseline a user runs instead of camdnn: N walkers, each on its own
/// thread with its own sessions, taking the next frame from one shared queue
/// when free (N = 1: one walker, one frame at a time).
pub(super) struct Pool<'a> {
    /// The contender's name.
    pub name: String,
    walkers: Vec<Walker<'a>>,
}

impl<'a> Pool<'a> {
    /// `workers` walkers on `proc`'s engine (`j`: as [`Walker::load`]).
    pub fn load(
        cfg: &DaemonConfig,
        system: &'a System,
        proc: &ProcessorEntry,
        j: Option<usize>,
        workers: usize,
        name: String,
    ) -> anyhow::Result<Self> {
        let walkers = (0..workers.max(1))
            .map(|_| Walker::load(cfg, system, proc, j))
            .collect::<anyhow::Result<_>>()?;
        Ok(Pool { name, walkers })
    }

    /// Walks `warm` (untimed, every worker) then `frames`, in order, each
    /// taken by the first free worker. `fps`: `None` closed loop (a frame's
    /// delay is its walk), or an open loop where frame n arrives n / fps s
    /// after the start and its delay runs from its arrival to its answer,
    /// its wait in the queue included.
    pub fn run(
        &mut self,
        warm: &[BenchFrame],
        frames: &[BenchFrame],
        fps: Option<f64>,
    ) -> anyhow::Result<Run> {
        let n = self.walkers.len();
        let barrier = Barrier::new(n);
        let next = AtomicUsize::new(0);
        let per_worker: Vec<anyhow::Result<WorkerRun>> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .walkers
                .iter_mut()
                .enumerate()
                .map(|(k, w)| {
                    let (barrier, next) = (&barrier, &next);
                    // Named, so a profiler tells the baseline's threads from the pipeline's.
                    std::thread::Builder::new()
                        .name(format!("bench-walker-{k}"))
                        .spawn_scoped(scope, move || {
                            // Every worker reaches the barrier, even one whose
                            // warm-up failed, or the others would wait forever.
                            let warmed = warm.iter().try_for_each(|f| w.frame(f).map(drop));
                            w.take_work();
                            barrier.wait();
                            warmed?;
                            let start = Instant::now();
                            let mut out = Vec::new();
                            loop {
                                let i = next.fetch_add(1, Ordering::Relaxed);
                                let Some(f) = frames.get(i) else { break };
                                let arrival = match fps {
                                    Some(fps) => {
                                        let due = start + Duration::from_secs_f64(i as f64 / fps);
                                        if let Some(wait) =
                                            due.checked_duration_since(Instant::now())
                                        {
                                            std::thread::sleep(wait);
                                        }
                                        due
                                    }
                                    None => Instant::now(),
                                };
                                let digest = w.frame(f)?;
                                out.push((i, arrival.elapsed().as_secs_f64() * 1e3, digest));
                            }
                            Ok((start, out))
                        })
                        // As `scope.spawn` does: the OS refusing a thread is not recoverable here.
                        .expect("the OS refused a benchmark worker thread")
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a worker panicked")))
                })
                .collect()
        });
        let mut starts = Vec::new();
        let mut by_frame = vec![(0.0, 0u64); frames.len()];
        for r in per_worker {
            let (start, out) = r?;
            starts.push(start);
            for (i, d, digest) in out {
                by_frame[i] = (d, digest);
            }
        }
        let start = starts.into_iter().min().unwrap_or_else(Instant::now);
        let seconds = start.elapsed().as_secs_f64();
        let mut work = Work::default();
        for w in &mut self.walkers {
            let t = w.take_work();
            work.detector_runs += t.detector_runs;
            for (m, c) in t.crops {
                *work.crops.entry(m).or_default() += c;
            }
        }
        let digests: Vec<u64> = by_frame.iter().map(|&(_, d)| d).collect();
        work.answers = Answers::Digest(work::run_digest(&digests));
        Ok(Run {
            figures: Figures {
                name: self.name.clone(),
                frames: frames.len(),
                seconds,
                delays_ms: by_frame.iter().map(|&(d, _)| d).collect(),
                failed: 0,
            },
            work,
        })
    }
}
