//! Helpers shared by the integration tests: golden-vector loading and proptest strategies.
#![allow(dead_code)]

pub mod peer;

use std::path::PathBuf;

use bytes::Bytes;
use camdnn_protocol::*;
use proptest::collection::vec;
use proptest::prelude::*;

/// Folder of the shared golden vectors.
pub fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Reads `tests/golden/NAME.hex`: hex pairs, whitespace and `#` comments ignored.
pub fn golden(name: &str) -> Vec<u8> {
    read_hex(&golden_dir().join(format!("{name}.hex")))
}

/// Reads an annotated hex file (golden vectors, the fuzz corpus): hex pairs, whitespace and `#`
/// comments ignored.
pub fn read_hex(path: &std::path::Path) -> Vec<u8> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let digits: String = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(|l| l.chars().filter(|c| !c.is_whitespace()))
        .collect();
    assert!(
        digits.len() % 2 == 0,
        "{}: odd number of hex digits",
        path.display()
    );
    (0..digits.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&digits[i..i + 2], 16).unwrap_or_else(|e| {
                panic!("{}: bad hex {:?}: {e}", path.display(), &digits[i..i + 2])
            })
        })
        .collect()
}

pub const MAX: u32 = DEFAULT_MAX_MESSAGE_SIZE;

fn text() -> impl Strategy<Value = String> {
    // Includes multi-byte UTF-8.
    "[a-zA-Z0-9 _é😀-]{0,12}"
}

fn finite() -> impl Strategy<Value = f32> {
    -1.0e6f32..1.0e6f32
}

fn class() -> impl Strategy<Value = ClassRef> {
    prop_oneof![
        any::<u32>().prop_map(ClassRef::Id),
        text().prop_map(ClassRef::Name)
    ]
}

fn bbox() -> impl Strategy<Value = BBox> {
    (finite(), finite(), 0.0f32..1000.0, 0.0f32..1000.0).prop_map(|(x0, y0, w, h)| BBox {
        x0,
        y0,
        x1: x0 + w,
        y1: y0 + h,
    })
}

pub fn hello() -> impl Strategy<Value = Hello> {
    (vec(any::<u16>(), 1..6), text()).prop_map(|(versions, client_name)| Hello {
        versions,
        client_name,
    })
}

fn format() -> impl Strategy<Value = PixelFormat> {
    prop_oneof![
        Just(PixelFormat::Rgb24),
        Just(PixelFormat::Bgr24),
        Just(PixelFormat::Nv12),
        Just(PixelFormat::Jpeg)
    ]
}

fn deadline() -> impl Strategy<Value = Deadline> {
    prop_oneof![
        any::<u64>().prop_map(Deadline::RelativeUs),
        any::<u64>().prop_map(Deadline::AbsoluteUs)
    ]
}

fn upstream() -> impl Strategy<Value = UpstreamDetection> {
    (bbox(), class(), 0.0f32..=1.0).prop_map(|(bbox, class, score)| UpstreamDetection {
        bbox,
        class,
        score,
    })
}

pub fn frame() -> impl Strategy<Value = Frame> {
    (
        (any::<u32>(), any::<u64>(), any::<u64>()),
        (1u32..20, 1u32..20, format()),
        (
            proptest::option::of(any::<u8>()),
            proptest::option::of(deadline()),
            proptest::option::of(vec(upstream(), 0..4)),
        ),
        any::<u8>(),
    )
        .prop_map(
            |(
                (stream_id, seq, capture_ts_us),
                (w, h, pixel_format),
                (priority, deadline, detections),
                fill,
            )| {
                let (width, height) = match pixel_format {
                    PixelFormat::Nv12 => (w * 2, h * 2),
                    _ => (w, h),
                };
                let len = pixel_format
                    .raw_len(width, height)
                    .unwrap_or(u64::from(w + h)) as usize;
                Frame {
                    stream_id,
                    seq,
                    capture_ts_us,
                    width,
                    height,
                    pixel_format,
                    priority,
                    deadline,
                    detections,
                    payload: Bytes::from(vec![fill; len]),
                }
            },
        )
}

