use super::*;

fn head(nose: (f32, f32), le: (f32, f32), re: (f32, f32), score: f32) -> Vec<Keypoint> {
    let mut k = vec![
        Keypoint {
            x: 0.0,
            y: 0.0,
            score: 0.0
        };
        17
    ];
    for (i, (x, y)) in [(0, nose), (1, le), (2, re)] {
        k[i] = Keypoint { x, y, score };
    }
    k
}

const RULE: FaceRule = FaceRule {
    min_score: 0.3,
    margin: 0.0,
    min_side: 16.0,
};

#[test]
fn a_front_face_gets_a_square_box_around_its_keypoints() {
    // Seen from the front: the person's left eye on the image's right, the nose below.
    let k = head((100.0, 110.0), (110.0, 100.0), (90.0, 100.0), 0.9);
    let b = face_from_pose(&k, &RULE, 640.0, 480.0).unwrap();
    // side: max(2.9 * 20, 3 * 10) = 58, centre (100, 103.3 + 7.25).
    assert!((b.width() - 58.0).abs() < 1e-3, "{b:?}");
    assert!((b.height() - 58.0).abs() < 1e-3, "{b:?}");
    assert!(
        b.x0 < 90.0 && b.x1 > 110.0 && b.y0 < 100.0 && b.y1 > 110.0,
        "{b:?}"
    );
    // Ears 60 px apart widen it to 1.25 x 60.
    let mut k2 = k.clone();
    k2[3] = Keypoint {
        x: 130.0,
        y: 102.0,
        score: 0.9,
    };
    k2[4] = Keypoint {
        x: 70.0,
        y: 102.0,
        score: 0.9,
    };
    let b2 = face_from_pose(&k2, &RULE, 640.0, 480.0).unwrap();
    assert!((b2.width() - 75.0).abs() < 0.1, "{b2:?}");
    // The margin scales the side.
    let wide = FaceRule {
        margin: 0.2,
        ..RULE
    };
    let b3 = face_from_pose(&k, &wide, 640.0, 480.0).unwrap();
    assert!((b3.width() - 58.0 * 1.2).abs() < 1e-3, "{b3:?}");
}

#[test]
fn a_head_seen_from_behind_gets_no_face() {
    // The eyes swapped left for right: the back of a head.
    let k = head((100.0, 110.0), (90.0, 100.0), (110.0, 100.0), 0.9);
    assert_eq!(
        face_from_pose(&k, &RULE, 640.0, 480.0),
        Err(NoFace::FacingAway)
    );
    // Nose above the eye line with the eyes in a front view's order: also the mirror order.
    let k = head((100.0, 90.0), (110.0, 100.0), (90.0, 100.0), 0.9);
    assert_eq!(
        face_from_pose(&k, &RULE, 640.0, 480.0),
        Err(NoFace::FacingAway)
    );
}

#[test]
fn an_upside_down_front_face_is_still_a_face() {
    // Rotated 180 degrees: the left eye on the image's left, the nose above the eyes.
    let k = head((100.0, 90.0), (90.0, 100.0), (110.0, 100.0), 0.9);
    assert!(face_from_pose(&k, &RULE, 640.0, 480.0).is_ok());
}

#[test]
fn unseen_or_small_faces_are_refused_with_their_reason() {
    let k = head((100.0, 110.0), (110.0, 100.0), (90.0, 100.0), 0.1);
    assert_eq!(
        face_from_pose(&k, &RULE, 640.0, 480.0),
        Err(NoFace::NotSeen)
    );
    let k = head((100.0, 110.0), (110.0, 100.0), (90.0, 100.0), 0.9);
    assert_eq!(
        face_from_pose(&k[..3], &RULE, 640.0, 480.0),
        Err(NoFace::NotSeen)
    );
    // A 3 px face (eyes 2 px apart) is under the 16 px minimum.
    let tiny = head((100.0, 101.0), (101.0, 100.0), (99.0, 100.0), 0.9);
    match face_from_pose(&tiny, &RULE, 640.0, 480.0) {
        Err(NoFace::TooSmall { side }) => assert!(side < 16.0, "{side}"),
        other => panic!("a tiny face must be refused: {other:?}"),
    }
    // Cut by the frame's edge to under the minimum: refused too.
    let edge = head((-15.0, 110.0), (-5.0, 100.0), (-25.0, 100.0), 0.9);
    assert!(matches!(
        face_from_pose(&edge, &RULE, 640.0, 480.0),
        Err(NoFace::TooSmall { .. })
    ));
}
