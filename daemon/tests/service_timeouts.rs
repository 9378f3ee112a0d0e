//! Timeouts and limits for every client state, over a real Unix socket with short configured
//! timeouts: a silent or half-sent handshake, a message left half-sent, an idle connection and a
//! client that never reads are all closed, so they cannot hold connection slots; a refused
//! connection gets the dedicated `ConnectionLimit` code (protocol version 2) or its version-1
//! stand-in. Nothing here compares measured durations: each case only waits for the outcome.

mod service_common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use camdnn_daemon::server::config::ServerConfig;
use camdnn_protocol::{
    Client, ClientError, ClientMessage, ErrorCode, Hello, ServerMessage, DEFAULT_MAX_MESSAGE_SIZE,
};
use service_common::{frame, FakeProcessor, TestServer};

fn server(adjust: impl FnOnce(&mut ServerConfig)) -> TestServer {
    let mut cfg = ServerConfig::with_socket("unused");
    cfg.handshake_timeout_ms = 300;
    cfg.message_timeout_ms = 300;
    cfg.idle_timeout_ms = 300;
    cfg.write_timeout_ms = 300;
    adjust(&mut cfg);
    TestServer::start(cfg, FakeProcessor::new(Some(Duration::from_millis(1)), 4))
}

fn encode(m: &ClientMessage) -> Vec<u8> {
    let mut b = BytesMut::new();
    m.encode(&mut b, DEFAULT_MAX_MESSAGE_SIZE).expect("encode");
    b.to_vec()
}

fn hello(versions: &[u16]) -> Vec<u8> {
    encode(&ClientMessage::Hello(Hello {
        versions: versions.to_vec(),
        client_name: "slow".into(),
    }))
}

