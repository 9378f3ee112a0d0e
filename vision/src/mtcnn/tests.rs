//! Unit tests of the MTCNN stages' arithmetic.

use super::*;

fn scale_transform(fw: f32, fh: f32, s: f32, canvas: f32) -> Transform {
    Transform {
        scale_x: s,
        scale_y: s,
        pad_x: 0.0,
        pad_y: 0.0,
        frame_width: fw,
        frame_height: fh,
        input_width: canvas,
        input_height: canvas,
    }
}

#[test]
fn pyramid_follows_mtcnn_and_fits_the_canvas() {
    // 512x512 frame, min face 40: m = 0.3 -> 153.6 px fits a 160 canvas.
    let cfg = PyramidConfig {
        min_face: 40.0,
        ..Default::default()
    };
    let s = pyramid_scales(512, 512, 160, 160, &cfg).unwrap();
    assert!((s[0] - 0.3).abs() < 1e-6, "{s:?}");
    for w in s.windows(2) {
        assert!((w[1] / w[0] - 0.709).abs() < 1e-5);
    }
    assert!(512.0 * s.last().unwrap() >= 12.0);
    assert!(512.0 * s.last().unwrap() * 0.709 < 12.0);
    assert_eq!(s.len(), 8);
    // A canvas too small for 12 / min_face: the first scale shrinks to fit.
    let s = pyramid_scales(512, 256, 100, 100, &cfg).unwrap();
    assert!((s[0] - 100.0 / 512.0).abs() < 1e-6);
    let cap = PyramidConfig {
        max_scales: 2,
        ..cfg.clone()
    };
    assert_eq!(pyramid_scales(512, 512, 160, 160, &cap).unwrap().len(), 2);
    // A frame smaller than one cell has no scale; bad settings are errors.
    assert!(pyramid_scales(8, 8, 160, 160, &cfg).unwrap().is_empty());
    let bad = PyramidConfig {
        factor: 1.0,
        ..cfg.clone()
    };
    assert!(pyramid_scales(512, 512, 160, 160, &bad).is_err());
    assert!(pyramid_scales(0, 512, 160, 160, &cfg).is_err());
}

/// A `w` x `h` heatmap (HWC) with face probability `p` at the given cells, zero regression.
fn maps(w: usize, h: usize, faces: &[(usize, usize, f32)]) -> (Vec<f32>, Vec<f32>) {
    let mut prob = vec![0f32; w * h * 2];
    for i in 0..w * h {
        prob[i * 2] = 1.0;
    }
    for &(r, c, p) in faces {
        prob[(r * w + c) * 2] = 1.0 - p;
        prob[(r * w + c) * 2 + 1] = p;
    }
    (prob, vec![0f32; w * h * 4])
}

#[test]
fn pnet_cells_map_to_frame_boxes() {
    // Scale 0.5: cell (row 3, col 5) sees input x 10..22, y 6..18 -> frame (22, 14)-(44, 36).
    let (prob, mut reg) = maps(20, 20, &[(3, 5, 0.9)]);
    let t = scale_transform(100.0, 100.0, 0.5, 50.0);
    let d = decode_pnet(
        &prob,
        &reg,
        20,
        20,
        MapLayout::Hwc,
        &t,
        &PnetConfig::default(),
    )
    .unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].bbox, BBox::new(22.0, 14.0, 44.0, 36.0));
    assert!((d[0].score - 0.9).abs() < 1e-6);
    // Regression moves the window by fractions of its size (22 px), then it is squared.
    let i = 3 * 20 + 5;
    reg[i * 4..i * 4 + 4].copy_from_slice(&[0.5, 0.0, 0.5, 0.5]);
    let d = decode_pnet(
        &prob,
        &reg,
        20,
        20,
        MapLayout::Hwc,
        &t,
        &PnetConfig::default(),
    )
    .unwrap();
    // (33, 14)-(55, 47): 22 x 33 -> square side 33 centred at (44, 30.5).
    let b = d[0].bbox;
    assert!(
        (b.x0 - 27.5).abs() < 1e-4 && (b.x1 - 60.5).abs() < 1e-4,
        "{b:?}"
    );
    assert!(
        (b.y0 - 14.0).abs() < 1e-4 && (b.y1 - 47.0).abs() < 1e-4,
        "{b:?}"
    );
}

