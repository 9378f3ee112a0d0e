//! Multi-object tracking per camera stream: each frame's boxes are associated with the
//! stream's tracks, so one object keeps one id from frame to frame and a per-object result
//! can follow it.
//!
//! The tracker is norfair-rs (a Rust port of Tryolabs' norfair): a constant-velocity Kalman
//! filter on the two box corners, greedy association on IoU with the predicted boxes within
//! one class, births and deaths under hysteresis (a track is confirmed after
//! [`TrackerConfig::birth_hits`] associated frames and dies after
//! [`TrackerConfig::max_misses`] frames without one). Why norfair-rs over similari's SORT:
//! `docs/decisions.md`.
//!
//! State is bounded: at most [`TrackerConfig::max_tracks`] live tracks per stream (boxes
//! beyond it are not tracked, and the least recently confirmed tracks go first when births
//! would pass it), each holding its filter and its last box; [`Tracks`] holds one
//! [`StreamTracker`] per stream, at most `max_streams` of them, and frees a stream's tracks
//! when the stream or its connection ends.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use serde::Deserialize;

use crate::{BBox, Result, VisionError};

/// A track's id, unique within its stream for the stream's life (1, 2, ...).
pub type TrackId = u32;

/// How boxes become tracks (`[pipeline.track]` in camdnnd's config).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrackerConfig {
    /// A box associates with a track when its IoU with the track's predicted box is above
    /// this (SORT's 0.3).
    #[serde(default = "d_min_iou")]
    pub min_iou: f32,
    /// Associated frames (the first one included) before a track is confirmed: a box seen
    /// once is not yet an object whose results may be reused. With a detector interval of
    /// k, a detection counts for k frames.
    #[serde(default = "d_birth_hits")]
    pub birth_hits: u32,
    /// Most frames a track lives on without an associated box (occlusion, a missed
    /// detection). A track's credit grows by one per associated frame up to this and drops
    /// by one per frame without; it dies when the credit is spent, so a track followed for
    /// a few frames only dies sooner (norfair's hit counter). Frames the detector skipped
    /// spend it too, and the next detection that associates gives it back.
    #[serde(default = "d_max_misses")]
    pub max_misses: u32,
    /// Most live tracks of one stream (confirmed or not); bounds its memory and the
    /// association's cost.
    #[serde(default = "d_max_tracks")]
    pub max_tracks: usize,
    /// Most streams tracked at once ([`Tracks`]); a new stream beyond it replaces the one
    /// updated least recently.
    #[serde(default = "d_max_streams")]
    pub max_streams: usize,
    /// The detector runs on every k-th frame of a stream and the tracker carries the boxes
    /// between ([`StreamTracker::carry`]; DeepStream's `interval` + 1); 1: every frame.
    #[serde(default = "d_detector_interval")]
    pub detector_interval: u32,
}

fn d_min_iou() -> f32 {
    0.3
}
fn d_birth_hits() -> u32 {
    3
}
fn d_max_misses() -> u32 {
    15
}
fn d_max_tracks() -> usize {
    128
}
fn d_max_streams() -> usize {
    64
}
fn d_detector_interval() -> u32 {
    1
}

impl Default for TrackerConfig {
    fn default() -> Self {
        Self {
            min_iou: d_min_iou(),
            birth_hits: d_birth_hits(),
            max_misses: d_max_misses(),
            max_tracks: d_max_tracks(),
            max_streams: d_max_streams(),
            detector_interval: d_detector_interval(),
        }
    }
}

impl TrackerConfig {
    /// Refuses values the tracker cannot work with, naming the field (`prefix.field`).
    pub fn check(&self, prefix: &str) -> Result<()> {
        let field = |f: &str| format!("{prefix}.{f}");
        if !(self.min_iou > 0.0 && self.min_iou < 1.0) {
            return Err(VisionError::config(
                field("min_iou"),
                format!("must be in (0, 1), got {}", self.min_iou),
            ));
        }
        if self.birth_hits == 0 || self.birth_hits > 1000 {
            return Err(VisionError::config(
                field("birth_hits"),
                format!("must be 1 to 1000 frames, got {}", self.birth_hits),
            ));
        }
        if self.max_misses < self.birth_hits || self.max_misses > 100_000 {
            return Err(VisionError::config(
                field("max_misses"),
                format!(
                    "must be at least birth_hits ({}) and at most 100000 frames, got {}",
                    self.birth_hits, self.max_misses
                ),
            ));
        }
        if self.max_tracks == 0 || self.max_tracks > 4096 {
            return Err(VisionError::config(
                field("max_tracks"),
                format!("must be 1 to 4096, got {}", self.max_tracks),
            ));
        }
        if self.max_streams == 0 || self.max_streams > 65_536 {
            return Err(VisionError::config(
                field("max_streams"),
                format!("must be 1 to 65536, got {}", self.max_streams),
            ));
        }
        if self.detector_interval == 0 || self.detector_interval > self.max_misses {
            return Err(VisionError::config(
                field("detector_interval"),
                format!(
                    "must be 1 (every frame) to max_misses ({}) frames, or tracks would die between two runs of the detector; got {}",
                    self.max_misses, self.detector_interval
                ),
            ));
        }
        Ok(())
    }
}

