//! The per-object reuse decision: each reason to infer, reuse with its age, the stored
//! results' bounds, the detector interval, and inferences on their way.

use camdnn_policy::reuse::{Decision, Request, ReuseConfig, Stored, StreamReuse, Tracked, Why};
use camdnn_policy::ModelId;

const POSE: ModelId = ModelId(1);
const BOX: [f32; 4] = [100.0, 100.0, 140.0, 200.0];

fn tracked(id: u32) -> Option<Tracked> {
    Some(Tracked {
        id,
        confirmed: true,
        continued: true,
    })
}

fn req(bbox: [f32; 4], track: Option<Tracked>) -> Request {
    Request {
        object: 0,
        model: POSE,
        bbox,
        track,
    }
}

fn cfg() -> ReuseConfig {
    ReuseConfig {
        reinfer_interval: 5,
        min_iou: Some(0.7),
        max_area_ratio: 1.2,
        min_score: None,
        max_age_ms: 1000.0,
    }
}

/// A stream at frame 1 with a pose result of track 7 stored on `BOX` at t = 0.
fn stream_with_result(score: Option<f32>) -> StreamReuse<&'static str> {
    let mut s = StreamReuse::new(16);
    s.begin_frame();
    s.store(7, POSE, BOX, score, 0.0, "pose of 7");
    s
}

#[test]
fn a_result_is_reused_until_the_interval_with_its_age() {
    let mut s = stream_with_result(None);
    let c = cfg();
    for frame in 2..=5u32 {
        s.begin_frame();
        let d = s.decide(Some(&c), &req(BOX, tracked(7)), 100.0 * frame as f64);
        assert_eq!(
            d,
            Decision::Reuse {
                age_frames: frame - 1,
                age_ms: 100.0 * frame as f64
            }
        );
        assert_eq!(s.stored(7, POSE).unwrap().value, "pose of 7");
    }
    s.begin_frame();
    assert_eq!(
        s.decide(Some(&c), &req(BOX, tracked(7)), 600.0),
        Decision::Infer(Why::Interval)
    );
}

#[test]
fn every_guard_forces_inference() {
    let mut s = stream_with_result(Some(0.4));
    s.begin_frame();
    let c = cfg();
    // No config, or an interval of 1: reuse is off.
    assert_eq!(
        s.decide(None, &req(BOX, tracked(7)), 10.0),
        Decision::Infer(Why::Off)
    );
    let every = ReuseConfig {
        reinfer_interval: 1,
        ..cfg()
    };
    assert_eq!(
        s.decide(Some(&every), &req(BOX, tracked(7)), 10.0),
        Decision::Infer(Why::Off)
    );
    // Not tracked, tentative, or born on this frame: untracked.
    for t in [
        None,
        Some(Tracked {
            id: 7,
            confirmed: false,
            continued: true,
        }),
        Some(Tracked {
            id: 7,
            confirmed: true,
            continued: false,
        }),
    ] {
        assert_eq!(
            s.decide(Some(&c), &req(BOX, t), 10.0),
            Decision::Infer(Why::Untracked)
        );
    }
    // Another track has no result.
    assert_eq!(
        s.decide(Some(&c), &req(BOX, tracked(8)), 10.0),
        Decision::Infer(Why::NoResult)
    );
    // Too old in ms, though young in frames.
    assert_eq!(
        s.decide(Some(&c), &req(BOX, tracked(7)), 1500.0),
        Decision::Infer(Why::TooOld)
    );
    // Its confidence 0.4 is under a threshold of 0.5.
    let sure = ReuseConfig {
        min_score: Some(0.5),
        ..cfg()
    };
    assert_eq!(
        s.decide(Some(&sure), &req(BOX, tracked(7)), 10.0),
        Decision::Infer(Why::LowScore)
    );
    // Moved by a quarter of its width: IoU 0.6 < 0.7.
    let moved = [110.0, 100.0, 150.0, 200.0];
    assert_eq!(
        s.decide(Some(&c), &req(moved, tracked(7)), 10.0),
        Decision::Infer(Why::Moved)
    );
    // Grown 12.5 % each way around the same centre: IoU 0.79 passes, the area ratio 1.27
    // does not.
    let grown = [97.5, 93.75, 142.5, 206.25];
    assert_eq!(
        s.decide(Some(&c), &req(grown, tracked(7)), 10.0),
        Decision::Infer(Why::Resized)
    );
    // A little motion passes every guard.
    let nudged = [102.0, 101.0, 142.0, 201.0];
    assert!(!s.decide(Some(&c), &req(nudged, tracked(7)), 10.0).infers());
}

