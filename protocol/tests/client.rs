//! The blocking `Client` against a small in-test server on a real Unix socket.

mod common;

use std::io::Write;
use std::os::unix::net::{UnixListener, UnixStream};
use std::thread;

use bytes::{Bytes, BytesMut};
use camdnn_protocol::*;
use common::peer::{answer, frame, Peer};
use common::MAX;

#[test]
fn connect_handshake_pipeline_and_bye() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("camdnnd.sock");
    let listener = UnixListener::bind(&path).expect("bind");
    const WINDOW: usize = 3;
    // The server answers a frame only once the client has WINDOW frames in flight, so the client
    // must block on the window; it reports the most frames it ever saw in flight.
    let server = thread::spawn(move || {
        let (s, _) = listener.accept().expect("accept");
        let mut peer = Peer::new(s);
        let hello = peer.accept(WINDOW as u16, MAX);
        let mut unanswered = std::collections::VecDeque::new();
        let mut most = 0;
        while let Some(m) = peer.read() {
            match m {
                ClientMessage::Frame(f) => {
                    assert_eq!(f, frame(f.stream_id, f.seq));
                    unanswered.push_back((f.stream_id, f.seq));
                    most = most.max(unanswered.len());
                    if unanswered.len() == WINDOW {
                        let (st, seq) = unanswered.pop_front().expect("non-empty");
                        peer.send(&answer(st, seq));
                    }
                }
                ClientMessage::Bye => {
                    for (st, seq) in unanswered.drain(..) {
                        peer.send(&answer(st, seq));
                    }
                    break;
                }
                ClientMessage::Hello(_) => panic!("second Hello"),
            }
        }
        (hello, most)
    });

    let mut client = Client::connect(&path, "cam-test").expect("connect");
    assert_eq!(client.welcome().window, WINDOW as u16);
    assert_eq!(client.welcome().server_name, "test-server");
    let mut answers = Vec::new();
    for seq in 0..10 {
        client.send_frame(&frame(5, seq)).expect("send");
        assert!(client.in_flight(5) <= WINDOW);
        if seq == 6 {
            // Answers read while waiting for the window come back in order.
            answers.push(client.recv().expect("recv"));
        }
    }
    answers.extend(client.bye().expect("bye"));
    let (hello, most) = server.join().expect("server thread");
    assert_eq!(hello.client_name, "cam-test");
    assert_eq!(hello.versions, SUPPORTED_VERSIONS);
    assert_eq!(
        most, WINDOW,
        "the client pipelines up to the window, no further"
    );
    let expected: Vec<ServerMessage> = (0..10).map(|seq| answer(5, seq)).collect();
    assert_eq!(answers, expected);
}

#[test]
fn refused_handshake_reports_the_servers_error() {
    let (a, b) = UnixStream::pair().expect("pair");
    let server = thread::spawn(move || {
        let mut peer = Peer::new(b);
        let _ = peer.read();
        peer.send(&ServerMessage::Error(ServerError {
            code: ErrorCode::UnsupportedVersion,
            closing: true,
            message: "speaks only version 9".into(),
        }));
    });
    match Client::handshake(a, "old") {
        Err(ClientError::Refused(e)) => {
            assert_eq!(e.code, ErrorCode::UnsupportedVersion);
            assert!(e.closing);
        }
        other => panic!("expected Refused, got {other:?}"),
    }
    server.join().expect("server thread");
}

#[test]
fn welcome_with_a_version_not_offered_is_an_error() {
    let (a, b) = UnixStream::pair().expect("pair");
    let server = thread::spawn(move || {
        let mut peer = Peer::new(b);
        let _ = peer.read();
        peer.send(&ServerMessage::Welcome(Welcome {
            version: 77,
            max_message_size: MAX,
            window: 1,
            server_name: String::new(),
        }));
    });
    assert!(matches!(
        Client::handshake(a, "c"),
        Err(ClientError::VersionNotOffered { chosen: 77 })
    ));
    server.join().expect("server thread");
}

#[test]
fn answers_to_frames_not_in_flight_are_errors() {
    let (a, b) = UnixStream::pair().expect("pair");
    let server = thread::spawn(move || {
        let mut peer = Peer::new(b);
        peer.accept(4, MAX);
        let _ = peer.read();
        peer.send(&answer(1, 99));
    });
    let mut client = Client::handshake(a, "c").expect("handshake");
    client.send_frame(&frame(1, 1)).expect("send");
    assert!(matches!(
        client.recv(),
        Err(ClientError::NotInFlight {
            stream_id: 1,
            seq: 99
        })
    ));
    server.join().expect("server thread");
}

#[test]
fn duplicate_and_oversized_frames_are_refused_before_sending() {
    let (a, b) = UnixStream::pair().expect("pair");
    let server = thread::spawn(move || {
        let mut peer = Peer::new(b);
        peer.accept(4, 64);
        let mut frames = 0;
        while let Some(m) = peer.read() {
            if matches!(m, ClientMessage::Frame(_)) {
                frames += 1;
            }
        }
        frames
    });
    let mut client = Client::handshake(a, "c").expect("handshake");
    client.send_frame(&frame(1, 1)).expect("send");
    assert!(matches!(
        client.send_frame(&frame(1, 1)),
        Err(ClientError::DuplicateInFlight {
            stream_id: 1,
            seq: 1
        })
    ));
    let mut big = frame(1, 2);
    big.width = 100;
    big.payload = Bytes::from(vec![0; 300]);
    assert!(matches!(
        client.send_frame(&big),
        Err(ClientError::Encode(EncodeError::TooLarge { max: 64, .. }))
    ));
    assert_eq!(client.in_flight(1), 1);
    drop(client);
    assert_eq!(server.join().expect("server thread"), 1);
}

#[test]
fn server_closing_mid_message_names_what_is_missing() {
    let (a, b) = UnixStream::pair().expect("pair");
    let server = thread::spawn(move || {
        let mut peer = Peer::new(b);
        peer.accept(4, MAX);
        let _ = peer.read();
        let mut bytes = BytesMut::new();
        answer(1, 1).encode(&mut bytes, MAX).expect("encode");
        peer.stream
            .write_all(&bytes[..bytes.len() - 3])
            .expect("write");
    });
    let mut client = Client::handshake(a, "c").expect("handshake");
    client.send_frame(&frame(1, 1)).expect("send");
    server.join().expect("server thread");
    assert!(matches!(
        client.recv(),
        Err(ClientError::Decode(DecodeError::TruncatedBody {
            kind: MessageType::Dropped,
            ..
        }))
    ));
    assert!(matches!(client.recv(), Err(ClientError::Closed)));
}
