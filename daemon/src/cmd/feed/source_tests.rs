use super::*;

fn fixture(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn jpeg_size_reads_the_sof_marker() {
    // SOI, APP0 (len 4), SOF0 (len 11): 8-bit, h=480, w=640.
    let b = [
        0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xC0, 0x00, 0x0B, 0x08, 0x01, 0xE0,
        0x02, 0x80, 0x03, 0x01, 0x22, 0x00,
    ];
    assert_eq!(jpeg_size(&b).unwrap(), (640, 480));
    assert!(jpeg_size(b"not a jpeg").is_err());
}

#[test]
fn ppm_parses_header_and_checks_length() {
    let mut b = b"P6\n# c\n2 1\n255\n".to_vec();
    b.extend([1, 2, 3, 4, 5, 6]);
    let (w, h, _, payload) = ppm(&b).unwrap();
    assert_eq!((w, h, payload.len()), (2, 1, 6));
    assert!(ppm(&b[..b.len() - 1]).is_err());
}

#[test]
fn png_files_become_rgb24_frames() {
    // 4x3, pixel (x, y) = (60x, 100y, 200), written by PIL.
    let (w, h, format, px) = png(&fixture("rgb_4x3.png")).unwrap();
    assert_eq!((w, h, format), (4, 3, PixelFormat::Rgb24));
    let at = |x: usize, y: usize| &px[(y * 4 + x) * 3..(y * 4 + x) * 3 + 3];
    assert_eq!(at(0, 0), [0, 0, 200]);
    assert_eq!(at(3, 2), [180, 200, 200]);
    // Grey with alpha: grey replicated, alpha dropped.
    let (w, h, _, px) = png(&fixture("grey_alpha_4x3.png")).unwrap();
    assert_eq!((w, h, px.len()), (4, 3, 36));
    assert!(px.chunks(3).all(|p| p[0] == p[1] && p[1] == p[2]));
    let e = png(b"\x89PNG\r\n\x1a\n garbage").unwrap_err();
    assert!(format!("{e:#}").contains("not a readable PNG"), "{e:#}");
}

#[test]
fn a_folder_with_bad_files_lists_them_to_report_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| std::fs::write(dir.path().join(name), bytes).unwrap();
    write("a.png", &fixture("rgb_4x3.png"));
    write("b.jpg", b"this is not a JPEG");
    write("c.gif", b"GIF89a");
    write("d.ppm", b"P6\n1 1\n255\n\x01\x02\x03");
    write("coco.names", b"person\n");
    let (paths, ignored) = list_images(dir.path()).unwrap();
    assert_eq!(ignored, ["coco.names"]);
    let items: Vec<Item> = paths.iter().map(|p| read_image(p)).collect();
    let summary: Vec<String> = items
        .iter()
        .map(|i| match i {
            Item::Frame(s) => format!("{} {}x{}", s.label, s.width, s.height),
            Item::Unreadable { label, error } => format!("{label} unreadable: {error}"),
        })
        .collect();
    assert_eq!(summary[0], "a.png 4x3");
    assert!(
        summary[1].starts_with("b.jpg unreadable: not a JPEG"),
        "{summary:?}"
    );
    assert!(
        summary[2].starts_with("c.gif unreadable: .gif images are not read"),
        "{summary:?}"
    );
    assert_eq!(summary[3], "d.ppm 1x1");
    // A folder without images is an error naming what feed reads.
    let empty = tempfile::tempdir().unwrap();
    std::fs::write(empty.path().join("x.txt"), b"").unwrap();
    let e = list_images(empty.path()).unwrap_err();
    assert!(e.to_string().contains(".jpg, .jpeg, .png and .ppm"), "{e}");
}

#[test]
fn trace_detections_match_counts_and_stay_in_the_frame() {
    let classes = vec!["person".to_owned(), "car".to_owned()];
    let d = trace_detections(&[3, 2], &classes, 640, 480);
    assert_eq!(d.len(), 5);
    assert_eq!(
        d.iter()
            .filter(|x| x.class == ClassRef::Name("car".into()))
            .count(),
        2
    );
    assert!(d.iter().all(|x| x.bbox.x1 <= 640.0 && x.bbox.y1 <= 480.0));
}
