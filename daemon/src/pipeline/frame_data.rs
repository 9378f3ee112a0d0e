//! What the scheduler thread keeps of a frame while the flow works on it:
//! where its answer goes, its decoded image, its objects and their outputs,
//! the inputs prepared for its requests, and its timings; and the result
//! it becomes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use camdnn_engine::Tensor;
use camdnn_policy::flow::Request;
use camdnn_policy::reuse::Tracked;
use camdnn_policy::ModelId;
use camdnn_protocol::{BBox as WireBox, ClassRef, FrameResult, ObjectResult, Output, Timing};
use camdnn_vision::{BBox, RgbImage, Transform};
use tokio::sync::oneshot;

use super::models::{Found, ModelRuntime, Verdict};
use super::prep::CropSpec;
use super::reuse_value::KeptResult;
use super::Outcome;

/// One object of a frame.
pub struct ObjectState {
    pub bbox: BBox,
    /// The class as the result names it (the client's id when no label names it).
    pub class: ClassRef,
    pub score: f32,
    pub outputs: Vec<Output>,
    /// A model's verdict removed it (e.g. R-Net found no face): left out of the result.
    pub rejected: bool,
    /// Its track in the stream (`None`: not tracked).
    pub track: Option<Tracked>,
    /// Frames since the detector saw its box (0: on this frame).
    pub box_age: u32,
}

impl ObjectState {
    /// An object as found (by the detector, upstream, or carried by the tracker), untracked.
    pub fn new(bbox: BBox, class: ClassRef, score: f32) -> Self {
        ObjectState {
            bbox,
            class,
            score,
            outputs: Vec::new(),
            rejected: false,
            track: None,
            box_age: 0,
        }
    }

    /// Puts a model's result on the object, `age` frames after it was inferred (0: on this
    /// frame), and applies its verdict.
    pub fn take_result(
        &mut self,
        model: &str,
        value: camdnn_protocol::OutputValue,
        verdict: Verdict,
        age: u32,
    ) {
        self.outputs.push(Output {
            model: model.to_owned(),
            value,
            age,
        });
        match verdict {
            Verdict::Keep | Verdict::Part(_) => {}
            Verdict::Refine { bbox, score } => {
                self.bbox = bbox;
                self.score = score;
            }
            Verdict::Reject => {
                self.rejected = true;
                metrics::counter!("camdnn_objects_rejected_total", "model" => model.to_owned())
                    .increment(1);
            }
        }
    }
}

/// A stream: its connection and its stream id.
pub type StreamKey = (u64, u32);

/// A frame's place in its stream's tracking.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameTrack {
    /// Its stream.
    pub key: StreamKey,
    /// Its index among the stream's submitted frames.
    pub index: u64,
    /// Its number in the stream's reuse store once the tracker saw it (`None`: untracked).
    pub frame: Option<u64>,
    /// When it arrived, ms: the time its decisions and stored results carry.
    pub now_ms: f64,
    /// Its detections are awaited (its detector is due or running).
    pub waiting: bool,
}

/// A frame in the pipeline, as the scheduler thread holds it.
pub struct FrameData {
    pub stream_id: u32,
    pub seq: u64,
    pub received: Instant,
    pub reply: oneshot::Sender<Outcome>,
    /// The frame as received, until it is decoded.
    pub raw: Option<camdnn_protocol::Frame>,
    pub image: Option<Arc<RgbImage>>,
    /// Per detector item (a frame, or a canvas of pyramid scales): its regions' network
    /// pixels to frame pixels.
    pub det_transforms: Vec<Vec<Transform>>,
    /// Detector items not decoded yet.
    pub det_left: usize,
    /// Objects of the detector items decoded so far (merged when the last one is).
    pub det_found: Vec<Found>,
    pub objects: Vec<ObjectState>,
    /// How to cut each released request's input.
    pub crops: HashMap<Request, CropSpec>,
    /// Inputs prepared and not yet run.
    pub inputs: HashMap<Request, Tensor>,
    /// When the frame's first batch was dispatched (its queueing ends).
    pub first_start: Option<Instant>,
    /// Wall span of the detector: its first item's start and its last item's finish.
    pub detect_started: Option<Instant>,
    pub detect_done: Option<Instant>,
    /// Objects over `max_objects`, left out before any crop was cut.
    pub objects_dropped: u32,
    /// Why it could not be read, when it could not.
    pub invalid: Option<(camdnn_protocol::RejectReason, String)>,
    /// Its place in its stream's tracking (`None`: tracking is off).
    pub track: Option<FrameTrack>,
    /// The box each request of a tracked frame ran on, until its result is stored.
    pub ran_on: HashMap<Request, BBox>,
    /// Results inferred for a tracked frame and not yet stored: object, model, result.
    pub inferred: Vec<(u32, ModelId, KeptResult)>,
}