#[test]
fn a_result_without_a_score_is_not_reused_under_a_score_threshold() {
    let mut s = stream_with_result(None);
    s.begin_frame();
    let sure = ReuseConfig {
        min_score: Some(0.1),
        ..cfg()
    };
    assert_eq!(
        s.decide(Some(&sure), &req(BOX, tracked(7)), 10.0),
        Decision::Infer(Why::LowScore)
    );
}

#[test]
fn a_not_finite_box_is_inferred_not_reused() {
    let mut s = stream_with_result(None);
    s.begin_frame();
    let nan = [f32::NAN, 100.0, 140.0, 200.0];
    assert!(s.decide(Some(&cfg()), &req(nan, tracked(7)), 10.0).infers());
    assert!(s
        .decide(Some(&cfg()), &req(BOX, tracked(7)), f64::NAN)
        .infers());
}

#[test]
fn stored_results_are_bounded_and_dropped_with_their_tracks() {
    let mut s = StreamReuse::new(3);
    s.begin_frame();
    for t in 0..5u32 {
        s.store(t, POSE, BOX, None, f64::from(t), t);
        assert!(s.len() <= 3);
    }
    // The oldest went first: tracks 2, 3, 4 remain.
    assert!(s.stored(0, POSE).is_none() && s.stored(1, POSE).is_none());
    assert_eq!(s.stored(4, POSE).unwrap().value, 4);
    // Replacing a track's result does not evict another.
    s.store(3, POSE, BOX, None, 9.0, 33);
    assert_eq!((s.len(), s.stored(3, POSE).unwrap().value), (3, 33));
    s.retain_tracks(|t| t == 4);
    assert_eq!(s.len(), 1);
    s.retain_tracks(|_| false);
    assert!(s.is_empty());
}

#[test]
fn the_plan_follows_the_requests_and_each_models_config() {
    let mut s = stream_with_result(None);
    s.begin_frame();
    let face = ModelId(2);
    let configs = vec![None, Some(cfg()), None];
    let requests = [
        req(BOX, tracked(7)),
        Request {
            object: 0,
            model: face,
            bbox: BOX,
            track: tracked(7),
        },
        req(BOX, None),
    ];
    let plan = s.plan(&configs, &requests, 50.0);
    assert!(!plan[0].infers());
    assert_eq!(plan[1], Decision::Infer(Why::Off));
    assert_eq!(plan[2], Decision::Infer(Why::Untracked));
}

#[test]
fn the_detector_runs_on_every_kth_frame_from_the_first() {
    let mut s: StreamReuse<()> = StreamReuse::new(1);
    let due: Vec<bool> = (0..7).map(|_| s.detector_due(3)).collect();
    assert_eq!(due, [true, false, false, true, false, false, true]);
    let mut every: StreamReuse<()> = StreamReuse::new(1);
    assert!((0..5).all(|_| every.detector_due(1)));
    let mut zero: StreamReuse<()> = StreamReuse::new(1);
    assert!((0..5).all(|_| zero.detector_due(0)), "0 is taken as 1");
}