#[test]
fn a_scale_packed_at_an_offset_gives_the_boxes_it_gives_alone() {
    // The same face cell, the scale drawn at the top-left and at (40, 20) of the canvas.
    let alone = scale_transform(100.0, 100.0, 0.5, 100.0);
    let (prob, reg) = maps(45, 45, &[(3, 5, 0.9)]);
    let a = decode_pnet(
        &prob,
        &reg,
        45,
        45,
        MapLayout::Hwc,
        &alone,
        &PnetConfig::default(),
    )
    .unwrap();
    let packed = Transform {
        pad_x: 40.0,
        pad_y: 20.0,
        ..alone
    };
    // Row 3 + 20/2, column 5 + 40/2; and cells whose window straddles the region's edges
    // (left of it, above it, past its 50x50 pixels) are ignored.
    let faces = [(13, 25, 0.9), (13, 19, 0.99), (9, 25, 0.99), (13, 40, 0.99)];
    let (prob, reg) = maps(45, 45, &faces);
    let b = decode_pnet(
        &prob,
        &reg,
        45,
        45,
        MapLayout::Hwc,
        &packed,
        &PnetConfig::default(),
    )
    .unwrap();
    assert_eq!(a, b);
    let odd = Transform {
        pad_x: 41.0,
        ..alone
    };
    assert!(decode_pnet(
        &prob,
        &reg,
        45,
        45,
        MapLayout::Hwc,
        &odd,
        &PnetConfig::default()
    )
    .is_err());
}

#[test]
fn scales_pack_into_few_canvases_without_overlap() {
    let cfg = PyramidConfig {
        min_face: 40.0,
        ..Default::default()
    };
    for (fw, fh) in [
        (512u32, 512u32),
        (640, 480),
        (480, 640),
        (192, 100),
        (13, 4000),
    ] {
        let scales = pyramid_scales(fw, fh, 192, 192, &cfg).unwrap();
        let sizes: Vec<(u32, u32)> = scales
            .iter()
            .map(|s| {
                let w = ((fw as f32 * s).round() as u32).clamp(1, 192);
                let h = ((fh as f32 * s).round() as u32).clamp(1, 192);
                (w, h)
            })
            .collect();
        let at = pack_scales(&sizes, 192, 192, true).unwrap();
        assert_eq!(at.len(), sizes.len());
        let rect = |i: usize| (at[i].0, at[i].1, at[i].2, sizes[i].0, sizes[i].1);
        for i in 0..sizes.len() {
            let (n, x, y, w, h) = rect(i);
            assert!(x % 2 == 0 && y % 2 == 0, "{fw}x{fh}: {at:?}");
            assert!(x + w <= 192 && y + h <= 192, "{fw}x{fh}: {at:?}");
            for j in 0..i {
                let (m, u, v, a, b) = rect(j);
                let apart = n != m || x >= u + a || u >= x + w || y >= v + b || v >= y + h;
                assert!(apart, "{fw}x{fh}: scales {j} and {i} overlap: {at:?}");
            }
        }
        let canvases = at.iter().map(|a| a.0).max().map_or(0, |n| n + 1);
        let area: usize = sizes.iter().map(|&(w, h)| (w * h) as usize).sum();
        // Never more canvases than twice the area needs, and the big frames' 8 scales in 2.
        assert!(
            canvases <= (2 * area).div_ceil(192 * 192).max(1),
            "{fw}x{fh}: {at:?}"
        );
        if fw >= 480 && fh >= 480 {
            assert_eq!((sizes.len(), canvases), (8, 2), "{fw}x{fh}: {at:?}");
        }
        // Unpacked: one scale per canvas, at its top-left.
        let one = pack_scales(&sizes, 192, 192, false).unwrap();
        assert!(one.iter().enumerate().all(|(i, &a)| a == (i, 0, 0)));
    }
    // Any frame and canvas, odd sides included: inside, even, apart.
    for (fw, fh, cw, ch) in [(1000, 300, 161, 97), (300, 900, 97, 161), (12, 12, 13, 13)] {
        let min_face = 12.0;
        let cfg = PyramidConfig {
            min_face,
            factor: 0.8,
            ..Default::default()
        };
        let sizes: Vec<(u32, u32)> = pyramid_scales(fw, fh, cw, ch, &cfg)
            .unwrap()
            .iter()
            .map(|s| {
                let w = ((fw as f32 * s).round() as u32).clamp(1, cw);
                let h = ((fh as f32 * s).round() as u32).clamp(1, ch);
                (w, h)
            })
            .collect();
        assert!(!sizes.is_empty());
        let at = pack_scales(&sizes, cw, ch, true).unwrap();
        for (i, &(n, x, y)) in at.iter().enumerate() {
            let (w, h) = sizes[i];
            assert!(
                x % 2 == 0 && y % 2 == 0 && x + w <= cw && y + h <= ch,
                "{at:?}"
            );
            for (j, &(m, u, v)) in at[..i].iter().enumerate() {
                let (a, b) = sizes[j];
                assert!(
                    n != m || x >= u + a || u >= x + w || y >= v + b || v >= y + h,
                    "{fw}x{fh} on {cw}x{ch}: {j} and {i} overlap: {at:?}"
                );
            }
        }
    }
    assert!(pack_scales(&[(193, 10)], 192, 192, true).is_err());
    assert!(pack_scales(&[(0, 10)], 192, 192, true).is_err());
}

