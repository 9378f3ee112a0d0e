//! Malformed input over a real socket: each bad message is answered with an
//! `Error` (connection closed) or a `Rejected` (connection kept), and other
//! clients keep being served throughout.

mod service_common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use bytes::BytesMut;
use camdnn_daemon::server::config::ServerConfig;
use camdnn_protocol::{
    Client, ClientMessage, ErrorCode, Hello, RejectReason, ServerMessage, DEFAULT_MAX_MESSAGE_SIZE,
};
use service_common::{frame, FakeProcessor, TestServer};

const MAX: u32 = 4096;

fn server() -> TestServer {
    let mut cfg = ServerConfig::with_socket("unused");
    cfg.max_message_size = MAX;
    TestServer::start(cfg, FakeProcessor::new(Some(Duration::from_millis(1)), 4))
}

fn encode(m: &ClientMessage) -> Vec<u8> {
    let mut b = BytesMut::new();
    m.encode(&mut b, DEFAULT_MAX_MESSAGE_SIZE).expect("encode");
    b.to_vec()
}

fn hello() -> Vec<u8> {
    encode(&ClientMessage::Hello(Hello {
        versions: vec![1],
        client_name: "bad".into(),
    }))
}

fn header(version: u16, kind: u8, flags: u8, body_len: u32) -> Vec<u8> {
    let mut h = b"CDNN".to_vec();
    h.extend_from_slice(&version.to_le_bytes());
    h.push(kind);
    h.push(flags);
    h.extend_from_slice(&body_len.to_le_bytes());
    h
}

