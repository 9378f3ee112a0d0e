//! The per-stream rules of tracking in the frame path: the order the tracker sees frames in,
//! the detector interval, and what a closed connection frees.

use camdnn_protocol::ClassRef;
use camdnn_vision::track::TrackerConfig;
use camdnn_vision::BBox;

use super::*;

/// Tracks confirmed on their second frame, the detector on every `every`-th frame.
fn reuse(every: u32) -> Reuse {
    reuse_with(every, 2)
}

fn reuse_with(every: u32, birth_hits: u32) -> Reuse {
    let track = TrackerConfig {
        birth_hits,
        detector_interval: every,
        ..Default::default()
    };
    Reuse::new(track, vec![None, None], vec!["det".into(), "pose".into()]).unwrap()
}

fn person(x: f32) -> ObjectState {
    ObjectState::new(
        BBox::new(x, 10.0, x + 20.0, 60.0),
        ClassRef::Name("person".into()),
        0.8,
    )
}

const KEY: StreamKey = (1, 0);

/// Enters a frame that runs its detector and associates one person at `x`.
fn detect(r: &mut Reuse, x: f32) -> (FrameTrack, Vec<ObjectState>) {
    let (mut ft, carried) = r.enter(KEY, 0.0, true);
    assert!(carried.is_none(), "the detector is due");
    let mut objects = vec![person(x)];
    r.associate(&mut ft, &mut objects);
    (ft, objects)
}

#[test]
fn a_box_that_continues_keeps_its_track() {
    let mut r = reuse(1);
    let (_, first) = detect(&mut r, 0.0);
    let (ft, second) = detect(&mut r, 2.0);
    let (a, b) = (first[0].track.unwrap(), second[0].track.unwrap());
    assert_eq!(a.id, b.id);
    assert!(!a.continued && b.continued && b.confirmed);
    assert_eq!(ft.frame, Some(2));
}

#[test]
fn a_frame_whose_detector_finishes_after_a_later_frames_stays_untracked() {
    let mut r = reuse(1);
    let (mut early, _) = r.enter(KEY, 0.0, true);
    let (mut late, _) = r.enter(KEY, 0.0, true);
    let mut objects = vec![person(0.0)];
    r.associate(&mut late, &mut objects);
    assert!(late.frame.is_some() && objects[0].track.is_some());
    let mut objects = vec![person(0.0)];
    r.associate(&mut early, &mut objects);
    assert_eq!(early.frame, None, "the tracker never moves backwards");
    assert!(objects[0].track.is_none());
}

#[test]
fn the_detector_interval_carries_boxes_between_detections() {
    let mut r = reuse_with(3, 1);
    let (_, found) = detect(&mut r, 0.0);
    let track = found[0].track.unwrap().id;
    for box_age in 1..3 {
        let (ft, carried) = r.enter(KEY, 0.0, true);
        let carried = carried.expect("the detector is not due: the tracker carries the box");
        assert_eq!(ft.frame, Some(u64::from(box_age) + 1));
        assert_eq!(carried.len(), 1);
        assert_eq!((carried[0].track, carried[0].box_age), (track, box_age));
        assert_eq!(r.carried_score(&KEY, track), 0.8);
    }
    // Every third frame runs the detector again.
    detect(&mut r, 6.0);
}

#[test]
fn the_detector_runs_while_an_earlier_frame_is_still_in_it() {
    let mut r = reuse(5);
    let (mut first, _) = r.enter(KEY, 0.0, true);
    // Not due, but the first frame's detections are not known: the detector runs.
    let (second, carried) = r.enter(KEY, 0.0, true);
    assert!(carried.is_none() && second.waiting);
    r.associate(&mut first, &mut [person(0.0)]);
    r.frame_gone(&second);
    // Nothing awaited now: the next frame within the interval is carried.
    assert!(r.enter(KEY, 0.0, true).1.is_some());
}

#[test]
fn a_closed_connection_frees_its_streams() {
    let mut r = reuse(1);
    detect(&mut r, 0.0);
    r.enter((2, 0), 0.0, false);
    assert_eq!((r.tracks.streams(), r.tracks.live()), (2, 1));
    r.connection_closed(1);
    assert_eq!((r.tracks.streams(), r.streams.len()), (1, 1));
    assert_eq!(r.tracks.live(), 0);
}
