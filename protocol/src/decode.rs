//! Decoding bytes into messages. Never panics: every problem is a typed `DecodeError`.

use bytes::Bytes;

use crate::error::{BodyError, DecodeError};
use crate::message::{
    BBox, ClassRef, ClientMessage, Deadline, DropReason, Dropped, ErrorCode, Frame, FrameResult,
    Hello, Label, ObjectResult, Output, OutputValue, PixelFormat, RejectReason, Rejected,
    ServerError, ServerMessage, Tensor, Timing, UpstreamDetection, Welcome,
};
use crate::validate;
use crate::wire::{flags, Header, MessageType, HEADER_LEN};

/// A bounds-checked cursor over one message body.
pub(crate) struct Reader<'a> {
    body: &'a [u8],
    pos: usize,
    /// The same bytes as `body`, refcounted, so payloads can be sliced without copying.
    backing: Option<&'a Bytes>,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.body.len() - self.pos
    }

    fn take(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], BodyError> {
        if n > self.remaining() {
            return Err(BodyError::Truncated {
                field,
                needed: n as u64,
                remaining: self.remaining(),
            });
        }
        let s = &self.body[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], BodyError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(field, N)?);
        Ok(a)
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, BodyError> {
        Ok(self.array::<1>(field)?[0])
    }

    fn u16(&mut self, field: &'static str) -> Result<u16, BodyError> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, BodyError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, BodyError> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    fn f32(&mut self, field: &'static str) -> Result<f32, BodyError> {
        Ok(f32::from_le_bytes(self.array(field)?))
    }

    fn string(&mut self, field: &'static str) -> Result<String, BodyError> {
        let len = self.u16(field)? as usize;
        let raw = self.take(field, len)?;
        std::str::from_utf8(raw)
            .map(str::to_owned)
            .map_err(|_| BodyError::InvalidUtf8 { field })
    }

    /// Checks that `count` entries of at least `min_size` bytes each can fit, before allocating.
    fn check_count(
        &self,
        field: &'static str,
        count: usize,
        min_size: usize,
    ) -> Result<(), BodyError> {
        let needed = (count as u64).saturating_mul(min_size as u64);
        if needed > self.remaining() as u64 {
            return Err(BodyError::Truncated {
                field,
                needed,
                remaining: self.remaining(),
            });
        }
        Ok(())
    }

    fn payload(&mut self, len: usize) -> Result<Bytes, BodyError> {
        let start = self.pos;
        let raw = self.take("payload", len)?;
        Ok(match self.backing {
            Some(b) => b.slice(start..start + len),
            None => Bytes::copy_from_slice(raw),
        })
    }

    fn bbox(&mut self) -> Result<BBox, BodyError> {
        Ok(BBox {
            x0: self.f32("x0")?,
            y0: self.f32("y0")?,
            x1: self.f32("x1")?,
            y1: self.f32("y1")?,
        })
    }

    fn class(&mut self) -> Result<ClassRef, BodyError> {
        match self.u8("class_kind")? {
            0 => Ok(ClassRef::Id(self.u32("class_id")?)),
            1 => Ok(ClassRef::Name(self.string("class_name")?)),
            v => Err(BodyError::OutOfRange {
                field: "class_kind",
                value: v.into(),
                allowed: "0 (id) or 1 (name)",
            }),
        }
    }

    fn finish(&self) -> Result<(), BodyError> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(BodyError::TrailingBytes { count }),
        }
    }
}

fn hello(r: &mut Reader<'_>) -> Result<Hello, BodyError> {
    let n = r.u8("n_versions")? as usize;
    r.check_count("versions", n, 2)?;
    let versions = (0..n)
        .map(|_| r.u16("versions"))
        .collect::<Result<Vec<_>, _>>()?;
    let client_name = r.string("client_name")?;
    r.finish()?;
    let h = Hello {
        versions,
        client_name,
    };
    validate::hello(&h)?;
    Ok(h)
}