#[test]
fn bad_knobs_are_refused_by_field_and_unknown_fields_by_serde() {
    for (c, field) in [
        (
            ReuseConfig {
                reinfer_interval: 0,
                ..cfg()
            },
            "m.reuse.reinfer_interval",
        ),
        (
            ReuseConfig {
                min_iou: Some(0.0),
                ..cfg()
            },
            "m.reuse.min_iou",
        ),
        (
            ReuseConfig {
                min_iou: Some(f32::NAN),
                ..cfg()
            },
            "m.reuse.min_iou",
        ),
        (
            ReuseConfig {
                max_area_ratio: 0.9,
                ..cfg()
            },
            "m.reuse.max_area_ratio",
        ),
        (
            ReuseConfig {
                min_score: Some(1.5),
                ..cfg()
            },
            "m.reuse.min_score",
        ),
        (
            ReuseConfig {
                max_age_ms: 0.0,
                ..cfg()
            },
            "m.reuse.max_age_ms",
        ),
        (
            ReuseConfig {
                max_age_ms: f64::INFINITY,
                ..cfg()
            },
            "m.reuse.max_age_ms",
        ),
    ] {
        let e = c.check("m.reuse").unwrap_err().to_string();
        assert!(e.starts_with(field), "{field}: {e}");
    }
    cfg().check("m.reuse").unwrap();
    let c: ReuseConfig = toml::from_str("reinfer_interval = 3").unwrap();
    assert_eq!(
        c,
        ReuseConfig {
            reinfer_interval: 3,
            ..ReuseConfig::default()
        }
    );
    let e = toml::from_str::<ReuseConfig>("reinfer_intervall = 3").unwrap_err();
    assert!(e.to_string().contains("reinfer_intervall"), "{e}");
}

/// A result whose inference finished after a later frame's: stored on its own frame (its age
/// counts from there) and never in place of the newer one.
#[test]
fn a_late_result_keeps_its_frame_and_never_replaces_a_newer_one() {
    let mut s: StreamReuse<&str> = StreamReuse::new(8);
    let stored = |frame, value| Stored {
        bbox: BOX,
        frame,
        at_ms: 0.0,
        score: None,
        value,
    };
    for _ in 0..3 {
        s.begin_frame();
    }
    s.store_inferred(7, POSE, stored(3, "frame 3"));
    s.store_inferred(7, POSE, stored(2, "frame 2, late"));
    assert_eq!(s.stored(7, POSE).map(|r| r.value), Some("frame 3"));
    s.store_inferred(8, POSE, stored(1, "frame 1"));
    let cfg = ReuseConfig::default();
    assert_eq!(
        s.decide(Some(&cfg), &req(BOX, tracked(8)), 0.0),
        Decision::Reuse {
            age_frames: 2,
            age_ms: 0.0
        }
    );
}

/// Frames in flight overlap: the frame after one that re-inferred finds the new result not
/// stored yet. It reuses the older result (with its true age) instead of inferring again,
/// until the new one lands; an inference that never lands is retried an interval later.
#[test]
fn an_inference_on_its_way_is_not_issued_again() {
    let mut s = stream_with_result(None);
    let c = cfg();
    let at = |s: &mut StreamReuse<&str>, frame: u64| {
        assert_eq!(s.begin_frame(), frame);
        s.decide(Some(&c), &req(BOX, tracked(7)), 10.0 * frame as f64)
    };
    for frame in 2..=5 {
        assert!(!at(&mut s, frame).infers());
    }
    // Frame 6: the interval is up; the caller infers.
    assert_eq!(at(&mut s, 6), Decision::Infer(Why::Interval));
    s.inferring(7, POSE);
    // Frame 7: frame 6's result is still running: the old one stands, 6 frames old.
    assert_eq!(
        at(&mut s, 7),
        Decision::Reuse {
            age_frames: 6,
            age_ms: 70.0
        }
    );
    // It lands: counted from frame 6.
    let new = Stored {
        bbox: BOX,
        frame: 6,
        at_ms: 60.0,
        score: None,
        value: "pose of 7, frame 6",
    };
    s.store_inferred(7, POSE, new);
    assert_eq!(
        at(&mut s, 8),
        Decision::Reuse {
            age_frames: 2,
            age_ms: 20.0
        }
    );
    // Frame 11 infers again (5 frames after 6); that inference fails and never lands:
    // frames 12 to 15 reuse frame 6's result, frame 16 retries.
    for frame in 9..=10 {
        assert!(!at(&mut s, frame).infers());
    }
    assert_eq!(at(&mut s, 11), Decision::Infer(Why::Interval));
    s.inferring(7, POSE);
    for frame in 12..=15 {
        assert!(!at(&mut s, frame).infers(), "frame {frame}");
    }
    assert_eq!(at(&mut s, 16), Decision::Infer(Why::Interval));
}
