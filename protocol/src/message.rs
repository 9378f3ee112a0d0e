//! The messages of the protocol (versions 1 to 3), as plain Rust values.
//!
//! These types say nothing about bytes; `encode` and `decode` turn them into and out of the wire
//! format described in `docs/protocol.md`.

use bytes::Bytes;

/// A message a client sends to the server.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientMessage {
    /// Opens the connection; must be the first message.
    Hello(Hello),
    /// One image to process.
    Frame(Frame),
    /// The client will send nothing more; the server answers every frame in flight, then closes.
    Bye,
}

/// A message the server sends to a client.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerMessage {
    /// The handshake succeeded.
    Welcome(Welcome),
    /// A processed frame.
    Result(FrameResult),
    /// A frame the server accepted but did not process.
    Dropped(Dropped),
    /// A frame the server found invalid.
    Rejected(Rejected),
    /// A protocol-level error.
    Error(ServerError),
}

/// `Hello`: the first client message, offering versions and naming the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// Protocol versions the client speaks (1 to 255 entries, any order).
    pub versions: Vec<u16>,
    /// Free-form client name for logs and metrics (UTF-8, at most 65535 bytes).
    pub client_name: String,
}

/// `Welcome`: the server's answer to a good `Hello`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Welcome {
    /// The version used for the rest of the connection (one of those offered).
    pub version: u16,
    /// Largest body, in bytes, the server accepts in one message (the header is not counted).
    pub max_message_size: u32,
    /// Most frames per stream that may be in flight (sent and not yet answered); at least 1.
    pub window: u16,
    /// Free-form server name.
    pub server_name: String,
}

/// Layout of a frame's pixel payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PixelFormat {
    /// Packed 8-bit R, G, B: `width * height * 3` bytes.
    Rgb24,
    /// Packed 8-bit B, G, R: `width * height * 3` bytes.
    Bgr24,
    /// Y plane then interleaved UV plane at half resolution: `width * height * 3 / 2` bytes;
    /// width and height must be even.
    Nv12,
    /// A JPEG file; any non-empty length (width and height state the decoded size).
    Jpeg,
}

impl PixelFormat {
    /// The byte on the wire.
    pub const fn code(self) -> u8 {
        match self {
            Self::Rgb24 => 1,
            Self::Bgr24 => 2,
            Self::Nv12 => 3,
            Self::Jpeg => 4,
        }
    }

    /// The format for a wire byte, `None` if unknown.
    pub const fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => Self::Rgb24,
            2 => Self::Bgr24,
            3 => Self::Nv12,
            4 => Self::Jpeg,
            _ => return None,
        })
    }

    /// Exact payload length for raw formats, `None` for JPEG (or on arithmetic overflow).
    pub fn raw_len(self, width: u32, height: u32) -> Option<u64> {
        let pixels = u64::from(width) * u64::from(height);
        match self {
            Self::Rgb24 | Self::Bgr24 => pixels.checked_mul(3),
            Self::Nv12 => pixels.checked_mul(3).map(|b| b / 2),
            Self::Jpeg => None,
        }
    }
}

/// When a frame stops being worth processing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// Microseconds after the server has read the whole `Frame` message.
    RelativeUs(u64),
    /// Microseconds since the Unix epoch (CLOCK_REALTIME, the clock of `capture_ts_us`).
    AbsoluteUs(u64),
}

/// A class, by numeric id (the detector's label index) or by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClassRef {
    /// The detector's label index.
    Id(u32),
    /// A label name such as `"person"`.
    Name(String),
}

/// An axis-aligned box in pixel coordinates of the frame (x right, y down, `x0 <= x1`, `y0 <= y1`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BBox {
    /// Left edge.
    pub x0: f32,
    /// Top edge.
    pub y0: f32,
    /// Right edge.
    pub x1: f32,
    /// Bottom edge.
    pub y1: f32,
}

/// A detection made before the frame reached camdnnd (for example by the camera's own detector).
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamDetection {
    /// Where the object is.
    pub bbox: BBox,
    /// What it is.
    pub class: ClassRef,
    /// Confidence in `[0, 1]`.
    pub score: f32,
}

/// `Frame`: one image from one camera stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// Which camera stream (chosen by the client; independent sequence and window per stream).
    pub stream_id: u32,
    /// Frame number within the stream; the answer carries it back.
    pub seq: u64,
    /// Capture time, microseconds since the Unix epoch (CLOCK_REALTIME).
    pub capture_ts_us: u64,
    /// Image width in pixels (at least 1).
    pub width: u32,
    /// Image height in pixels (at least 1).
    pub height: u32,
    /// Payload layout.
    pub pixel_format: PixelFormat,
    /// Scheduling priority, 0 lowest to 255 highest; `None` means the stream's configured default.
    pub priority: Option<u8>,
    /// After this the frame is dropped rather than processed; `None` means no deadline.
    pub deadline: Option<Deadline>,
    /// Detections made upstream; when present the server skips its detector and classifies these
    /// boxes (an empty list means "no objects"). `None` means run the detector.
    pub detections: Option<Vec<UpstreamDetection>>,
    /// The image bytes, laid out as `pixel_format` says.
    pub payload: Bytes,
}

