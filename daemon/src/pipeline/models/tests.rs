//! Decoders and input preparation on made-up outputs and entries.

use super::*;
use crate::pipeline::config::PipelineConfig;
use camdnn_engine::Tensor;
use camdnn_protocol::OutputValue;
use camdnn_vision::mtcnn::MapLayout;
use camdnn_vision::{BBox, Preprocessor, RgbImage, Transform};

fn pnet_entry() -> ModelEntry {
    entry(
        r#"[[model]]
name = "pnet"
path = "pnet.onnx"
input = { width = 160, height = 160, pad = [9, 9, 9], pyramid = { min_face = 40 }, norm = { layout = "nwhc" } }
output = { kind = "mtcnn_pnet" }
"#,
    )
}

#[test]
fn the_pyramids_scales_are_packed_on_canvases() {
    let m = pnet_entry();
    let rt = ModelRuntime::new(&m, &|p| p.to_path_buf()).unwrap();
    let img = RgbImage::filled(512, 256, [200, 10, 10]).unwrap();
    // 12 / 40 = 0.3 would make 153.6 px, which fits; 256 * 0.3 * 0.709^k >= 12 for k < 6.
    let scale = |n: usize| (512.0 * 0.3 * 0.709f32.powi(n as i32)).round() / 512.0;
    let check = |items: &[(Tensor, Vec<Transform>)]| {
        let mut regions: Vec<&Transform> = items.iter().flat_map(|(_, r)| r).collect();
        regions.sort_by(|a, b| b.scale_x.total_cmp(&a.scale_x));
        assert_eq!(regions.len(), 6);
        for (n, tr) in regions.iter().enumerate() {
            assert!((tr.scale_x - scale(n)).abs() < 1e-6, "{tr:?}");
            assert_eq!(tr.frame_width, 512.0);
        }
        for (t, regions) in items {
            assert_eq!(t.shape(), &[1, 160, 160, 3], "NWHC canvas");
            let data = t.as_f32().unwrap();
            // Each region's top-left pixel is the image's; the far corner is padding.
            for tr in regions {
                let (x, y) = (tr.pad_x as usize, tr.pad_y as usize);
                assert_eq!(data[(x * 160 + y) * 3], 200.0, "{tr:?}");
            }
            assert_eq!(data[data.len() - 3], 9.0);
        }
    };
    let packed = rt
        .input
        .prepare_frame(&mut Preprocessor::new(), &img)
        .unwrap();
    check(&packed);
    assert_eq!(packed.len(), 2, "6 scales on 2 canvases");
    // Unpacked: one canvas per scale, the scale at its top-left.
    let mut m = pnet_entry();
    m.input.pyramid.as_mut().unwrap().pack = false;
    let rt1 = ModelRuntime::new(&m, &|p| p.to_path_buf()).unwrap();
    let one = rt1
        .input
        .prepare_frame(&mut Preprocessor::new(), &img)
        .unwrap();
    check(&one);
    assert_eq!(one.len(), 6);
    assert!(one
        .iter()
        .all(|(_, r)| r.len() == 1 && (r[0].pad_x, r[0].pad_y) == (0.0, 0.0)));
    assert!(matches!(
        rt.decoder,
        Decoder::Pnet {
            layout: MapLayout::Whc,
            ..
        }
    ));
    let tiny = RgbImage::filled(8, 8, [0; 3]).unwrap();
    assert!(rt
        .input
        .prepare_frame(&mut Preprocessor::new(), &tiny)
        .unwrap()
        .is_empty());
}

fn entry(model: &str) -> ModelEntry {
    let cfg: PipelineConfig = toml::from_str(&format!(
        r#"
profile = "p.toml"
[[processor]]
name = "cpu"
kind = "cpu"
max_resident = 1
engine = "sim"
{model}
"#
    ))
    .unwrap();
    cfg.models[0].clone()
}

