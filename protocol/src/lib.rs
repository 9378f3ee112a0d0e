//! camdnn's versioned socket protocol: message types, the framing codec and a Rust client.
//!
//! Every message is a 12-byte little-endian header (`CDNN`, version, type, flags, body length)
//! followed by its body; `docs/protocol.md` gives the layout byte by byte. Encoding and decoding
//! are pure functions over byte buffers ([`ClientMessage::encode`], [`ServerMessage::decode`],
//! ...) that never panic on bad input and return typed errors naming what was wrong. With the
//! `tokio` feature (default) [`ServerCodec`] and [`ClientCodec`] plug into `tokio_util`'s
//! `Framed`; [`Client`] is a blocking client for tests, the `camdnnd feed` command and tools.

#![warn(missing_docs)]

mod client;
#[cfg(feature = "tokio")]
mod codec;
mod decode;
mod encode;
mod error;
mod message;
mod reconnect;
mod validate;
mod wire;

pub use client::{Client, ClientError};
#[cfg(feature = "tokio")]
pub use codec::{ClientCodec, CodecError, ServerCodec};
pub use error::{BodyError, DecodeError, EncodeError};
pub use message::{
    BBox, ClassRef, ClientMessage, Deadline, DropReason, Dropped, ErrorCode, Frame, FrameResult,
    Hello, Label, ObjectResult, Output, OutputValue, PixelFormat, RejectReason, Rejected,
    ServerError, ServerMessage, Tensor, Timing, UpstreamDetection, Welcome,
};
pub use reconnect::{connect_with_backoff, Answer, Backoff, ReconnectingClient};
pub use wire::{
    flags, negotiate, MessageType, DEFAULT_MAX_MESSAGE_SIZE, HANDSHAKE_VERSION, HEADER_LEN, MAGIC,
    PROTOCOL_VERSION, SUPPORTED_VERSIONS,
};