/// One box of a frame to associate: where it is and its class (boxes of different classes
/// never share a track).
#[derive(Debug, Clone, PartialEq)]
pub struct TrackBox {
    /// Box in frame pixels.
    pub bbox: BBox,
    /// Class name.
    pub class: String,
}

/// What the tracker made of one box of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Association {
    /// The track the box now belongs to.
    pub track: TrackId,
    /// The track is confirmed (it has had `birth_hits` associated frames, this one included).
    pub confirmed: bool,
    /// The box continued a track that existed before this frame (false: the track was born
    /// on it). Only a continued, confirmed track may be served a stored result.
    pub continued: bool,
}

/// A confirmed track carried through a frame without detections (the detector did not run):
/// its box is the motion model's prediction.
#[derive(Debug, Clone, PartialEq)]
pub struct CarriedBox {
    /// The track.
    pub track: TrackId,
    /// Its predicted box, frame pixels.
    pub bbox: BBox,
    /// Its class.
    pub class: String,
    /// Frames since a detection was last associated with it (1 on the first frame after).
    pub box_age: u32,
}

/// Which frame and which box of it a track's last detection was: the tag norfair carries.
type Tag = (u64, usize);

/// The tracks of one camera stream.
pub struct StreamTracker {
    inner: norfair_rs::Tracker,
    config: TrackerConfig,
    /// Frames seen (updates and carried frames), the first one is 1.
    frame: u64,
    /// The frame of the last update with detections (0: none yet).
    detected: u64,
}

impl std::fmt::Debug for StreamTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamTracker")
            .field("config", &self.config)
            .field("frame", &self.frame)
            .field("live", &self.live())
            .finish()
    }
}

impl StreamTracker {
    /// A stream with no tracks yet; the config is checked first.
    pub fn new(config: TrackerConfig) -> Result<Self> {
        config.check("track")?;
        let mut c = norfair_rs::TrackerConfig::new(
            norfair_rs::distances::distance_function_by_name("iou"),
            1.0 - f64::from(config.min_iou),
        );
        c.hit_counter_max = config.max_misses as i32;
        c.initialization_delay = config.birth_hits as i32 - 1;
        c.past_detections_length = 1;
        let inner = norfair_rs::Tracker::new(c)
            .map_err(|e| VisionError::config("track", format!("norfair refused it: {e}")))?;
        Ok(Self {
            inner,
            config,
            frame: 0,
            detected: 0,
        })
    }