#[test]
fn movenet_gives_keypoints_and_its_children_the_face() {
    let m = entry(
        r#"[[model]]
name = "movenet"
path = "m.onnx"
parent = "det"
input = { width = 192, height = 192, crop = "fit", norm = { layout = "nhwc" } }
output = { kind = "movenet", face = { min_side = 16 } }"#,
    );
    let rt = ModelRuntime::new(&m, &|p| p.to_path_buf()).unwrap();
    // A 96x192 person box fit into 192x192: drawn 96 wide at left 48, scale 1.
    let person = BBox::new(100.0, 50.0, 196.0, 242.0);
    let ctx = ItemContext {
        regions: &[Transform::identity(640, 480)],
        bbox: Some(person),
    };
    let mut k = vec![0.0f32; 51];
    // nose, left eye, right eye at the crop's top centre (y, x as input fractions).
    for (i, (y, x)) in [(0.12, 0.5), (0.1, 0.53), (0.1, 0.47)]
        .into_iter()
        .enumerate()
    {
        k[3 * i..3 * i + 3].copy_from_slice(&[y, x, 0.9]);
    }
    let out = vec![Tensor::from_f32(vec![1, 1, 17, 3], k.clone()).unwrap()];
    let Decoded::Output { value, verdict, .. } = rt.decoder.decode(&out, &ctx).unwrap() else {
        panic!("per-object output expected")
    };
    let OutputValue::Tensors(t) = value else {
        panic!("tensors expected")
    };
    assert_eq!(
        (t[0].name.as_str(), t[0].dims.as_slice()),
        ("keypoints", &[17u32, 3][..])
    );
    // The nose: x = 0.5 * 192 - 48 + 100 = 148, y = 0.12 * 192 + 50 = 73.04.
    assert!((t[0].data[0] - 148.0).abs() < 1e-3 && (t[0].data[1] - 73.04).abs() < 1e-3);
    assert_eq!(t[1].name, "face_box");
    let Verdict::Part(Some(face)) = verdict else {
        panic!("the face is the children's crop: {verdict:?}")
    };
    assert_eq!([face.x0, face.y0, face.x1, face.y1], t[1].data[..]);
    assert_eq!(verdict.child_crop(person), Some(face));
    assert!(face.x0 > person.x0 && face.x1 < person.x1, "{face:?}");
    // No eyes seen: no face, the children do not run, the person stays.
    for i in 0..3 {
        k[3 * i + 2] = 0.1;
    }
    let out = vec![Tensor::from_f32(vec![1, 1, 17, 3], k).unwrap()];
    let Decoded::Output { verdict, .. } = rt.decoder.decode(&out, &ctx).unwrap() else {
        panic!()
    };
    assert_eq!(verdict, Verdict::Part(None));
    assert_eq!(verdict.child_crop(person), None);
}

#[test]
fn age_gender_reads_both_heads_by_size() {
    let rt = ModelRuntime::new(
        &entry(
            r#"[[model]]
name = "faceres"
path = "f.onnx"
parent = "pose"
input = { width = 224, height = 224, norm = { layout = "nhwc" } }
output = { kind = "age_gender", age = true }"#,
        ),
        &|p| p.to_path_buf(),
    )
    .unwrap();
    let mut age = vec![0.0; 100];
    age[40] = 0.9;
    let out = vec![
        Tensor::from_f32(vec![1, 100], age).unwrap(),
        Tensor::from_f32(vec![1, 1], vec![0.1]).unwrap(),
    ];
    let ctx = ItemContext {
        regions: &[Transform::identity(100, 100)],
        bbox: Some(BBox::new(0.0, 0.0, 50.0, 50.0)),
    };
    let Decoded::Output {
        value: OutputValue::Tensors(t),
        verdict,
        ..
    } = rt.decoder.decode(&out, &ctx).unwrap()
    else {
        panic!()
    };
    assert_eq!(verdict, Verdict::Keep);
    assert_eq!((t[0].name.as_str(), t[0].data[0]), ("age", 40.0));
    assert_eq!((t[1].name.as_str(), t[1].data[0]), ("male", 0.1));
    // Without `age` (the default) only the gender is reported.
    let Decoded::Output {
        value: OutputValue::Tensors(t),
        ..
    } = Decoder::AgeGender { age: false }
        .decode(&out, &ctx)
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        t.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["male"]
    );
    let e = rt.decoder.decode(&out[1..], &ctx).unwrap_err();
    assert!(format!("{e:#}").contains("age head"), "{e:#}");
}

#[test]
fn rnet_outputs_are_found_by_shape_and_reject_or_refine() {
    let rnet = Decoder::Rnet { threshold: 0.7 };
    let ctx = ItemContext {
        regions: &[Transform::identity(100, 100)],
        bbox: Some(BBox::new(10.0, 10.0, 49.0, 49.0)),
    };
    let out = |p: f32| {
        vec![
            Tensor::from_f32(vec![1, 4], vec![0.0; 4]).unwrap(),
            Tensor::from_f32(vec![1, 2], vec![1.0 - p, p]).unwrap(),
        ]
    };
    let Decoded::Output { verdict, .. } = rnet.decode(&out(0.9), &ctx).unwrap() else {
        panic!()
    };
    assert!(matches!(verdict, Verdict::Refine { score, .. } if score == 0.9));
    let Decoded::Output { verdict, .. } = rnet.decode(&out(0.2), &ctx).unwrap() else {
        panic!()
    };
    assert_eq!(verdict, Verdict::Reject);
    let e = rnet.decode(&out(0.9)[..1], &ctx).unwrap_err();
    assert!(
        format!("{e:#}").contains("no output with last dim 2"),
        "{e:#}"
    );
    let no_box = ItemContext { bbox: None, ..ctx };
    assert!(rnet.decode(&out(0.9), &no_box).is_err());
    assert!(Decoder::Upstream { labels: vec![] }
        .decode(&out(0.9), &ctx)
        .is_err());
}
