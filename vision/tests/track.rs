//! The per-stream tracker: association, birth and death with hysteresis, bounded state,
//! carried boxes and refused input.

use camdnn_vision::track::{Association, StreamTracker, TrackBox, TrackerConfig, Tracks};
use camdnn_vision::{BBox, VisionError};

fn person(x: f32, y: f32) -> TrackBox {
    TrackBox {
        bbox: BBox::new(x, y, x + 40.0, y + 100.0),
        class: "person".into(),
    }
}

fn tracker(birth_hits: u32, max_misses: u32) -> StreamTracker {
    StreamTracker::new(TrackerConfig {
        birth_hits,
        max_misses,
        ..TrackerConfig::default()
    })
    .unwrap()
}

fn ids(a: &[Option<Association>]) -> Vec<u32> {
    a.iter().map(|x| x.unwrap().track).collect()
}

#[test]
fn two_walkers_keep_their_ids_whatever_order_their_boxes_come_in() {
    let mut t = tracker(3, 10);
    let mut first = None;
    for f in 0..30 {
        let x = f as f32 * 5.0;
        // The two boxes swap places in the list every other frame.
        let (a, b) = (person(100.0 + x, 50.0), person(600.0 - x, 300.0));
        let boxes = if f % 2 == 0 { vec![a, b] } else { vec![b, a] };
        let got = t.update(&boxes).unwrap();
        let mut pair = ids(&got);
        if f % 2 == 1 {
            pair.swap(0, 1);
        }
        match first {
            None => first = Some(pair),
            Some(ref p) => assert_eq!(&pair, p, "frame {f}"),
        }
        for a in got.iter().flatten() {
            assert_eq!(a.continued, f > 0, "frame {f}");
            assert_eq!(a.confirmed, f >= 2, "frame {f}: confirmed at the third hit");
        }
    }
    let p = first.unwrap();
    assert_ne!(p[0], p[1]);
}

#[test]
fn boxes_of_different_classes_never_share_a_track() {
    let mut t = tracker(1, 5);
    let a = t.update(&[person(10.0, 10.0)]).unwrap()[0].unwrap();
    let mut dog = person(10.0, 10.0);
    dog.class = "dog".into();
    let b = t.update(&[dog]).unwrap()[0].unwrap();
    assert_ne!(a.track, b.track);
    assert!(!b.continued);
}

#[test]
fn a_box_that_jumps_far_starts_a_new_track() {
    let mut t = tracker(1, 5);
    let a = t.update(&[person(10.0, 10.0)]).unwrap()[0].unwrap();
    let b = t.update(&[person(500.0, 10.0)]).unwrap()[0].unwrap();
    assert_ne!(a.track, b.track);
    assert!(!b.continued && a.confirmed && b.confirmed);
}

#[test]
fn a_confirmed_track_survives_misses_up_to_its_limit_and_a_tentative_one_does_not() {
    let mut t = tracker(2, 8);
    // Twenty hits: the track's counter is at its limit.
    let id = (0..20)
        .map(|_| t.update(&[person(100.0, 100.0)]).unwrap()[0].unwrap().track)
        .last()
        .unwrap();
    // Six empty frames: still the same track afterwards.
    for _ in 0..6 {
        t.update(&[]).unwrap();
    }
    let back = t.update(&[person(100.0, 100.0)]).unwrap()[0].unwrap();
    assert_eq!((back.track, back.continued), (id, true));
    // Many more empty frames than max_misses: the track is gone and the box starts anew.
    for _ in 0..12 {
        t.update(&[]).unwrap();
    }
    assert_eq!(t.live(), 0);
    let new = t.update(&[person(100.0, 100.0)]).unwrap()[0].unwrap();
    assert!(new.track != id && !new.continued && !new.confirmed);
    // A box seen once, then missed twice, dies before it is confirmed.
    let mut t = tracker(3, 8);
    let once = t.update(&[person(300.0, 300.0)]).unwrap()[0].unwrap();
    assert!(!once.confirmed);
    for _ in 0..3 {
        t.update(&[]).unwrap();
    }
    let again = t.update(&[person(300.0, 300.0)]).unwrap()[0].unwrap();
    assert_ne!(again.track, once.track);
}

#[test]
fn live_tracks_never_pass_max_tracks() {
    let cfg = TrackerConfig {
        max_tracks: 5,
        birth_hits: 1,
        max_misses: 50,
        ..TrackerConfig::default()
    };
    let mut t = StreamTracker::new(cfg).unwrap();
    // Frames of 8 new far-apart boxes each: the last 3 of a frame are not tracked, and the
    // tracks never exceed 5.
    for f in 0..20 {
        let boxes: Vec<TrackBox> = (0..8)
            .map(|i| person(i as f32 * 100.0, f as f32 * 200.0))
            .collect();
        let got = t.update(&boxes).unwrap();
        assert!(got[..5].iter().all(Option::is_some));
        assert!(got[5..].iter().all(Option::is_none));
        assert!(t.live() <= 5, "frame {f}: {} live", t.live());
    }
}

