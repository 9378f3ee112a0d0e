//! Per-object result reuse on a camera stream: whether a tracked object's result from an
//! earlier frame may stand for this frame's, per model, and how much of each model's work
//! reuse saves, estimated online for the planners.
//!
//! DeepStream's secondary inference runs a classifier on a tracked object again only when its
//! box has grown by a set fraction or a re-infer interval has passed; this is that decision,
//! with the box change taken both ways (area, and optionally IoU) and two guards: a result is reused only
//! for an object that associated with a confirmed track that existed before this frame (a
//! stream of unrelated frames, where no box continues a track, is always inferred), and never
//! past a maximum age in ms (a slow camera's frames are far apart). Off by default, also the
//! detector interval: the detector runs on every k-th frame of a stream and the tracker
//! carries the boxes between ([`StreamReuse::detector_due`]).
//!
//! The seam the frame path calls, per frame of a stream: [`StreamReuse::begin_frame`], then
//! [`StreamReuse::plan`] over the frame's requests (one per object and model, with the box the
//! model would run on): which are inferred and which reuse which stored result; inferred
//! results are kept with [`StreamReuse::store`], and [`StreamReuse::retain_tracks`] drops the
//! results of tracks that died. Only the requests left to infer reach the frame flow, so the
//! scenes the scheduler and its global step plan for are the work that really runs.
//!
//! Pure: no clock (time is `now_ms` passed in), no I/O; the stored value `R` is the caller's.

use std::collections::HashMap;

use serde::Deserialize;

use crate::{ModelId, SpecError};

/// A track's id within its stream (the tracker's).
pub type TrackId = u32;

/// When a model's result for a tracked object may be reused (`reuse` of a
/// `[[pipeline.model]]` in camdnnd's config).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReuseConfig {
    /// Frames one result stands for: the object is inferred again once its result is this
    /// many frames old (1: every frame, reuse off).
    #[serde(default = "d_interval")]
    pub reinfer_interval: u32,
    /// Inferred again when the object's box has an IoU below this with the box the result
    /// was computed on (it moved that far). Absent: not checked, since a result moves with
    /// its object's box (a walking person's box leaves an IoU of 0.7 with its last one in a
    /// frame or two at 10 fps); what moves the object must pass the tracker's association.
    #[serde(default)]
    pub min_iou: Option<f32>,
    /// Inferred again when the box's area is more than this factor larger or smaller than
    /// the area the result was computed on (DeepStream's box growth; 1.2: 20 %).
    #[serde(default = "d_area_ratio")]
    pub max_area_ratio: f32,
    /// Only a result whose own confidence is at least this is reused (the caller's score:
    /// a top-1 probability, a gender head's certainty, a pose's mean keypoint score).
    /// Absent: any result.
    #[serde(default)]
    pub min_score: Option<f32>,
    /// A result older than this, ms, is never reused, whatever the frames counted.
    #[serde(default = "d_max_age_ms")]
    pub max_age_ms: f64,
}

fn d_interval() -> u32 {
    10
}
fn d_area_ratio() -> f32 {
    1.2
}
fn d_max_age_ms() -> f64 {
    2000.0
}

impl Default for ReuseConfig {
    fn default() -> Self {
        Self {
            reinfer_interval: d_interval(),
            min_iou: None,
            max_area_ratio: d_area_ratio(),
            min_score: None,
            max_age_ms: d_max_age_ms(),
        }
    }
}

impl ReuseConfig {
    /// Refuses values outside their range, naming the field (`prefix.field`).
    pub fn check(&self, prefix: &str) -> Result<(), SpecError> {
        let bad = |field: &str, value: String, reason: &'static str| SpecError::BadValue {
            field: format!("{prefix}.{field}"),
            value,
            reason,
        };
        if !(1..=100_000).contains(&self.reinfer_interval) {
            return Err(bad(
                "reinfer_interval",
                self.reinfer_interval.to_string(),
                "must be 1 to 100000 frames (1: infer every frame)",
            ));
        }
        if let Some(m) = self.min_iou {
            if !(m > 0.0 && m <= 1.0) {
                return Err(bad("min_iou", m.to_string(), "must be in (0, 1]"));
            }
        }
        if !(self.max_area_ratio >= 1.0 && self.max_area_ratio.is_finite()) {
            return Err(bad(
                "max_area_ratio",
                self.max_area_ratio.to_string(),
                "must be a finite factor >= 1",
            ));
        }
        if let Some(s) = self.min_score {
            if !(0.0..=1.0).contains(&s) {
                return Err(bad("min_score", s.to_string(), "must be in [0, 1]"));
            }
        }
        if !(self.max_age_ms > 0.0 && self.max_age_ms.is_finite()) {
            return Err(bad(
                "max_age_ms",
                self.max_age_ms.to_string(),
                "must be a finite number of ms > 0",
            ));
        }
        Ok(())
    }
}

/// An axis-aligned box `x0, y0, x1, y1` in frame pixels (the policy crate does not depend on
/// the vision crate's `BBox`).
pub type Rect = [f32; 4];