/// Reads a frame body after `stream_id` and `seq`.
fn frame_rest(r: &mut Reader<'_>, fl: u8, stream_id: u32, seq: u64) -> Result<Frame, BodyError> {
    let capture_ts_us = r.u64("capture_ts_us")?;
    let width = r.u32("width")?;
    let height = r.u32("height")?;
    let code = r.u8("pixel_format")?;
    let pixel_format = PixelFormat::from_code(code).ok_or(BodyError::OutOfRange {
        field: "pixel_format",
        value: code.into(),
        allowed: "1 (RGB24), 2 (BGR24), 3 (NV12) or 4 (JPEG)",
    })?;
    let priority = if fl & flags::FRAME_PRIORITY != 0 {
        Some(r.u8("priority")?)
    } else {
        None
    };
    let deadline = if fl & flags::FRAME_DEADLINE != 0 {
        let d = r.u64("deadline_us")?;
        Some(if fl & flags::FRAME_DEADLINE_ABSOLUTE != 0 {
            Deadline::AbsoluteUs(d)
        } else {
            Deadline::RelativeUs(d)
        })
    } else {
        None
    };
    let detections = if fl & flags::FRAME_DETECTIONS != 0 {
        let n = r.u16("n_detections")? as usize;
        // 4 coordinates + score + class kind + 4-byte id or 2-byte name length.
        r.check_count("detections", n, 23)?;
        let mut dets = Vec::with_capacity(n);
        for _ in 0..n {
            let bbox = r.bbox()?;
            let score = r.f32("score")?;
            let class = r.class()?;
            dets.push(UpstreamDetection { bbox, class, score });
        }
        Some(dets)
    } else {
        None
    };
    let len = r.u32("payload_len")? as usize;
    let payload = r.payload(len)?;
    r.finish()?;
    let f = Frame {
        stream_id,
        seq,
        capture_ts_us,
        width,
        height,
        pixel_format,
        priority,
        deadline,
        detections,
        payload,
    };
    validate::frame(&f)?;
    Ok(f)
}

fn welcome(r: &mut Reader<'_>) -> Result<Welcome, BodyError> {
    let w = Welcome {
        version: r.u16("version")?,
        max_message_size: r.u32("max_message_size")?,
        window: r.u16("window")?,
        server_name: r.string("server_name")?,
    };
    r.finish()?;
    validate::welcome(&w)?;
    Ok(w)
}

