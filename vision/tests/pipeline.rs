//! The stages chained as the daemon chains them, on synthetic frames whose right answer is known:
//! the detector graph (NV12 -> letterbox -> YOLO decode -> NMS -> routing -> crops -> batch ->
//! top-k) and the OCR graph (RGB -> stretch -> DBNet map -> boxes -> crops -> orientation -> CTC).
//! The networks are replaced by outputs computed from the preprocessed pixels themselves.

use camdnn_vision::classify::{apply_orientation, batch_top_k};
use camdnn_vision::ctc::CtcDecoder;
use camdnn_vision::dbnet::{decode_dbnet, DbNetConfig};
use camdnn_vision::yolo::decode_yolov8;
use camdnn_vision::{
    nms, BBox, Frame, NmsConfig, NormConfig, Normalizer, PixelFormat, Placement, Preprocessor,
    RgbImage, Router, RoutingConfig,
};

/// A 640x360 NV12 frame, grey, with a pure red 80x60 block at (320, 120).
fn nv12_with_red_block() -> (Frame, BBox) {
    let (w, h) = (640usize, 360usize);
    let inside = |x: usize, y: usize| (320..400).contains(&x) && (120..180).contains(&y);
    let mut d = vec![0u8; w * h * 3 / 2];
    for y in 0..h {
        for x in 0..w {
            d[y * w + x] = if inside(x, y) { 81 } else { 126 };
        }
    }
    for y in 0..h / 2 {
        for x in 0..w / 2 {
            let (u, v) = if inside(2 * x, 2 * y) {
                (90, 240)
            } else {
                (128, 128)
            };
            d[w * h + y * w + 2 * x] = u;
            d[w * h + y * w + 2 * x + 1] = v;
        }
    }
    let f = Frame::new(640, 360, PixelFormat::Nv12, d).unwrap();
    (f, BBox::new(320.0, 120.0, 400.0, 180.0))
}

#[test]
fn detector_graph_end_to_end() {
    let (frame, truth) = nv12_with_red_block();
    let rgb = frame.to_rgb().unwrap();
    let mut pre = Preprocessor::new();
    let (input, t) = pre
        .letterbox(&rgb, 320, 320, [114; 3], Placement::Center)
        .unwrap();
    // The red block is where the transform says it is in the detector input.
    let ib = t.to_input(truth);
    let c = input
        .pixel(
            ((ib.x0 + ib.x1) / 2.0) as u32,
            ((ib.y0 + ib.y1) / 2.0) as u32,
        )
        .unwrap();
    assert!(c[0] > 240 && c[1] < 15 && c[2] < 15, "{c:?}");
    assert_eq!(input.pixel(5, 5), Some([114, 114, 114])); // top padding
    let tensor = Normalizer::new(NormConfig {
        scale: 1.0 / 255.0,
        ..Default::default()
    })
    .unwrap()
    .tensor(&input);
    assert_eq!(tensor.shape, [1, 3, 320, 320]);

    // A "detector" that finds the red pixels of its input: one column per anchor.
    let (mut x0, mut y0, mut x1, mut y1) = (f32::MAX, f32::MAX, 0f32, 0f32);
    let plane = 320 * 320;
    for y in 0..320 {
        for x in 0..320 {
            let (r, g) = (tensor.data[y * 320 + x], tensor.data[plane + y * 320 + x]);
            if r > 0.9 && g < 0.1 {
                x0 = x0.min(x as f32);
                y0 = y0.min(y as f32);
                x1 = x1.max(x as f32 + 1.0);
                y1 = y1.max(y as f32 + 1.0);
            }
        }
    }
    let anchors: [[f32; 6]; 3] = [
        [
            (x0 + x1) / 2.0,
            (y0 + y1) / 2.0,
            x1 - x0,
            y1 - y0,
            0.9,
            0.05,
        ], // "car"
        [
            (x0 + x1) / 2.0 + 1.0,
            (y0 + y1) / 2.0,
            x1 - x0,
            y1 - y0,
            0.8,
            0.0,
        ], // duplicate
        [20.0, 100.0, 4.0, 4.0, 0.0, 0.6], // tiny "person": under the routing minimum
    ];
    let mut out = vec![0f32; 6 * 3];
    for (i, a) in anchors.iter().enumerate() {
        for r in 0..6 {
            out[r * 3 + i] = a[r];
        }
    }
    let dets = nms(
        &decode_yolov8(&out, &[1, 6, 3], 0.25, &t).unwrap(),
        &NmsConfig::default(),
    );
    assert_eq!(dets.len(), 2);
    let b = dets[0].bbox;
    for (g, w) in [
        (b.x0, truth.x0),
        (b.y0, truth.y0),
        (b.x1, truth.x1),
        (b.y1, truth.y1),
    ] {
        assert!((g - w).abs() <= 2.5, "{b:?} vs {truth:?}");
    }

    let router = Router::new(
        toml::from_str::<RoutingConfig>(
            "labels = [\"car\", \"person\"]\nmin_object_size = 16\n[routes]\ncar = \"resnet50\"\nperson = \"squeezenet\"",
        )
        .unwrap(),
    )
    .unwrap();
    let routed = router.route(&dets);
    assert_eq!(routed.len(), 1);
    assert_eq!((routed[0].class_name, routed[0].model), ("car", "resnet50"));

    let boxes: Vec<BBox> = routed.iter().map(|r| r.detection.bbox).collect();
    let crops = pre.crops(&rgb, &boxes, 32, 32, 16.0).unwrap();
    assert_eq!(crops.len(), 1);
    let red = crops[0]
        .image
        .data()
        .chunks(3)
        .filter(|p| p[0] > 200 && p[1] < 40)
        .count();
    assert!(red >= 32 * 32 * 9 / 10, "only {red} red pixels in the crop");
    let imgs: Vec<&RgbImage> = crops.iter().map(|c| &c.image).collect();
    let batch = Normalizer::new(NormConfig::default())
        .unwrap()
        .batch(&imgs)
        .unwrap();
    assert_eq!(batch.shape, [1, 3, 32, 32]);
    // A "classifier" with 3 logits; class 2 wins.
    let top = batch_top_k(&[0.1, 1.0, 3.0], 1, 2, true).unwrap();
    assert_eq!(top[0][0].class_id, 2);
    assert!(top[0][0].score > top[0][1].score);
}

