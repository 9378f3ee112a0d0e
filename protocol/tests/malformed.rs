//! Each kind of malformed input gives its own specific, typed error (and encoding refuses what
//! decoding would reject).

mod common;

use bytes::{Bytes, BytesMut};
use camdnn_protocol::*;
use common::{golden, MAX};

/// A message with a hand-made header: magic, version 1, `kind`, `flags`, then `body`.
fn raw(kind: u8, flags: u8, body: &[u8]) -> Vec<u8> {
    raw_v(1, kind, flags, body)
}

fn raw_v(version: u16, kind: u8, flags: u8, body: &[u8]) -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&version.to_le_bytes());
    v.push(kind);
    v.push(flags);
    v.extend_from_slice(&(body.len() as u32).to_le_bytes());
    v.extend_from_slice(body);
    v
}

/// Little-endian body builder.
#[derive(Default)]
struct B(Vec<u8>);

impl B {
    fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    fn u16(mut self, v: u16) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn f32(mut self, v: f32) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(mut self, v: &[u8]) -> Self {
        self.0.extend_from_slice(v);
        self
    }
    fn str(self, s: &str) -> Self {
        self.u16(s.len() as u16).bytes(s.as_bytes())
    }
}

/// Frame body start: stream 7, seq 42, ts 0, `w`x`h`, format `fmt`.
fn frame_head(w: u32, h: u32, fmt: u8) -> B {
    B::default().u32(7).u64(42).u64(0).u32(w).u32(h).u8(fmt)
}

fn client(bytes: &[u8]) -> Result<ClientMessage, DecodeError> {
    ClientMessage::decode_exact(bytes, MAX)
}

fn server(bytes: &[u8]) -> Result<ServerMessage, DecodeError> {
    ServerMessage::decode_exact(bytes, MAX)
}

/// The body error of an invalid frame from stream 7, seq 42.
fn frame_error(body: B, flags: u8) -> BodyError {
    match client(&raw(0x02, flags, &body.0)) {
        Err(DecodeError::InvalidFrame {
            stream_id: 7,
            seq: 42,
            message_len,
            error,
        }) => {
            assert_eq!(message_len, HEADER_LEN + body.0.len());
            error
        }
        other => panic!("expected an invalid frame from stream 7 seq 42, got {other:?}"),
    }
}

fn body_error(kind: MessageType, r: Result<impl std::fmt::Debug, DecodeError>) -> BodyError {
    match r {
        Err(DecodeError::Body { kind: k, error }) if k == kind => error,
        other => panic!("expected a malformed {kind}, got {other:?}"),
    }
}

#[test]
fn truncated_header() {
    assert_eq!(
        client(b"CDNN\x01"),
        Err(DecodeError::TruncatedHeader { got: 5 })
    );
    assert_eq!(server(b""), Err(DecodeError::TruncatedHeader { got: 0 }));
    // Streaming decode just waits for more.
    assert_eq!(ClientMessage::decode(b"CDNN\x01", MAX), Ok(None));
}

#[test]
fn bad_magic() {
    let mut m = golden("bye");
    m[0] = b'X';
    assert_eq!(client(&m), Err(DecodeError::BadMagic { found: *b"XDNN" }));
    // Reported from the first wrong byte, without waiting for a whole header.
    assert_eq!(
        ClientMessage::decode(b"GE", MAX),
        Err(DecodeError::BadMagic { found: *b"GE\0\0" })
    );
}

#[test]
fn unsupported_version() {
    assert_eq!(
        client(&raw_v(4, 0x03, 0, &[])),
        Err(DecodeError::UnsupportedVersion {
            version: 4,
            kind: MessageType::Bye
        })
    );
    assert_eq!(client(&raw_v(2, 0x03, 0, &[])), Ok(ClientMessage::Bye));
    assert_eq!(client(&raw_v(3, 0x03, 0, &[])), Ok(ClientMessage::Bye));
    // Hello and Welcome stay version 1 whatever the version chosen.
    assert_eq!(
        client(&raw_v(2, 0x01, 0, &B::default().u8(1).u16(2).str("x").0)),
        Err(DecodeError::UnsupportedVersion {
            version: 2,
            kind: MessageType::Hello
        })
    );
    // Hello always carries the frozen handshake version 1 in its header.
    assert_eq!(
        client(&raw_v(0, 0x01, 0, &B::default().u8(1).u16(1).str("x").0)),
        Err(DecodeError::UnsupportedVersion {
            version: 0,
            kind: MessageType::Hello
        })
    );
}