fn tensor(r: &mut Reader<'_>) -> Result<Tensor, BodyError> {
    let name = r.string("tensor_name")?;
    let ndim = r.u8("n_dims")? as usize;
    r.check_count("dims", ndim, 4)?;
    let dims = (0..ndim)
        .map(|_| r.u32("dims"))
        .collect::<Result<Vec<_>, _>>()?;
    let count = dims
        .iter()
        .try_fold(1u64, |acc, d| acc.checked_mul(u64::from(*d)))
        .filter(|c| *c <= usize::MAX as u64 / 4)
        .ok_or(BodyError::Truncated {
            field: "tensor_data",
            needed: u64::MAX,
            remaining: r.remaining(),
        })? as usize;
    r.check_count("tensor_data", count, 4)?;
    let data = (0..count)
        .map(|_| r.f32("tensor_data"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Tensor { name, dims, data })
}

fn object(r: &mut Reader<'_>, version: u16) -> Result<ObjectResult, BodyError> {
    let bbox = r.bbox()?;
    let score = r.f32("score")?;
    let class = r.class()?;
    let (track_id, box_age) = if version >= 3 {
        (r.u32("track_id")?, r.u32("box_age")?)
    } else {
        (0, 0)
    };
    let n = r.u8("n_outputs")? as usize;
    // model name length + kind + count.
    r.check_count("outputs", n, 4)?;
    let mut outputs = Vec::with_capacity(n);
    for _ in 0..n {
        let model = r.string("model")?;
        let age = if version >= 3 {
            r.u32("output_age")?
        } else {
            0
        };
        let kind = r.u8("output_kind")?;
        let value = match kind {
            0 => {
                let n = r.u8("n_labels")? as usize;
                r.check_count("labels", n, 6)?;
                let labels = (0..n)
                    .map(|_| {
                        Ok(Label {
                            label: r.string("label")?,
                            score: r.f32("label_score")?,
                        })
                    })
                    .collect::<Result<Vec<_>, BodyError>>()?;
                OutputValue::TopK(labels)
            }
            1 => {
                let n = r.u8("n_tensors")? as usize;
                r.check_count("tensors", n, 3)?;
                let tensors = (0..n).map(|_| tensor(r)).collect::<Result<Vec<_>, _>>()?;
                OutputValue::Tensors(tensors)
            }
            v => {
                return Err(BodyError::OutOfRange {
                    field: "output_kind",
                    value: v.into(),
                    allowed: "0 (top-k) or 1 (tensors)",
                })
            }
        };
        outputs.push(Output { model, value, age });
    }
    Ok(ObjectResult {
        bbox,
        class,
        score,
        track_id,
        box_age,
        outputs,
    })
}

fn result(r: &mut Reader<'_>, version: u16) -> Result<FrameResult, BodyError> {
    let stream_id = r.u32("stream_id")?;
    let seq = r.u64("seq")?;
    let timing = Timing {
        queue_us: r.u32("queue_us")?,
        detect_us: r.u32("detect_us")?,
        classify_us: r.u32("classify_us")?,
        total_us: r.u32("total_us")?,
    };
    let n = r.u16("n_objects")? as usize;
    // bbox + score + class kind + at least 2 bytes of class + output count.
    r.check_count("objects", n, 24)?;
    let objects = (0..n)
        .map(|_| object(r, version))
        .collect::<Result<Vec<_>, _>>()?;
    let objects_dropped = if version >= 2 {
        r.u32("objects_dropped")?
    } else {
        0
    };
    r.finish()?;
    Ok(FrameResult {
        stream_id,
        seq,
        timing,
        objects,
        objects_dropped,
    })
}

fn dropped(r: &mut Reader<'_>) -> Result<Dropped, BodyError> {
    let stream_id = r.u32("stream_id")?;
    let seq = r.u64("seq")?;
    let code = r.u8("drop_reason")?;
    let reason = DropReason::from_code(code).ok_or(BodyError::OutOfRange {
        field: "drop_reason",
        value: code.into(),
        allowed: "1..=6",
    })?;
    r.finish()?;
    Ok(Dropped {
        stream_id,
        seq,
        reason,
    })
}

fn rejected(r: &mut Reader<'_>) -> Result<Rejected, BodyError> {
    let stream_id = r.u32("stream_id")?;
    let seq = r.u64("seq")?;
    let code = r.u8("reject_reason")?;
    let reason = RejectReason::from_code(code).ok_or(BodyError::OutOfRange {
        field: "reject_reason",
        value: code.into(),
        allowed: "1..=6",
    })?;
    let message = r.string("message")?;
    r.finish()?;
    Ok(Rejected {
        stream_id,
        seq,
        reason,
        message,
    })
}

fn error(r: &mut Reader<'_>, fl: u8, version: u16) -> Result<ServerError, BodyError> {
    let raw = r.u16("error_code")?;
    let code = ErrorCode::from_code(raw)
        .filter(|c| c.since_version() <= version)
        .ok_or(BodyError::OutOfRange {
            field: "error_code",
            value: raw.into(),
            allowed: if version >= 2 {
                "1..=11"
            } else {
                "1..=9 (version 1)"
            },
        })?;
    let message = r.string("message")?;
    r.finish()?;
    Ok(ServerError {
        code,
        closing: fl & flags::ERROR_CLOSING != 0,
        message,
    })
}

/// A message type that can be decoded from one side of the connection.
pub(crate) trait Decode: Sized {
    /// Whether this side's messages have the top bit of the type byte set.
    const FROM_SERVER: bool;
    /// Decodes a body whose header has already been checked.
    fn body(header: &Header, r: &mut Reader<'_>) -> Result<Self, DecodeError>;
}

fn body_err(kind: MessageType) -> impl FnOnce(BodyError) -> DecodeError {
    move |error| DecodeError::Body { kind, error }
}

impl Decode for ClientMessage {
    const FROM_SERVER: bool = false;

    fn body(h: &Header, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let kind = h.kind;
        match kind {
            MessageType::Hello => hello(r).map(Self::Hello).map_err(body_err(kind)),
            MessageType::Frame => {
                // Until stream_id and seq are known the frame cannot be named: fatal.
                let stream_id = r.u32("stream_id").map_err(body_err(kind))?;
                let seq = r.u64("seq").map_err(body_err(kind))?;
                frame_rest(r, h.flags, stream_id, seq)
                    .map(Self::Frame)
                    .map_err(|error| DecodeError::InvalidFrame {
                        stream_id,
                        seq,
                        message_len: h.message_len(),
                        error,
                    })
            }
            MessageType::Bye => r.finish().map(|()| Self::Bye).map_err(body_err(kind)),
            _ => Err(DecodeError::WrongDirection { kind }),
        }
    }
}

impl Decode for ServerMessage {
    const FROM_SERVER: bool = true;

    fn body(h: &Header, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let kind = h.kind;
        let msg = match kind {
            MessageType::Welcome => welcome(r).map(Self::Welcome),
            MessageType::Result => result(r, h.version).map(Self::Result),
            MessageType::Dropped => dropped(r).map(Self::Dropped),
            MessageType::Rejected => rejected(r).map(Self::Rejected),
            MessageType::Error => error(r, h.flags, h.version).map(Self::Error),
            _ => return Err(DecodeError::WrongDirection { kind }),
        };
        msg.map_err(body_err(kind))
    }
}

/// Checks the header of the message at the start of `src`: `Ok(None)` when more bytes are needed
/// to see it, an error as soon as anything is wrong (including a type from the wrong side).
pub(crate) fn header<M: Decode>(src: &[u8], max: u32) -> Result<Option<Header>, DecodeError> {
    let Some(h) = Header::parse(src, max)? else {
        return Ok(None);
    };
    if h.kind.from_server() != M::FROM_SERVER {
        return Err(DecodeError::WrongDirection { kind: h.kind });
    }
    Ok(Some(h))
}

/// Decodes the body of a message whose header was checked; `message` is the whole message.
pub(crate) fn body<M: Decode>(
    h: &Header,
    message: &[u8],
    backing: Option<&Bytes>,
) -> Result<M, DecodeError> {
    let mut r = Reader {
        body: &message[HEADER_LEN..],
        pos: 0,
        backing: None,
    };
    let sliced;
    if let Some(b) = backing {
        sliced = b.slice(HEADER_LEN..);
        r.backing = Some(&sliced);
        M::body(h, &mut r)
    } else {
        M::body(h, &mut r)
    }
}

/// Streaming decode: `Ok(None)` when `src` does not yet hold a whole message.
fn decode_stream<M: Decode>(src: &[u8], max: u32) -> Result<Option<(M, usize)>, DecodeError> {
    let Some(h) = header::<M>(src, max)? else {
        return Ok(None);
    };
    let len = h.message_len();
    if src.len() < len {
        return Ok(None);
    }
    body(&h, &src[..len], None).map(|m| Some((m, len)))
}

/// Decodes exactly one message filling all of `src`.
fn decode_exact<M: Decode>(src: &[u8], max: u32) -> Result<M, DecodeError> {
    let Some(h) = header::<M>(src, max)? else {
        return Err(DecodeError::TruncatedHeader { got: src.len() });
    };
    let len = h.message_len();
    if src.len() < len {
        return Err(DecodeError::TruncatedBody {
            kind: h.kind,
            expected: h.body_len,
            got: src.len() - HEADER_LEN,
        });
    }
    let m = body(&h, &src[..len], None)?;
    if src.len() > len {
        return Err(DecodeError::TrailingData {
            count: src.len() - len,
        });
    }
    Ok(m)
}

impl ClientMessage {
    /// Decodes the first message in `src` (a stream buffer). Returns the message and the bytes it
    /// used, or `Ok(None)` when `src` does not yet hold a whole message. Header problems are
    /// reported as soon as the header is complete. On `DecodeError::InvalidFrame` skip
    /// `message_len` bytes, answer with `DecodeError::rejection`, and carry on.
    pub fn decode(src: &[u8], max_message_size: u32) -> Result<Option<(Self, usize)>, DecodeError> {
        decode_stream(src, max_message_size)
    }

    /// Decodes `src` as exactly one whole message: a short buffer is `TruncatedHeader` or
    /// `TruncatedBody`, extra bytes are `TrailingData`.
    pub fn decode_exact(src: &[u8], max_message_size: u32) -> Result<Self, DecodeError> {
        decode_exact(src, max_message_size)
    }
}

impl ServerMessage {
    /// Decodes the first message in `src` (a stream buffer). Returns the message and the bytes it
    /// used, or `Ok(None)` when `src` does not yet hold a whole message. Header problems are
    /// reported as soon as the header is complete.
    pub fn decode(src: &[u8], max_message_size: u32) -> Result<Option<(Self, usize)>, DecodeError> {
        decode_stream(src, max_message_size)
    }

    /// Decodes `src` as exactly one whole message: a short buffer is `TruncatedHeader` or
    /// `TruncatedBody`, extra bytes are `TrailingData`.
    pub fn decode_exact(src: &[u8], max_message_size: u32) -> Result<Self, DecodeError> {
        decode_exact(src, max_message_size)
    }
}