#[test]
fn ocr_graph_end_to_end() {
    // 200x100 white page with two black text lines.
    let lines = [
        BBox::new(20.0, 20.0, 120.0, 36.0),
        BBox::new(60.0, 60.0, 180.0, 80.0),
    ];
    let mut d = vec![255u8; 200 * 100 * 3];
    for l in &lines {
        for y in l.y0 as usize..l.y1 as usize {
            for x in l.x0 as usize..l.x1 as usize {
                d[(y * 200 + x) * 3..(y * 200 + x) * 3 + 3].copy_from_slice(&[0, 0, 0]);
            }
        }
    }
    let rgb = RgbImage::new(200, 100, d).unwrap();
    let mut pre = Preprocessor::new();
    // PP-OCR det stretches to multiples of 32.
    let (input, t) = pre.stretch(&rgb, 192, 96).unwrap();
    // A "DBNet" that outputs the shrunk text kernels DB is trained on: each text polygon shrunk
    // by D = A (1 - r^2) / L with r = 0.4, in detector-input pixels.
    assert!(
        input.pixel(40, 25).unwrap()[0] < 50,
        "line 1 is dark in the input"
    );
    let mut map = vec![0.01f32; 192 * 96];
    for l in &lines {
        let ib = t.to_input(*l);
        let dd = ib.area() * (1.0 - 0.16) / (2.0 * (ib.width() + ib.height()));
        for y in 0..96 {
            for x in 0..192 {
                let (cx, cy) = (x as f32 + 0.5, y as f32 + 0.5);
                if cx > ib.x0 + dd && cx < ib.x1 - dd && cy > ib.y0 + dd && cy < ib.y1 - dd {
                    map[y * 192 + x] = 0.95;
                }
            }
        }
    }
    let boxes = decode_dbnet(&map, 192, 96, &DbNetConfig::default(), &t).unwrap();
    assert_eq!(boxes.len(), 2);
    for (b, l) in boxes.iter().zip(&lines) {
        // The unclipped box covers the text line to within a few pixels.
        for (g, w) in [
            (b.bbox.x0, l.x0),
            (b.bbox.y0, l.y0),
            (b.bbox.x1, l.x1),
            (b.bbox.y1, l.y1),
        ] {
            assert!((g - w).abs() <= 5.0, "{:?} vs {l:?}", b.bbox);
        }
    }

    let bboxes: Vec<BBox> = boxes.iter().map(|d| d.bbox).collect();
    let mut crops: Vec<RgbImage> = pre
        .crops(&rgb, &bboxes, 96, 48, 3.0)
        .unwrap()
        .into_iter()
        .map(|c| c.image)
        .collect();
    assert_eq!(crops.len(), 2);
    // Orientation "classifier": the second crop is upside down.
    let flipped = apply_orientation(&mut crops, &[0.98, 0.02, 0.03, 0.97], 0.9).unwrap();
    assert_eq!(flipped, vec![false, true]);
    // Recognition "model" output for each crop: "ab" and "ba ".
    let dec = CtcDecoder::from_dict_text("a\nb", true).unwrap();
    let onehot = |ids: &[usize]| -> Vec<f32> {
        ids.iter()
            .flat_map(|&i| (0..4).map(move |c| if c == i { 0.97 } else { 0.01 }))
            .collect()
    };
    let mut out = onehot(&[1, 1, 0, 2, 0, 0]);
    out.extend(onehot(&[2, 0, 1, 1, 3, 0]));
    let texts = dec.decode_batch(&out, 2).unwrap();
    assert_eq!(
        (texts[0].text.as_str(), texts[1].text.as_str()),
        ("ab", "ba ")
    );
}
