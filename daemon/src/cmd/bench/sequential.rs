//! The plain sequential Rust loop `camdnnd bench` measures the pipeline
//! against: every model of the graph loaded on one engine, and per frame the
//! graph walked one item at a time (detector items, then each object's crop
//! through each model under it), with the pipeline's own pre- and
//! post-processing (`ModelRuntime`) but no batching, no second processor and
//! no overlap between frames.

use std::time::Instant;

use anyhow::{bail, Context};
use camdnn_engine::LoadedModel;
use camdnn_policy::{ModelId, ProcId, System};
use camdnn_protocol::ClassRef;
use camdnn_vision::{BBox, Detection, Preprocessor, RgbImage, Transform};

use super::{BenchFrame, Figures};
use crate::config::DaemonConfig;
use crate::pipeline::models::{Decoded, Found, ItemContext, ModelRuntime, Verdict};
use crate::pipeline::prep;
use crate::pipeline::real_engine as engine_for;

/// What one sequential run measured.
pub(super) struct SequentialRun {
    /// Frames/s and delays.
    pub figures: Figures,
    /// Objects the last frame's result kept (cross-checked with the pipeline's).
    pub objects: usize,
}

/// An object while its frame is walked.
struct Object {
    bbox: BBox,
    score: f32,
    rejected: bool,
    /// Models that produced an output for it.
    seen_by: Vec<ModelId>,
}

/// The graph's models loaded on processor `j`'s engine, ready to walk frames.
struct Walker<'a> {
    system: &'a System,
    root: ModelId,
    /// Per model: its handle (`None`: upstream, never run) and runtime.
    models: Vec<(Option<Box<dyn LoadedModel>>, ModelRuntime)>,
    pre: Preprocessor,
}

impl<'a> Walker<'a> {
    fn load(cfg: &DaemonConfig, system: &'a System, j: usize) -> anyhow::Result<Self> {
        let p = &cfg.pipeline;
        let proc = &p.processors[j];
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
                if !system.supports(ModelId(i), ProcId(j)) {
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
        })
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
        for (t, transform) in items {
            let out = self.run(root, t)?;
            let ctx = ItemContext {
                transform,
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

    /// One frame through the whole graph; returns the objects its result keeps.
    fn frame(&mut self, frame: &BenchFrame) -> anyhow::Result<usize> {
        let image = prep::decode(&frame.frame)
            .map_err(|(reason, msg)| anyhow::anyhow!("frame rejected ({reason:?}): {msg}"))?;
        let found = self.detect(frame, &image)?;
        let mut objects = Vec::with_capacity(found.len());
        // (object, model, box, rotate) still to run, depth first.
        let mut todo: Vec<(usize, ModelId, BBox, bool)> = Vec::new();
        for (k, o) in found.into_iter().enumerate() {
            let bbox = o.detection.bbox;
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
            let out = self.run(m, input)?;
            let ctx = ItemContext {
                transform: identity,
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
            std::hint::black_box(value);
            let obj = &mut objects[k];
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
        Ok(objects.iter().filter(|o| !o.rejected).count())
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

/// Walks `warm` (untimed) then `frames` (timed) through the graph on
/// processor `j`'s engine, one item at a time.
pub(super) fn run(
    cfg: &DaemonConfig,
    system: &System,
    j: usize,
    warm: &[BenchFrame],
    frames: &[BenchFrame],
) -> anyhow::Result<SequentialRun> {
    let proc = &cfg.pipeline.processors[j];
    let mut walker = Walker::load(cfg, system, j)?;
    for f in warm {
        walker.frame(f)?;
    }
    let start = Instant::now();
    let mut delays = Vec::with_capacity(frames.len());
    let mut objects = 0;
    for f in frames {
        let t0 = Instant::now();
        objects = walker.frame(f)?;
        delays.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let figures = Figures {
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
    Ok(SequentialRun { figures, objects })
}
