//! Golden vectors shared with the Python client's tests: the Rust encoder must produce exactly
//! these bytes and the decoder must read them back to the same values.

mod common;

use bytes::Bytes;
use camdnn_protocol::*;
use common::{golden, golden_dir, MAX};

/// Every golden vector's client-side value.
fn client_vectors() -> Vec<(&'static str, ClientMessage)> {
    vec![
        (
            "hello",
            ClientMessage::Hello(Hello {
                versions: vec![1],
                client_name: "cam0".into(),
            }),
        ),
        (
            "frame_minimal",
            ClientMessage::Frame(Frame {
                stream_id: 7,
                seq: 42,
                capture_ts_us: 1_700_000_000_000_000,
                width: 2,
                height: 2,
                pixel_format: PixelFormat::Rgb24,
                priority: None,
                deadline: None,
                detections: None,
                payload: Bytes::from((0u8..12).collect::<Vec<_>>()),
            }),
        ),
        (
            "frame_full",
            ClientMessage::Frame(Frame {
                stream_id: 1,
                seq: 2,
                capture_ts_us: 3,
                width: 4,
                height: 2,
                pixel_format: PixelFormat::Nv12,
                priority: Some(200),
                deadline: Some(Deadline::AbsoluteUs(1_700_000_000_033_000)),
                detections: Some(vec![
                    UpstreamDetection {
                        bbox: BBox {
                            x0: 10.0,
                            y0: 20.0,
                            x1: 30.0,
                            y1: 40.0,
                        },
                        class: ClassRef::Id(3),
                        score: 0.5,
                    },
                    UpstreamDetection {
                        bbox: BBox {
                            x0: 0.0,
                            y0: 0.0,
                            x1: 1.0,
                            y1: 1.0,
                        },
                        class: ClassRef::Name("car".into()),
                        score: 1.0,
                    },
                ]),
                payload: Bytes::from(vec![0x80; 12]),
            }),
        ),
        (
            "frame_jpeg",
            ClientMessage::Frame(Frame {
                stream_id: 9,
                seq: 0,
                capture_ts_us: 5,
                width: 640,
                height: 480,
                pixel_format: PixelFormat::Jpeg,
                priority: None,
                deadline: Some(Deadline::RelativeUs(33_000)),
                detections: Some(vec![]),
                payload: Bytes::from_static(&[0xff, 0xd8, 0xff, 0xd9]),
            }),
        ),
        ("bye", ClientMessage::Bye),
    ]
}

/// Every golden vector's server-side value.
fn server_vectors() -> Vec<(&'static str, ServerMessage)> {
    vec![
        (
            "welcome",
            ServerMessage::Welcome(Welcome {
                version: 1,
                max_message_size: 33_554_432,
                window: 4,
                server_name: "camdnnd".into(),
            }),
        ),
        (
            "result",
            ServerMessage::Result(FrameResult {
                stream_id: 7,
                seq: 42,
                timing: Timing {
                    queue_us: 100,
                    detect_us: 2000,
                    classify_us: 3000,
                    total_us: 5500,
                },
                objects: vec![ObjectResult {
                    bbox: BBox {
                        x0: 10.0,
                        y0: 20.0,
                        x1: 30.0,
                        y1: 40.0,
                    },
                    class: ClassRef::Name("person".into()),
                    score: 0.75,
                    outputs: vec![
                        Output {
                            model: "age".into(),
                            value: OutputValue::TopK(vec![
                                Label {
                                    label: "adult".into(),
                                    score: 0.5,
                                },
                                Label {
                                    label: "child".into(),
                                    score: 0.25,
                                },
                            ]),
                        },
                        Output {
                            model: "emb".into(),
                            value: OutputValue::Tensors(vec![Tensor {
                                name: "v".into(),
                                dims: vec![1, 2],
                                data: vec![1.0, -2.0],
                            }]),
                        },
                    ],
                }],
                objects_dropped: 0,
            }),
        ),
        (
            "result_v2",
            ServerMessage::Result(FrameResult {
                stream_id: 7,
                seq: 42,
                timing: Timing {
                    queue_us: 100,
                    detect_us: 2000,
                    classify_us: 3000,
                    total_us: 5500,
                },
                objects: vec![ObjectResult {
                    bbox: BBox {
                        x0: 10.0,
                        y0: 20.0,
                        x1: 30.0,
                        y1: 40.0,
                    },
                    class: ClassRef::Id(0),
                    score: 0.75,
                    outputs: vec![],
                }],
                objects_dropped: 65503,
            }),
        ),
        (
            "dropped",
            ServerMessage::Dropped(Dropped {
                stream_id: 7,
                seq: 43,
                reason: DropReason::DeadlinePassed,
            }),
        ),
        (
            "rejected",
            ServerMessage::Rejected(Rejected {
                stream_id: 7,
                seq: 44,
                reason: RejectReason::PayloadSizeMismatch,
                message: "bad".into(),
            }),
        ),
        (
            "error",
            ServerMessage::Error(ServerError {
                code: ErrorCode::UnsupportedVersion,
                closing: true,
                message: "no common version".into(),
            }),
        ),
        (
            "error_v2",
            ServerMessage::Error(ServerError {
                code: ErrorCode::ConnectionLimit,
                closing: true,
                message: "too many connections (at most 64)".into(),
            }),
        ),
    ]
}

/// The protocol version a golden vector is written in: `NAME_v2` is version 2, the rest 1.
fn version_of(name: &str) -> u16 {
    if name.ends_with("_v2") {
        2
    } else {
        1
    }
}

#[test]
fn client_messages_encode_to_and_decode_from_the_golden_bytes() {
    for (name, msg) in client_vectors() {
        let bytes = golden(name);
        let mut enc = bytes::BytesMut::new();
        msg.encode_version(&mut enc, MAX, version_of(name)).unwrap();
        assert_eq!(enc.to_vec(), bytes, "encoding of golden vector {name}");
        assert_eq!(
            ClientMessage::decode_exact(&bytes, MAX),
            Ok(msg),
            "decoding of golden vector {name}"
        );
    }
}

#[test]
fn server_messages_encode_to_and_decode_from_the_golden_bytes() {
    for (name, msg) in server_vectors() {
        let bytes = golden(name);
        let mut enc = bytes::BytesMut::new();
        msg.encode_version(&mut enc, MAX, version_of(name)).unwrap();
        assert_eq!(enc.to_vec(), bytes, "encoding of golden vector {name}");
        assert_eq!(
            ServerMessage::decode_exact(&bytes, MAX),
            Ok(msg),
            "decoding of golden vector {name}"
        );
    }
}

#[test]
fn every_golden_file_is_checked() {
    let mut covered: Vec<String> = client_vectors()
        .into_iter()
        .map(|(n, _)| n.to_owned())
        .chain(server_vectors().into_iter().map(|(n, _)| n.to_owned()))
        .collect();
    covered.sort();
    let mut on_disk: Vec<String> = std::fs::read_dir(golden_dir())
        .expect("golden dir")
        .filter_map(|e| {
            let name = e
                .expect("dir entry")
                .file_name()
                .into_string()
                .expect("utf-8 name");
            name.strip_suffix(".hex").map(str::to_owned)
        })
        .collect();
    on_disk.sort();
    assert_eq!(covered, on_disk);
}