#[test]
fn pnet_transposed_maps_and_padding_cells() {
    // The same face in a WHC map gives the same box.
    let (w, h) = (20, 10);
    let (prob, reg) = maps(w, h, &[(3, 5, 0.9)]);
    let mut whc = vec![0f32; w * h * 2];
    for r in 0..h {
        for c in 0..w {
            for k in 0..2 {
                whc[(c * h + r) * 2 + k] = prob[(r * w + c) * 2 + k];
            }
        }
    }
    let t = scale_transform(100.0, 100.0, 0.5, 50.0);
    let a = decode_pnet(
        &prob,
        &reg,
        w,
        h,
        MapLayout::Hwc,
        &t,
        &PnetConfig::default(),
    )
    .unwrap();
    let b = decode_pnet(&whc, &reg, w, h, MapLayout::Whc, &t, &PnetConfig::default()).unwrap();
    assert_eq!(a, b);
    // A frame covering only 30x30 canvas pixels: windows starting past 18 see padding.
    let small = scale_transform(60.0, 60.0, 0.5, 50.0);
    let (prob, reg) = maps(20, 20, &[(2, 9, 0.95), (2, 10, 0.95), (10, 2, 0.95)]);
    let d = decode_pnet(
        &prob,
        &reg,
        20,
        20,
        MapLayout::Hwc,
        &small,
        &PnetConfig::default(),
    )
    .unwrap();
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].bbox.x0, 38.0);
}

#[test]
fn pnet_suppresses_within_and_across_scales() {
    let t = scale_transform(100.0, 100.0, 0.5, 50.0);
    // Neighbouring cells overlap by 10/12 of a window: the better one stays.
    let (prob, reg) = maps(
        20,
        20,
        &[(3, 5, 0.7), (3, 6, 0.8), (3, 15, 0.65), (3, 16, 0.5)],
    );
    let d = decode_pnet(
        &prob,
        &reg,
        20,
        20,
        MapLayout::Hwc,
        &t,
        &PnetConfig::default(),
    )
    .unwrap();
    assert_eq!(d.len(), 2, "{d:?}");
    assert!((d[0].score - 0.8).abs() < 1e-6 && (d[1].score - 0.65).abs() < 1e-6);
    let mut all = d.clone();
    all.push(Detection {
        bbox: BBox::new(25.0, 15.0, 47.0, 37.0),
        class_id: 0,
        score: 0.99,
    });
    let merged = merge_pnet(&all, &PnetConfig::default());
    assert_eq!(merged.len(), 2);
    assert_eq!(merged[0].score, 0.99);
    let one = merge_pnet(
        &all,
        &PnetConfig {
            max_candidates: 1,
            ..Default::default()
        },
    );
    assert_eq!(one.len(), 1);
}

