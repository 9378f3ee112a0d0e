//! Typed errors for decoding and encoding; each names what was wrong.

use crate::message::{ErrorCode, PixelFormat, RejectReason, Rejected};
use crate::wire::{MessageType, HEADER_LEN};

/// A problem inside a message body (the header and framing were fine).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BodyError {
    /// A field runs past the end of the body.
    #[error("field `{field}` needs {needed} bytes but only {remaining} remain in the body")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Bytes it needs.
        needed: u64,
        /// Bytes left in the body.
        remaining: usize,
    },
    /// A string field is not UTF-8.
    #[error("field `{field}` is not valid UTF-8")]
    InvalidUtf8 {
        /// The field.
        field: &'static str,
    },
    /// A field holds a value outside its allowed range (unknown enum code, zero count, ...).
    #[error("field `{field}` has value {value}, allowed: {allowed}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// The value found.
        value: u64,
        /// What is allowed.
        allowed: &'static str,
    },
    /// Bytes left over after the last field.
    #[error("{count} trailing bytes after the last field of the body")]
    TrailingBytes {
        /// How many.
        count: usize,
    },
    /// Width or height is zero.
    #[error("frame is {width}x{height}; width and height must be at least 1")]
    ZeroDimension {
        /// Width.
        width: u32,
        /// Height.
        height: u32,
    },
    /// NV12 needs even width and height.
    #[error("NV12 frame is {width}x{height}; width and height must be even")]
    OddNv12Dimension {
        /// Width.
        width: u32,
        /// Height.
        height: u32,
    },
    /// Payload length does not match width, height and pixel format.
    #[error(
        "{format:?} frame {width}x{height} needs a {expected}-byte payload, got {actual} bytes"
    )]
    PayloadSizeMismatch {
        /// Pixel format.
        format: PixelFormat,
        /// Width.
        width: u32,
        /// Height.
        height: u32,
        /// Expected payload length (for JPEG: at least 1).
        expected: u64,
        /// Actual payload length.
        actual: u64,
    },
    /// A JPEG frame with an empty payload.
    #[error("JPEG frame {width}x{height} has an empty payload")]
    EmptyJpeg {
        /// Width.
        width: u32,
        /// Height.
        height: u32,
    },
    /// An upstream detection coordinate or score is NaN or infinite.
    #[error("upstream detection {index}: `{field}` is not finite")]
    NonFinite {
        /// Detection index.
        index: usize,
        /// The field.
        field: &'static str,
    },
    /// An upstream detection has x0 > x1 or y0 > y1.
    #[error("upstream detection {index}: box is inverted (needs x0 <= x1 and y0 <= y1)")]
    InvertedBox {
        /// Detection index.
        index: usize,
    },
    /// An upstream detection score is outside [0, 1].
    #[error("upstream detection {index}: score {score} is outside [0, 1]")]
    ScoreOutOfRange {
        /// Detection index.
        index: usize,
        /// The score.
        score: f32,
    },
    /// A tensor's data length differs from the product of its dims (encoding only).
    #[error("tensor `{name}` has dims {dims:?} (product {expected}) but {actual} values")]
    TensorShape {
        /// Tensor name.
        name: String,
        /// Its dims.
        dims: Vec<u32>,
        /// Product of dims.
        expected: u64,
        /// Values given.
        actual: usize,
    },
}

impl BodyError {
    /// The `Rejected` category for this problem when it is found in a `Frame`.
    pub fn reject_reason(&self) -> RejectReason {
        match self {
            Self::ZeroDimension { .. } | Self::OddNv12Dimension { .. } => {
                RejectReason::BadDimensions
            }
            Self::PayloadSizeMismatch { .. } | Self::EmptyJpeg { .. } => {
                RejectReason::PayloadSizeMismatch
            }
            Self::NonFinite { .. } | Self::InvertedBox { .. } | Self::ScoreOutOfRange { .. } => {
                RejectReason::BadDetection
            }
            Self::Truncated { .. }
            | Self::InvalidUtf8 { .. }
            | Self::OutOfRange { .. }
            | Self::TrailingBytes { .. }
            | Self::TensorShape { .. } => RejectReason::Malformed,
        }
    }
}

