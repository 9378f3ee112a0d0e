//! Every metric family the daemon records: its name, kind, HELP text and
//! start-up series, in one table ([`FAMILIES`]), and the label values of
//! the protocol's reasons and codes.

use camdnn_protocol::{DropReason, ErrorCode, RejectReason};

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
/// Open client connections (a gauge; not `camdnn_connections`, which
/// OpenMetrics would read as the family of `camdnn_connections_total`).
pub const CONNECTIONS: &str = "camdnn_connections_open";
/// Client connections by `result`: `accepted`, `refused`, and `evicted`
/// (closed to give their slot to a new connection, `server::door`).
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
/// Always 1, labelled with `version` and `config` (the config file's stem).
pub const BUILD_INFO: &str = "camdnn_build_info";
/// 1 while the pipeline is alive: its scheduler thread runs its loop and it
/// is not stalled (frames inside with no progress for the progress timeout).
pub const SCHEDULER_ALIVE: &str = "camdnn_scheduler_alive";
/// Model loads that failed, by `model` and `processor` (recorded by the pipeline).
pub const MODEL_LOAD_FAILURES: &str = "camdnn_model_load_failures_total";
/// 1 while a (`model`, `processor`) pair is out of service awaiting a load
/// retry (recorded by the pipeline).
pub const MODEL_UNAVAILABLE: &str = "camdnn_model_unavailable";
/// Engine panics, each restarting that processor's worker, by `processor`
/// (recorded by the pipeline).
pub const ENGINE_PANICS: &str = "camdnn_engine_panics_total";
/// Engine calls (runs and loads) that outlived their limits, by `processor`
/// (recorded by the pipeline; each replaced a worker thread or retired the worker).
pub const ENGINE_TIMEOUTS: &str = "camdnn_engine_timeouts_total";
/// Worker threads abandoned in an engine call past its limit and not
/// returned yet, by `processor` (recorded by the pipeline).
pub const WORKER_THREADS_STUCK: &str = "camdnn_worker_threads_stuck";
/// Queued work of a processor (the scheduler's rem_j), by `processor`, seconds.
pub const PROCESSOR_REMAINING: &str = "camdnn_processor_remaining_seconds";
/// Per-object requests of tracked streams that ran their model, by `model` and the `reason`
/// reuse did not stand (`camdnn_policy::reuse::Why`; recorded by the pipeline).
pub const REQUESTS_INFERRED: &str = "camdnn_requests_inferred_total";
/// Per-object requests of tracked streams answered with their track's stored result, by
/// `model` (recorded by the pipeline).
pub const REQUESTS_REUSED: &str = "camdnn_requests_reused_total";
/// Live tracks over every tracked stream (recorded by the pipeline).
pub const TRACKS_LIVE: &str = "camdnn_tracks_live";
/// Streams with a tracker (recorded by the pipeline; freed when their connection ends).
pub const TRACK_STREAMS: &str = "camdnn_track_streams";

/// The kind of a family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (name ends in `_total`).
    Counter,
    /// Goes up and down.
    Gauge,
    /// Fixed buckets (aggregatable across boards, unlike a summary).
    Histogram,
}

/// The series a family has from start-up, each at zero.
#[derive(Clone, Copy, Debug)]
pub enum Series {
    /// One series without labels.
    Single,
    /// One series per value of a label.
    Each(&'static str, fn() -> Vec<&'static str>),
    /// One series per processor of the pipeline (`processor`).
    PerProcessor,
    /// One series per model of the pipeline (`model`).
    PerModel,
    /// One series per (model, processor) pair of the pipeline.
    PerModelProcessor,
    /// One series per model of the pipeline and value of a label.
    PerModelEach(&'static str, fn() -> Vec<&'static str>),
    /// Set elsewhere with its own labels at start-up (`camdnn_build_info`,
    /// `process_*`).
    Own,
}

/// One metric family: what `# HELP` and `# TYPE` say and its start-up series.
#[derive(Clone, Copy, Debug)]
pub struct Family {
    /// Name as exported (counters end in `_total`, units are base units).
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: Kind,
    /// The HELP text.
    pub help: &'static str,
    /// Series present from start-up.
    pub series: Series,
}

const fn family(name: &'static str, kind: Kind, help: &'static str, series: Series) -> Family {
    Family {
        name,
        kind,
        help,
        series,
    }
}

fn outcomes() -> Vec<&'static str> {
    vec!["completed", "dropped", "rejected"]
}
fn drop_labels() -> Vec<&'static str> {
    DropReason::ALL.into_iter().map(drop_label).collect()
}
fn reject_labels() -> Vec<&'static str> {
    RejectReason::ALL.into_iter().map(reject_label).collect()
}
fn error_labels() -> Vec<&'static str> {
    ErrorCode::ALL.into_iter().map(error_label).collect()
}
fn stages() -> Vec<&'static str> {
    vec!["admission", "queue", "detect", "classify"]
}
fn ok_error() -> Vec<&'static str> {
    vec!["ok", "error"]
}
fn connection_results() -> Vec<&'static str> {
    vec!["accepted", "refused", "evicted"]
}
fn flush_reasons() -> Vec<&'static str> {
    vec!["full", "complete", "timer"]
}
fn timeout_stages() -> Vec<&'static str> {
    vec!["handshake", "message", "idle", "write"]
}
fn pipeline_stages() -> Vec<&'static str> {
    vec!["total", "classify"]
}

