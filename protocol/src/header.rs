//! Reading and writing the fixed 12-byte header of every message ([`crate::wire`] has its
//! layout), with every check a header alone allows.

use crate::error::DecodeError;
use crate::wire::{flags, MessageType, HANDSHAKE_VERSION, HEADER_LEN, MAGIC, SUPPORTED_VERSIONS};

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