#[test]
fn unknown_message_type() {
    assert_eq!(
        client(&raw(0x07, 0, &[])),
        Err(DecodeError::UnknownMessageType { code: 0x07 })
    );
    assert_eq!(
        server(&raw(0x80, 0, &[])),
        Err(DecodeError::UnknownMessageType { code: 0x80 })
    );
}

#[test]
fn message_from_the_wrong_side() {
    assert_eq!(
        client(&golden("welcome")),
        Err(DecodeError::WrongDirection {
            kind: MessageType::Welcome
        })
    );
    assert_eq!(
        server(&golden("hello")),
        Err(DecodeError::WrongDirection {
            kind: MessageType::Hello
        })
    );
}

#[test]
fn invalid_flags() {
    assert_eq!(
        client(&raw(0x03, 0x01, &[])),
        Err(DecodeError::InvalidFlags {
            kind: MessageType::Bye,
            flags: 0x01
        })
    );
    assert_eq!(
        client(&raw(0x02, 0x10, &[])),
        Err(DecodeError::InvalidFlags {
            kind: MessageType::Frame,
            flags: 0x10
        })
    );
    // "Absolute" without "deadline present".
    assert_eq!(
        client(&raw(0x02, 0x04, &[])),
        Err(DecodeError::InvalidFlags {
            kind: MessageType::Frame,
            flags: 0x04
        })
    );
    assert_eq!(
        server(&raw(0x85, 0x02, &[])),
        Err(DecodeError::InvalidFlags {
            kind: MessageType::Error,
            flags: 0x02
        })
    );
}

#[test]
fn body_over_the_maximum() {
    let m = golden("frame_minimal");
    let expected = Err(DecodeError::BodyTooLarge {
        kind: MessageType::Frame,
        body_len: 45,
        max: 44,
    });
    assert_eq!(ClientMessage::decode_exact(&m, 44), expected.clone());
    // Known from the header alone: the body is never buffered.
    assert_eq!(
        ClientMessage::decode(&m[..HEADER_LEN], 44).map(|_| ()),
        expected.clone().map(|_| ())
    );
    assert!(ClientMessage::decode_exact(&m, 45).is_ok());
}

#[test]
fn truncated_body_and_trailing_data() {
    let m = golden("hello");
    assert_eq!(
        client(&m[..m.len() - 1]),
        Err(DecodeError::TruncatedBody {
            kind: MessageType::Hello,
            expected: 9,
            got: 8
        })
    );
    assert_eq!(ClientMessage::decode(&m[..m.len() - 1], MAX), Ok(None));
    let mut two = golden("bye");
    two.push(0);
    assert_eq!(client(&two), Err(DecodeError::TrailingData { count: 1 }));
}

