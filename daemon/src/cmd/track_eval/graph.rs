//! The config's graph loaded on one processor's engine, run one item at a time with the
//! pipeline's own pre- and post-processing (`ModelRuntime`): the detector on a whole frame,
//! a per-object model on one box.

use anyhow::{bail, Context};
use camdnn_engine::LoadedModel;
use camdnn_policy::{ModelId, ProcId, System};
use camdnn_vision::{keep_best, BBox, Preprocessor, RgbImage, Transform};

use crate::config::DaemonConfig;
use crate::pipeline::models::{Decoded, Found, ItemContext, ModelRuntime};
use crate::pipeline::real_engine;
use crate::pipeline::reuse_value::KeptResult;

/// The graph's models on one engine.
pub struct Graph {
    /// The scheduler's view of the graph (routes, children, levels).
    pub system: System,
    /// The detector.
    pub root: ModelId,
    models: Vec<(Box<dyn LoadedModel>, ModelRuntime)>,
    pre: Preprocessor,
    max_objects: usize,
    /// Items run per model.
    pub runs: Vec<u64>,
}

impl Graph {
    /// Every model of `cfg` loaded on the processor named `processor` (or the first ORT
    /// one, else the first); the detector must not be `upstream`.
    pub fn load(
        cfg: &DaemonConfig,
        system: System,
        processor: Option<&str>,
    ) -> anyhow::Result<Self> {
        let p = &cfg.pipeline;
        let (j, proc) = match processor {
            Some(name) => p
                .processors
                .iter()
                .enumerate()
                .find(|(_, q)| q.name == name)
                .with_context(|| format!("--processor {name:?} is not in the config"))?,
            None => p
                .processors
                .iter()
                .enumerate()
                .find(|(_, q)| q.engine == camdnn_engine::EngineKind::Ort)
                .or_else(|| p.processors.iter().enumerate().next())
                .context("the config has no processor")?,
        };
        let engine = real_engine(proc)?;
        let pcfg = proc.engine_config();
        let root = system
            .roots()
            .next()
            .context("the config has no detector")?;
        let mut models = Vec::with_capacity(p.models.len());
        for (i, m) in p.models.iter().enumerate() {
            let rt = ModelRuntime::new(m, &|f| cfg.resolve(f))?;
            if rt.decoder.is_upstream() {
                bail!("model {:?} is an upstream detector: track-eval runs a real detector on the clip's frames", m.name);
            }
            if !system.supports(ModelId(i), ProcId(j)) {
                bail!(
                    "the profile says {:?} cannot run {:?}; pick another --processor",
                    proc.name,
                    m.name
                );
            }
            let handle = engine
                .load(&m.source(|f| cfg.resolve(f), 1), &pcfg)
                .with_context(|| format!("loading {} on {}", m.name, proc.name))?;
            models.push((handle, rt));
        }
        let n = models.len();
        Ok(Graph {
            system,
            root,
            models,
            pre: Preprocessor::new(),
            max_objects: p.max_objects,
            runs: vec![0; n],
        })
    }

    /// The model's name.
    pub fn name(&self, m: ModelId) -> &str {
        &self.system.models[m.0].name
    }

    fn run(
        &mut self,
        m: ModelId,
        input: camdnn_engine::Tensor,
    ) -> anyhow::Result<Vec<camdnn_engine::Tensor>> {
        self.runs[m.0] += 1;
        let name = &self.system.models[m.0].name;
        self.models[m.0]
            .0
            .run(&[input])
            .with_context(|| format!("running {name}"))
    }

    /// The detector's merged objects on a frame, the best `max_objects` of them.
    pub fn detect(&mut self, image: &RgbImage) -> anyhow::Result<Vec<Found>> {
        let root = self.root;
        let items = self.models[root.0]
            .1
            .input
            .prepare_frame(&mut self.pre, image)?;
        let mut found = Vec::new();
        for (t, regions) in items {
            let out = self.run(root, t)?;
            let ctx = ItemContext {
                regions: &regions,
                bbox: None,
            };
            match self.models[root.0].1.decoder.decode(&out, &ctx)? {
                Decoded::Objects(f) => found.extend(f),
                Decoded::Output { .. } => bail!(
                    "the detector {:?} gave a per-object output",
                    self.name(root)
                ),
            }
        }
        let found = self.models[root.0].1.decoder.merge(found);
        let scores: Vec<f32> = found.iter().map(|o| o.detection.score).collect();
        let kept = keep_best(&scores, self.max_objects);
        let mut found: Vec<Option<Found>> = found.into_iter().map(Some).collect();
        Ok(kept.into_iter().filter_map(|i| found[i].take()).collect())
    }

    /// A per-object model on `bbox` of the frame.
    pub fn infer(
        &mut self,
        m: ModelId,
        image: &RgbImage,
        bbox: BBox,
    ) -> anyhow::Result<KeptResult> {
        let (input, _) =
            self.models[m.0]
                .1
                .input
                .prepare(&mut self.pre, image, Some(bbox), false)?;
        let out = self.run(m, input)?;
        let identity = Transform::identity(image.width(), image.height());
        let ctx = ItemContext {
            regions: std::slice::from_ref(&identity),
            bbox: Some(bbox),
        };
        match self.models[m.0].1.decoder.decode(&out, &ctx)? {
            Decoded::Output { value, verdict, .. } => Ok(KeptResult { value, verdict }),
            Decoded::Objects(_) => {
                bail!("model {:?} under the detector gave objects", self.name(m))
            }
        }
    }
}