pub fn client_message() -> impl Strategy<Value = ClientMessage> {
    prop_oneof![
        hello().prop_map(ClientMessage::Hello),
        frame().prop_map(ClientMessage::Frame),
        Just(ClientMessage::Bye)
    ]
}

pub fn welcome() -> impl Strategy<Value = Welcome> {
    (any::<u16>(), any::<u32>(), 1u16.., text()).prop_map(
        |(version, max_message_size, window, server_name)| Welcome {
            version,
            max_message_size,
            window,
            server_name,
        },
    )
}

fn tensor() -> impl Strategy<Value = Tensor> {
    (text(), vec(0u32..4, 0..4)).prop_flat_map(|(name, dims)| {
        let n: u32 = dims.iter().product();
        vec(finite(), n as usize).prop_map(move |data| Tensor {
            name: name.clone(),
            dims: dims.clone(),
            data,
        })
    })
}

fn output() -> impl Strategy<Value = Output> {
    let value = prop_oneof![
        vec(
            (text(), finite()).prop_map(|(label, score)| Label { label, score }),
            0..4
        )
        .prop_map(OutputValue::TopK),
        vec(tensor(), 0..3).prop_map(OutputValue::Tensors),
    ];
    (text(), value, any::<u32>()).prop_map(|(model, value, age)| Output { model, value, age })
}

fn object() -> impl Strategy<Value = ObjectResult> {
    (
        bbox(),
        class(),
        finite(),
        any::<[u32; 2]>(),
        vec(output(), 0..3),
    )
        .prop_map(
            |(bbox, class, score, [track_id, box_age], outputs)| ObjectResult {
                bbox,
                class,
                score,
                track_id,
                box_age,
                outputs,
            },
        )
}

pub fn result() -> impl Strategy<Value = FrameResult> {
    (
        any::<u32>(),
        any::<u64>(),
        any::<[u32; 4]>(),
        vec(object(), 0..4),
        any::<u32>(),
    )
        .prop_map(
            |(stream_id, seq, t, objects, objects_dropped)| FrameResult {
                stream_id,
                seq,
                timing: Timing {
                    queue_us: t[0],
                    detect_us: t[1],
                    classify_us: t[2],
                    total_us: t[3],
                },
                objects,
                objects_dropped,
            },
        )
}

pub fn dropped() -> impl Strategy<Value = Dropped> {
    (
        any::<u32>(),
        any::<u64>(),
        proptest::sample::select(DropReason::ALL.to_vec()),
    )
        .prop_map(|(stream_id, seq, reason)| Dropped {
            stream_id,
            seq,
            reason,
        })
}

pub fn rejected() -> impl Strategy<Value = Rejected> {
    (
        any::<u32>(),
        any::<u64>(),
        proptest::sample::select(RejectReason::ALL.to_vec()),
        text(),
    )
        .prop_map(|(stream_id, seq, reason, message)| Rejected {
            stream_id,
            seq,
            reason,
            message,
        })
}

pub fn server_error() -> impl Strategy<Value = ServerError> {
    (
        proptest::sample::select(ErrorCode::ALL.to_vec()),
        any::<bool>(),
        text(),
    )
        .prop_map(|(code, closing, message)| ServerError {
            code,
            closing,
            message,
        })
}

pub fn server_message() -> impl Strategy<Value = ServerMessage> {
    prop_oneof![
        welcome().prop_map(ServerMessage::Welcome),
        result().prop_map(ServerMessage::Result),
        dropped().prop_map(ServerMessage::Dropped),
        rejected().prop_map(ServerMessage::Rejected),
        server_error().prop_map(ServerMessage::Error),
    ]
}

/// Encodes a client message with the default limit.
pub fn enc_client(m: &ClientMessage) -> Vec<u8> {
    let mut b = bytes::BytesMut::new();
    m.encode(&mut b, MAX).expect("encodes");
    b.to_vec()
}

/// Encodes a server message with the default limit.
pub fn enc_server(m: &ServerMessage) -> Vec<u8> {
    let mut b = bytes::BytesMut::new();
    m.encode(&mut b, MAX).expect("encodes");
    b.to_vec()
}
