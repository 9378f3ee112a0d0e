//! One frame of `track-eval`, twice: per-frame inference of the whole graph (the reference),
//! and the tracked pass (detector on every k-th frame, the tracker, each model's reuse
//! decision, inference only where it says so), with the tracked pass's results compared with
//! the reference's on the same objects.
//!
//! Where the tracked pass infers a model on exactly the box the reference ran it on, it takes
//! the reference's result instead of running the model again: the same model on the same
//! input gives the same output, so only the models' run counts, not the results, depend on it.

use std::collections::HashMap;
use std::time::Instant;

use anyhow::Context;
use camdnn_policy::reuse::{Decision, Request, ReuseConfig, StreamReuse, Tracked};
use camdnn_policy::ModelId;
use camdnn_vision::track::{StreamTracker, TrackBox};
use camdnn_vision::{BBox, RgbImage};

use super::graph::Graph;
use super::measure::{compare, ModelCounts};
use crate::pipeline::reuse_value::KeptResult;

/// An object of a frame with the results the graph gave it: model -> (input box, result).
#[derive(Debug, Clone)]
pub struct Object {
    /// Box, frame pixels.
    pub bbox: BBox,
    /// Class name.
    pub class: String,
    /// Its track (tracked pass only).
    pub track: Option<Tracked>,
    /// Frames since the detector saw the box.
    pub box_age: u32,
    /// Per model: the box it ran on and its result.
    pub results: HashMap<ModelId, (BBox, KeptResult)>,
}

impl Object {
    fn new(bbox: BBox, class: String) -> Self {
        Object {
            bbox,
            class,
            track: None,
            box_age: 0,
            results: HashMap::new(),
        }
    }
}

/// Per-frame inference of the whole graph.
pub fn reference(graph: &mut Graph, image: &RgbImage) -> anyhow::Result<Vec<Object>> {
    let found = graph.detect(image)?;
    let mut objects: Vec<Object> = found
        .into_iter()
        .map(|f| Object::new(f.detection.bbox, f.class))
        .collect();
    for o in &mut objects {
        let Some(m) = graph.system.route(&o.class) else {
            continue;
        };
        let mut todo = vec![(m, o.bbox)];
        while let Some((m, bbox)) = todo.pop() {
            let r = graph.infer(m, image, bbox)?;
            if let Some(crop) = r.verdict.child_crop(o.bbox) {
                todo.extend(graph.system.models[m.0].children.iter().map(|&c| (c, crop)));
            }
            o.results.insert(m, (bbox, r));
        }
    }
    Ok(objects)
}

/// The tracked pass's state over the clip.
pub struct TrackedPass {
    /// The stream's tracker.
    pub tracker: StreamTracker,
    /// Its stored results.
    pub reuse: StreamReuse<KeptResult>,
    /// Reuse knobs by model.
    pub configs: Vec<Option<ReuseConfig>>,
    /// Run the detector on every k-th frame.
    pub detector_interval: u32,
    /// Counts per model.
    pub counts: Vec<ModelCounts>,
    /// Tracker time per frame, µs.
    pub tracker_us: Vec<f64>,
    /// Frames the detector ran on.
    pub detector_frames: u64,
}

/// The reference object the tracked pass's object `o` stands for: the same index on a
/// detected frame, else the best IoU above 0.5.
fn matched<'a>(o: &Object, k: usize, detected: bool, refs: &'a [Object]) -> Option<&'a Object> {
    if detected {
        return refs.get(k);
    }
    refs.iter()
        .filter(|r| r.class == o.class)
        .map(|r| (r.bbox.iou(&o.bbox), r))
        .filter(|(iou, _)| *iou > 0.5)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, r)| r)
}

