//! Tracking and per-object result reuse in the frame path (`[pipeline.track]` and each
//! model's `reuse`): one tracker and one store of results per camera stream, keyed by
//! connection and stream, freed when the connection ends.
//!
//! What the tracker sees: the frames of a stream in the order they were submitted (the server
//! refuses a seq that does not increase), each at most once. A frame is associated when its
//! detections are known: at submission when it brings upstream boxes, when its detector's last
//! item is read otherwise. Detectors of one stream's frames may finish out of order (two
//! processors, a retry); a frame whose detections arrive after a later frame of its stream was
//! associated is not associated at all: it is inferred in full and answered untracked (track
//! id 0). That is the simplest rule that cannot serve a stale result: the tracker never moves
//! backwards, nothing waits, and a result is only reused for a box that continued a track in
//! sequence order. With a detector interval, the detector is skipped on a frame only while no
//! earlier frame of its stream is still in the detector; otherwise the frame runs the
//! detector after all, so a carried box is always predicted from every earlier detection.
//!
//! For every (object, model) request, [`StreamReuse::decide`] says whether the model runs or
//! its stored result stands (moved onto the object's current box, `reuse_value.rs`). A child's
//! request comes only from its parent's inferred result, so a result is reused together with
//! its branch: a pose is reused only when the face it shows can reuse its gender result too,
//! else the pose is inferred again (reason `child`). Reused requests never reach the frame
//! flow; inferred results are stored when their batch is read, on the frame they ran for.

use std::collections::{BTreeSet, HashMap};

use camdnn_policy::flow::Request;
use camdnn_policy::reuse::{Decision, ReuseConfig, Stored, StreamReuse, Tracked, Why};
use camdnn_policy::{ModelId, System};
use camdnn_protocol::ClassRef;
use camdnn_vision::track::{CarriedBox, TrackBox, TrackerConfig, Tracks};
use camdnn_vision::BBox;

use super::frame_data::{FrameData, FrameTrack, ObjectState, StreamKey};
use super::reuse_value::KeptResult;
use crate::telemetry as names;

/// The connection of frames submitted without one (tests, benches: one caller).
pub const DIRECT: u64 = u64::MAX;

/// One stream's state beside its tracker.
struct StreamState {
    reuse: StreamReuse<KeptResult>,
    /// Frames submitted so far.
    submitted: u64,
    /// The index of the last frame the tracker saw.
    seen: Option<u64>,
    /// Frames whose detections are awaited.
    waiting: BTreeSet<u64>,
    /// Each live track's last detection score (a carried box is answered with it).
    scores: HashMap<u32, f32>,
}

/// Tracking and reuse over every stream of one pipeline.
pub struct Reuse {
    tracks: Tracks<StreamKey>,
    streams: HashMap<StreamKey, StreamState>,
    /// Per model (by id): its reuse knobs.
    configs: Vec<Option<ReuseConfig>>,
    /// Per model: its name (metric labels, outputs).
    names: Vec<String>,
    detector_interval: u32,
    max_entries: usize,
}

impl Reuse {
    /// The state for a pipeline whose models (in id order) have `configs` and `names`.
    pub fn new(
        track: TrackerConfig,
        configs: Vec<Option<ReuseConfig>>,
        names: Vec<String>,
    ) -> anyhow::Result<Self> {
        let with_reuse = configs.iter().flatten().count().max(1);
        Ok(Self {
            tracks: Tracks::new(track)?,
            streams: HashMap::new(),
            max_entries: track.max_tracks * with_reuse,
            detector_interval: track.detector_interval,
            configs,
            names,
        })
    }

    /// A frame of stream `key` arrives at `now_ms`. `detects`: it runs the detector here (it
    /// brings no boxes). Returns its place, and the tracker's carried boxes when its detector
    /// is skipped (not due, and no earlier frame of the stream in the detector).
    pub fn enter(
        &mut self,
        key: StreamKey,
        now_ms: f64,
        detects: bool,
    ) -> (FrameTrack, Option<Vec<CarriedBox>>) {
        self.tracks.stream(&key);
        if self.streams.len() >= self.tracks.streams() {
            let tracks = &self.tracks;
            self.streams.retain(|k, _| *k == key || tracks.has(k));
        }
        let max_entries = self.max_entries;
        let st = self.streams.entry(key).or_insert_with(|| StreamState {
            reuse: StreamReuse::new(max_entries),
            submitted: 0,
            seen: None,
            waiting: BTreeSet::new(),
            scores: HashMap::new(),
        });
        let index = st.submitted;
        st.submitted += 1;
        let mut ft = FrameTrack {
            key,
            index,
            frame: None,
            now_ms,
            waiting: false,
        };
        if !detects {
            self.publish();
            return (ft, None);
        }
        let every = self.detector_interval;
        let due = if st.waiting.is_empty() {
            st.reuse.detector_due(every)
        } else {
            st.reuse.detector_ran(every);
            true
        };
        if due {
            st.waiting.insert(index);
            ft.waiting = true;
            self.publish();
            return (ft, None);
        }
        let tracker = self.tracks.stream(&key);
        let carried = tracker.carry();
        st.seen = Some(index);
        ft.frame = Some(st.reuse.begin_frame());
        let live: std::collections::HashSet<u32> = tracker.live_ids().collect();
        st.reuse.retain_tracks(|t| live.contains(&t));
        st.scores.retain(|t, _| live.contains(t));
        self.publish();
        (ft, Some(carried))
    }