    /// Associates one frame's boxes with the stream's tracks. Returns, per box in order, its
    /// track, or `None` for a box beyond `max_tracks` (it is not tracked). A box that is not
    /// finite or has no area is refused with its index.
    pub fn update(&mut self, boxes: &[TrackBox]) -> Result<Vec<Option<Association>>> {
        for (i, b) in boxes.iter().enumerate() {
            if !b.bbox.is_finite() || b.bbox.area() <= 0.0 {
                return Err(VisionError::Track(format!(
                    "box {i} ({:?}) is not a finite box with an area",
                    b.bbox
                )));
            }
        }
        self.frame += 1;
        let taken = boxes.len().min(self.config.max_tracks);
        let detections = boxes[..taken]
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let p = [b.bbox.x0, b.bbox.y0, b.bbox.x1, b.bbox.y1].map(f64::from);
                let mut d = norfair_rs::Detection::from_slice(&p, 2, 2)
                    .map_err(|e| VisionError::Track(format!("box {i}: {e}")))?;
                d.label = Some(b.class.clone());
                d.data = Some(Arc::new((self.frame, i) as Tag));
                Ok(d)
            })
            .collect::<Result<Vec<_>>>()?;
        // A detection counts for the frames since the previous one, and at least for the
        // detector interval (norfair's `period`): it gives back the credit the carried frames
        // took, and a newborn track lives through the frames until the next detection.
        let gap = (self.frame - self.detected).max(u64::from(self.config.detector_interval));
        self.detected = self.frame;
        self.inner
            .update(detections, i32::try_from(gap).unwrap_or(i32::MAX), None);
        self.bound();
        let mut out = vec![None; boxes.len()];
        for o in &self.inner.tracked_objects {
            let Some((frame, i)) = tag(o) else { continue };
            if frame != self.frame {
                continue;
            }
            out[i] = Some(Association {
                track: track_id(o),
                confirmed: self.confirmed(o),
                continued: o.age > 0,
            });
        }
        Ok(out)
    }

    /// A track is confirmed once norfair has initialised it; with `birth_hits` 1, at once.
    fn confirmed(&self, o: &norfair_rs::TrackedObject) -> bool {
        !o.is_initializing || self.config.birth_hits <= 1
    }

    /// A frame without detections (the detector skipped it): every track's box moves on by
    /// its motion model and ages one frame. Returns the confirmed tracks still alive, with
    /// their predicted boxes.
    pub fn carry(&mut self) -> Vec<CarriedBox> {
        self.frame += 1;
        self.inner.update(Vec::new(), 1, None);
        let now = self.frame;
        self.inner
            .tracked_objects
            .iter()
            .filter(|o| self.confirmed(o) && o.hit_counter >= 0)
            .filter_map(|o| {
                let e = &o.estimate;
                let bbox = BBox::new(
                    e[(0, 0)] as f32,
                    e[(0, 1)] as f32,
                    e[(1, 0)] as f32,
                    e[(1, 1)] as f32,
                );
                let (frame, _) = tag(o)?;
                Some(CarriedBox {
                    track: track_id(o),
                    bbox,
                    class: o.label.clone().unwrap_or_default(),
                    box_age: u32::try_from(now - frame).unwrap_or(u32::MAX),
                })
            })
            .filter(|c| c.bbox.is_finite() && c.bbox.area() > 0.0)
            .collect()
    }

    /// Live tracks (confirmed or not).
    pub fn live(&self) -> usize {
        self.inner.tracked_objects.len()
    }

    /// The ids of the live tracks.
    pub fn live_ids(&self) -> impl Iterator<Item = TrackId> + '_ {
        self.inner.tracked_objects.iter().map(track_id)
    }

    /// Keeps at most `max_tracks` tracks: confirmed before tentative, then the most hits.
    fn bound(&mut self) {
        let cap = self.config.max_tracks;
        let objs = &mut self.inner.tracked_objects;
        if objs.len() <= cap {
            return;
        }
        objs.sort_by_key(|o| (o.is_initializing, std::cmp::Reverse(o.hit_counter)));
        objs.truncate(cap);
    }
}

fn tag(o: &norfair_rs::TrackedObject) -> Option<Tag> {
    o.last_detection
        .as_ref()?
        .data
        .as_ref()?
        .downcast_ref::<Tag>()
        .copied()
}

fn track_id(o: &norfair_rs::TrackedObject) -> TrackId {
    o.initializing_id
        .and_then(|i| u32::try_from(i).ok())
        .unwrap_or(0)
}

/// The trackers of every stream, keyed by `K` (for camdnnd: connection and stream id), with
/// at most `max_streams` of them: a new stream beyond that replaces the stream updated least
/// recently.
#[derive(Debug)]
pub struct Tracks<K> {
    config: TrackerConfig,
    streams: HashMap<K, (StreamTracker, u64)>,
    /// Updates so far, to find the stream updated least recently.
    clock: u64,
}

impl<K: Hash + Eq + Clone> Tracks<K> {
    /// No streams yet; the config is checked first.
    pub fn new(config: TrackerConfig) -> Result<Self> {
        config.check("track")?;
        Ok(Self {
            config,
            streams: HashMap::new(),
            clock: 0,
        })
    }

    /// The stream's tracker, made when the stream is new.
    pub fn stream(&mut self, key: &K) -> &mut StreamTracker {
        self.clock += 1;
        let clock = self.clock;
        if !self.streams.contains_key(key) && self.streams.len() >= self.config.max_streams {
            if let Some(oldest) = self
                .streams
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
            {
                self.streams.remove(&oldest);
            }
        }
        let entry = self.streams.entry(key.clone()).or_insert_with(|| {
            let t = StreamTracker::new(self.config).expect("config checked in Tracks::new");
            (t, clock)
        });
        entry.1 = clock;
        &mut entry.0
    }

    /// Frees a stream's tracks (the stream ended).
    pub fn end(&mut self, key: &K) {
        self.streams.remove(key);
    }

    /// Frees the tracks of every stream `ended` says ended (a connection closed).
    pub fn end_where(&mut self, mut ended: impl FnMut(&K) -> bool) {
        self.streams.retain(|k, _| !ended(k));
    }

    /// Whether the stream has a tracker (it may have been replaced by a newer stream).
    pub fn has(&self, key: &K) -> bool {
        self.streams.contains_key(key)
    }

    /// Streams with a tracker.
    pub fn streams(&self) -> usize {
        self.streams.len()
    }

    /// Live tracks over every stream (what a live-tracks gauge shows).
    pub fn live(&self) -> usize {
        self.streams.values().map(|(t, _)| t.live()).sum()
    }
}