fn connect(socket: &Path) -> UnixStream {
    let s = UnixStream::connect(socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    s.set_write_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    s
}

/// Every message the server sends until it closes the connection.
fn read_all(s: &mut UnixStream) -> Vec<ServerMessage> {
    let mut all = Vec::new();
    s.read_to_end(&mut all)
        .expect("the server closes the connection");
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

/// The closing `Error` the server ended with: its code and message.
fn closing_error(msgs: &[ServerMessage]) -> (ErrorCode, String) {
    match msgs.last() {
        Some(ServerMessage::Error(e)) if e.closing => (e.code, e.message.clone()),
        other => panic!("expected a closing Error, got {other:?}"),
    }
}

/// A new client gets in and is served. Slots of connections the server has just closed are
/// released by their tasks a moment after the close, so a refusal is retried for up to 10 s.
fn served(socket: &Path, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut c = loop {
        match Client::connect(socket, name) {
            Err(ClientError::Refused(e))
                if e.code == ErrorCode::ConnectionLimit && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            other => break other.expect("connect"),
        }
    };
    c.send_frame(&frame(0, 0)).expect("send");
    assert!(matches!(c.recv(), Ok(ServerMessage::Result(_))));
}

#[test]
fn silent_connections_time_out_and_do_not_lock_out_a_new_client() {
    // Long enough for the new client to come first on a busy host.
    let srv = server(|c| {
        c.handshake_timeout_ms = 4000;
        c.max_connections = 64;
    });
    // 63 clients that send nothing and one that sends six bytes of its Hello hold all 64
    // slots.
    let mut silent: Vec<UnixStream> = (0..63).map(|_| connect(&srv.socket)).collect();
    let mut six = connect(&srv.socket);
    six.write_all(&hello(&[1, 2])[..6]).expect("write");
    silent.push(six);
    // A new client is not locked out: it takes the slot of one that never sent a frame.
    served(&srv.socket, "meanwhile");
    // Each of them is closed with an Error: the one that gave up its slot as evicted, the
    // others by the handshake timeout (its version-1 stand-in, Malformed: they never said
    // which versions they speak).
    let (mut evicted, mut timed_out) = (0, 0);
    for s in &mut silent {
        let (code, message) = closing_error(&read_all(s));
        if message.starts_with("evicted:") {
            evicted += 1;
        } else {
            assert_eq!(code, ErrorCode::Malformed);
            assert!(
                message.contains("no whole Hello within 4000 ms"),
                "{message}"
            );
            timed_out += 1;
        }
    }
    assert_eq!((evicted, timed_out), (1, 63));
    served(&srv.socket, "after");
    srv.shutdown();
}

#[test]
fn a_message_left_half_sent_times_out() {
    let srv = server(|c| c.idle_timeout_ms = 0);
    let mut s = connect(&srv.socket);
    s.write_all(&hello(&[1, 2])).expect("write");
    let mut welcome = [0u8; 64];
    let n = s.read(&mut welcome).expect("welcome");
    assert!(matches!(
        ServerMessage::decode(&welcome[..n], DEFAULT_MAX_MESSAGE_SIZE),
        Ok(Some((ServerMessage::Welcome(_), _)))
    ));
    // Trickle a frame one byte at a time, far slower than the message timeout allows.
    let bytes = encode(&ClientMessage::Frame(frame(0, 0)));
    for b in &bytes[..bytes.len() - 1] {
        if s.write_all(std::slice::from_ref(b)).is_err() {
            break; // closed already
        }
        std::thread::sleep(Duration::from_millis(40));
    }
    let (code, message) = closing_error(&read_all(&mut s));
    assert_eq!(code, ErrorCode::Timeout);
    assert!(message.contains("half-sent for 300 ms"), "{message}");
    served(&srv.socket, "other");
    srv.shutdown();
}

#[test]
fn an_idle_connection_times_out_but_one_waiting_for_answers_does_not() {
    let srv = server(|_| {});
    let mut c = Client::connect(&srv.socket, "idle").expect("connect");
    // Served normally first.
    c.send_frame(&frame(0, 0)).expect("send");
    assert!(matches!(c.recv(), Ok(ServerMessage::Result(_))));
    // Then silent: closed with a Timeout error naming the idle limit.
    match c.recv() {
        Ok(ServerMessage::Error(e)) => {
            assert_eq!(e.code, ErrorCode::Timeout);
            assert!(
                e.message.contains("nothing sent for 300 ms"),
                "{}",
                e.message
            );
        }
        other => panic!("expected a timeout error, got {other:?}"),
    }
    srv.shutdown();
    // A frame held inside the processor for longer than the idle limit is still answered.
    let mut cfg = ServerConfig::with_socket("unused");
    cfg.idle_timeout_ms = 200;
    let slow = TestServer::start(cfg, FakeProcessor::new(Some(Duration::from_millis(900)), 4));
    let mut c = Client::connect(&slow.socket, "waiting").expect("connect");
    c.send_frame(&frame(0, 0)).expect("send");
    assert!(matches!(c.recv(), Ok(ServerMessage::Result(_))));
    slow.shutdown();
}

#[test]
fn a_client_that_never_reads_is_closed_and_others_are_served() {
    let srv = server(|c| c.idle_timeout_ms = 0);
    let mut s = connect(&srv.socket);
    s.write_all(&hello(&[1, 2])).expect("write");
    // Frames on many streams, never reading a single answer: the server's writes block, then
    // the write timeout closes the connection and our writes fail.
    let mut sent = 0u64;
    let closed = loop {
        let f = frame((sent % 64) as u32, sent / 64);
        if let Err(e) = s.write_all(&encode(&ClientMessage::Frame(f))) {
            break e;
        }
        sent += 1;
        assert!(
            sent < 10_000_000,
            "the server never closed a client that does not read"
        );
    };
    assert!(
        matches!(
            closed.kind(),
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
        ),
        "{closed}"
    );
    served(&srv.socket, "reader");
    srv.shutdown();
}

#[test]
fn a_version_1_client_over_the_limit_gets_the_version_1_code() {
    // The connection in the slot waits for an answer, so it keeps its slot.
    let mut cfg = ServerConfig::with_socket("unused");
    cfg.max_connections = 1;
    cfg.drain_timeout_ms = 100;
    let p = FakeProcessor::new(None, 4);
    let srv = TestServer::start(cfg, p.clone());
    let mut first = Client::connect(&srv.socket, "first").expect("connect");
    first.send_frame(&frame(0, 0)).expect("send");
    while p.submitted.load(std::sync::atomic::Ordering::SeqCst) < 1 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut s = connect(&srv.socket);
    s.write_all(&hello(&[1])).expect("write");
    let msgs = read_all(&mut s);
    let (code, message) = closing_error(&msgs);
    assert_eq!(code, ErrorCode::Internal);
    assert!(
        message.contains("too many connections from all clients (at most 1)"),
        "{message}"
    );
    srv.shutdown();
}