fn area(r: &Rect) -> f32 {
    (r[2] - r[0]).max(0.0) * (r[3] - r[1]).max(0.0)
}

fn iou(a: &Rect, b: &Rect) -> f32 {
    let iw = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let ih = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let union = area(a) + area(b) - iw * ih;
    if union > 0.0 {
        iw * ih / union
    } else {
        0.0
    }
}

/// What the tracker said of an object on this frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracked {
    /// Its track.
    pub id: TrackId,
    /// The track is confirmed.
    pub confirmed: bool,
    /// The object's box continued a track that existed before this frame.
    pub continued: bool,
}

/// One model's input for one object of the frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    /// The object's index in the frame.
    pub object: usize,
    /// The model.
    pub model: ModelId,
    /// The box the model would run on (the object's, or a part of it such as a face).
    pub bbox: Rect,
    /// The object's track, `None` when it was not tracked.
    pub track: Option<Tracked>,
}

/// Why a request is inferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Why {
    /// The model has no reuse config (or its interval is 1).
    Off,
    /// The object did not continue a confirmed track.
    Untracked,
    /// No result of this model is stored for the track.
    NoResult,
    /// The stored result is `reinfer_interval` frames old.
    Interval,
    /// The box moved: IoU with the result's box below `min_iou` (or the box is not finite).
    Moved,
    /// The box's area changed beyond `max_area_ratio`.
    Resized,
    /// The stored result's confidence is below `min_score`.
    LowScore,
    /// The stored result is older than `max_age_ms`.
    TooOld,
    /// The model's own result could be reused, but a model below it (which runs on what this
    /// result finds, a pose's face) must be inferred again: the caller infers the whole
    /// branch, as a child's request comes only from its parent's inferred result.
    Child,
}

impl Why {
    /// Every reason, for metrics registered at start-up.
    pub const ALL: [Why; 9] = [
        Why::Off,
        Why::Untracked,
        Why::NoResult,
        Why::Interval,
        Why::Moved,
        Why::Resized,
        Why::LowScore,
        Why::TooOld,
        Why::Child,
    ];

    /// A short name (a metric label, a report's column).
    pub fn name(self) -> &'static str {
        match self {
            Why::Off => "off",
            Why::Untracked => "untracked",
            Why::NoResult => "no-result",
            Why::Interval => "interval",
            Why::Moved => "moved",
            Why::Resized => "resized",
            Why::LowScore => "low-score",
            Why::TooOld => "too-old",
            Why::Child => "child",
        }
    }
}

/// The decision for one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    /// Run the model.
    Infer(Why),
    /// Answer with the stored result of this track and model.
    Reuse {
        /// Frames since the result was inferred (at least 1).
        age_frames: u32,
        /// Milliseconds since then.
        age_ms: f64,
    },
}

impl Decision {
    /// Whether the model runs.
    pub fn infers(&self) -> bool {
        matches!(self, Decision::Infer(_))
    }
}

/// A result kept for a track and model, with what it was computed on.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored<R> {
    /// The box the model ran on.
    pub bbox: Rect,
    /// The stream's frame it was inferred on ([`StreamReuse::begin_frame`]'s count).
    pub frame: u64,
    /// When, ms.
    pub at_ms: f64,
    /// Its confidence, when the model has one.
    pub score: Option<f32>,
    /// The result.
    pub value: R,
}

/// One stream's stored results and frame count.
#[derive(Debug, Clone)]
pub struct StreamReuse<R> {
    stored: HashMap<(TrackId, ModelId), Stored<R>>,
    /// Inferences issued and not yet stored: the frame each was issued on.
    pending: HashMap<(TrackId, ModelId), u64>,
    max_entries: usize,
    frame: u64,
    /// Frames until the detector is due again (0: due on the next frame).
    detector_wait: u32,
}

impl<R> StreamReuse<R> {
    /// No results yet; at most `max_entries` kept (live tracks x models with reuse is enough).
    pub fn new(max_entries: usize) -> Self {
        Self {
            stored: HashMap::new(),
            pending: HashMap::new(),
            max_entries: max_entries.max(1),
            frame: 0,
            detector_wait: 0,
        }
    }

    /// Counts a new frame of the stream and returns its number (the first is 1).
    pub fn begin_frame(&mut self) -> u64 {
        self.frame += 1;
        self.frame
    }

    /// Whether the detector runs on this frame with a detector interval of `every` frames
    /// (1: every frame). Call once per frame; the first frame of a stream is always detected.
    pub fn detector_due(&mut self, every: u32) -> bool {
        let due = self.detector_wait == 0;
        self.detector_wait = if due {
            every.max(1) - 1
        } else {
            self.detector_wait - 1
        };
        due
    }

    /// The detector ran on this frame although [`StreamReuse::detector_due`] said it was not
    /// due (the caller could not skip it): the interval counts from this frame.
    pub fn detector_ran(&mut self, every: u32) {
        self.detector_wait = every.max(1) - 1;
    }

