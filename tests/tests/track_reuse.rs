//! The tracker and the reuse decision together, as the frame path will drive them: on a
//! stream whose objects persist, results are reused between re-inferences; on a stream of
//! unrelated frames (every frame a new scene, or a clip's frames shuffled) no result is ever
//! reused, because no box continues a confirmed track.

use camdnn_policy::reuse::{Decision, Request, ReuseConfig, StreamReuse, Tracked};
use camdnn_policy::rng::Rng;
use camdnn_policy::ModelId;
use camdnn_vision::track::{StreamTracker, TrackBox, TrackerConfig};
use camdnn_vision::BBox;

const POSE: ModelId = ModelId(1);

/// `n` people walking right at 3 px a frame, spread over a 1280-pixel-wide frame.
fn walkers(n: usize, frame: usize) -> Vec<TrackBox> {
    (0..n)
        .map(|i| {
            let x = 20.0 + 120.0 * i as f32 + 3.0 * frame as f32;
            let y = 100.0 + 37.0 * (i % 5) as f32;
            TrackBox {
                bbox: BBox::new(x, y, x + 50.0, y + 120.0),
                class: "person".into(),
            }
        })
        .collect()
}

/// Runs the tracker and the reuse decision over `frames`; returns (offered, reused).
fn replay(frames: &[Vec<TrackBox>]) -> (usize, usize) {
    let mut tracker = StreamTracker::new(TrackerConfig::default()).unwrap();
    let mut reuse: StreamReuse<usize> = StreamReuse::new(1024);
    let cfg = vec![None, Some(ReuseConfig::default())];
    let (mut offered, mut reused) = (0, 0);
    for (t, boxes) in frames.iter().enumerate() {
        reuse.begin_frame();
        let now = t as f64 * 100.0;
        let assoc = tracker.update(boxes).unwrap();
        let requests: Vec<Request> = boxes
            .iter()
            .zip(&assoc)
            .enumerate()
            .map(|(k, (b, a))| Request {
                object: k,
                model: POSE,
                bbox: [b.bbox.x0, b.bbox.y0, b.bbox.x1, b.bbox.y1],
                track: a.map(|a| Tracked {
                    id: a.track,
                    confirmed: a.confirmed,
                    continued: a.continued,
                }),
            })
            .collect();
        for (r, d) in requests.iter().zip(reuse.plan(&cfg, &requests, now)) {
            offered += 1;
            match (d, r.track) {
                (Decision::Reuse { .. }, Some(t)) => {
                    reused += 1;
                    // The result served is the one stored for this very object.
                    assert_eq!(reuse.stored(t.id, POSE).unwrap().value, r.object);
                }
                (Decision::Reuse { .. }, None) => panic!("an untracked object reused a result"),
                (Decision::Infer(_), Some(t)) => {
                    reuse.store(t.id, POSE, r.bbox, None, now, r.object)
                }
                (Decision::Infer(_), None) => {}
            }
        }
        let live: Vec<u32> = tracker.live_ids().collect();
        reuse.retain_tracks(|t| live.contains(&t));
    }
    (offered, reused)
}

#[test]
fn persistent_objects_reuse_between_reinferences() {
    let frames: Vec<Vec<TrackBox>> = (0..60).map(|f| walkers(8, f)).collect();
    let (offered, reused) = replay(&frames);
    assert_eq!(offered, 480);
    // Per object: 3 frames to confirm, then inferred every 10th frame at most.
    assert!(reused >= 8 * 45, "reused {reused} of {offered}");
    assert!(reused <= 8 * 57, "reused {reused} of {offered}");
}

#[test]
fn shuffled_frames_never_reuse_a_result() {
    let mut frames: Vec<Vec<TrackBox>> = (0..120).map(|f| walkers(8, f * 7)).collect();
    let mut rng = Rng::new(5);
    for i in (1..frames.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        frames.swap(i, j);
    }
    assert_eq!(replay(&frames).1, 0);
}

#[test]
fn every_frame_a_new_scene_never_reuses_a_result() {
    let mut rng = Rng::new(9);
    let frames: Vec<Vec<TrackBox>> = (0..100)
        .map(|_| {
            (0..10)
                .map(|_| {
                    let (x, y) = (rng.unit() as f32 * 1200.0, rng.unit() as f32 * 600.0);
                    let (w, h) = (
                        20.0 + rng.unit() as f32 * 80.0,
                        60.0 + rng.unit() as f32 * 120.0,
                    );
                    TrackBox {
                        bbox: BBox::new(x, y, x + w, y + h),
                        class: "person".into(),
                    }
                })
                .collect()
        })
        .collect();
    let (offered, reused) = replay(&frames);
    assert_eq!((offered, reused), (1000, 0));
}