#[test]
fn streams_are_bounded_and_freed_when_they_end() {
    let mut all: Tracks<(u64, u32)> = Tracks::new(TrackerConfig {
        max_streams: 3,
        ..TrackerConfig::default()
    })
    .unwrap();
    for s in 0..3u32 {
        all.stream(&(1, s)).update(&[person(0.0, 0.0)]).unwrap();
    }
    assert_eq!((all.streams(), all.live()), (3, 3));
    // A fourth stream replaces the one updated least recently, (1, 0).
    all.stream(&(1, 1)).update(&[person(0.0, 0.0)]).unwrap();
    all.stream(&(2, 0)).update(&[person(0.0, 0.0)]).unwrap();
    assert_eq!(all.streams(), 3);
    assert_eq!(all.stream(&(1, 0)).live(), 0, "(1, 0) was replaced");
    all.end(&(1, 0));
    // Connection 1 closes: its streams' tracks are freed.
    all.end_where(|k| k.0 == 1);
    assert_eq!((all.streams(), all.live()), (1, 1));
    all.end(&(2, 0));
    assert_eq!((all.streams(), all.live()), (0, 0));
}

#[test]
fn carried_boxes_move_on_with_the_motion_and_age() {
    let mut t = tracker(2, 10);
    for f in 0..10 {
        t.update(&[person(100.0 + 10.0 * f as f32, 50.0)]).unwrap();
    }
    let c1 = t.carry();
    let c2 = t.carry();
    assert_eq!((c1.len(), c2.len()), (1, 1));
    assert_eq!((c1[0].box_age, c2[0].box_age), (1, 2));
    assert_eq!(c1[0].class, "person");
    // The box keeps moving right (10 px a frame, as far as the filter has learnt it).
    let dx = c2[0].bbox.x0 - c1[0].bbox.x0;
    assert!((1.0..15.0).contains(&dx), "moved {dx}");
    assert!(c1[0].bbox.x0 > 190.0, "{:?}", c1[0].bbox);
    // The next detection, where the person really is, continues the same track.
    let back = t.update(&[person(210.0, 50.0)]).unwrap()[0].unwrap();
    assert_eq!((back.track, back.continued), (c1[0].track, true));
}

#[test]
fn tracks_live_through_a_long_run_with_the_detector_on_every_fifth_frame() {
    // The credit carried frames take is given back at each detection: with birth_hits 3 and
    // max_misses 8, a walker detected on every 5th frame keeps one track for 200 frames.
    let mut t = StreamTracker::new(TrackerConfig {
        birth_hits: 3,
        max_misses: 8,
        detector_interval: 5,
        ..TrackerConfig::default()
    })
    .unwrap();
    let mut id = None;
    for f in 0..200u32 {
        let x = 50.0 + 2.0 * f as f32;
        if f % 5 != 0 {
            let carried = t.carry();
            if id.is_some() {
                assert_eq!(carried.len(), 1, "frame {f}");
                assert_eq!(carried[0].box_age, f % 5, "frame {f}");
            }
            continue;
        }
        let a = t.update(&[person(x, 80.0)]).unwrap()[0].unwrap();
        match id {
            Some(i) => assert_eq!(
                (a.track, a.continued, a.confirmed),
                (i, true, true),
                "frame {f}"
            ),
            None if a.confirmed => id = Some(a.track),
            None => {}
        }
    }
    assert!(id.is_some(), "the walker was confirmed");
    // Once the walker is gone, the track dies within max_misses frames, carried or not.
    for _ in 0..10 {
        t.carry();
    }
    t.update(&[]).unwrap();
    assert_eq!(t.live(), 0);
}

#[test]
fn bad_boxes_and_bad_configs_are_refused_by_name() {
    let mut t = tracker(1, 5);
    let mut bad = person(0.0, 0.0);
    bad.bbox.x1 = f32::NAN;
    let e = t.update(&[person(0.0, 0.0), bad]).unwrap_err();
    assert!(
        matches!(e, VisionError::Track(_)) && e.to_string().contains("box 1"),
        "{e}"
    );
    let flat = TrackBox {
        bbox: BBox::new(5.0, 5.0, 5.0, 9.0),
        class: "person".into(),
    };
    assert!(t.update(&[flat]).is_err());
    for (cfg, field) in [
        (
            TrackerConfig {
                min_iou: 0.0,
                ..Default::default()
            },
            "track.min_iou",
        ),
        (
            TrackerConfig {
                min_iou: f32::NAN,
                ..Default::default()
            },
            "track.min_iou",
        ),
        (
            TrackerConfig {
                birth_hits: 0,
                ..Default::default()
            },
            "track.birth_hits",
        ),
        (
            TrackerConfig {
                birth_hits: 5,
                max_misses: 4,
                ..Default::default()
            },
            "track.max_misses",
        ),
        (
            TrackerConfig {
                max_tracks: 0,
                ..Default::default()
            },
            "track.max_tracks",
        ),
        (
            TrackerConfig {
                detector_interval: 0,
                ..Default::default()
            },
            "track.detector_interval",
        ),
        (
            TrackerConfig {
                detector_interval: 16,
                max_misses: 15,
                ..Default::default()
            },
            "track.detector_interval",
        ),
    ] {
        let e = StreamTracker::new(cfg).unwrap_err().to_string();
        assert!(e.contains(field), "{field}: {e}");
    }
    let e = Tracks::<u32>::new(TrackerConfig {
        max_streams: 0,
        ..Default::default()
    })
    .unwrap_err();
    assert!(e.to_string().contains("track.max_streams"), "{e}");
}

#[test]
fn the_config_reads_from_toml_with_defaults_and_refuses_unknown_fields() {
    let c: TrackerConfig = toml::from_str("max_tracks = 16").unwrap();
    assert_eq!(
        c,
        TrackerConfig {
            max_tracks: 16,
            ..TrackerConfig::default()
        }
    );
    assert!(toml::from_str::<TrackerConfig>("max_track = 16").is_err());
}