    /// The score a carried track's box is answered with: its last detection's.
    pub fn carried_score(&self, key: &StreamKey, track: u32) -> f32 {
        self.streams
            .get(key)
            .and_then(|s| s.scores.get(&track))
            .copied()
            .unwrap_or(0.0)
    }

    /// The frame's detections are known (its objects): the stream's tracker associates them
    /// unless a later frame of the stream was associated first (then it stays untracked).
    pub fn associate(&mut self, ft: &mut FrameTrack, objects: &mut [ObjectState]) {
        let Some(st) = self.streams.get_mut(&ft.key) else {
            return; // its connection ended
        };
        if ft.waiting {
            st.waiting.remove(&ft.index);
            ft.waiting = false;
        }
        if ft.frame.is_some() || st.seen.is_some_and(|s| s >= ft.index) || !self.tracks.has(&ft.key)
        {
            return;
        }
        let boxes: Vec<TrackBox> = objects
            .iter()
            .map(|o| TrackBox {
                bbox: o.bbox,
                class: class_name(&o.class),
            })
            .collect();
        let tracker = self.tracks.stream(&ft.key);
        let assoc = match tracker.update(&boxes) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "boxes not tracked; the frame is inferred in full");
                return;
            }
        };
        st.seen = Some(ft.index);
        ft.frame = Some(st.reuse.begin_frame());
        for (o, a) in objects.iter_mut().zip(assoc) {
            o.track = a.map(|a| Tracked {
                id: a.track,
                confirmed: a.confirmed,
                continued: a.continued,
            });
            if let Some(t) = o.track {
                st.scores.insert(t.id, o.score);
            }
        }
        let live: std::collections::HashSet<u32> = tracker.live_ids().collect();
        st.reuse.retain_tracks(|t| live.contains(&t));
        st.scores.retain(|t, _| live.contains(t));
        self.publish();
    }

    /// A frame leaves the pipeline: if its detections never came, the stream stops awaiting them.
    pub fn frame_gone(&mut self, ft: &FrameTrack) {
        if ft.waiting {
            if let Some(st) = self.streams.get_mut(&ft.key) {
                st.waiting.remove(&ft.index);
            }
        }
    }

    /// Frees the tracks and results of every stream of connection `conn`.
    pub fn connection_closed(&mut self, conn: u64) {
        self.tracks.end_where(|k| k.0 == conn);
        self.streams.retain(|k, _| k.0 != conn);
        self.publish();
    }

    fn publish(&self) {
        metrics::gauge!(names::TRACKS_LIVE).set(self.tracks.live() as f64);
        metrics::gauge!(names::TRACK_STREAMS).set(self.tracks.streams() as f64);
    }

    /// Stores the results inferred for the frame's tracked objects since the last call, on
    /// the frame they ran for.
    pub fn store(&mut self, frame: &mut FrameData) {
        let inferred = std::mem::take(&mut frame.inferred);
        let Some(ft) = frame.track else { return };
        let (Some(n), Some(st)) = (ft.frame, self.streams.get_mut(&ft.key)) else {
            return;
        };
        for (object, model, kept) in inferred {
            let ran_on = frame.ran_on.remove(&Request { model, object });
            let track = frame.objects.get(object as usize).and_then(|o| o.track);
            let wanted = self.configs.get(model.0).is_some_and(Option::is_some);
            let (Some(bbox), Some(t), true) = (ran_on, track, wanted) else {
                continue;
            };
            let stored = Stored {
                bbox: [bbox.x0, bbox.y0, bbox.x1, bbox.y1],
                frame: n,
                at_ms: ft.now_ms,
                score: kept.confidence(),
                value: kept,
            };
            st.reuse.store_inferred(t.id, model, stored);
        }
    }

    /// Decides each of the frame's `requests`: the reused ones are answered from the store
    /// (their branch with them) and left out; the rest, to infer, are returned in order.
    pub fn plan(
        &mut self,
        system: &System,
        frame: &mut FrameData,
        requests: Vec<Request>,
    ) -> Vec<Request> {
        let key = frame.track.filter(|t| t.frame.is_some()).map(|t| t.key);
        let stream = key.and_then(|k| self.streams.get(&k));
        let now_ms = frame.track.map_or(0.0, |t| t.now_ms);
        let mut inferred = Vec::with_capacity(requests.len());
        // Tracked requests inferred with reuse on: their results are on their way.
        let mut on_their_way = Vec::new();
        for r in requests {
            let object = r.object as usize;
            let (Some(spec), Some(o)) = (frame.crops.get(&r), frame.objects.get(object)) else {
                inferred.push(r);
                continue;
            };
            let branch = match (stream, o.track) {
                (Some(st), Some(t)) => {
                    let mut branch = Vec::new();
                    let at = (t, o.bbox, now_ms);
                    self.reusable(system, &st.reuse, at, r.model, spec.bbox, &mut branch)
                        .map(|()| branch)
                }
                _ => Err(self.untracked_why(r.model)),
            };
            match branch {
                Err(why) => {
                    metrics::counter!(names::REQUESTS_INFERRED, "model" => self.names[r.model.0].clone(), "reason" => why.name()).increment(1);
                    if let (Some(t), false) = (o.track, why == Why::Off) {
                        on_their_way.push((t.id, r.model));
                    }
                    inferred.push(r);
                }
                Ok(branch) => {
                    frame.crops.remove(&r);
                    let o = &mut frame.objects[object];
                    for (m, kept, age) in branch {
                        metrics::counter!(names::REQUESTS_REUSED, "model" => self.names[m.0].clone())
                            .increment(1);
                        o.take_result(&self.names[m.0], kept.value, kept.verdict, age);
                    }
                }
            }
        }
        if let Some(st) = key.and_then(|k| self.streams.get_mut(&k)) {
            for (track, model) in on_their_way {
                st.reuse.inferring(track, model);
            }
        }
        inferred
    }

    /// Why a request of an untracked frame is inferred.
    fn untracked_why(&self, model: ModelId) -> Why {
        match self.configs.get(model.0) {
            Some(Some(c)) if c.reinfer_interval > 1 => Why::Untracked,
            _ => Why::Off,
        }
    }

    /// Whether `model`'s stored result for the object's track stands on `bbox`, with every
    /// model below it its moved verdict would run: the branch's results (moved) and ages are
    /// pushed on `out`, parent first; else why not.
    fn reusable(
        &self,
        system: &System,
        stream: &StreamReuse<KeptResult>,
        (track, object_box, now_ms): (Tracked, BBox, f64),
        model: ModelId,
        bbox: BBox,
        out: &mut Vec<(ModelId, KeptResult, u32)>,
    ) -> Result<(), Why> {
        let req = camdnn_policy::reuse::Request {
            object: 0,
            model,
            bbox: [bbox.x0, bbox.y0, bbox.x1, bbox.y1],
            track: Some(track),
        };
        let config = self.configs.get(model.0).and_then(Option::as_ref);
        let age = match stream.decide(config, &req, now_ms) {
            Decision::Infer(why) => return Err(why),
            Decision::Reuse { age_frames, .. } => age_frames,
        };
        let stored = stream.stored(track.id, model).ok_or(Why::NoResult)?;
        let [x0, y0, x1, y1] = stored.bbox;
        let kept = stored.value.moved(&BBox::new(x0, y0, x1, y1), &bbox);
        let object_box = match kept.verdict {
            super::models::Verdict::Refine { bbox, .. } => bbox,
            _ => object_box,
        };
        let child_box = kept.verdict.child_crop(object_box);
        out.push((model, kept, age));
        let Some(child_box) = child_box else {
            return Ok(());
        };
        for &c in &system.models[model.0].children {
            let at = (track, object_box, now_ms);
            if self
                .reusable(system, stream, at, c, child_box, out)
                .is_err()
            {
                return Err(Why::Child);
            }
        }
        Ok(())
    }
}

/// A class as the tracker keys it: boxes of different classes never share a track.
fn class_name(c: &ClassRef) -> String {
    match c {
        ClassRef::Name(s) => s.clone(),
        ClassRef::Id(i) => format!("#{i}"),
    }
}

#[cfg(test)]
#[path = "reuse_tests.rs"]
mod tests;
