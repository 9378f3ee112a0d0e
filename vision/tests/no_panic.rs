//! Property tests: no combination of sizes, formats, bytes or tensor shapes makes the crate
//! panic, and the invariants of NMS and the letterbox transform hold for arbitrary inputs.

use camdnn_vision::dbnet::{decode_dbnet, DbNetConfig};
use camdnn_vision::ssd::{AnchorConfig, SsdConfig, SsdDecoder};
use camdnn_vision::yolo::decode_yolov8;
use camdnn_vision::{
    nms, BBox, Detection, Frame, NmsConfig, NormConfig, Normalizer, PixelFormat, Placement,
    Preprocessor, Transform,
};
use proptest::prelude::*;

fn format() -> impl Strategy<Value = PixelFormat> {
    prop_oneof![
        Just(PixelFormat::Rgb24),
        Just(PixelFormat::Bgr24),
        Just(PixelFormat::Nv12),
        Just(PixelFormat::Jpeg),
    ]
}

fn float() -> impl Strategy<Value = f32> {
    prop_oneof![
        8 => -1000.0f32..1000.0,
        1 => Just(f32::NAN),
        1 => Just(f32::INFINITY),
        1 => Just(f32::NEG_INFINITY),
    ]
}

fn bbox() -> impl Strategy<Value = BBox> {
    (float(), float(), float(), float()).prop_map(|(a, b, c, d)| BBox::new(a, b, c, d))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Any declared size and format with any byte count: an error or a frame that converts,
    /// resizes, letterboxes, crops and normalises without panicking.
    #[test]
    fn frames_never_panic(
        w in 0u32..24, h in 0u32..24, fmt in format(),
        extra in -3i64..3, exact in any::<bool>(), seed in any::<u8>(),
        ow in 0u32..40, oh in 0u32..40, boxes in prop::collection::vec(bbox(), 0..4),
    ) {
        let need = match fmt {
            PixelFormat::Nv12 => (w * h * 3 / 2) as i64,
            _ => (w * h * 3) as i64,
        };
        let len = if exact { need } else { (need + extra).max(0) } as usize;
        let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(seed)).collect();
        match Frame::new(w, h, fmt, data) {
            Err(e) => prop_assert!(!e.to_string().is_empty()),
            Ok(f) => {
                prop_assert!(fmt != PixelFormat::Jpeg, "random bytes accepted as JPEG");
                let rgb = f.to_rgb().unwrap();
                prop_assert_eq!((rgb.width(), rgb.height()), (w, h));
                let mut p = Preprocessor::new();
                let _ = p.stretch(&rgb, ow, oh);
                let _ = p.letterbox(&rgb, ow, oh, [114; 3], Placement::Center);
                let _ = p.letterbox(&rgb, ow, oh, [0; 3], Placement::TopLeft);
                let crops = p.crops(&rgb, &boxes, ow.max(1), oh.max(1), 0.0).unwrap();
                for c in &crops {
                    prop_assert!(c.bbox.x0 >= 0.0 && c.bbox.x1 <= w as f32);
                }
                let n = Normalizer::new(NormConfig::default()).unwrap();
                let imgs: Vec<_> = crops.iter().map(|c| &c.image).collect();
                if !imgs.is_empty() {
                    let t = n.batch(&imgs).unwrap();
                    prop_assert_eq!(t.data.len(), t.shape.iter().product::<usize>());
                }
            }
        }
    }

    /// Arbitrary bytes, and JPEG-looking bytes, never panic the JPEG path.
    #[test]
    fn jpeg_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 0..600), soi in any::<bool>()) {
        if soi && bytes.len() >= 4 {
            bytes[..4].copy_from_slice(&[0xFF, 0xD8, 0xFF, 0xC0]);
        }
        if let Ok(f) = Frame::jpeg(bytes) {
            let _ = f.to_rgb();
        }
    }

    /// Decoders refuse or decode any shape and values, NaN and infinities included.
    #[test]
    fn decoders_never_panic(
        vals in prop::collection::vec(float(), 0..300),
        d0 in 0usize..12, d1 in 0usize..30, rank in 1usize..5,
        fw in 1u32..2000, fh in 1u32..2000,
    ) {
        let t = Transform::identity(fw, fh);
        let shape: Vec<usize> = [1, d0, d1, 2][..rank].to_vec();
        let _ = decode_yolov8(&vals, &shape, 0.25, &t);
        let _ = decode_dbnet(&vals, d0, d1, &DbNetConfig::default(), &t);
        let cfg = SsdConfig {
            anchors: AnchorConfig { feature_map_sizes: vec![[d0, d0], [1, 1]], ..Default::default() },
            ..Default::default()
        };
        if let Ok(dec) = SsdDecoder::new(cfg) {
            let n = dec.anchors().len();
            let boxes: Vec<f32> = vals.iter().cycle().take(n * 4).copied().collect();
            if let Ok(dets) = dec.decode(&boxes, &vals, &t) {
                for d in dets {
                    prop_assert!(d.bbox.is_finite());
                }
            }
        }
    }

    /// NMS output: sorted, capped, and no two same-class survivors overlap above the threshold.
    #[test]
    fn nms_invariants(
        raw in prop::collection::vec((0.0f32..100.0, 0.0f32..100.0, 1.0f32..40.0, 1.0f32..40.0, 0usize..3, float()), 0..40),
        iou in 0.1f32..0.9, max in 1usize..20,
    ) {
        let dets: Vec<Detection> = raw.iter().map(|&(x, y, w, h, c, s)| Detection {
            bbox: BBox::new(x, y, x + w, y + h), class_id: c, score: s,
        }).collect();
        let cfg = NmsConfig { iou_threshold: iou, score_threshold: 0.0, max_detections: max, class_agnostic: false };
        let out = nms(&dets, &cfg);
        prop_assert!(out.len() <= max);
        for i in 0..out.len() {
            prop_assert!(out[i].score.is_finite() && out[i].score >= 0.0);
            for j in i + 1..out.len() {
                prop_assert!(out[i].score >= out[j].score);
                if out[i].class_id == out[j].class_id {
                    prop_assert!(out[i].bbox.iou(&out[j].bbox) <= iou);
                }
            }
        }
    }

    /// Letterbox: a box inside the frame maps to the input and back to itself.
    #[test]
    fn letterbox_round_trip(
        fw in 1u32..64, fh in 1u32..64, iw in 1u32..64, ih in 1u32..64,
        a in 0.0f32..1.0, b in 0.0f32..1.0, c in 0.0f32..1.0, d in 0.0f32..1.0,
    ) {
        let img = camdnn_vision::RgbImage::filled(fw, fh, [1, 2, 3]).unwrap();
        let (out, t) = Preprocessor::new().letterbox(&img, iw, ih, [0; 3], Placement::Center).unwrap();
        prop_assert_eq!((out.width(), out.height()), (iw, ih));
        let bx = BBox::new(a.min(b) * fw as f32, c.min(d) * fh as f32, a.max(b) * fw as f32, c.max(d) * fh as f32);
        let inp = t.to_input(bx);
        prop_assert!(inp.x0 >= -1e-3 && inp.x1 <= iw as f32 + 1e-3 && inp.y1 <= ih as f32 + 1e-3);
        let back = t.to_frame(inp);
        let tol = 1e-3 * (fw.max(fh) as f32);
        prop_assert!((back.x0 - bx.x0).abs() < tol && (back.x1 - bx.x1).abs() < tol);
        prop_assert!((back.y0 - bx.y0).abs() < tol && (back.y1 - bx.y1).abs() < tol);
    }
}
