//! Encoding messages into bytes: header, then body, all little-endian.

use bytes::{BufMut, BytesMut};

use crate::error::{BodyError, EncodeError};
use crate::message::{
    BBox, ClassRef, ClientMessage, Deadline, Frame, FrameResult, Hello, ObjectResult, OutputValue,
    ServerMessage, Welcome,
};
use crate::validate;
use crate::wire::{
    flags, Header, MessageType, HANDSHAKE_VERSION, HEADER_LEN, PROTOCOL_VERSION, SUPPORTED_VERSIONS,
};

/// Writes one whole message in protocol `version` (the handshake's own messages always carry
/// version 1), or nothing at all on error.
fn encode_message(
    dst: &mut BytesMut,
    kind: MessageType,
    flags: u8,
    (max_message_size, version): (u32, u16),
    body: impl FnOnce(&mut BytesMut) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    if !SUPPORTED_VERSIONS.contains(&version) {
        return Err(EncodeError::UnsupportedVersion { version });
    }
    let start = dst.len();
    let version = match kind {
        MessageType::Hello | MessageType::Welcome => HANDSHAKE_VERSION,
        _ => version,
    };
    Header {
        version,
        kind,
        flags,
        body_len: 0,
    }
    .write(dst);
    let result = body(dst).and_then(|()| {
        let body_len = dst.len() - start - HEADER_LEN;
        match u32::try_from(body_len) {
            Ok(len) if len <= max_message_size => Ok(len),
            _ => Err(EncodeError::TooLarge {
                kind,
                body_len,
                max: max_message_size,
            }),
        }
    });
    match result {
        Ok(len) => {
            dst[start + 8..start + HEADER_LEN].copy_from_slice(&len.to_le_bytes());
            Ok(())
        }
        Err(e) => {
            dst.truncate(start);
            Err(e)
        }
    }
}

fn invalid(kind: MessageType) -> impl FnOnce(BodyError) -> EncodeError {
    move |error| EncodeError::Invalid { kind, error }
}

fn put_str(dst: &mut BytesMut, field: &'static str, s: &str) -> Result<(), EncodeError> {
    let len = u16::try_from(s.len()).map_err(|_| EncodeError::StringTooLong {
        field,
        len: s.len(),
    })?;
    dst.put_u16_le(len);
    dst.put_slice(s.as_bytes());
    Ok(())
}

fn count_u8(field: &'static str, count: usize) -> Result<u8, EncodeError> {
    u8::try_from(count).map_err(|_| EncodeError::TooMany {
        field,
        count,
        max: u8::MAX as usize,
    })
}

fn count_u16(field: &'static str, count: usize) -> Result<u16, EncodeError> {
    u16::try_from(count).map_err(|_| EncodeError::TooMany {
        field,
        count,
        max: u16::MAX as usize,
    })
}

fn put_bbox(dst: &mut BytesMut, b: &BBox) {
    for v in [b.x0, b.y0, b.x1, b.y1] {
        dst.put_f32_le(v);
    }
}

fn put_class(dst: &mut BytesMut, c: &ClassRef) -> Result<(), EncodeError> {
    match c {
        ClassRef::Id(id) => {
            dst.put_u8(0);
            dst.put_u32_le(*id);
        }
        ClassRef::Name(name) => {
            dst.put_u8(1);
            put_str(dst, "class_name", name)?;
        }
    }
    Ok(())
}

fn hello_body(dst: &mut BytesMut, h: &Hello) -> Result<(), EncodeError> {
    dst.put_u8(count_u8("versions", h.versions.len())?);
    for v in &h.versions {
        dst.put_u16_le(*v);
    }
    put_str(dst, "client_name", &h.client_name)
}

fn frame_flags(f: &Frame) -> u8 {
    let mut fl = 0;
    if f.priority.is_some() {
        fl |= flags::FRAME_PRIORITY;
    }
    match f.deadline {
        Some(Deadline::RelativeUs(_)) => fl |= flags::FRAME_DEADLINE,
        Some(Deadline::AbsoluteUs(_)) => {
            fl |= flags::FRAME_DEADLINE | flags::FRAME_DEADLINE_ABSOLUTE
        }
        None => {}
    }
    if f.detections.is_some() {
        fl |= flags::FRAME_DETECTIONS;
    }
    fl
}