/// Why bytes could not be decoded into a message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// Fewer than 12 bytes where a whole message was expected.
    #[error("truncated header: got {got} of {HEADER_LEN} bytes")]
    TruncatedHeader {
        /// Bytes present.
        got: usize,
    },
    /// The message does not start with `CDNN`.
    #[error("bad magic {found:02x?}, expected \"CDNN\" (43 44 4e 4e)")]
    BadMagic {
        /// The bytes found (zero-padded when fewer than 4 arrived).
        found: [u8; 4],
    },
    /// The header's version is not supported for this message type.
    #[error("unsupported protocol version {version} in a {kind} header")]
    UnsupportedVersion {
        /// The version found.
        version: u16,
        /// The message type.
        kind: MessageType,
    },
    /// The type byte names no message.
    #[error("unknown message type 0x{code:02x}")]
    UnknownMessageType {
        /// The byte found.
        code: u8,
    },
    /// A message type that flows the other way (e.g. a `Welcome` sent to the server).
    #[error("{kind} is sent by the {}, not accepted from it", if kind.from_server() { "server" } else { "client" })]
    WrongDirection {
        /// The message type.
        kind: MessageType,
    },
    /// Flag bits not defined for this message type, or an invalid combination.
    #[error("invalid flags 0b{flags:08b} for a {kind}")]
    InvalidFlags {
        /// The message type.
        kind: MessageType,
        /// The flags byte.
        flags: u8,
    },
    /// The header announces a body over the maximum message size.
    #[error("{kind} body of {body_len} bytes exceeds the maximum of {max}")]
    BodyTooLarge {
        /// The message type.
        kind: MessageType,
        /// Announced body length.
        body_len: u32,
        /// The limit.
        max: u32,
    },
    /// The buffer ends before the body does.
    #[error("truncated {kind} body: header announces {expected} bytes, got {got}")]
    TruncatedBody {
        /// The message type.
        kind: MessageType,
        /// Announced body length.
        expected: u32,
        /// Bytes present.
        got: usize,
    },
    /// Bytes follow a complete message where exactly one was expected.
    #[error("{count} bytes after the end of the message")]
    TrailingData {
        /// How many.
        count: usize,
    },
    /// A non-frame body is malformed; the connection cannot continue sensibly.
    #[error("malformed {kind}: {error}")]
    Body {
        /// The message type.
        kind: MessageType,
        /// What was wrong.
        error: BodyError,
    },
    /// A `Frame` is invalid but framing is intact: answer with `Rejected` and keep going.
    #[error("invalid frame (stream {stream_id}, seq {seq}): {error}")]
    InvalidFrame {
        /// The frame's stream.
        stream_id: u32,
        /// The frame's sequence number.
        seq: u64,
        /// Length of the whole message (header and body), to skip it.
        message_len: usize,
        /// What was wrong.
        error: BodyError,
    },
}

impl DecodeError {
    /// For an invalid frame, the `Rejected` message to answer with; `None` for errors that are
    /// fatal to the connection.
    pub fn rejection(&self) -> Option<Rejected> {
        match self {
            Self::InvalidFrame {
                stream_id,
                seq,
                error,
                ..
            } => Some(Rejected {
                stream_id: *stream_id,
                seq: *seq,
                reason: error.reject_reason(),
                message: error.to_string(),
            }),
            _ => None,
        }
    }

    /// The `Error` code a server sends for this (fatal) decode error.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            Self::BadMagic { .. } => ErrorCode::BadMagic,
            Self::UnsupportedVersion { .. } => ErrorCode::UnsupportedVersion,
            Self::UnknownMessageType { .. } | Self::WrongDirection { .. } => {
                ErrorCode::UnknownMessageType
            }
            Self::BodyTooLarge { .. } => ErrorCode::MessageTooLarge,
            Self::TruncatedHeader { .. }
            | Self::TruncatedBody { .. }
            | Self::TrailingData { .. }
            | Self::InvalidFlags { .. }
            | Self::Body { .. }
            | Self::InvalidFrame { .. } => ErrorCode::Malformed,
        }
    }
}

/// Why a message could not be encoded. Nothing is written when encoding fails.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EncodeError {
    /// The requested protocol version is not one this crate speaks.
    #[error(
        "protocol version {version} is not supported (supported: {:?})",
        crate::wire::SUPPORTED_VERSIONS
    )]
    UnsupportedVersion {
        /// The version asked for.
        version: u16,
    },
    /// The body would exceed the maximum message size.
    #[error("{kind} body of {body_len} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// The message type.
        kind: MessageType,
        /// Body length.
        body_len: usize,
        /// The limit.
        max: u32,
    },
    /// A string is longer than its 65535-byte length prefix allows.
    #[error("string `{field}` is {len} bytes, at most 65535 allowed")]
    StringTooLong {
        /// The field.
        field: &'static str,
        /// Its length.
        len: usize,
    },
    /// A list is longer than its count prefix allows.
    #[error("list `{field}` has {count} entries, at most {max} allowed")]
    TooMany {
        /// The field.
        field: &'static str,
        /// Its length.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// The message holds a value the decoder would reject.
    #[error("invalid {kind}: {error}")]
    Invalid {
        /// The message type.
        kind: MessageType,
        /// What was wrong.
        error: BodyError,
    },
}