/// Sends `bytes` (then closes our write side if `eof`) and reads every
/// message until the server closes.
fn exchange(socket: &std::path::Path, bytes: &[u8], eof: bool) -> Vec<ServerMessage> {
    let mut s = UnixStream::connect(socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    s.write_all(bytes).expect("write");
    if eof {
        s.shutdown(std::net::Shutdown::Write).expect("shutdown");
    }
    let mut all = Vec::new();
    s.read_to_end(&mut all)
        .expect("read until the server closes");
    let mut out = Vec::new();
    let mut rest = &all[..];
    while !rest.is_empty() {
        let (m, used) = ServerMessage::decode(rest, DEFAULT_MAX_MESSAGE_SIZE)
            .expect("server bytes decode")
            .expect("whole message");
        out.push(m);
        rest = &rest[used..];
    }
    out
}

fn error_code(msgs: &[ServerMessage]) -> ErrorCode {
    match msgs.last() {
        Some(ServerMessage::Error(e)) => {
            assert!(e.closing);
            assert!(!e.message.is_empty());
            e.code
        }
        other => panic!("expected a closing Error, got {other:?}"),
    }
}

/// A well-behaved client gets a result (run between the bad ones).
fn good_client_is_served(socket: &std::path::Path, seq: u64) {
    let mut c = Client::connect(socket, "good").expect("connect");
    c.send_frame(&frame(0, seq)).expect("send");
    assert!(matches!(c.recv(), Ok(ServerMessage::Result(_))));
}

#[test]
fn every_kind_of_bad_input_gets_an_error_and_others_are_served() {
    let srv = server();
    let s = &srv.socket;
    let mut good = Client::connect(s, "steady").expect("connect");
    let mut seq = 0;
    let mut steady = |good: &mut Client| {
        good.send_frame(&frame(9, seq)).expect("send");
        assert!(matches!(good.recv(), Ok(ServerMessage::Result(_))));
        seq += 1;
    };

    // Garbage.
    let m = exchange(s, b"GET / HTTP/1.1\r\n\r\n", false);
    assert_eq!(error_code(&m), ErrorCode::BadMagic);
    steady(&mut good);

    // Wrong version in the Hello header.
    let mut h = hello();
    h[4] = 2;
    assert_eq!(
        error_code(&exchange(s, &h, false)),
        ErrorCode::UnsupportedVersion
    );
    // No common version offered.
    let h = encode(&ClientMessage::Hello(Hello {
        versions: vec![7, 9],
        client_name: "future".into(),
    }));
    assert_eq!(
        error_code(&exchange(s, &h, false)),
        ErrorCode::UnsupportedVersion
    );
    steady(&mut good);

    // Oversized: a body over the server's maximum, refused from the header alone.
    let mut b = hello();
    b.extend(header(1, 0x02, 0, MAX + 1));
    let m = exchange(s, &b, false);
    assert!(matches!(m[0], ServerMessage::Welcome(_)));
    assert_eq!(error_code(&m), ErrorCode::MessageTooLarge);

    // Truncated: the connection ends mid-message.
    let mut b = hello();
    let f = encode(&ClientMessage::Frame(frame(1, 0)));
    b.extend_from_slice(&f[..f.len() - 5]);
    assert_eq!(error_code(&exchange(s, &b, true)), ErrorCode::Malformed);
    // Truncated header.
    let mut b = hello();
    b.extend_from_slice(&f[..7]);
    assert_eq!(error_code(&exchange(s, &b, true)), ErrorCode::Malformed);
    steady(&mut good);

    // Unknown message type; a server message sent by a client.
    let mut b = hello();
    b.extend(header(1, 0x42, 0, 0));
    assert_eq!(
        error_code(&exchange(s, &b, false)),
        ErrorCode::UnknownMessageType
    );
    let mut b = hello();
    b.extend(header(1, 0x81, 0, 0));
    assert_eq!(
        error_code(&exchange(s, &b, false)),
        ErrorCode::UnknownMessageType
    );

    // Frame before Hello; second Hello; undefined flags on Bye.
    let f = encode(&ClientMessage::Frame(frame(1, 0)));
    assert_eq!(
        error_code(&exchange(s, &f, false)),
        ErrorCode::HandshakeRequired
    );
    let mut b = hello();
    b.extend(hello());
    assert_eq!(
        error_code(&exchange(s, &b, false)),
        ErrorCode::UnexpectedMessage
    );
    let mut b = hello();
    b.extend(header(1, 0x03, 0x80, 0));
    assert_eq!(error_code(&exchange(s, &b, false)), ErrorCode::Malformed);
    steady(&mut good);
    good_client_is_served(s, 0);
    drop(good);
    srv.shutdown();
}

#[test]
fn bad_frames_are_rejected_and_the_connection_goes_on() {
    let srv = server();
    let mut b = hello();
    // Wrong sizes: payload 11 bytes for a 2x2 RGB24 frame (patch a valid one).
    let mut f = encode(&ClientMessage::Frame(frame(3, 1)));
    let len = f.len();
    f.truncate(len - 1);
    let body_len = u32::from_le_bytes(f[8..12].try_into().unwrap()) - 1;
    f[8..12].copy_from_slice(&body_len.to_le_bytes());
    let pl = len - 1 - 11 - 4;
    f[pl..pl + 4].copy_from_slice(&11u32.to_le_bytes());
    b.extend(&f);
    // Zero width.
    let mut zb = BytesMut::new();
    // The encoder refuses invalid frames, so build the bytes by hand from a valid one.
    ClientMessage::Frame(frame(3, 2))
        .encode(&mut zb, DEFAULT_MAX_MESSAGE_SIZE)
        .expect("encode");
    let w_at = 12 + 4 + 8 + 8;
    zb[w_at..w_at + 4].copy_from_slice(&0u32.to_le_bytes());
    b.extend(&zb);
    // Body too short for its fields (but holding stream and seq).
    let mut t = header(1, 0x02, 0, 14);
    t.extend_from_slice(&3u32.to_le_bytes());
    t.extend_from_slice(&3u64.to_le_bytes());
    t.extend_from_slice(&[0, 0]);
    b.extend(&t);
    // Sequence number going backwards.
    b.extend(encode(&ClientMessage::Frame(frame(4, 10))));
    b.extend(encode(&ClientMessage::Frame(frame(4, 10))));
    // A good frame after all that, then Bye.
    b.extend(encode(&ClientMessage::Frame(frame(3, 4))));
    b.extend(encode(&ClientMessage::Bye));
    let msgs = exchange(&srv.socket, &b, false);
    assert!(matches!(msgs[0], ServerMessage::Welcome(_)));
    let mut rejected: Vec<(u64, RejectReason)> = Vec::new();
    let mut results = Vec::new();
    for m in &msgs[1..] {
        match m {
            ServerMessage::Rejected(r) => {
                assert!(!r.message.is_empty());
                rejected.push((r.seq, r.reason));
            }
            ServerMessage::Result(r) => results.push((r.stream_id, r.seq)),
            other => panic!("unexpected {other:?}"),
        }
    }
    rejected.sort_by_key(|r| r.0);
    assert_eq!(
        rejected,
        vec![
            (1, RejectReason::PayloadSizeMismatch),
            (2, RejectReason::BadDimensions),
            (3, RejectReason::Malformed),
            (10, RejectReason::SeqNotIncreasing),
        ]
    );
    results.sort();
    assert_eq!(results, vec![(3, 4), (4, 10)]);
    good_client_is_served(&srv.socket, 0);
    srv.shutdown();
}