fn frame_body(dst: &mut BytesMut, f: &Frame) -> Result<(), EncodeError> {
    dst.put_u32_le(f.stream_id);
    dst.put_u64_le(f.seq);
    dst.put_u64_le(f.capture_ts_us);
    dst.put_u32_le(f.width);
    dst.put_u32_le(f.height);
    dst.put_u8(f.pixel_format.code());
    if let Some(p) = f.priority {
        dst.put_u8(p);
    }
    if let Some(Deadline::RelativeUs(d) | Deadline::AbsoluteUs(d)) = f.deadline {
        dst.put_u64_le(d);
    }
    if let Some(dets) = &f.detections {
        dst.put_u16_le(count_u16("detections", dets.len())?);
        for d in dets {
            put_bbox(dst, &d.bbox);
            dst.put_f32_le(d.score);
            put_class(dst, &d.class)?;
        }
    }
    let len = u32::try_from(f.payload.len()).map_err(|_| EncodeError::TooLarge {
        kind: MessageType::Frame,
        body_len: f.payload.len(),
        max: u32::MAX,
    })?;
    dst.put_u32_le(len);
    dst.put_slice(&f.payload);
    Ok(())
}

fn welcome_body(dst: &mut BytesMut, w: &Welcome) -> Result<(), EncodeError> {
    dst.put_u16_le(w.version);
    dst.put_u32_le(w.max_message_size);
    dst.put_u16_le(w.window);
    put_str(dst, "server_name", &w.server_name)
}

fn object_body(dst: &mut BytesMut, o: &ObjectResult, version: u16) -> Result<(), EncodeError> {
    put_bbox(dst, &o.bbox);
    dst.put_f32_le(o.score);
    put_class(dst, &o.class)?;
    if version >= 3 {
        dst.put_u32_le(o.track_id);
        dst.put_u32_le(o.box_age);
    }
    dst.put_u8(count_u8("outputs", o.outputs.len())?);
    for out in &o.outputs {
        put_str(dst, "model", &out.model)?;
        if version >= 3 {
            dst.put_u32_le(out.age);
        }
        match &out.value {
            OutputValue::TopK(labels) => {
                dst.put_u8(0);
                dst.put_u8(count_u8("labels", labels.len())?);
                for l in labels {
                    put_str(dst, "label", &l.label)?;
                    dst.put_f32_le(l.score);
                }
            }
            OutputValue::Tensors(tensors) => {
                dst.put_u8(1);
                dst.put_u8(count_u8("tensors", tensors.len())?);
                for t in tensors {
                    let expected = t
                        .dims
                        .iter()
                        .try_fold(1u64, |acc, d| acc.checked_mul(u64::from(*d)));
                    if expected != Some(t.data.len() as u64) {
                        return Err(EncodeError::Invalid {
                            kind: MessageType::Result,
                            error: BodyError::TensorShape {
                                name: t.name.clone(),
                                dims: t.dims.clone(),
                                expected: expected.unwrap_or(u64::MAX),
                                actual: t.data.len(),
                            },
                        });
                    }
                    put_str(dst, "tensor_name", &t.name)?;
                    dst.put_u8(count_u8("dims", t.dims.len())?);
                    for d in &t.dims {
                        dst.put_u32_le(*d);
                    }
                    for v in &t.data {
                        dst.put_f32_le(*v);
                    }
                }
            }
        }
    }
    Ok(())
}

fn result_body(dst: &mut BytesMut, r: &FrameResult, version: u16) -> Result<(), EncodeError> {
    dst.put_u32_le(r.stream_id);
    dst.put_u64_le(r.seq);
    let t = &r.timing;
    for v in [t.queue_us, t.detect_us, t.classify_us, t.total_us] {
        dst.put_u32_le(v);
    }
    dst.put_u16_le(count_u16("objects", r.objects.len())?);
    for o in &r.objects {
        object_body(dst, o, version)?;
    }
    if version >= 2 {
        dst.put_u32_le(r.objects_dropped);
    }
    Ok(())
}