#[test]
fn field_running_past_the_body() {
    // The name claims 5 bytes, 4 follow.
    let e = body_error(
        MessageType::Hello,
        client(&raw(
            0x01,
            0,
            &B::default().u8(1).u16(1).u16(5).bytes(b"cam0").0,
        )),
    );
    assert_eq!(
        e,
        BodyError::Truncated {
            field: "client_name",
            needed: 5,
            remaining: 4
        }
    );
    // 255 versions announced, none present: refused before allocating.
    let e = body_error(MessageType::Hello, client(&raw(0x01, 0, &[255])));
    assert_eq!(
        e,
        BodyError::Truncated {
            field: "versions",
            needed: 510,
            remaining: 0
        }
    );
    // 65535 objects announced in a short body.
    let body = B::default()
        .u32(1)
        .u64(1)
        .u32(0)
        .u32(0)
        .u32(0)
        .u32(0)
        .u16(u16::MAX);
    let e = body_error(MessageType::Result, server(&raw(0x82, 0, &body.0)));
    assert!(
        matches!(
            e,
            BodyError::Truncated {
                field: "objects",
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn tensor_with_huge_dims_is_refused_without_allocating() {
    let body = B::default()
        .u32(1)
        .u64(1)
        .bytes(&[0; 16])
        .u16(1)
        .f32(0.0)
        .f32(0.0)
        .f32(1.0)
        .f32(1.0)
        .f32(0.5)
        .u8(0)
        .u32(1)
        .u8(1)
        .str("m")
        .u8(1)
        .u8(1)
        .str("t")
        .u8(3)
        .u32(u32::MAX)
        .u32(u32::MAX)
        .u32(u32::MAX);
    let e = body_error(MessageType::Result, server(&raw(0x82, 0, &body.0)));
    assert!(
        matches!(
            e,
            BodyError::Truncated {
                field: "tensor_data",
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn string_not_utf8() {
    let e = body_error(
        MessageType::Hello,
        client(&raw(
            0x01,
            0,
            &B::default().u8(1).u16(1).u16(2).bytes(&[0xff, 0xfe]).0,
        )),
    );
    assert_eq!(
        e,
        BodyError::InvalidUtf8 {
            field: "client_name"
        }
    );
}

#[test]
fn fields_out_of_range() {
    let oor = |e: BodyError| match e {
        BodyError::OutOfRange { field, value, .. } => (field, value),
        other => panic!("expected OutOfRange, got {other:?}"),
    };
    let e = body_error(
        MessageType::Hello,
        client(&raw(0x01, 0, &B::default().u8(0).str("x").0)),
    );
    assert_eq!(oor(e), ("n_versions", 0));
    let e = body_error(
        MessageType::Welcome,
        server(&raw(0x81, 0, &B::default().u16(1).u32(9).u16(0).str("s").0)),
    );
    assert_eq!(oor(e), ("window", 0));
    let e = body_error(
        MessageType::Dropped,
        server(&raw(0x83, 0, &B::default().u32(1).u64(2).u8(9).0)),
    );
    assert_eq!(oor(e), ("drop_reason", 9));
    let e = body_error(
        MessageType::Rejected,
        server(&raw(0x84, 0, &B::default().u32(1).u64(2).u8(0).str("").0)),
    );
    assert_eq!(oor(e), ("reject_reason", 0));
    let e = body_error(
        MessageType::Error,
        server(&raw(0x85, 0, &B::default().u16(99).str("").0)),
    );
    assert_eq!(oor(e), ("error_code", 99));
    let obj = |class_kind: u8, output_kind: u8| {
        B::default()
            .u32(1)
            .u64(1)
            .bytes(&[0; 16])
            .u16(1)
            .bytes(&[0; 20])
            .u8(class_kind)
            .u32(0)
            .u8(1)
            .str("m")
            .u8(output_kind)
            .u8(0)
    };
    let e = body_error(MessageType::Result, server(&raw(0x82, 0, &obj(2, 0).0)));
    assert_eq!(oor(e), ("class_kind", 2));
    let e = body_error(MessageType::Result, server(&raw(0x82, 0, &obj(0, 5).0)));
    assert_eq!(oor(e), ("output_kind", 5));
    assert!(server(&raw(0x82, 0, &obj(0, 0).0)).is_ok());
}

#[test]
fn trailing_bytes_inside_the_body() {
    let e = body_error(MessageType::Bye, client(&raw(0x03, 0, &[0])));
    assert_eq!(e, BodyError::TrailingBytes { count: 1 });
    let e = body_error(
        MessageType::Dropped,
        server(&raw(
            0x83,
            0,
            &B::default().u32(1).u64(2).u8(1).u8(0).u8(0).0,
        )),
    );
    assert_eq!(e, BodyError::TrailingBytes { count: 2 });
    let e = frame_error(frame_head(1, 1, 1).u32(3).bytes(&[1, 2, 3, 4]), 0);
    assert_eq!(e, BodyError::TrailingBytes { count: 1 });
}

#[test]
fn frame_payload_must_match_its_format() {
    let e = frame_error(frame_head(3, 2, 1).u32(12).bytes(&[0; 12]), 0);
    assert_eq!(
        e,
        BodyError::PayloadSizeMismatch {
            format: PixelFormat::Rgb24,
            width: 3,
            height: 2,
            expected: 18,
            actual: 12
        }
    );
    let e = frame_error(frame_head(4, 4, 3).u32(48).bytes(&[0; 48]), 0);
    assert_eq!(
        e,
        BodyError::PayloadSizeMismatch {
            format: PixelFormat::Nv12,
            width: 4,
            height: 4,
            expected: 24,
            actual: 48
        }
    );
    let e = frame_error(frame_head(3, 4, 3).u32(18).bytes(&[0; 18]), 0);
    assert_eq!(
        e,
        BodyError::OddNv12Dimension {
            width: 3,
            height: 4
        }
    );
    let e = frame_error(frame_head(0, 4, 2).u32(0), 0);
    assert_eq!(
        e,
        BodyError::ZeroDimension {
            width: 0,
            height: 4
        }
    );
    let e = frame_error(frame_head(640, 480, 4).u32(0), 0);
    assert_eq!(
        e,
        BodyError::EmptyJpeg {
            width: 640,
            height: 480
        }
    );
    let e = frame_error(frame_head(1, 1, 9).u32(3).bytes(&[0; 3]), 0);
    assert!(
        matches!(
            e,
            BodyError::OutOfRange {
                field: "pixel_format",
                value: 9,
                ..
            }
        ),
        "{e:?}"
    );
    // Payload length larger than the body.
    let e = frame_error(frame_head(1, 1, 1).u32(3).bytes(&[0; 2]), 0);
    assert_eq!(
        e,
        BodyError::Truncated {
            field: "payload",
            needed: 3,
            remaining: 2
        }
    );
    // Optional fields announced by flags but missing.
    let e = frame_error(frame_head(1, 1, 1), 0x01);
    assert!(
        matches!(
            e,
            BodyError::Truncated {
                field: "priority",
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn frame_too_short_to_name_is_fatal() {
    let e = body_error(
        MessageType::Frame,
        client(&raw(0x02, 0, &B::default().u32(7).u32(0).0)),
    );
    assert!(
        matches!(e, BodyError::Truncated { field: "seq", .. }),
        "{e:?}"
    );
}

#[test]
fn upstream_detections_are_checked() {
    let det = |x0: f32, x1: f32, score: f32| {
        frame_head(1, 1, 1)
            .u16(2)
            .f32(0.0)
            .f32(0.0)
            .f32(1.0)
            .f32(1.0)
            .f32(0.5)
            .u8(0)
            .u32(1)
            .f32(x0)
            .f32(0.0)
            .f32(x1)
            .f32(1.0)
            .f32(score)
            .u8(1)
            .str("car")
            .u32(3)
            .bytes(&[0; 3])
    };
    assert!(client(&raw(0x02, 0x08, &det(0.0, 1.0, 1.0).0)).is_ok());
    assert_eq!(
        frame_error(det(f32::NAN, 1.0, 0.5), 0x08),
        BodyError::NonFinite {
            index: 1,
            field: "x0"
        }
    );
    assert_eq!(
        frame_error(det(0.0, f32::INFINITY, 0.5), 0x08),
        BodyError::NonFinite {
            index: 1,
            field: "x1"
        }
    );
    assert_eq!(
        frame_error(det(2.0, 1.0, 0.5), 0x08),
        BodyError::InvertedBox { index: 1 }
    );
    assert_eq!(
        frame_error(det(0.0, 1.0, 1.5), 0x08),
        BodyError::ScoreOutOfRange {
            index: 1,
            score: 1.5
        }
    );
}

#[test]
fn invalid_frames_turn_into_rejections() {
    let err = client(&raw(
        0x02,
        0,
        &frame_head(3, 2, 1).u32(12).bytes(&[0; 12]).0,
    ))
    .unwrap_err();
    let r = err
        .rejection()
        .expect("an invalid frame is answered with Rejected");
    assert_eq!(
        (r.stream_id, r.seq, r.reason),
        (7, 42, RejectReason::PayloadSizeMismatch)
    );
    assert_eq!(
        r.message,
        "Rgb24 frame 3x2 needs a 18-byte payload, got 12 bytes"
    );
    assert_eq!(err.error_code(), ErrorCode::Malformed);
    // Fatal errors have no rejection.
    let err = client(&raw(0x07, 0, &[])).unwrap_err();
    assert_eq!(err.rejection(), None);
    assert_eq!(err.error_code(), ErrorCode::UnknownMessageType);
    let err = client(&raw_v(9, 0x03, 0, &[])).unwrap_err();
    assert_eq!(err.error_code(), ErrorCode::UnsupportedVersion);
}

fn valid_frame() -> Frame {
    Frame {
        stream_id: 1,
        seq: 1,
        capture_ts_us: 0,
        width: 2,
        height: 2,
        pixel_format: PixelFormat::Rgb24,
        priority: None,
        deadline: None,
        detections: None,
        payload: Bytes::from(vec![0; 12]),
    }
}

#[test]
fn encoder_refuses_what_the_decoder_would_reject() {
    let enc = |m: ClientMessage| {
        let mut b = BytesMut::from(&b"keep"[..]);
        let r = m.encode(&mut b, MAX);
        assert_eq!(&b[..], b"keep", "a failed encode writes nothing");
        r
    };
    let mut f = valid_frame();
    f.width = 3;
    assert!(matches!(
        enc(ClientMessage::Frame(f)),
        Err(EncodeError::Invalid {
            kind: MessageType::Frame,
            error: BodyError::PayloadSizeMismatch { .. }
        })
    ));
    assert!(matches!(
        enc(ClientMessage::Hello(Hello {
            versions: vec![],
            client_name: String::new()
        })),
        Err(EncodeError::Invalid {
            kind: MessageType::Hello,
            error: BodyError::OutOfRange {
                field: "n_versions",
                ..
            }
        })
    ));
    assert_eq!(
        enc(ClientMessage::Hello(Hello {
            versions: vec![1; 256],
            client_name: String::new()
        })),
        Err(EncodeError::TooMany {
            field: "versions",
            count: 256,
            max: 255
        })
    );
    assert_eq!(
        enc(ClientMessage::Hello(Hello {
            versions: vec![1],
            client_name: "x".repeat(70_000)
        })),
        Err(EncodeError::StringTooLong {
            field: "client_name",
            len: 70_000
        })
    );
    let mut f = valid_frame();
    f.detections = Some(vec![UpstreamDetection {
        bbox: BBox {
            x0: 0.0,
            y0: 0.0,
            x1: 1.0,
            y1: 1.0,
        },
        class: ClassRef::Id(0),
        score: -0.1,
    }]);
    assert!(matches!(
        enc(ClientMessage::Frame(f)),
        Err(EncodeError::Invalid {
            error: BodyError::ScoreOutOfRange { index: 0, .. },
            ..
        })
    ));
    let mut b = BytesMut::new();
    let r = ServerMessage::Result(FrameResult {
        stream_id: 0,
        seq: 0,
        timing: Timing::default(),
        objects: vec![ObjectResult {
            bbox: BBox {
                x0: 0.0,
                y0: 0.0,
                x1: 1.0,
                y1: 1.0,
            },
            class: ClassRef::Id(0),
            score: 1.0,
            track_id: 0,
            box_age: 0,
            outputs: vec![Output {
                model: "m".into(),
                value: OutputValue::Tensors(vec![Tensor {
                    name: "t".into(),
                    dims: vec![2, 2],
                    data: vec![0.0; 3],
                }]),
                age: 0,
            }],
        }],
        objects_dropped: 0,
    })
    .encode(&mut b, MAX);
    assert!(matches!(
        r,
        Err(EncodeError::Invalid {
            error: BodyError::TensorShape {
                expected: 4,
                actual: 3,
                ..
            },
            ..
        })
    ));
    assert!(b.is_empty());
    let welcome = ServerMessage::Welcome(Welcome {
        version: 1,
        max_message_size: 1,
        window: 0,
        server_name: String::new(),
    });
    assert!(matches!(
        welcome.encode(&mut b, MAX),
        Err(EncodeError::Invalid {
            error: BodyError::OutOfRange {
                field: "window",
                ..
            },
            ..
        })
    ));
}

#[test]
fn version_negotiation_picks_the_highest_common_version() {
    assert_eq!(negotiate(&[1]), Some(1));
    assert_eq!(negotiate(&[7, 1, 4]), Some(1));
    assert_eq!(negotiate(&[7, 1, 3]), Some(3));
    assert_eq!(negotiate(&[1, 2]), Some(2));
    assert_eq!(negotiate(&[2, 4]), Some(2));
    assert_eq!(negotiate(&[2, 3]), Some(3));
    assert_eq!(negotiate(&[3, 4]), Some(3));
    assert_eq!(negotiate(&[4, 5]), None);
    assert_eq!(negotiate(&[]), None);
}

/// Version 2's additions: `objects_dropped` ends a Result, and Error codes 10 and 11 exist;
/// neither is read from (nor written in) a version-1 message.
#[test]
fn version_2_fields_and_codes_only_in_version_2() {
    let r = ServerMessage::Result(FrameResult {
        stream_id: 1,
        seq: 2,
        timing: Timing::default(),
        objects: vec![],
        objects_dropped: 9,
    });
    let enc = |m: &ServerMessage, v: u16| {
        let mut b = BytesMut::new();
        m.encode_version(&mut b, MAX, v).unwrap();
        b.to_vec()
    };
    let v2 = enc(&r, 2);
    let v1 = enc(&r, 1);
    assert_eq!(v2.len(), v1.len() + 4);
    assert_eq!(ServerMessage::decode_exact(&v2, MAX), Ok(r.clone()));
    let ServerMessage::Result(back) = ServerMessage::decode_exact(&v1, MAX).unwrap() else {
        panic!()
    };
    assert_eq!(back.objects_dropped, 0, "a version-1 peer never sees it");
    // The version-2 body under a version-1 header has 4 trailing bytes.
    let mut lying = v2.clone();
    lying[4] = 1;
    assert!(matches!(
        ServerMessage::decode_exact(&lying, MAX),
        Err(DecodeError::Body {
            error: BodyError::TrailingBytes { count: 4 },
            ..
        })
    ));
    for (code, v1_code) in [
        (ErrorCode::ConnectionLimit, ErrorCode::Internal),
        (ErrorCode::Timeout, ErrorCode::Malformed),
    ] {
        let e = |c| {
            ServerMessage::Error(ServerError {
                code: c,
                closing: true,
                message: "m".into(),
            })
        };
        assert_eq!(
            ServerMessage::decode_exact(&enc(&e(code), 2), MAX),
            Ok(e(code))
        );
        // Sent to a version-1 peer as its stand-in.
        assert_eq!(
            ServerMessage::decode_exact(&enc(&e(code), 1), MAX),
            Ok(e(v1_code))
        );
        let mut lying = enc(&e(code), 2);
        lying[4] = 1;
        assert!(matches!(
            ServerMessage::decode_exact(&lying, MAX),
            Err(DecodeError::Body {
                error: BodyError::OutOfRange {
                    field: "error_code",
                    ..
                },
                ..
            })
        ));
    }
    let mut b = BytesMut::new();
    assert_eq!(
        r.encode_version(&mut b, MAX, 4),
        Err(EncodeError::UnsupportedVersion { version: 4 })
    );
    assert!(b.is_empty());
}

/// Version 3's addition: `Rejected` reason 7 (too large), sent to a version 1 or 2 peer as its
/// stand-in 2 (bad dimensions) with the same message.
#[test]
fn too_large_is_reason_7_in_version_3_and_bad_dimensions_before() {
    let r = ServerMessage::Rejected(camdnn_protocol::Rejected {
        stream_id: 1,
        seq: 2,
        reason: RejectReason::TooLarge,
        message: "JPEG frame 10000x1500 is larger than the 8192-pixel side limit".into(),
    });
    for (version, want) in [
        (1, RejectReason::BadDimensions),
        (2, RejectReason::BadDimensions),
        (3, RejectReason::TooLarge),
    ] {
        let mut b = BytesMut::new();
        r.encode_version(&mut b, MAX, version).unwrap();
        let Ok(ServerMessage::Rejected(got)) = ServerMessage::decode_exact(&b, MAX) else {
            panic!("version {version}: not a Rejected")
        };
        assert_eq!(got.reason, want, "version {version}");
        assert!(got.message.contains("8192-pixel side limit"));
    }
    assert_eq!(RejectReason::from_code(7), Some(RejectReason::TooLarge));
}
