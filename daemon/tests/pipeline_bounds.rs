//! Bounded work per frame on the real pipeline (sim engines, the shipped simulated-RB5 config):
//! the per-frame object cap (`pipeline.max_objects`) applies before any crop is cut and the
//! excess is counted in the Result; a box's class id is the detector's label index and is
//! routed by that label; a JPEG too small for its declared size is rejected before decoding.
//!
//! A counting global allocator measures the heap while one frame is processed: the figure
//! `docs/operations.md` ("Limits") states is checked here, not timed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use camdnn_daemon::config::DaemonConfig;
use camdnn_daemon::pipeline::{self, FrameProcessor, Outcome};
use camdnn_protocol::{BBox, ClassRef, Frame, PixelFormat, RejectReason, UpstreamDetection};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The heap is process-wide: the tests of this file run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn config() -> DaemonConfig {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/camdnnd-sim.toml");
    DaemonConfig::load(&path).unwrap()
}

fn rgb_frame(seq: u64, detections: Vec<UpstreamDetection>) -> Frame {
    let (w, h) = (64u32, 48u32);
    Frame {
        stream_id: 3,
        seq,
        capture_ts_us: 0,
        width: w,
        height: h,
        pixel_format: PixelFormat::Rgb24,
        priority: None,
        deadline: None,
        detections: Some(detections),
        payload: Bytes::from(vec![90u8; (w * h * 3) as usize]),
    }
}

fn det(class: ClassRef, score: f32) -> UpstreamDetection {
    UpstreamDetection {
        bbox: BBox {
            x0: 2.0,
            y0: 2.0,
            x1: 40.0,
            y1: 40.0,
        },
        class,
        score,
    }
}

fn run(p: &dyn FrameProcessor, f: Frame) -> Outcome {
    p.submit_now(f)
        .blocking_recv()
        .expect("every frame is answered")
}

/// One classifier input of this config (224 x 224 x 3 f32). The bound `docs/operations.md`
/// states: every kept object's crop, and at worst a second copy of it in the batch it rides in,
/// plus 8 MiB for the frame's own bookkeeping: `2 x max_objects x CROP_BYTES + 8 MiB`.
const CROP_BYTES: usize = 224 * 224 * 3 * 4;

#[test]
fn a_frame_of_65535_boxes_is_capped_before_cropping_and_the_rest_counted() {
    let _one_at_a_time = serial();
    let cfg = config();
    let cap = cfg.pipeline.max_objects;
    assert_eq!(cap, 64, "the documented default");
    let built = pipeline::start(&cfg.pipeline).unwrap();
    // Warm the pipeline once so lazily grown buffers do not count against the frame.
    assert!(matches!(
        run(
            &built.pipeline,
            rgb_frame(0, vec![det(ClassRef::Name("person".into()), 0.5)])
        ),
        Outcome::Done(_)
    ));
    let n = usize::from(u16::MAX);
    let boxes: Vec<UpstreamDetection> = (0..n)
        .map(|i| det(ClassRef::Name("person".into()), (i % 1000) as f32 / 1000.0))
        .collect();
    let frame = rgb_frame(1, boxes);
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = run(&built.pipeline, frame);
    let peak = PEAK.load(Ordering::Relaxed) - base;
    println!("peak heap growth for one frame of {n} boxes: {peak} bytes");
    let Outcome::Done(r) = out else {
        panic!("a frame of {n} boxes was not processed: {out:?}")
    };
    assert_eq!(r.objects.len(), cap);
    assert_eq!(r.objects_dropped as usize, n - cap);
    assert!(r.objects.iter().all(|o| o.outputs.len() == 1));
    // The highest scores were kept.
    assert!(
        r.objects.iter().all(|o| o.score >= 0.99),
        "{:?}",
        r.objects[0].score
    );
    let bound = 2 * cap * CROP_BYTES + (8 << 20);
    assert!(
        peak < bound,
        "one frame of {n} boxes took {peak} bytes of heap at peak; the stated bound is {bound}"
    );
    assert_eq!(built.pipeline.in_flight(), 0);
}

#[test]
fn class_ids_are_the_detectors_label_indices_and_are_routed_by_label() {
    let _one_at_a_time = serial();
    let built = pipeline::start(&config().pipeline).unwrap();
    // camdnnd-sim.toml's detector labels: person, bicycle, car.
    let dets = vec![
        det(ClassRef::Id(0), 0.9),
        det(ClassRef::Id(2), 0.8),
        det(ClassRef::Id(9), 0.7),
    ];
    let Outcome::Done(r) = run(&built.pipeline, rgb_frame(1, dets)) else {
        panic!("not processed")
    };
    let got: Vec<(ClassRef, Vec<&str>)> = r
        .objects
        .iter()
        .map(|o| {
            (
                o.class.clone(),
                o.outputs.iter().map(|x| x.model.as_str()).collect(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (ClassRef::Name("person".into()), vec!["inception_v1"]),
            (ClassRef::Name("car".into()), vec!["squeezenet"]),
            // No label 9: reported as sent, not classified.
            (ClassRef::Id(9), vec![]),
        ]
    );
    assert_eq!(r.objects_dropped, 0);
}

#[test]
fn a_tiny_jpeg_declaring_8192_squared_is_rejected_before_decoding() {
    let _one_at_a_time = serial();
    use jpeg_encoder::{ColorType, Encoder};
    let mut data = Vec::new();
    Encoder::new(&mut data, 50)
        .encode(&[128u8; 64], 8, 8, ColorType::Luma)
        .unwrap();
    let sof = data.windows(2).position(|m| m == [0xFF, 0xC0]).unwrap();
    data[sof + 5..sof + 9].copy_from_slice(&[0x20, 0x00, 0x20, 0x00]);
    let len = data.len();
    let built = pipeline::start(&config().pipeline).unwrap();
    let mut f = rgb_frame(1, vec![det(ClassRef::Id(0), 0.9)]);
    f.width = 8192;
    f.height = 8192;
    f.pixel_format = PixelFormat::Jpeg;
    f.payload = Bytes::from(data);
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = run(&built.pipeline, f);
    let peak = PEAK.load(Ordering::Relaxed) - base;
    match out {
        Outcome::Rejected(RejectReason::Malformed, m) => {
            assert!(
                m.contains("8192x8192") && m.contains(&format!("{len} bytes")),
                "{m}"
            )
        }
        other => panic!("a {len}-byte JPEG declaring 8192x8192 was not rejected: {other:?}"),
    }
    assert!(peak < 4 << 20, "rejecting it took {peak} bytes at peak");
}
