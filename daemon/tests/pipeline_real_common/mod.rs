//! Shared helpers of the real-model pipeline tests: the shipped configs, the
//! test images of scripts/fetch_test_images.sh, frames and submission.

#![allow(dead_code)] // each test binary uses a subset

use std::path::{Path, PathBuf};

use bytes::Bytes;
use camdnn_daemon::config::DaemonConfig;
use camdnn_daemon::pipeline::{FrameProcessor, Outcome};
use camdnn_engine::{EngineKind, OrtProvider};
use camdnn_protocol::{Frame, PixelFormat, UpstreamDetection};

/// The workspace root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A shipped config, e.g. `camdnnd-ocr.toml`, whose model files must be there.
pub fn config(name: &str) -> DaemonConfig {
    let cfg = DaemonConfig::load(&root().join("config").join(name))
        .unwrap_or_else(|e| panic!("loading config/{name}: {e:#}"));
    for m in &cfg.pipeline.models {
        if let Some(p) = &m.path {
            let p = cfg.resolve(p);
            assert!(
                p.is_file(),
                "model file {} is missing: run scripts/setup.sh",
                p.display()
            );
        }
    }
    cfg
}

/// An RGB image read from a binary PPM (P6, maxval 255).
pub struct Rgb {
    pub width: u32,
    pub height: u32,
    pub data: Vec<u8>,
}

/// Reads `testdata/NAME` (made by scripts/fetch_test_images.sh).
pub fn test_image(name: &str) -> Rgb {
    let path = root().join("testdata").join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "test image {} cannot be read ({e}): run scripts/setup.sh (it calls scripts/fetch_test_images.sh)",
            path.display()
        )
    });
    parse_ppm(&bytes, &path)
}

fn parse_ppm(bytes: &[u8], path: &Path) -> Rgb {
    let image = camdnn_vision::read_ppm(bytes)
        .unwrap_or_else(|e| panic!("{}: {e}; run scripts/fetch_test_images.sh", path.display()));
    Rgb {
        width: image.width(),
        height: image.height(),
        data: image.into_data(),
    }
}

/// An RGB24 frame of `img`, with upstream detections when given.
pub fn frame(seq: u64, img: &Rgb, detections: Option<Vec<UpstreamDetection>>) -> Frame {
    Frame {
        stream_id: 1,
        seq,
        capture_ts_us: 0,
        width: img.width,
        height: img.height,
        pixel_format: PixelFormat::Rgb24,
        priority: None,
        deadline: None,
        detections,
        payload: Bytes::from(img.data.clone()),
    }
}

/// Submits a frame and waits for its outcome.
pub fn run(p: &dyn FrameProcessor, f: Frame) -> Outcome {
    p.submit_now(f)
        .blocking_recv()
        .expect("every frame is answered")
}

/// The shipped config `name` as shipped ("mixed": cpu-tract + cpu-ort) and
/// with every processor switched to one engine ("tract", "ort"), so each test
/// proves every model of the graph runs on both engines (with the shipped
/// profile, the scheduler may well leave one engine idle).
pub fn variants(name: &str) -> Vec<(&'static str, DaemonConfig)> {
    let shipped = config(name);
    let mut out = vec![("mixed", shipped.clone())];
    for (label, engine, provider) in [
        ("tract", EngineKind::Tract, None),
        ("ort", EngineKind::Ort, Some(OrtProvider::Cpu)),
    ] {
        let mut cfg = shipped.clone();
        for p in &mut cfg.pipeline.processors {
            p.engine = engine;
            p.provider = provider;
        }
        out.push((label, cfg));
    }
    out
}

/// A run's shortest limit before it counts as stuck, in these tests. They check what real
/// models answer, on a debug build sharing two cores with the other tests of their binary
/// (and with every variant on one engine, so off its profile), where a run can take many times
/// its profiled time, and the shipped 2 s floor can then answer a slow run `processing_failed`.
/// Stuck runs are what `pipeline_stalls` and `service_stalls` test.
const RUN_TIMEOUT_FLOOR_MS: f64 = 60_000.0;

/// Starts a pipeline, naming the variant on failure.
pub fn start(label: &str, cfg: &DaemonConfig) -> camdnn_daemon::pipeline::Built {
    let mut cfg = cfg.clone();
    cfg.pipeline.stall.run_timeout_floor_ms = RUN_TIMEOUT_FLOOR_MS;
    camdnn_daemon::pipeline::start(&cfg.pipeline)
        .unwrap_or_else(|e| panic!("starting the {label} variant: {e:#}"))
}