use Kind::{Counter, Gauge, Histogram};
fn reuse_reasons() -> Vec<&'static str> {
    camdnn_policy::reuse::Why::ALL.map(|w| w.name()).to_vec()
}

use Series::{Each, Own, PerModel, PerModelEach, PerModelProcessor, PerProcessor, Single};

/// Every `camdnn_*` family the daemon exports (the `process_*` families come
/// from the `metrics-process` collector, which describes its own).
pub const FAMILIES: &[Family] = &[
    // The service shell.
    family(
        FRAMES_RECEIVED,
        Counter,
        "Frames read from clients (valid or not).",
        Single,
    ),
    family(
        FRAMES,
        Counter,
        "Frames answered, by outcome.",
        Each("outcome", outcomes),
    ),
    family(
        FRAMES_DROPPED,
        Counter,
        "Frames answered Dropped, by reason.",
        Each("reason", drop_labels),
    ),
    family(
        FRAMES_REJECTED,
        Counter,
        "Frames answered Rejected, by reason.",
        Each("reason", reject_labels),
    ),
    family(
        FRAME_LATENCY,
        Histogram,
        "End-to-end latency of completed frames (read to answer), seconds.",
        Single,
    ),
    family(
        FRAME_STAGE,
        Histogram,
        "Time of completed frames per stage (admission wait, pipeline queues, detect, \
         classify), seconds.",
        Each("stage", stages),
    ),
    family(PENDING, Gauge, "Frames waiting for admission.", Single),
    family(
        IN_FLIGHT,
        Gauge,
        "Frames inside the frame processor.",
        Single,
    ),
    family(CONNECTIONS, Gauge, "Open client connections.", Single),
    family(
        CONNECTIONS_TOTAL,
        Counter,
        "Client connections, by result (accepted, refused, evicted: closed to give its slot to \
         a new connection).",
        Each("result", connection_results),
    ),
    family(
        PROTOCOL_ERRORS,
        Counter,
        "Connections ended by a protocol Error, by code.",
        Each("code", error_labels),
    ),
    family(
        CONFIG_RELOADS,
        Counter,
        "Config reloads (SIGHUP), by result.",
        Each("result", ok_error),
    ),
    family(
        READY,
        Gauge,
        "1 while ready: pipeline alive, workers running with no thread stuck, every needed \
         model in service, models warmed up and the daemon not draining; else 0.",
        Own,
    ),
    family(
        BUILD_INFO,
        Gauge,
        "Build and config of this daemon (always 1; labels version and config).",
        Own,
    ),
    family(
        OBJECTS_DROPPED,
        Counter,
        "Objects over the per-frame cap (pipeline.max_objects), not classified; counted in \
         Result.objects_dropped.",
        Single,
    ),
    family(
        CONNECTION_TIMEOUTS,
        Counter,
        "Connections closed because the client took too long, by stage (handshake, message, \
         idle, write).",
        Each("stage", timeout_stages),
    ),
    family(
        SCHEDULER_ALIVE,
        Gauge,
        "1 while the pipeline is alive: its scheduler thread runs and frames inside make progress \
         (the systemd watchdog is fed only then).",
        Single,
    ),
    family(
        MODEL_LOAD_FAILURES,
        Counter,
        "Model loads that failed, by model and processor (each is retried with backoff).",
        PerModelProcessor,
    ),
    family(
        MODEL_UNAVAILABLE,
        Gauge,
        "1 while a model is out of service on a processor, awaiting a load retry.",
        PerModelProcessor,
    ),
    family(
        ENGINE_PANICS,
        Counter,
        "Engine panics by processor; each restarts that worker, which reloads its models.",
        PerProcessor,
    ),
    family(
        ENGINE_TIMEOUTS,
        Counter,
        "Engine runs and loads that outlived their limits (pipeline.stall), by processor; each \
         abandoned its worker thread for a fresh one, or retired the worker.",
        PerProcessor,
    ),
    family(
        WORKER_THREADS_STUCK,
        Gauge,
        "Worker threads abandoned in an engine call past its limit and not returned yet, by \
         processor (readiness is false while any is).",
        PerProcessor,
    ),
    // The pipeline.
    family(
        "camdnn_pipeline_frames_total",
        Counter,
        "Frames submitted to the pipeline.",
        Single,
    ),
    family(
        "camdnn_pipeline_seconds",
        Histogram,
        "Time of frames inside the pipeline, total and classify stage, seconds.",
        Each("stage", pipeline_stages),
    ),
    family(
        "camdnn_frame_prep_seconds",
        Histogram,
        "Time to decode and prepare a frame for its root model, seconds.",
        Single,
    ),
    family(
        "camdnn_crop_seconds",
        Histogram,
        "Time to cut and prepare one object crop, seconds.",
        Single,
    ),
    family(
        "camdnn_crop_failures_total",
        Counter,
        "Object crops that failed (the object is left unclassified).",
        Single,
    ),
    family(
        "camdnn_objects_rejected_total",
        Counter,
        "Objects a model rejected (no children run for them), by model.",
        PerModel,
    ),
    family(
        "camdnn_batch_flushes_total",
        Counter,
        "Batches released by the sync-timer batcher, by reason (full, complete, timer).",
        Each("reason", flush_reasons),
    ),
    family(
        "camdnn_batch_size",
        Histogram,
        "Requests per batch sent to a processor, by model and processor.",
        PerModelProcessor,
    ),
    family(
        "camdnn_dispatch_decision_seconds",
        Histogram,
        "Time of one local dispatch decision, seconds.",
        Single,
    ),
    family(
        "camdnn_batch_queue_seconds",
        Histogram,
        "Time a batch waited in its processor's queue before running, seconds.",
        Single,
    ),
    family(
        "camdnn_batch_overhead_seconds",
        Histogram,
        "Time a batch cost beyond its run (hand-over to and from the processor's thread), seconds.",
        Single,
    ),
    family(
        "camdnn_batch_exec_vs_profile_ratio",
        Histogram,
        "Measured batch run time over the profile's time for it, by model and processor.",
        PerModelProcessor,
    ),
    family(
        "camdnn_processor_busy_seconds",
        Histogram,
        "Run time of each batch on a processor, seconds (rate of the sum: busy share).",
        PerProcessor,
    ),
    family(
        PROCESSOR_REMAINING,
        Gauge,
        "Work queued on a processor as the scheduler sees it (rem_j), seconds.",
        PerProcessor,
    ),
    family(
        "camdnn_model_loads_total",
        Counter,
        "Models loaded onto a processor, by model and processor.",
        PerModelProcessor,
    ),
    family(
        "camdnn_model_load_seconds",
        Histogram,
        "Time to load a model onto a processor, seconds.",
        PerModelProcessor,
    ),
    family(
        "camdnn_resident_models",
        Gauge,
        "Models resident on a processor.",
        PerProcessor,
    ),
    family(
        "camdnn_estimate_exec_seconds",
        Gauge,
        "Live estimate of one request's run time alone (batch of 1), by model and processor (pipeline.adapt).",
        PerModelProcessor,
    ),
    family(
        REQUESTS_INFERRED,
        Counter,
        "Per-object requests of tracked streams that ran their model, by model and the reason a stored result did not stand (pipeline.track, reuse).",
        PerModelEach("reason", reuse_reasons),
    ),
    family(
        REQUESTS_REUSED,
        Counter,
        "Per-object requests of tracked streams answered with their track's stored result, by model (pipeline.track, reuse).",
        PerModel,
    ),
    family(
        TRACKS_LIVE,
        Gauge,
        "Live tracks over every tracked stream (pipeline.track).",
        Single,
    ),
    family(
        TRACK_STREAMS,
        Gauge,
        "Camera streams with a tracker; freed when their connection ends (pipeline.track).",
        Single,
    ),
    family(
        "camdnn_adapt_triggers_total",
        Counter,
        "Global steps run early because a processor's speed or the scene mix changed (pipeline.adapt).",
        Single,
    ),
    family(
        "camdnn_drop_steps_total",
        Counter,
        "Global steps run early because frames were dropped for their deadline or at admission, or one was answered late after on-time ones (pipeline.drop_step_gap_ms).",
        Single,
    ),
    family(
        "camdnn_behind_drops_total",
        Counter,
        "Frames answered overloaded by real-time dropping (pipeline.drop_behind_ms, or drop_behind_periods of the frame's stream period): at submission when no processor could start the detector within it, or after the detector when a frame with objects found the pipeline further behind than its age leaves of it.",
        Single,
    ),
    family(
        "camdnn_deadline_admission_drops_total",
        Counter,
        "Frames answered deadline_passed before running because they could not make their deadline (pipeline.deadline_admission).",
        Single,
    ),
    family(
        "camdnn_global_step_seconds",
        Histogram,
        "Time of one global step (re-planning residency and batching) from its start on the scheduler thread to its choice applied, computed on the step thread meanwhile, seconds.",
        Single,
    ),
    family(
        "camdnn_global_step_failures_total",
        Counter,
        "Global steps that panicked on the step thread (the scheduler then takes no more global steps; its dispatcher goes on).",
        Single,
    ),
    family(
        "camdnn_global_step_reallocations_total",
        Counter,
        "Model loads the global step decided.",
        Single,
    ),
];

/// The family named `name`, if the table has it.
pub fn family_of(name: &str) -> Option<&'static Family> {
    FAMILIES.iter().find(|f| f.name == name)
}

/// Label names the daemon itself puts on its series; constant labels from
/// `[metrics] labels` may not reuse them.
pub const OWN_LABELS: &[&str] = &[
    "outcome",
    "reason",
    "code",
    "result",
    "stage",
    "model",
    "processor",
    "version",
    "config",
    "le",
    "quantile",
];

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
        RejectReason::TooLarge => "too_large",
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
