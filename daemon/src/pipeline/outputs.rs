//! Reading a finished batch: each item's outputs decoded into the frame's
//! objects (a detector's, merged once its last item is read) and the
//! requests its result releases (a detector's objects routed to their
//! models, a classifier's children on the part its verdict names).

use camdnn_engine::{RunReport, Tensor};
use camdnn_policy::flow::{ItemFailed, Request};
use camdnn_policy::{ModelId, System};
use camdnn_protocol::ClassRef;
use camdnn_vision::{keep_best, Transform};

use super::frame_data::{FrameData, ObjectState};
use super::models::{Decoded, Found, ItemContext, ModelRuntime, Verdict};
use super::prep::CropSpec;
use super::reuse_value::KeptResult;

/// What reading a batch needs of the pipeline.
pub struct Reader<'a> {
    pub system: &'a System,
    pub models: &'a [ModelRuntime],
    pub max_objects: usize,
}

impl Reader<'_> {
    /// Per item of a batch of `model` over `objects` of `frame`: the
    /// requests its result releases, or `Err` when its output cannot be read.
    pub fn read(
        &self,
        frame: &mut FrameData,
        frame_id: u64,
        model: ModelId,
        objects: &[u32],
        report: &RunReport,
    ) -> Vec<Result<Vec<Request>, ItemFailed>> {
        let is_root = self.system.models[model.0].parent.is_none();
        let mut out = Vec::with_capacity(objects.len());
        for (n, &object) in objects.iter().enumerate() {
            let outputs: Result<Vec<Tensor>, _> =
                report.outputs.iter().map(|t| t.slice_batch(n, 1)).collect();
            let (w, h) = frame
                .image
                .as_ref()
                .map_or((1, 1), |i| (i.width(), i.height()));
            let identity = [Transform::identity(w, h)];
            let ctx = if is_root {
                ItemContext {
                    regions: frame
                        .det_transforms
                        .get(object as usize)
                        .map_or(&identity[..], |t| &t[..]),
                    bbox: None,
                }
            } else {
                ItemContext {
                    regions: &identity,
                    bbox: frame.objects.get(object as usize).map(|o| o.bbox),
                }
            };
            let decoded = outputs
                .map_err(anyhow::Error::from)
                .and_then(|o| self.models[model.0].decoder.decode(&o, &ctx));
            out.push(match decoded {
                Err(e) => {
                    tracing::warn!(frame = frame_id, model = %self.system.models[model.0].name, error = %format!("{e:#}"), "cannot read outputs");
                    Err(ItemFailed)
                }
                Ok(Decoded::Objects(found)) => Ok(self.detected(frame, model, found, report)),
                Ok(Decoded::Output {
                    value,
                    rotate,
                    verdict,
                }) => Ok(self.classified(frame, model, object, value, rotate, verdict)),
            });
        }
        out
    }

    /// A detector item's objects; once the frame's last item is read, the
    /// merged objects (best `max_objects` kept) become the frame's and
    /// their level-1 requests are released.
    fn detected(
        &self,
        frame: &mut FrameData,
        model: ModelId,
        found: Vec<Found>,
        report: &RunReport,
    ) -> Vec<Request> {
        frame.detect_started = Some(
            frame
                .detect_started
                .map_or(report.started, |s| s.min(report.started)),
        );
        frame.detect_done = Some(
            frame
                .detect_done
                .map_or(report.finished, |d| d.max(report.finished)),
        );
        frame.det_found.extend(found);
        frame.det_left = frame.det_left.saturating_sub(1);
        if frame.det_left > 0 {
            return Vec::new();
        }
        let found = self.models[model.0]
            .decoder
            .merge(std::mem::take(&mut frame.det_found));
        let scores: Vec<f32> = found.iter().map(|o| o.detection.score).collect();
        let kept = keep_best(&scores, self.max_objects);
        frame.objects_dropped = (found.len() - kept.len()) as u32;
        let mut found: Vec<Option<Found>> = found.into_iter().map(Some).collect();
        let mut requests = Vec::new();
        for o in kept.into_iter().filter_map(|i| found[i].take()) {
            let object = frame.objects.len();
            let bbox = o.detection.bbox;
            if let Some(m) = self.system.route(&o.class) {
                if self.system.models[m.0].parent == Some(model) {
                    let r = Request {
                        model: m,
                        object: object as u32,
                    };
                    let spec = CropSpec {
                        object,
                        model: m,
                        bbox,
                        rotate: false,
                    };
                    frame.crops.insert(r, spec);
                    requests.push(r);
                }
            }
            frame.objects.push(ObjectState::new(
                bbox,
                ClassRef::Name(o.class),
                o.detection.score,
            ));
        }
        requests
    }

    /// A classifier's answer on one object: its output is kept, its
    /// verdict applied, and its children's requests released on the part
    /// the verdict names.
    fn classified(
        &self,
        frame: &mut FrameData,
        model: ModelId,
        object: u32,
        value: camdnn_protocol::OutputValue,
        rotate: bool,
        verdict: Verdict,
    ) -> Vec<Request> {
        let m = &self.system.models[model.0];
        let Some(obj) = frame.objects.get_mut(object as usize) else {
            return Vec::new();
        };
        if frame.track.is_some_and(|t| t.frame.is_some()) {
            let kept = KeptResult {
                value: value.clone(),
                verdict,
            };
            frame.inferred.push((object, model, kept));
        }
        obj.take_result(&m.name, value, verdict, 0);
        let Some(bbox) = verdict.child_crop(obj.bbox) else {
            return Vec::new();
        };
        let mut requests = Vec::new();
        for &c in &m.children {
            let r = Request { model: c, object };
            let spec = CropSpec {
                object: object as usize,
                model: c,
                bbox,
                rotate,
            };
            frame.crops.insert(r, spec);
            requests.push(r);
        }
        requests
    }
}
