use super::*;
use bytes::Bytes;

#[test]
fn picture_names_follow_the_source() {
    assert_eq!(file_name("person.jpg"), "person.jpg");
    assert_eq!(file_name("kite.png"), "kite.png.jpg");
    assert_eq!(file_name("clip.mp4#12"), "clip.mp4-000012.jpg");
    assert_eq!(file_name("a b/c.JPG"), "a_b_c.JPG");
}

#[test]
fn boxes_skeletons_and_faces_are_drawn_where_the_answer_puts_them() {
    let r = super::super::answer::tests::person_result();
    let src = Source {
        label: "grey.ppm".into(),
        width: 200,
        height: 320,
        format: PixelFormat::Rgb24,
        payload: Bytes::from(vec![128u8; 200 * 320 * 3]),
        detections: None,
    };
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &src, &r).unwrap();
    assert_eq!(path, dir.path().join("grey.ppm.jpg"));
    let img = camdnn_vision::Frame::jpeg(std::fs::read(&path).unwrap())
        .unwrap()
        .to_rgb()
        .unwrap();
    assert_eq!((img.width(), img.height()), (200, 320));
    let px = |x: u32, y: u32| {
        let i = ((y * img.width() + x) * 3) as usize;
        [img.data()[i], img.data()[i + 1], img.data()[i + 2]]
    };
    let grey = |p: [u8; 3]| p.iter().all(|&v| (118..=138).contains(&v));
    // The person's box edge (left side, x = 50, halfway down) is drawn, not grey.
    assert!(!grey(px(50, 200)), "{:?}", px(50, 200));
    // The skeleton joins nose (100, 60) and left eye (110, 50): their midpoint is drawn.
    assert!(!grey(px(105, 55)), "{:?}", px(105, 55));
    // The face box's bottom edge (y = 89) at x = 125 is drawn white.
    assert!(px(125, 89).iter().all(|&v| v > 180), "{:?}", px(125, 89));
    // Far from every object the frame is untouched.
    assert!(grey(px(180, 310)), "{:?}", px(180, 310));
}