    /// The decision for one request on the current frame.
    pub fn decide(&self, config: Option<&ReuseConfig>, req: &Request, now_ms: f64) -> Decision {
        let Some(cfg) = config.filter(|c| c.reinfer_interval > 1) else {
            return Decision::Infer(Why::Off);
        };
        let Some(t) = req.track.filter(|t| t.confirmed && t.continued) else {
            return Decision::Infer(Why::Untracked);
        };
        let Some(s) = self.stored.get(&(t.id, req.model)) else {
            return Decision::Infer(Why::NoResult);
        };
        let age_frames = self.frame.saturating_sub(s.frame);
        let age_ms = now_ms - s.at_ms;
        let interval = u64::from(cfg.reinfer_interval);
        // A newer inference issued less than an interval ago is on its way (frames in
        // flight overlap): the stored result stands until it lands, with its true age.
        let on_its_way = self
            .pending
            .get(&(t.id, req.model))
            .is_some_and(|&p| p > s.frame && self.frame.saturating_sub(p) < interval);
        if age_frames >= interval && !on_its_way {
            return Decision::Infer(Why::Interval);
        }
        // NaN times, scores and boxes always infer.
        if age_ms.is_nan() || age_ms > cfg.max_age_ms {
            return Decision::Infer(Why::TooOld);
        }
        let below = |v: f32, m: f32| v.is_nan() || v < m;
        if cfg
            .min_score
            .is_some_and(|m| s.score.is_none_or(|v| below(v, m)))
        {
            return Decision::Infer(Why::LowScore);
        }
        if !req.bbox.iter().all(|v| v.is_finite())
            || cfg
                .min_iou
                .is_some_and(|m| below(iou(&req.bbox, &s.bbox), m))
        {
            return Decision::Infer(Why::Moved);
        }
        let (a, b) = (area(&req.bbox), area(&s.bbox));
        if a.max(b) > a.min(b) * cfg.max_area_ratio {
            return Decision::Infer(Why::Resized);
        }
        Decision::Reuse {
            age_frames: age_frames.max(1) as u32,
            age_ms,
        }
    }

    /// The decisions for one frame's requests, in their order (`configs` by model id).
    pub fn plan(
        &self,
        configs: &[Option<ReuseConfig>],
        requests: &[Request],
        now_ms: f64,
    ) -> Vec<Decision> {
        requests
            .iter()
            .map(|r| self.decide(configs.get(r.model.0).and_then(Option::as_ref), r, now_ms))
            .collect()
    }

    /// The caller infers `model` for `track` on the current frame: until its result is
    /// stored, a later frame within the interval reuses the older result instead of
    /// inferring again. At most `max_entries` are kept (the oldest goes).
    pub fn inferring(&mut self, track: TrackId, model: ModelId) {
        if self.pending.insert((track, model), self.frame).is_none()
            && self.pending.len() > self.max_entries
        {
            if let Some(oldest) = self.pending.iter().min_by_key(|(_, &f)| f).map(|(k, _)| *k) {
                self.pending.remove(&oldest);
            }
        }
    }

    /// The result stored for a track and model.
    pub fn stored(&self, track: TrackId, model: ModelId) -> Option<&Stored<R>> {
        self.stored.get(&(track, model))
    }

    /// Keeps a result inferred on the current frame for its track, replacing the older one;
    /// beyond `max_entries` the entry inferred longest ago goes.
    pub fn store(
        &mut self,
        track: TrackId,
        model: ModelId,
        bbox: Rect,
        score: Option<f32>,
        now_ms: f64,
        value: R,
    ) {
        let stored = Stored {
            bbox,
            frame: self.frame,
            at_ms: now_ms,
            score,
            value,
        };
        self.store_inferred(track, model, stored);
    }

    /// Keeps a result inferred on the frame `stored.frame` names (an earlier frame than the
    /// current one when its inference finished late), unless a result of a later frame is
    /// kept already for that track and model: a late result never replaces a newer one. Beyond
    /// `max_entries` the entry inferred longest ago goes.
    pub fn store_inferred(&mut self, track: TrackId, model: ModelId, stored: Stored<R>) {
        if self
            .pending
            .get(&(track, model))
            .is_some_and(|&p| p <= stored.frame)
        {
            self.pending.remove(&(track, model));
        }
        if self
            .stored
            .get(&(track, model))
            .is_some_and(|s| s.frame > stored.frame)
        {
            return;
        }
        if self.stored.insert((track, model), stored).is_none()
            && self.stored.len() > self.max_entries
        {
            if let Some(oldest) = self
                .stored
                .iter()
                .min_by(|a, b| a.1.at_ms.total_cmp(&b.1.at_ms))
                .map(|(k, _)| *k)
            {
                self.stored.remove(&oldest);
            }
        }
    }

    /// Drops the results of tracks that are no longer alive.
    pub fn retain_tracks(&mut self, mut alive: impl FnMut(TrackId) -> bool) {
        self.stored.retain(|(t, _), _| alive(*t));
        self.pending.retain(|(t, _), _| alive(*t));
    }

    /// Results kept.
    pub fn len(&self) -> usize {
        self.stored.len()
    }

    /// Whether no result is kept.
    pub fn is_empty(&self) -> bool {
        self.stored.is_empty()
    }
}