impl FrameData {
    /// A frame just received.
    pub fn new(
        frame: camdnn_protocol::Frame,
        received: Instant,
        reply: oneshot::Sender<Outcome>,
    ) -> Self {
        FrameData {
            stream_id: frame.stream_id,
            seq: frame.seq,
            received,
            reply,
            raw: Some(frame),
            image: None,
            det_transforms: Vec::new(),
            det_left: 0,
            det_found: Vec::new(),
            objects: Vec::new(),
            crops: HashMap::new(),
            inputs: HashMap::new(),
            first_start: None,
            detect_started: None,
            detect_done: None,
            objects_dropped: 0,
            invalid: None,
            track: None,
            ran_on: HashMap::new(),
            inferred: Vec::new(),
        }
    }

    /// Where its answer goes, and its result: every object no verdict
    /// removed, after frame-wide suppression (MTCNN's last step), with its
    /// timings.
    pub fn into_result(
        mut self,
        models: &[ModelRuntime],
        names: &[String],
    ) -> (oneshot::Sender<Outcome>, FrameResult) {
        suppress(&mut self.objects, models, names);
        let done = Instant::now();
        let total = done.duration_since(self.received);
        let queue = self
            .first_start
            .map_or(Duration::ZERO, |s| s.duration_since(self.received));
        let classify = self.detect_done.map_or(total.saturating_sub(queue), |d| {
            done.saturating_duration_since(d)
        });
        metrics::histogram!("camdnn_pipeline_seconds", "stage" => "total")
            .record(total.as_secs_f64());
        metrics::histogram!("camdnn_pipeline_seconds", "stage" => "classify")
            .record(classify.as_secs_f64());
        let result = FrameResult {
            stream_id: self.stream_id,
            seq: self.seq,
            timing: Timing {
                queue_us: us(queue),
                detect_us: match (self.detect_started, self.detect_done) {
                    (Some(s), Some(d)) => us(d.saturating_duration_since(s)),
                    _ => 0,
                },
                classify_us: us(classify),
                total_us: us(total),
            },
            objects: self
                .objects
                .into_iter()
                .filter(|o| !o.rejected)
                .map(|o| ObjectResult {
                    bbox: WireBox {
                        x0: o.bbox.x0,
                        y0: o.bbox.y0,
                        x1: o.bbox.x1,
                        y1: o.bbox.y1,
                    },
                    class: o.class,
                    score: o.score,
                    track_id: o.track.map_or(0, |t| t.id),
                    box_age: o.box_age,
                    outputs: o.outputs,
                })
                .collect(),
            objects_dropped: self.objects_dropped,
        };
        (self.reply, result)
    }
}

/// Frame-wide suppression over the objects each such model refined; the
/// losers are marked rejected.
fn suppress(objects: &mut [ObjectState], models: &[ModelRuntime], names: &[String]) {
    for (m, name) in models.iter().zip(names) {
        let Some(overlap) = m.decoder.final_suppression() else {
            continue;
        };
        let candidates: Vec<(usize, BBox, f32)> = objects
            .iter()
            .enumerate()
            .filter(|(_, o)| !o.rejected && o.outputs.iter().any(|x| &x.model == name))
            .map(|(n, o)| (n, o.bbox, o.score))
            .collect();
        for n in camdnn_vision::mtcnn::nested_losers(&candidates, overlap) {
            objects[n].rejected = true;
        }
    }
}

fn us(d: Duration) -> u32 {
    d.as_micros().min(u32::MAX as u128) as u32
}