impl ClientMessage {
    /// Appends this message to `dst` in [`PROTOCOL_VERSION`]. Fails, writing nothing, when the
    /// body would exceed `max_message_size`, a string or list is too long, or a value is one the
    /// decoder rejects.
    pub fn encode(&self, dst: &mut BytesMut, max_message_size: u32) -> Result<(), EncodeError> {
        self.encode_version(dst, max_message_size, PROTOCOL_VERSION)
    }

    /// As [`ClientMessage::encode`], in protocol `version` (the one the handshake chose).
    pub fn encode_version(
        &self,
        dst: &mut BytesMut,
        max_message_size: u32,
        version: u16,
    ) -> Result<(), EncodeError> {
        let kind = self.kind();
        let lim = (max_message_size, version);
        match self {
            Self::Hello(h) => {
                validate::hello(h).map_err(invalid(kind))?;
                encode_message(dst, kind, 0, lim, |d| hello_body(d, h))
            }
            Self::Frame(f) => {
                validate::frame(f).map_err(invalid(kind))?;
                encode_message(dst, kind, frame_flags(f), lim, |d| frame_body(d, f))
            }
            Self::Bye => encode_message(dst, kind, 0, lim, |_| Ok(())),
        }
    }

    /// The message type.
    pub fn kind(&self) -> MessageType {
        match self {
            Self::Hello(_) => MessageType::Hello,
            Self::Frame(_) => MessageType::Frame,
            Self::Bye => MessageType::Bye,
        }
    }
}

impl ServerMessage {
    /// Appends this message to `dst` in [`PROTOCOL_VERSION`]. Fails, writing nothing, when the
    /// body would exceed `max_message_size`, a string or list is too long, or a value is one the
    /// decoder rejects.
    pub fn encode(&self, dst: &mut BytesMut, max_message_size: u32) -> Result<(), EncodeError> {
        self.encode_version(dst, max_message_size, PROTOCOL_VERSION)
    }

    /// As [`ServerMessage::encode`], in protocol `version` (the one the handshake chose, 1
    /// before it): fields the version lacks are left out (`Result::objects_dropped` in
    /// version 1, tracks and ages before version 3), and an `Error` code or a `Rejected`
    /// reason it lacks is sent as its stand-in ([`crate::ErrorCode::for_version`],
    /// [`crate::RejectReason::for_version`]).
    pub fn encode_version(
        &self,
        dst: &mut BytesMut,
        max_message_size: u32,
        version: u16,
    ) -> Result<(), EncodeError> {
        let kind = self.kind();
        let max = (max_message_size, version);
        match self {
            Self::Welcome(w) => {
                validate::welcome(w).map_err(invalid(kind))?;
                encode_message(dst, kind, 0, max, |d| welcome_body(d, w))
            }
            Self::Result(r) => encode_message(dst, kind, 0, max, |d| result_body(d, r, version)),
            Self::Dropped(x) => encode_message(dst, kind, 0, max, |d| {
                d.put_u32_le(x.stream_id);
                d.put_u64_le(x.seq);
                d.put_u8(x.reason.code());
                Ok(())
            }),
            Self::Rejected(x) => encode_message(dst, kind, 0, max, |d| {
                d.put_u32_le(x.stream_id);
                d.put_u64_le(x.seq);
                d.put_u8(x.reason.for_version(version).code());
                put_str(d, "message", &x.message)
            }),
            Self::Error(e) => {
                let fl = if e.closing { flags::ERROR_CLOSING } else { 0 };
                encode_message(dst, kind, fl, max, |d| {
                    d.put_u16_le(e.code.for_version(version).code());
                    put_str(d, "message", &e.message)
                })
            }
        }
    }

    /// The message type.
    pub fn kind(&self) -> MessageType {
        match self {
            Self::Welcome(_) => MessageType::Welcome,
            Self::Result(_) => MessageType::Result,
            Self::Dropped(_) => MessageType::Dropped,
            Self::Rejected(_) => MessageType::Rejected,
            Self::Error(_) => MessageType::Error,
        }
    }
}
