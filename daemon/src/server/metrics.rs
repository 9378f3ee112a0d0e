//! The service shell's Prometheus metrics: names, descriptions, recording
//! helpers and the recorder itself (rendered by [`super::http`]).
//!
//! Every frame is counted once in `camdnn_frames_received_total` and, when
//! answered, once in `camdnn_frames_total{outcome}` and, for drops and
//! rejections, once in `camdnn_frames_dropped_total{reason}` or
//! `camdnn_frames_rejected_total{reason}`; so at rest
//! `received == completed + dropped + rejected`.

use std::time::Duration;

use camdnn_protocol::{DropReason, ErrorCode, RejectReason};
use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Frames read from clients (valid or not).
pub const FRAMES_RECEIVED: &str = "camdnn_frames_received_total";
/// Frames answered, by `outcome` (`completed`, `dropped`, `rejected`).
pub const FRAMES: &str = "camdnn_frames_total";
/// Frames answered `Dropped`, by `reason`.
pub const FRAMES_DROPPED: &str = "camdnn_frames_dropped_total";
/// Frames answered `Rejected`, by `reason`.
pub const FRAMES_REJECTED: &str = "camdnn_frames_rejected_total";
/// End-to-end latency of completed frames (read to answer), seconds.
pub const FRAME_LATENCY: &str = "camdnn_frame_latency_seconds";
/// Per-stage time of completed frames, by `stage` (`admission`, `queue`,
/// `detect`, `classify`), seconds.
pub const FRAME_STAGE: &str = "camdnn_frame_stage_seconds";
/// Frames waiting for admission.
pub const PENDING: &str = "camdnn_admission_pending";
/// Frames inside the frame processor.
pub const IN_FLIGHT: &str = "camdnn_frames_in_flight";
/// Open client connections.
pub const CONNECTIONS: &str = "camdnn_connections";
/// Client connections accepted (`result`: `accepted`, `refused`).
pub const CONNECTIONS_TOTAL: &str = "camdnn_connections_total";
/// Connections ended by a protocol `Error`, by `code`.
pub const PROTOCOL_ERRORS: &str = "camdnn_protocol_errors_total";
/// Objects over the per-frame cap (`pipeline.max_objects`): left out before any crop was
/// cut and reported as a count in the frame's `Result` (`objects_dropped`).
pub const OBJECTS_DROPPED: &str = "camdnn_objects_dropped_total";
/// Connections closed because the client took too long, by `stage` (`handshake`,
/// `message`, `idle`, `write`).
pub const CONNECTION_TIMEOUTS: &str = "camdnn_connection_timeouts_total";
/// Config reloads (SIGHUP), by `result` (`ok`, `error`).
pub const CONFIG_RELOADS: &str = "camdnn_config_reloads_total";
/// 1 while the frame processor reports ready (models loaded and warmed up).
pub const READY: &str = "camdnn_ready";
/// Always 1, labelled with `version`.
pub const BUILD_INFO: &str = "camdnn_build_info";

/// Label value for a drop reason.
pub fn drop_label(r: DropReason) -> &'static str {
    match r {
        DropReason::Superseded => "superseded",
        DropReason::DeadlinePassed => "deadline_passed",
        DropReason::Overloaded => "overloaded",
        DropReason::ShuttingDown => "shutting_down",
        DropReason::WindowExceeded => "window_exceeded",
        DropReason::ProcessingFailed => "processing_failed",
    }
}

/// Label value for a reject reason.
pub fn reject_label(r: RejectReason) -> &'static str {
    match r {
        RejectReason::Malformed => "malformed",
        RejectReason::BadDimensions => "bad_dimensions",
        RejectReason::PayloadSizeMismatch => "payload_size_mismatch",
        RejectReason::BadDetection => "bad_detection",
        RejectReason::UnsupportedFormat => "unsupported_format",
        RejectReason::SeqNotIncreasing => "seq_not_increasing",
    }
}

/// Label value for a protocol error code.
pub fn error_label(c: ErrorCode) -> &'static str {
    match c {
        ErrorCode::BadMagic => "bad_magic",
        ErrorCode::UnsupportedVersion => "unsupported_version",
        ErrorCode::UnknownMessageType => "unknown_message_type",
        ErrorCode::MessageTooLarge => "message_too_large",
        ErrorCode::Malformed => "malformed",
        ErrorCode::HandshakeRequired => "handshake_required",
        ErrorCode::UnexpectedMessage => "unexpected_message",
        ErrorCode::Internal => "internal",
        ErrorCode::ShuttingDown => "shutting_down",
        ErrorCode::ConnectionLimit => "connection_limit",
        ErrorCode::Timeout => "timeout",
    }
}

/// Latency buckets, seconds: 0.5 ms to 10 s.
const SECONDS_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.033, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0,
    2.0, 5.0, 10.0,
];
/// Buckets for counts such as batch sizes.
const COUNT_BUCKETS: &[f64] = &[1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 64.0];

