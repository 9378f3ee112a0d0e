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
                    track_id: 0,
                    box_age: 0,
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
                            age: 0,
                        },
                        Output {
                            model: "emb".into(),
                            value: OutputValue::Tensors(vec![Tensor {
                                name: "v".into(),
                                dims: vec![1, 2],
                                data: vec![1.0, -2.0],
                            }]),
                            age: 0,
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
                    track_id: 0,
                    box_age: 0,
                    outputs: vec![],
                }],
                objects_dropped: 65503,
            }),
        ),
        (
            "result_v3",
            ServerMessage::Result(FrameResult {
                stream_id: 7,
                seq: 42,
                timing: Timing {
                    queue_us: 100,
                    detect_us: 0,
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
                    track_id: 5,
                    box_age: 2,
                    outputs: vec![Output {
                        model: "age".into(),
                        value: OutputValue::TopK(vec![Label {
                            label: "adult".into(),
                            score: 0.5,
                        }]),
                        age: 3,
                    }],
                }],
                objects_dropped: 0,
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

/// The protocol version a golden vector is written in: `NAME_vN` is version N, the rest 1.
fn version_of(name: &str) -> u16 {
    name.rsplit_once("_v")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(1)
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

#[test]
fn a_version_3_result_reaches_older_peers_without_tracks_and_ages() {
    let (_, v3) = server_vectors()
        .into_iter()
        .find(|(n, _)| *n == "result_v3")
        .expect("result_v3 vector");
    let ServerMessage::Result(mut expected) = v3.clone() else {
        panic!("result_v3 is a Result");
    };
    for o in &mut expected.objects {
        (o.track_id, o.box_age) = (0, 0);
        for out in &mut o.outputs {
            out.age = 0;
        }
    }
    let full = golden("result_v3");
    for version in [1u16, 2] {
        let mut enc = bytes::BytesMut::new();
        v3.encode_version(&mut enc, MAX, version).unwrap();
        // 8 bytes of track and box age, 4 of the output's age, in version 1 also the
        // 4 of objects_dropped.
        let shorter = 12 + if version == 1 { 4 } else { 0 };
        assert_eq!(enc.len(), full.len() - shorter, "version {version}");
        assert_eq!(u16::from_le_bytes([enc[4], enc[5]]), version);
        let decoded = ServerMessage::decode_exact(&enc, MAX).unwrap();
        assert_eq!(
            decoded,
            ServerMessage::Result(expected.clone()),
            "version {version}"
        );
    }
}
