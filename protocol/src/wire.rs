//! The fixed 12-byte message header, protocol versions and message type codes.
//!
//! Every message on the socket is `header || body`; the header says what the body is and how long
//! it is, so a reader can frame messages without understanding them.

use crate::error::DecodeError;

/// The four bytes every message starts with: ASCII `CDNN`.
pub const MAGIC: [u8; 4] = *b"CDNN";

/// Length of the fixed header in bytes.
pub const HEADER_LEN: usize = 12;

/// The protocol version this crate speaks by default (the highest it supports).
///
/// Version 2 adds `objects_dropped` at the end of `Result` and the `Error` codes 10 (connection
/// limit) and 11 (timeout); version 3 adds each object's track id and box age and each
/// output's age to `Result`, and the `Rejected` reason 7 (too large); everything else is as in
/// version 1 (`docs/protocol.md`, "Versions").
pub const PROTOCOL_VERSION: u16 = 3;

/// Every protocol version this crate can encode and decode, lowest first.
pub const SUPPORTED_VERSIONS: &[u16] = &[1, 2, 3];

/// The version carried in the header of `Hello` and `Welcome`: the handshake layout is frozen so
/// that any server can read any client's `Hello`, whatever versions either side speaks.
pub const HANDSHAKE_VERSION: u16 = 1;

/// Default largest body (bytes after the 12-byte header) accepted: 32 MiB, enough for one
/// 3840x2160 RGB24 frame (24.9 MB) plus its metadata.
pub const DEFAULT_MAX_MESSAGE_SIZE: u32 = 32 * 1024 * 1024;

/// Picks the version for a connection: the highest version offered by the client that this crate
/// also supports, or `None` when they share none.
pub fn negotiate(offered: &[u16]) -> Option<u16> {
    offered
        .iter()
        .copied()
        .filter(|v| SUPPORTED_VERSIONS.contains(v))
        .max()
}

/// Header flag bits; their meaning depends on the message type.
pub mod flags {
    /// `Frame`: a `priority` byte is present.
    pub const FRAME_PRIORITY: u8 = 0x01;
    /// `Frame`: a `deadline_us` field is present.
    pub const FRAME_DEADLINE: u8 = 0x02;
    /// `Frame`: the deadline is absolute (µs since the Unix epoch) rather than relative.
    pub const FRAME_DEADLINE_ABSOLUTE: u8 = 0x04;
    /// `Frame`: a list of upstream detections is present.
    pub const FRAME_DETECTIONS: u8 = 0x08;
    /// All flag bits defined for `Frame`.
    pub const FRAME_ALL: u8 =
        FRAME_PRIORITY | FRAME_DEADLINE | FRAME_DEADLINE_ABSOLUTE | FRAME_DETECTIONS;
    /// `Error`: the server closes the connection after this message.
    pub const ERROR_CLOSING: u8 = 0x01;
}

/// The kind of a message: the header's type byte. Client-to-server codes have the top bit clear,
/// server-to-client codes have it set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageType {
    /// Client opens the connection and offers versions.
    Hello,
    /// Client sends one image.
    Frame,
    /// Client will send nothing more.
    Bye,
    /// Server accepts the handshake.
    Welcome,
    /// Server answers a frame with detections and classifier outputs.
    Result,
    /// Server did not process a frame (and says why).
    Dropped,
    /// Server found a frame invalid.
    Rejected,
    /// Server reports a protocol-level error.
    Error,
}

impl MessageType {
    /// The type byte on the wire.
    pub const fn code(self) -> u8 {
        match self {
            Self::Hello => 0x01,
            Self::Frame => 0x02,
            Self::Bye => 0x03,
            Self::Welcome => 0x81,
            Self::Result => 0x82,
            Self::Dropped => 0x83,
            Self::Rejected => 0x84,
            Self::Error => 0x85,
        }
    }

    /// The message type for a type byte, `None` when the byte names no message.
    pub const fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0x01 => Self::Hello,
            0x02 => Self::Frame,
            0x03 => Self::Bye,
            0x81 => Self::Welcome,
            0x82 => Self::Result,
            0x83 => Self::Dropped,
            0x84 => Self::Rejected,
            0x85 => Self::Error,
            _ => return None,
        })
    }

    /// True for messages the server sends, false for messages the client sends.
    pub const fn from_server(self) -> bool {
        self.code() & 0x80 != 0
    }

    /// Flag bits that may be set on this message type; any other bit is an error.
    pub(crate) const fn allowed_flags(self) -> u8 {
        match self {
            Self::Frame => flags::FRAME_ALL,
            Self::Error => flags::ERROR_CLOSING,
            _ => 0,
        }
    }
}

impl std::fmt::Display for MessageType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// A parsed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub version: u16,
    pub kind: MessageType,
    pub flags: u8,
    pub body_len: u32,
}

impl Header {
    /// Total message length (header and body).
    pub fn message_len(&self) -> usize {
        HEADER_LEN + self.body_len as usize
    }

    /// Parses and checks the first `HEADER_LEN` bytes of `src`; `Ok(None)` when fewer are present.
    pub fn parse(src: &[u8], max_message_size: u32) -> Result<Option<Header>, DecodeError> {
        if src.len() < HEADER_LEN {
            // Report a wrong magic as early as possible, even before the whole header is here.
            let n = src.len().min(4);
            if src[..n] != MAGIC[..n] {
                let mut found = [0u8; 4];
                found[..n].copy_from_slice(&src[..n]);
                return Err(DecodeError::BadMagic { found });
            }
            return Ok(None);
        }
        let magic: [u8; 4] = [src[0], src[1], src[2], src[3]];
        if magic != MAGIC {
            return Err(DecodeError::BadMagic { found: magic });
        }
        let version = u16::from_le_bytes([src[4], src[5]]);
        let code = src[6];
        let flags = src[7];
        let body_len = u32::from_le_bytes([src[8], src[9], src[10], src[11]]);
        let kind = MessageType::from_code(code).ok_or(DecodeError::UnknownMessageType { code })?;
        let version_ok = match kind {
            MessageType::Hello | MessageType::Welcome => version == HANDSHAKE_VERSION,
            _ => SUPPORTED_VERSIONS.contains(&version),
        };
        if !version_ok {
            return Err(DecodeError::UnsupportedVersion { version, kind });
        }
        if flags & !kind.allowed_flags() != 0 {
            return Err(DecodeError::InvalidFlags { kind, flags });
        }
        if kind == MessageType::Frame
            && flags & flags::FRAME_DEADLINE_ABSOLUTE != 0
            && flags & flags::FRAME_DEADLINE == 0
        {
            return Err(DecodeError::InvalidFlags { kind, flags });
        }
        if body_len > max_message_size {
            return Err(DecodeError::BodyTooLarge {
                kind,
                body_len,
                max: max_message_size,
            });
        }
        Ok(Some(Header {
            version,
            kind,
            flags,
            body_len,
        }))
    }

    /// Writes the header; `body_len` is patched later by the encoder.
    pub fn write(&self, dst: &mut bytes::BytesMut) {
        use bytes::BufMut;
        dst.put_slice(&MAGIC);
        dst.put_u16_le(self.version);
        dst.put_u8(self.kind.code());
        dst.put_u8(self.flags);
        dst.put_u32_le(self.body_len);
    }
}
