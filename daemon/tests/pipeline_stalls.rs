//! Engine calls that do not come back, through the pipeline's public API on
//! the shipped simulated-RB5 config (the sim engine's test-only faults make a
//! run hang): the frame waiting on a stuck run is answered at the run's
//! limit, readiness names the stuck processor while its thread is stuck, a
//! processor with too many stuck threads retires while the others serve, and
//! a pipeline where nothing moves stops being alive. Nothing here compares
//! measured durations: each case waits for an outcome, and the outcome
//! itself shows the limit fired (a hung run without one ends in a result).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use camdnn_daemon::config::DaemonConfig;
use camdnn_daemon::pipeline::{self, FrameProcessor, Outcome};
use camdnn_engine::SimFaults;
use camdnn_protocol::{BBox, ClassRef, DropReason, Frame, PixelFormat, UpstreamDetection};

/// The sim config with short run limits: a sim run takes at most 151 ms,
/// so a 1 s floor is every run's limit.
fn config() -> DaemonConfig {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/camdnnd-sim.toml");
    let mut cfg = DaemonConfig::load(&path).unwrap();
    cfg.pipeline.stall.run_timeout_floor_ms = 1_000.0;
    cfg.pipeline.stall.timeout_factor = 1.0;
    // No global step moves models while a case runs.
    cfg.pipeline.epoch_ms = 0.0;
    cfg.pipeline.drop_step_gap_ms = 0.0;
    cfg
}

/// `model`'s runs listed in `runs` hang for `stall_ms` on every processor
/// (run 1 of each processor where it is resident at start is the warm-up).
fn stall(cfg: &mut DaemonConfig, model: &str, runs: Vec<u64>, stall_ms: u64) {
    let m = cfg
        .pipeline
        .models
        .iter_mut()
        .find(|m| m.name == model)
        .expect("model");
    m.sim_faults = Some(SimFaults {
        stall_on_runs: runs,
        stall_ms,
        ..SimFaults::default()
    });
}

/// A 64x48 frame carrying one upstream detection of `class`.
fn frame(seq: u64, class: &str) -> Frame {
    let (w, h) = (64u32, 48u32);
    Frame {
        stream_id: 1,
        seq,
        capture_ts_us: 0,
        width: w,
        height: h,
        pixel_format: PixelFormat::Rgb24,
        priority: None,
        deadline: None,
        detections: Some(vec![UpstreamDetection {
            bbox: BBox {
                x0: 2.0,
                y0: 2.0,
                x1: 40.0,
                y1: 40.0,
            },
            class: ClassRef::Name(class.into()),
            score: 0.9,
        }]),
        payload: Bytes::from(vec![90u8; (w * h * 3) as usize]),
    }
}

/// Waits up to 30 s for `done`, failing with `what`.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < Duration::from_secs(30), "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A frame whose classifier hangs for 6 s is answered `processing_failed`
/// at its run's 1 s limit (without one it would get its result after 6 s);
/// while the stuck thread is inside the engine, readiness says which
/// processor and model; the processor serves on with a fresh thread, and
/// once the stuck thread is back and the model reloaded, the pipeline is
/// ready again and classifies persons.
#[test]
fn a_run_stuck_past_its_limit_is_answered_and_the_processor_serves_on() {
    let mut cfg = config();
    stall(&mut cfg, "inception_v1", vec![2], 6_000);
    let built = pipeline::start(&cfg.pipeline).unwrap();
    let p = &built.pipeline;
    assert!(p.is_ready());
    let first = p.submit_now(frame(0, "person")).blocking_recv().unwrap();
    assert_eq!(first, Outcome::Dropped(DropReason::ProcessingFailed));
    let reason = p
        .not_ready_reason()
        .expect("not ready while a thread is stuck");
    assert!(
        reason.contains("stuck in the engine") && reason.contains("model inception_v1"),
        "{reason}"
    );
    assert!(p.is_alive(), "the pipeline still works: {reason}");
    // A car frame does not need the stuck model: it is served meanwhile.
    let car = p.submit_now(frame(1, "car")).blocking_recv().unwrap();
    assert!(matches!(car, Outcome::Done(_)), "{car:?}");
    wait_for("ready again once the stuck thread is back", || p.is_ready());
    // Each processor's second run of the model hangs once: a few person
    // frames may meet another one; then persons are classified again.
    let mut outcomes = Vec::new();
    for seq in 2..10 {
        let o = p.submit_now(frame(seq, "person")).blocking_recv().unwrap();
        let done =
            matches!(&o, Outcome::Done(r) if r.objects[0].outputs[0].model == "inception_v1");
        outcomes.push(o);
        if done {
            break;
        }
    }
    assert!(
        matches!(outcomes.last(), Some(Outcome::Done(_))),
        "{outcomes:?}"
    );
    built.pipeline.shutdown();
}