/// Server-side time spent on one frame, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timing {
    /// Waiting in queues (admission, batcher, processor queues).
    pub queue_us: u32,
    /// Running the detector.
    pub detect_us: u32,
    /// Running classifiers (wall time from first start to last finish).
    pub classify_us: u32,
    /// From reading the frame to writing the result.
    pub total_us: u32,
}

/// One (label, score) pair of a top-k classifier output.
#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    /// Class label.
    pub label: String,
    /// Its score (usually a probability).
    pub score: f32,
}

/// A named dense f32 tensor in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// Output name.
    pub name: String,
    /// Shape (at most 255 dimensions); `data.len()` equals the product of `dims`.
    pub dims: Vec<u32>,
    /// Values.
    pub data: Vec<f32>,
}

/// What a classifier produced for one object.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputValue {
    /// Best labels, best first.
    TopK(Vec<Label>),
    /// Raw output tensors.
    Tensors(Vec<Tensor>),
}

/// One classifier's output for one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// The classifier (model) name from the config.
    pub model: String,
    /// What it produced.
    pub value: OutputValue,
    /// Frames since this result was inferred: 0 when the model ran on this frame, more when
    /// the object's track reused an earlier result. Sent from protocol version 3 on (a
    /// version-1 or -2 peer never sees it; it decodes as 0).
    pub age: u32,
}

/// One detected object and what the classifiers said about it.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectResult {
    /// Where the object is.
    pub bbox: BBox,
    /// Detector class.
    pub class: ClassRef,
    /// Detector confidence.
    pub score: f32,
    /// The object's track in its stream (the same object keeps its id from frame to frame),
    /// 0 when it is not tracked. Sent from protocol version 3 on (decodes as 0 before).
    pub track_id: u32,
    /// Frames since the detector last saw this box: 0 when it found it on this frame, more
    /// when the tracker carried the box through frames the detector skipped. Version 3 on.
    pub box_age: u32,
    /// Classifier outputs (at most 255).
    pub outputs: Vec<Output>,
}

/// `Result`: the answer to a processed frame.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameResult {
    /// The frame's stream.
    pub stream_id: u32,
    /// The frame's sequence number.
    pub seq: u64,
    /// Where the time went.
    pub timing: Timing,
    /// Objects found (at most 65535).
    pub objects: Vec<ObjectResult>,
    /// Objects found (upstream or by the detector) beyond the server's per-frame cap: neither
    /// classified nor listed, only counted. Sent from protocol version 2 on; a version-1 peer
    /// never sees it (it decodes as 0).
    pub objects_dropped: u32,
}

/// Why a frame was not processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// A newer frame of the same stream replaced it while it waited.
    Superseded,
    /// Its deadline passed before it could be processed.
    DeadlinePassed,
    /// The server's queues were full.
    Overloaded,
    /// The server is shutting down.
    ShuttingDown,
    /// The client already had `window` frames of this stream in flight.
    WindowExceeded,
    /// An engine failed while processing it.
    ProcessingFailed,
}

impl DropReason {
    /// Every reason, in code order.
    pub const ALL: [DropReason; 6] = [
        Self::Superseded,
        Self::DeadlinePassed,
        Self::Overloaded,
        Self::ShuttingDown,
        Self::WindowExceeded,
        Self::ProcessingFailed,
    ];

    /// The byte on the wire.
    pub const fn code(self) -> u8 {
        match self {
            Self::Superseded => 1,
            Self::DeadlinePassed => 2,
            Self::Overloaded => 3,
            Self::ShuttingDown => 4,
            Self::WindowExceeded => 5,
            Self::ProcessingFailed => 6,
        }
    }

    /// The reason for a wire byte, `None` if unknown.
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.code() == code)
    }
}

/// `Dropped`: a frame the server accepted but will not process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    /// The frame's stream.
    pub stream_id: u32,
    /// The frame's sequence number.
    pub seq: u64,
    /// Why.
    pub reason: DropReason,
}

/// Why a frame was rejected as invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// The body could not be parsed (truncated field, unknown enum code, bad UTF-8, extra bytes).
    Malformed,
    /// Width or height is zero, or odd for NV12.
    BadDimensions,
    /// The payload length does not match width, height and pixel format.
    PayloadSizeMismatch,
    /// An upstream detection has a non-finite coordinate, an inverted box or a score outside [0, 1].
    BadDetection,
    /// The server cannot process this pixel format.
    UnsupportedFormat,
    /// The sequence number does not increase within the stream.
    SeqNotIncreasing,
    /// Width or height is over the server's side limit (the message names it); version 3.
    /// Sent as [`RejectReason::BadDimensions`] to a version 1 or 2 peer.
    TooLarge,
}

