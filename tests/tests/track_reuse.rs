//! The tracker and the reuse decision together, as the frame path will drive them: on a
//! stream whose objects persist, results are reused between re-inferences; on a stream where
//! every frame is a new scene no result is ever reused, because no box continues a confirmed
//! track; on a clip's frames shuffled, little is reused and never another object's result.

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

/// `n` people of different sizes, each walking in its own lane (they never overlap each
/// other) at its own velocity (3 to 6 px a frame sideways): no frame is another frame
/// shifted, and an object's boxes on two frames overlap only when the frames are a few apart.
fn wanderers(n: usize, frame: usize) -> Vec<TrackBox> {
    let mut rng = Rng::new(17);
    (0..n)
        .map(|lane| {
            let w = 30.0 + rng.unit() as f32 * 80.0;
            let (x0, y0) = (rng.unit() as f32 * 1280.0, 300.0 * lane as f32);
            let speed = 3.0 + rng.unit() as f32 * 3.0;
            let vx = if rng.unit() < 0.5 { -speed } else { speed };
            let (x, y) = (x0 + vx * frame as f32, y0);
            TrackBox {
                bbox: BBox::new(x, y, x + w, y + 2.4 * w),
                class: "person".into(),
            }
        })
        .collect()
}

/// What a replay served.
struct Served {
    offered: usize,
    reused: usize,
}

/// Runs the tracker and the reuse decision over `frames`; every reused result must be the
/// one stored for the same object.
fn replay(frames: &[Vec<TrackBox>]) -> Served {
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
    Served { offered, reused }
}

#[test]
fn persistent_objects_reuse_between_reinferences() {
    let frames: Vec<Vec<TrackBox>> = (0..60).map(|f| walkers(8, f)).collect();
    let Served {
        offered, reused, ..
    } = replay(&frames);
    assert_eq!(offered, 480);
    // Per object: 3 frames to confirm, then inferred every 10th frame at most.
    assert!(reused >= 8 * 45, "reused {reused} of {offered}");
    assert!(reused <= 8 * 57, "reused {reused} of {offered}");
}

#[test]
fn shuffled_frames_reuse_little_and_only_the_same_objects_results() {
    // In clip order most results are reused. Shuffled, a box continues a track only when the
    // frames just before it in the new order showed its object close by (frames a few apart
    // in the clip): the few results reused are each the same object's (`replay` checks it).
    let clip: Vec<Vec<TrackBox>> = (0..120).map(|f| wanderers(8, f)).collect();
    let in_order = replay(&clip);
    assert!(
        in_order.reused > 8 * 80,
        "the clip in order reused {}",
        in_order.reused
    );
    let mut frames = clip;
    let mut rng = Rng::new(5);
    for i in (1..frames.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        frames.swap(i, j);
    }
    let shuffled = replay(&frames);
    assert!(
        shuffled.reused * 5 < in_order.reused,
        "shuffled reused {} of {}, in order {}",
        shuffled.reused,
        shuffled.offered,
        in_order.reused
    );
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
    let served = replay(&frames);
    assert_eq!((served.offered, served.reused), (1000, 0));
}
