//! No client can hold the door (`server::door`), over a real Unix socket:
//! with the connection table full of connections that never sent a frame, a
//! new client gets in by taking the slot of the longest idle, which is
//! closed with an `Error` saying why; connections waiting for answers keep
//! their slots, and when all are waiting a new client is refused; one
//! process over its cap gives up its own idle connections, and another
//! process still gets in. The rule is asserted, not a timing.

mod service_common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use bytes::BytesMut;
use camdnn_daemon::server::config::ServerConfig;
use camdnn_protocol::{
    Client, ClientError, ClientMessage, ErrorCode, Hello, ServerMessage, DEFAULT_MAX_MESSAGE_SIZE,
};
use service_common::{frame, FakeProcessor, TestServer};

/// A server with `total` slots, `per_pid` per process, answering after
/// `delay` (never, with `None`).
fn server(total: usize, per_pid: usize, delay: Option<Duration>) -> TestServer {
    let mut cfg = ServerConfig::with_socket("unused");
    cfg.max_connections = total;
    cfg.max_connections_per_pid = per_pid;
    TestServer::start(cfg, FakeProcessor::new(delay, 64))
}

/// A connection that is welcomed and then sends nothing.
fn silent(socket: &Path) -> UnixStream {
    let mut s = UnixStream::connect(socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut hello = BytesMut::new();
    ClientMessage::Hello(Hello {
        versions: vec![2],
        client_name: "silent".into(),
    })
    .encode(&mut hello, DEFAULT_MAX_MESSAGE_SIZE)
    .unwrap();
    s.write_all(&hello).unwrap();
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).expect("welcome");
    assert!(matches!(
        ServerMessage::decode(&buf[..n], DEFAULT_MAX_MESSAGE_SIZE),
        Ok(Some((ServerMessage::Welcome(_), _)))
    ));
    s
}

/// The closing `Error` the server sent `s` before closing it.
fn closed_with(s: &mut UnixStream) -> (ErrorCode, String) {
    let mut all = Vec::new();
    s.read_to_end(&mut all).expect("closed by the server");
    match ServerMessage::decode(&all, DEFAULT_MAX_MESSAGE_SIZE) {
        Ok(Some((ServerMessage::Error(e), _))) if e.closing => (e.code, e.message),
        other => panic!("expected a closing Error, got {other:?}"),
    }
}

/// A new client is served: connects, sends a frame, gets its result; it
/// stays connected.
fn served(socket: &Path) -> Client {
    let mut c = Client::connect(socket, "new").expect("admitted");
    c.send_frame(&frame(0, 0)).expect("send");
    assert!(matches!(c.recv(), Ok(ServerMessage::Result(_))));
    c
}

#[test]
fn a_full_table_of_silent_connections_admits_a_new_client_by_evicting_the_longest_idle() {
    let srv = server(8, 64, Some(Duration::from_millis(1)));
    let mut held: Vec<UnixStream> = (0..8)
        .map(|_| {
            let s = silent(&srv.socket);
            // Distinct idle times: the first is idle the longest.
            std::thread::sleep(Duration::from_millis(5));
            s
        })
        .collect();
    let first = served(&srv.socket);
    let (code, message) = closed_with(&mut held[0]);
    assert_eq!(code, ErrorCode::ConnectionLimit);
    assert!(message.starts_with("evicted:"), "{message}");
    // The next new client takes the next longest idle (the first sent a frame).
    let second = served(&srv.socket);
    let (_, message) = closed_with(&mut held[1]);
    assert!(message.starts_with("evicted:"), "{message}");
    drop((first, second));
    srv.shutdown();
}

#[test]
fn connections_waiting_for_answers_keep_their_slots_and_a_new_client_is_refused() {
    let p = FakeProcessor::new(None, 64);
    let mut cfg = ServerConfig::with_socket("unused");
    cfg.max_connections = 4;
    cfg.drain_timeout_ms = 200;
    let srv = TestServer::start(cfg, p.clone());
    let mut waiting: Vec<Client> = (0..4)
        .map(|n| {
            let mut c = Client::connect(&srv.socket, "waiting").expect("connect");
            c.send_frame(&frame(n, 0)).expect("send");
            c
        })
        .collect();
    while p.submitted.load(std::sync::atomic::Ordering::SeqCst) < 4 {
        std::thread::sleep(Duration::from_millis(5));
    }
    match Client::connect(&srv.socket, "late") {
        Err(ClientError::Refused(e)) => {
            assert_eq!(e.code, ErrorCode::ConnectionLimit);
            assert_eq!(
                e.message,
                "too many connections from all clients (at most 4) and every one has frames in flight"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    srv.handle.shutdown();
    for c in &mut waiting {
        assert!(matches!(c.recv(), Ok(ServerMessage::Dropped(_))));
    }
    srv.rt.block_on(srv.done).expect("server");
}

/// One process at its cap gives up its own idle connection for a new one;
/// another process (the Python client) gets in while this one's are all busy.
#[test]
fn a_process_over_its_cap_gives_up_its_own_slots_and_others_still_get_in() {
    let p = FakeProcessor::new(None, 64);
    let mut cfg = ServerConfig::with_socket("unused");
    cfg.max_connections = 64;
    cfg.max_connections_per_pid = 2;
    cfg.drain_timeout_ms = 200;
    let srv = TestServer::start(cfg, p.clone());
    let mut idle = silent(&srv.socket);
    std::thread::sleep(Duration::from_millis(5));
    let mut busy = Client::connect(&srv.socket, "busy").expect("connect");
    busy.send_frame(&frame(0, 0)).expect("send");
    while p.submitted.load(std::sync::atomic::Ordering::SeqCst) < 1 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut second = Client::connect(&srv.socket, "second").expect("takes the idle one's slot");
    let (_, message) = closed_with(&mut idle);
    assert!(message.starts_with("evicted:"), "{message}");
    second.send_frame(&frame(1, 0)).expect("send");
    while p.submitted.load(std::sync::atomic::Ordering::SeqCst) < 2 {
        std::thread::sleep(Duration::from_millis(5));
    }
    match Client::connect(&srv.socket, "third") {
        Err(ClientError::Refused(e)) => assert!(
            e.message
                .starts_with("too many connections from this process (at most 2)"),
            "{}",
            e.message
        ),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Another process is not held to this one's cap.
    let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients/python");
    let script = "import sys; sys.path.insert(0, sys.argv[1]); from camdnn_client import Client; \
                  c = Client(sys.argv[2], 'other', timeout=20); print(c.welcome['type'])";
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&clients)
        .arg(&srv.socket)
        .output()
        .expect("run python3");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "welcome",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    srv.handle.shutdown();
    drop((busy, second));
    srv.rt.block_on(srv.done).expect("server");
}