impl TrackedPass {
    /// The tracked pass on one frame (`now_ms`: its time), given the reference's objects.
    pub fn frame(
        &mut self,
        graph: &mut Graph,
        image: &RgbImage,
        now_ms: f64,
        refs: &[Object],
    ) -> anyhow::Result<Vec<Object>> {
        self.reuse.begin_frame();
        let detected = self.reuse.detector_due(self.detector_interval);
        self.detector_frames += u64::from(detected);
        let start = Instant::now();
        let mut objects = if detected {
            let boxes: Vec<TrackBox> = refs
                .iter()
                .map(|r| TrackBox {
                    bbox: r.bbox,
                    class: r.class.clone(),
                })
                .collect();
            let assoc = self.tracker.update(&boxes)?;
            refs.iter()
                .zip(assoc)
                .map(|(r, a)| {
                    let mut o = Object::new(r.bbox, r.class.clone());
                    o.track = a.map(|a| Tracked {
                        id: a.track,
                        confirmed: a.confirmed,
                        continued: a.continued,
                    });
                    o
                })
                .collect()
        } else {
            self.tracker
                .carry()
                .into_iter()
                .map(|c| {
                    let mut o = Object::new(c.bbox, c.class);
                    o.track = Some(Tracked {
                        id: c.track,
                        confirmed: true,
                        continued: true,
                    });
                    o.box_age = c.box_age;
                    o
                })
                .collect::<Vec<_>>()
        };
        self.tracker_us.push(start.elapsed().as_secs_f64() * 1e6);
        for (k, o) in objects.iter_mut().enumerate() {
            let reference = matched(o, k, detected, refs);
            self.serve(graph, image, now_ms, o, reference)?;
        }
        let live: std::collections::HashSet<u32> = self.tracker.live_ids().collect();
        self.reuse.retain_tracks(|t| live.contains(&t));
        Ok(objects)
    }

    /// Every model under the detector for one object, depth first: reused or inferred.
    fn serve(
        &mut self,
        graph: &mut Graph,
        image: &RgbImage,
        now_ms: f64,
        o: &mut Object,
        reference: Option<&Object>,
    ) -> anyhow::Result<()> {
        let Some(m) = graph.system.route(&o.class) else {
            return Ok(());
        };
        let mut todo = vec![(m, o.bbox)];
        while let Some((m, bbox)) = todo.pop() {
            let req = Request {
                object: 0,
                model: m,
                bbox: [bbox.x0, bbox.y0, bbox.x1, bbox.y1],
                track: o.track,
            };
            let decision = self.reuse.decide(self.configs[m.0].as_ref(), &req, now_ms);
            self.counts[m.0].count(&decision);
            let result = match (decision, o.track) {
                (Decision::Reuse { .. }, Some(t)) => {
                    let s = self
                        .reuse
                        .stored(t.id, m)
                        .context("a reused result is stored")?;
                    let from = BBox::new(s.bbox[0], s.bbox[1], s.bbox[2], s.bbox[3]);
                    s.value.moved(&from, &bbox)
                }
                _ => {
                    let r = match reference.and_then(|r| r.results.get(&m)) {
                        Some((b, r)) if *b == bbox => r.clone(),
                        _ => graph.infer(m, image, bbox)?,
                    };
                    if let Some(t) = o.track {
                        self.reuse
                            .store(t.id, m, req.bbox, r.confidence(), now_ms, r.clone());
                    }
                    r
                }
            };
            self.compare(m, &decision, &result, reference);
            if let Some(crop) = result.verdict.child_crop(o.bbox) {
                todo.extend(graph.system.models[m.0].children.iter().map(|&c| (c, crop)));
            }
            o.results.insert(m, (bbox, result));
        }
        Ok(())
    }

    fn compare(
        &mut self,
        m: ModelId,
        d: &Decision,
        served: &KeptResult,
        reference: Option<&Object>,
    ) {
        let c = reference.and_then(|r| {
            let (_, want) = r.results.get(&m)?;
            compare(&served.value, &want.value, r.bbox)
        });
        let counts = &mut self.counts[m.0];
        counts.all_agreement.add(c);
        if !d.infers() {
            counts.reused_agreement.add(c);
        }
    }
}