impl RejectReason {
    /// Every reason, in code order.
    pub const ALL: [RejectReason; 7] = [
        Self::Malformed,
        Self::BadDimensions,
        Self::PayloadSizeMismatch,
        Self::BadDetection,
        Self::UnsupportedFormat,
        Self::SeqNotIncreasing,
        Self::TooLarge,
    ];

    /// The byte on the wire.
    pub const fn code(self) -> u8 {
        match self {
            Self::Malformed => 1,
            Self::BadDimensions => 2,
            Self::PayloadSizeMismatch => 3,
            Self::BadDetection => 4,
            Self::UnsupportedFormat => 5,
            Self::SeqNotIncreasing => 6,
            Self::TooLarge => 7,
        }
    }

    /// The reason as a peer speaking `version` can read it: one that version lacks is sent
    /// as its stand-in (too large: bad dimensions), as `docs/protocol.md` says; the message
    /// text still names the real cause.
    pub const fn for_version(self, version: u16) -> Self {
        match self {
            Self::TooLarge if version < 3 => Self::BadDimensions,
            other => other,
        }
    }

    /// The reason for a wire byte, `None` if unknown.
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.code() == code)
    }
}

/// `Rejected`: a frame that was invalid; the connection stays open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The frame's stream.
    pub stream_id: u32,
    /// The frame's sequence number.
    pub seq: u64,
    /// The category.
    pub reason: RejectReason,
    /// Human-readable detail naming what was wrong.
    pub message: String,
}

/// Protocol-level error categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A message did not start with the magic bytes.
    BadMagic,
    /// The client offered no version the server speaks, or a header carried an unsupported one.
    UnsupportedVersion,
    /// Unknown message type byte, or a server-only message sent by the client.
    UnknownMessageType,
    /// A body was longer than the server's maximum message size.
    MessageTooLarge,
    /// A non-frame message could not be parsed, or a header had invalid flags.
    Malformed,
    /// The first message was not `Hello`.
    HandshakeRequired,
    /// A message that is not allowed at this point (for example a second `Hello`).
    UnexpectedMessage,
    /// The server failed internally.
    Internal,
    /// The server is shutting down and closes the connection.
    ShuttingDown,
    /// The server already serves as many connections as it allows (version 2 on).
    ConnectionLimit,
    /// The client took too long: no `Hello` in time, or a message left half-sent (version 2 on).
    Timeout,
}

impl ErrorCode {
    /// Every code, in code order.
    pub const ALL: [ErrorCode; 11] = [
        Self::BadMagic,
        Self::UnsupportedVersion,
        Self::UnknownMessageType,
        Self::MessageTooLarge,
        Self::Malformed,
        Self::HandshakeRequired,
        Self::UnexpectedMessage,
        Self::Internal,
        Self::ShuttingDown,
        Self::ConnectionLimit,
        Self::Timeout,
    ];

    /// The first protocol version that defines this code.
    pub const fn since_version(self) -> u16 {
        match self {
            Self::ConnectionLimit | Self::Timeout => 2,
            _ => 1,
        }
    }

    /// The code to send to a peer speaking `version`: this one if the version defines it, else
    /// its version-1 stand-in (connection limit: internal; timeout: malformed), as
    /// `docs/protocol.md` says. The message text still names the real cause.
    pub const fn for_version(self, version: u16) -> Self {
        if version >= self.since_version() {
            return self;
        }
        match self {
            Self::ConnectionLimit => Self::Internal,
            Self::Timeout => Self::Malformed,
            other => other,
        }
    }

    /// The u16 on the wire.
    pub const fn code(self) -> u16 {
        match self {
            Self::BadMagic => 1,
            Self::UnsupportedVersion => 2,
            Self::UnknownMessageType => 3,
            Self::MessageTooLarge => 4,
            Self::Malformed => 5,
            Self::HandshakeRequired => 6,
            Self::UnexpectedMessage => 7,
            Self::Internal => 8,
            Self::ShuttingDown => 9,
            Self::ConnectionLimit => 10,
            Self::Timeout => 11,
        }
    }

    /// The code for a wire value, `None` if unknown.
    pub fn from_code(code: u16) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.code() == code)
    }
}

/// `Error`: a protocol-level error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerError {
    /// The category.
    pub code: ErrorCode,
    /// True when the server closes the connection right after this message (header flag bit 0).
    pub closing: bool,
    /// Human-readable detail naming what was wrong.
    pub message: String,
}
