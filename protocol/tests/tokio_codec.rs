//! `ServerCodec` and `ClientCodec` driving `Framed` on a tokio `UnixStream` pair.
#![cfg(feature = "tokio")]

use bytes::Bytes;
use camdnn_protocol::*;
use futures_util::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio_util::codec::{Framed, FramedRead};

const MAX: u32 = 1 << 20;

fn frame(seq: u64, width: u32) -> Frame {
    Frame {
        stream_id: 3,
        seq,
        capture_ts_us: 0,
        width,
        height: 1,
        pixel_format: PixelFormat::Rgb24,
        priority: None,
        deadline: None,
        detections: None,
        payload: Bytes::from(vec![7; 6]),
    }
}

#[tokio::test]
async fn framed_server_and_client_talk_and_invalid_frames_are_rejected_not_fatal() {
    let (a, b) = UnixStream::pair().expect("pair");
    let mut server = Framed::new(a, ServerCodec::new(MAX));
    let mut client = Framed::new(b, ClientCodec::new(MAX));

    client
        .send(ClientMessage::Hello(Hello {
            versions: vec![1],
            client_name: "tokio".into(),
        }))
        .await
        .expect("send hello");
    let good = ClientMessage::Frame(frame(1, 2));
    client.send(&good).await.expect("send frame");

    // An invalid frame (width 3 for a 6-byte RGB24 payload), written as raw bytes since the
    // encoder refuses to produce it.
    let mut raw = Vec::new();
    {
        let mut b = bytes::BytesMut::new();
        ClientMessage::Frame(frame(2, 2))
            .encode(&mut b, MAX)
            .expect("encode");
        b[12 + 4 + 8 + 8] = 3; // width
        raw.extend_from_slice(&b);
    }
    client.get_mut().write_all(&raw).await.expect("write raw");
    client
        .send(ClientMessage::Frame(frame(3, 2)))
        .await
        .expect("send frame");
    client.send(ClientMessage::Bye).await.expect("send bye");

    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(
            server
                .next()
                .await
                .expect("a message")
                .expect("no fatal error"),
        );
    }
    assert_eq!(
        got[0],
        Ok(ClientMessage::Hello(Hello {
            versions: vec![1],
            client_name: "tokio".into()
        }))
    );
    assert_eq!(got[1], Ok(good));
    let Err(rejected) = &got[2] else {
        panic!("expected a rejection, got {:?}", got[2])
    };
    assert_eq!((rejected.stream_id, rejected.seq), (3, 2));
    assert_eq!(rejected.reason, RejectReason::PayloadSizeMismatch);
    assert_eq!(got[3], Ok(ClientMessage::Frame(frame(3, 2))));
    assert_eq!(got[4], Ok(ClientMessage::Bye));

    let answer = ServerMessage::Rejected(rejected.clone());
    server.send(&answer).await.expect("send rejected");
    drop(server);
    assert_eq!(
        client.next().await.expect("an answer").expect("decodes"),
        answer
    );
    assert!(client.next().await.is_none(), "clean end of stream");
}

#[tokio::test]
async fn fatal_errors_end_the_stream_with_a_typed_error() {
    let (a, mut b) = UnixStream::pair().expect("pair");
    let mut server = FramedRead::new(a, ServerCodec::new(MAX));
    b.write_all(b"GET / HTTP/1.1\r\n").await.expect("write");
    match server.next().await {
        Some(Err(CodecError::Decode(DecodeError::BadMagic { found }))) => {
            assert_eq!(&found, b"GET ")
        }
        other => panic!("expected BadMagic, got {other:?}"),
    }
}

#[tokio::test]
async fn oversized_bodies_are_refused_from_the_header() {
    let (a, mut b) = UnixStream::pair().expect("pair");
    let mut server = FramedRead::new(a, ServerCodec::new(16));
    let mut msg = bytes::BytesMut::new();
    ClientMessage::Frame(frame(1, 2))
        .encode(&mut msg, MAX)
        .expect("encode");
    // Only the header is sent: the error must not wait for the body.
    b.write_all(&msg[..HEADER_LEN]).await.expect("write");
    match server.next().await {
        Some(Err(CodecError::Decode(DecodeError::BodyTooLarge { max: 16, .. }))) => {}
        other => panic!("expected BodyTooLarge, got {other:?}"),
    }
}

#[tokio::test]
async fn peer_closing_mid_message_is_a_truncation_error() {
    let (a, mut b) = UnixStream::pair().expect("pair");
    let mut client = FramedRead::new(a, ClientCodec::new(MAX));
    b.write_all(b"CDNN\x01\x00\x83").await.expect("write");
    drop(b);
    match client.next().await {
        Some(Err(CodecError::Decode(DecodeError::TruncatedHeader { got: 7 }))) => {}
        other => panic!("expected TruncatedHeader, got {other:?}"),
    }
}

#[test]
fn codec_payloads_share_the_read_buffer_instead_of_copying() {
    use tokio_util::codec::Decoder;
    let f = Frame {
        width: 64,
        height: 48,
        payload: Bytes::from(vec![9; 64 * 48 * 3]),
        ..frame(1, 2)
    };
    let mut buf = bytes::BytesMut::new();
    ClientMessage::Frame(f.clone())
        .encode(&mut buf, MAX)
        .expect("encode");
    let payload_at = buf.as_ptr() as usize + buf.len() - f.payload.len();
    match ServerCodec::new(MAX).decode(&mut buf) {
        Ok(Some(Ok(ClientMessage::Frame(got)))) => {
            assert_eq!(got, f);
            assert_eq!(got.payload.as_ptr() as usize, payload_at);
        }
        other => panic!("expected a frame, got {other:?}"),
    }
}