/// Frames whose runs hang stop counting against the admission limit once
/// their batches are late by their own run time, so the frames that do not
/// need the stuck model get in (up to as many again as the limit); the
/// hung frames are answered at their runs' limit and the room shrinks back.
#[test]
fn frames_stuck_on_a_hung_run_make_room_for_the_others() {
    let mut cfg = config();
    cfg.pipeline.stall.run_timeout_floor_ms = 5_000.0;
    stall(&mut cfg, "inception_v1", vec![2, 3], 6_000);
    let built = pipeline::start(&cfg.pipeline).unwrap();
    let p = &built.pipeline;
    let limit = p.max_in_flight();
    let hung: Vec<_> = (0..limit as u64)
        .map(|seq| p.submit_now(frame(seq, "person")))
        .collect();
    wait_for("room for as many more frames as are stuck", || {
        p.max_in_flight() == 2 * limit
    });
    let car = p.submit_now(frame(9, "car")).blocking_recv().unwrap();
    assert!(matches!(car, Outcome::Done(_)), "{car:?}");
    for h in hung {
        let o = h.blocking_recv().unwrap();
        assert_eq!(o, Outcome::Dropped(DropReason::ProcessingFailed));
    }
    wait_for("the room shrinks back", || p.max_in_flight() == limit);
    built.pipeline.shutdown();
}

/// With no stuck thread allowed, the first stuck run retires its
/// processor: readiness says so, and frames are still answered by the
/// other processors.
#[test]
fn a_processor_with_too_many_stuck_threads_retires_and_the_others_serve() {
    let mut cfg = config();
    cfg.pipeline.stall.max_abandoned_threads = 0;
    stall(&mut cfg, "squeezenet", vec![2], 6_000);
    let built = pipeline::start(&cfg.pipeline).unwrap();
    let p = &built.pipeline;
    let first = p.submit_now(frame(0, "car")).blocking_recv().unwrap();
    assert_eq!(first, Outcome::Dropped(DropReason::ProcessingFailed));
    wait_for("the retired worker is seen", || {
        p.not_ready_reason()
            .is_some_and(|r| r.contains("the worker retired") && r.contains("worker thread ended"))
    });
    let person = p.submit_now(frame(1, "person")).blocking_recv().unwrap();
    assert!(matches!(person, Outcome::Done(_)), "{person:?}");
    built.pipeline.shutdown();
}

/// When nothing moves while frames are inside for the progress timeout,
/// the pipeline is not alive (the systemd watchdog stops being fed), and
/// alive again once it moves. Here a run hangs within a long limit.
#[test]
fn a_pipeline_where_nothing_moves_is_not_alive() {
    let mut cfg = config();
    cfg.pipeline.stall.run_timeout_floor_ms = 60_000.0;
    cfg.pipeline.stall.progress_timeout_ms = 300.0;
    stall(&mut cfg, "inception_v1", vec![2], 3_000);
    let built = pipeline::start(&cfg.pipeline).unwrap();
    let p = &built.pipeline;
    let rx = p.submit_now(frame(0, "person"));
    wait_for("stalled", || !p.is_alive());
    let reason = p.not_ready_reason().expect("not ready");
    assert!(reason.starts_with("stalled: 1 frame(s) inside"), "{reason}");
    let done = rx.blocking_recv().unwrap();
    assert!(
        matches!(done, Outcome::Done(_)),
        "within its limit: {done:?}"
    );
    wait_for("alive again", || p.is_alive());
    built.pipeline.shutdown();
}