#[test]
fn pnet_rejects_bad_shapes() {
    let t = scale_transform(100.0, 100.0, 0.5, 50.0);
    let c = PnetConfig::default();
    assert!(decode_pnet(&[0.0; 8], &[0.0; 16], 2, 2, MapLayout::Hwc, &t, &c).is_ok());
    assert!(decode_pnet(&[0.0; 7], &[0.0; 16], 2, 2, MapLayout::Hwc, &t, &c).is_err());
    assert!(decode_pnet(&[0.0; 8], &[0.0; 15], 2, 2, MapLayout::Hwc, &t, &c).is_err());
    assert!(decode_pnet(&[], &[], 0, 2, MapLayout::Hwc, &t, &c).is_err());
    assert!(decode_pnet(&[], &[], usize::MAX, 2, MapLayout::Hwc, &t, &c).is_err());
}

#[test]
fn rnet_rejects_or_refines_to_a_square() {
    let b = BBox::new(10.0, 20.0, 49.0, 59.0); // 40 x 40 inclusive
    assert_eq!(refine_rnet(b, &[0.0; 4], &[0.4, 0.6], 0.7).unwrap(), None);
    let (r, s) = refine_rnet(b, &[0.1, 0.0, 0.1, 0.5], &[0.1, 0.9], 0.7)
        .unwrap()
        .unwrap();
    assert_eq!(s, 0.9);
    // (14, 20)-(53, 79): 39 x 59 -> square of side 59 around (33.5, 49.5).
    assert!((r.width() - 59.0).abs() < 1e-4 && (r.height() - 59.0).abs() < 1e-4);
    assert!(((r.x0 + r.x1) / 2.0 - 33.5).abs() < 1e-4, "{r:?}");
    assert!(((r.y0 + r.y1) / 2.0 - 49.5).abs() < 1e-4, "{r:?}");
    assert!(refine_rnet(b, &[0.0; 3], &[0.1, 0.9], 0.7).is_err());
    assert!(refine_rnet(b, &[0.0; 4], &[0.9], 0.7).is_err());
}

#[test]
fn onet_gives_box_and_landmarks() {
    let b = BBox::new(100.0, 200.0, 147.0, 247.0); // 48 x 48 inclusive
    let points = [0.25, 0.75, 0.5, 0.3, 0.7, 0.3, 0.3, 0.5, 0.8, 0.8];
    let f = decode_onet(b, &[0.0, 0.0, 0.0, -0.25], &points, &[0.05, 0.95], 0.7)
        .unwrap()
        .unwrap();
    assert_eq!(f.score, 0.95);
    assert_eq!(f.bbox, BBox::new(100.0, 200.0, 147.0, 235.0));
    let want = [[111.0, 213.4], [135.0, 213.4], [123.0, 223.0]];
    for (got, want) in f.landmarks.iter().zip(want) {
        assert!(
            (got[0] - want[0]).abs() < 1e-3 && (got[1] - want[1]).abs() < 1e-3,
            "{:?}",
            f.landmarks
        );
    }
    assert!(decode_onet(b, &[0.0; 4], &points, &[0.5, 0.5], 0.7)
        .unwrap()
        .is_none());
    assert!(decode_onet(b, &[0.0; 4], &points[..9], &[0.1, 0.9], 0.7).is_err());
}

#[test]
fn nested_and_overlapping_faces_are_suppressed() {
    let faces = [
        (BBox::new(0.0, 0.0, 100.0, 100.0), 0.9),
        (BBox::new(10.0, 10.0, 50.0, 50.0), 0.95), // inside the first: IoU 0.16, min 1.0
        (BBox::new(200.0, 0.0, 300.0, 100.0), 0.8),
        (BBox::new(5.0, 5.0, 105.0, 105.0), 0.85),
    ];
    assert_eq!(suppress_nested(&faces, 0.7), vec![false, true, true, false]);
    assert_eq!(suppress_nested(&faces, 1.0), vec![true, true, true, true]);
    assert!(suppress_nested(&[], 0.7).is_empty());
}

#[test]
fn config_from_toml() {
    let p: PyramidConfig = toml::from_str("min_face = 40").unwrap();
    assert_eq!(p.factor, 0.709);
    let c: PnetConfig = toml::from_str("threshold = 0.7").unwrap();
    assert_eq!(c.merge_iou, 0.7);
    assert!(toml::from_str::<PnetConfig>("treshold = 0.7").is_err());
}