/// Installs the Prometheus recorder as the process's global `metrics`
/// recorder (histograms with fixed buckets: `*_seconds` in seconds, `*_size`
/// in counts) and describes the shell's metrics, zeroing every frame counter
/// so dashboards see all reasons from the start.
pub fn install() -> anyhow::Result<PrometheusHandle> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)?
        .set_buckets_for_metric(Matcher::Suffix("_size".into()), COUNT_BUCKETS)?
        .install_recorder()?;
    describe();
    Ok(handle)
}

/// Registers descriptions and zero values of the shell's metrics.
pub fn describe() {
    describe_counter!(FRAMES_RECEIVED, "Frames read from clients (valid or not).");
    describe_counter!(FRAMES, "Frames answered, by outcome.");
    describe_counter!(FRAMES_DROPPED, "Frames answered Dropped, by reason.");
    describe_counter!(FRAMES_REJECTED, "Frames answered Rejected, by reason.");
    describe_histogram!(
        FRAME_LATENCY,
        metrics::Unit::Seconds,
        "End-to-end latency of completed frames."
    );
    describe_histogram!(
        FRAME_STAGE,
        metrics::Unit::Seconds,
        "Time of completed frames per stage (admission wait, pipeline queues, detect, classify)."
    );
    describe_gauge!(PENDING, "Frames waiting for admission.");
    describe_gauge!(IN_FLIGHT, "Frames inside the frame processor.");
    describe_gauge!(CONNECTIONS, "Open client connections.");
    describe_counter!(CONNECTIONS_TOTAL, "Client connections, by result.");
    describe_counter!(
        PROTOCOL_ERRORS,
        "Connections ended by a protocol Error, by code."
    );
    describe_counter!(CONFIG_RELOADS, "Config reloads (SIGHUP), by result.");
    describe_counter!(
        OBJECTS_DROPPED,
        "Objects over the per-frame cap (pipeline.max_objects), not classified; counted in Result.objects_dropped."
    );
    describe_counter!(
        CONNECTION_TIMEOUTS,
        "Connections closed because the client took too long, by stage (handshake, message, idle, write)."
    );
    describe_gauge!(READY, "1 while models are loaded and warmed up.");
    describe_gauge!(BUILD_INFO, "Build information (always 1).");
    counter!(FRAMES_RECEIVED).absolute(0);
    for outcome in ["completed", "dropped", "rejected"] {
        counter!(FRAMES, "outcome" => outcome).absolute(0);
    }
    for r in DropReason::ALL {
        counter!(FRAMES_DROPPED, "reason" => drop_label(r)).absolute(0);
    }
    for r in RejectReason::ALL {
        counter!(FRAMES_REJECTED, "reason" => reject_label(r)).absolute(0);
    }
    for c in ErrorCode::ALL {
        counter!(PROTOCOL_ERRORS, "code" => error_label(c)).absolute(0);
    }
    for result in ["ok", "error"] {
        counter!(CONFIG_RELOADS, "result" => result).absolute(0);
    }
    counter!(OBJECTS_DROPPED).absolute(0);
    for stage in ["handshake", "message", "idle", "write"] {
        counter!(CONNECTION_TIMEOUTS, "stage" => stage).absolute(0);
    }
    gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
}

/// Counts a frame read from a client.
pub fn frame_received() {
    counter!(FRAMES_RECEIVED).increment(1);
}

/// Counts a frame answered `Dropped`.
pub fn frame_dropped(r: DropReason) {
    counter!(FRAMES, "outcome" => "dropped").increment(1);
    counter!(FRAMES_DROPPED, "reason" => drop_label(r)).increment(1);
}

/// Counts a frame answered `Rejected`.
pub fn frame_rejected(r: RejectReason) {
    counter!(FRAMES, "outcome" => "rejected").increment(1);
    counter!(FRAMES_REJECTED, "reason" => reject_label(r)).increment(1);
}

/// Counts a completed frame and records its latencies.
pub fn frame_completed(total: Duration, admission: Duration, timing: &camdnn_protocol::Timing) {
    counter!(FRAMES, "outcome" => "completed").increment(1);
    histogram!(FRAME_LATENCY).record(total.as_secs_f64());
    histogram!(FRAME_STAGE, "stage" => "admission").record(admission.as_secs_f64());
    for (stage, us) in [
        ("queue", timing.queue_us),
        ("detect", timing.detect_us),
        ("classify", timing.classify_us),
    ] {
        histogram!(FRAME_STAGE, "stage" => stage).record(f64::from(us) / 1e6);
    }
}

/// Counts a connection ended by a protocol error.
pub fn protocol_error(c: ErrorCode) {
    counter!(PROTOCOL_ERRORS, "code" => error_label(c)).increment(1);
}
