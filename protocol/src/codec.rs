//! `tokio_util::codec` adapters, so the daemon can wrap a `UnixStream` in `Framed`.

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use crate::decode::{body, header, Decode};
use crate::error::{DecodeError, EncodeError};
use crate::message::{ClientMessage, Rejected, ServerMessage};
use crate::wire::HEADER_LEN;

/// Errors from the tokio codecs: the socket, or the bytes on it.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// Reading or writing the socket failed.
    #[error("socket I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The peer sent bytes that are not a valid message (fatal to the connection).
    #[error("decoding: {0}")]
    Decode(#[from] DecodeError),
    /// A message could not be encoded.
    #[error("encoding: {0}")]
    Encode(#[from] EncodeError),
}

/// Shared streaming logic: splits whole messages off `src` without copying their payloads.
fn decode_next<M: Decode>(
    src: &mut BytesMut,
    max: u32,
) -> Result<Option<Result<M, DecodeError>>, DecodeError> {
    let Some(h) = header::<M>(src, max)? else {
        return Ok(None);
    };
    let len = h.message_len();
    if src.len() < len {
        src.reserve(len - src.len());
        return Ok(None);
    }
    let message = src.split_to(len).freeze();
    Ok(Some(body(&h, &message, Some(&message))))
}

/// Typed error for bytes left over when the peer closes mid-message.
fn eof_error<M: Decode>(src: &BytesMut, max: u32) -> DecodeError {
    match header::<M>(src, max) {
        Ok(Some(h)) => DecodeError::TruncatedBody {
            kind: h.kind,
            expected: h.body_len,
            got: src.len() - HEADER_LEN,
        },
        Ok(None) => DecodeError::TruncatedHeader { got: src.len() },
        Err(e) => e,
    }
}

/// Server side: decodes `ClientMessage`s, encodes `ServerMessage`s.
///
/// An invalid `Frame` whose framing is intact decodes as `Ok(Some(Err(rejected)))`: its bytes are
/// consumed, the server sends `rejected` back and the connection goes on. Every other decode
/// error is fatal (send `Error` with `DecodeError::error_code`, then close).
///
/// Messages are encoded in version 1 until the codec encodes a `Welcome`, then in the version
/// that `Welcome` chose.
#[derive(Debug, Clone, Copy)]
pub struct ServerCodec {
    /// Largest body accepted from the client; also the largest body encoded.
    pub max_message_size: u32,
    /// The version answers are encoded in (see the type's docs).
    pub version: u16,
}

impl ServerCodec {
    /// A codec accepting bodies up to `max_message_size` bytes.
    pub fn new(max_message_size: u32) -> Self {
        Self {
            max_message_size,
            version: crate::wire::HANDSHAKE_VERSION,
        }
    }
}

impl Decoder for ServerCodec {
    type Item = Result<ClientMessage, Rejected>;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Self::Item>, CodecError> {
        match decode_next::<ClientMessage>(src, self.max_message_size)? {
            None => Ok(None),
            Some(Ok(m)) => Ok(Some(Ok(m))),
            Some(Err(e)) => match e.rejection() {
                Some(r) => Ok(Some(Err(r))),
                None => Err(e.into()),
            },
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Self::Item>, CodecError> {
        match self.decode(src)? {
            Some(m) => Ok(Some(m)),
            None if src.is_empty() => Ok(None),
            None => Err(eof_error::<ClientMessage>(src, self.max_message_size).into()),
        }
    }
}

impl Encoder<&ServerMessage> for ServerCodec {
    type Error = CodecError;

    fn encode(&mut self, item: &ServerMessage, dst: &mut BytesMut) -> Result<(), CodecError> {
        item.encode_version(dst, self.max_message_size, self.version)?;
        if let ServerMessage::Welcome(w) = item {
            self.version = w.version;
        }
        Ok(())
    }
}

impl Encoder<ServerMessage> for ServerCodec {
    type Error = CodecError;

    fn encode(&mut self, item: ServerMessage, dst: &mut BytesMut) -> Result<(), CodecError> {
        self.encode(&item, dst)
    }
}

/// Client side: decodes `ServerMessage`s, encodes `ClientMessage`s. Every decode error is fatal.
///
/// Messages are encoded in [`crate::PROTOCOL_VERSION`] until the codec decodes a `Welcome`,
/// then in the version that `Welcome` chose.
#[derive(Debug, Clone, Copy)]
pub struct ClientCodec {
    /// Largest body accepted from the server; also the largest body encoded.
    pub max_message_size: u32,
    /// The version messages are encoded in (see the type's docs).
    pub version: u16,
}

impl ClientCodec {
    /// A codec accepting bodies up to `max_message_size` bytes.
    pub fn new(max_message_size: u32) -> Self {
        Self {
            max_message_size,
            version: crate::wire::PROTOCOL_VERSION,
        }
    }
}

impl Decoder for ClientCodec {
    type Item = ServerMessage;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<ServerMessage>, CodecError> {
        match decode_next::<ServerMessage>(src, self.max_message_size)? {
            None => Ok(None),
            Some(r) => {
                let m = r?;
                if let ServerMessage::Welcome(w) = &m {
                    if crate::wire::SUPPORTED_VERSIONS.contains(&w.version) {
                        self.version = w.version;
                    }
                }
                Ok(Some(m))
            }
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<ServerMessage>, CodecError> {
        match self.decode(src)? {
            Some(m) => Ok(Some(m)),
            None if src.is_empty() => Ok(None),
            None => Err(eof_error::<ServerMessage>(src, self.max_message_size).into()),
        }
    }
}

impl Encoder<&ClientMessage> for ClientCodec {
    type Error = CodecError;

    fn encode(&mut self, item: &ClientMessage, dst: &mut BytesMut) -> Result<(), CodecError> {
        Ok(item.encode_version(dst, self.max_message_size, self.version)?)
    }
}

impl Encoder<ClientMessage> for ClientCodec {
    type Error = CodecError;

    fn encode(&mut self, item: ClientMessage, dst: &mut BytesMut) -> Result<(), CodecError> {
        self.encode(&item, dst)
    }
}
