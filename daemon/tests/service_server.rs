//! The socket server end to end over a real Unix socket, with a test-only
//! frame processor: handshake, pipelining, flow control, drain.

mod service_common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::Duration;

use camdnn_daemon::server::config::ServerConfig;
use camdnn_protocol::{
    BBox, ClassRef, Client, ClientError, Deadline, DropReason, ErrorCode, Label, ObjectResult,
    Output, OutputValue, ServerMessage,
};
use service_common::{frame, key, raw, FakeProcessor, TestServer};

fn cfg() -> ServerConfig {
    ServerConfig::with_socket("unused")
}

/// Answers by kind: results, drops by reason.
#[derive(Debug, Default)]
struct Tally {
    results: usize,
    dropped: HashMap<DropReason, usize>,
    other: Vec<ServerMessage>,
}

impl Tally {
    fn add(&mut self, m: ServerMessage) {
        match m {
            ServerMessage::Result(_) => self.results += 1,
            ServerMessage::Dropped(d) => *self.dropped.entry(d.reason).or_default() += 1,
            other => self.other.push(other),
        }
    }
    fn total(&self) -> usize {
        self.results + self.dropped.values().sum::<usize>()
    }
}

/// Sends `n` frames on each of `streams` streams, pipelined within the
/// window, then `Bye`; checks every frame is answered exactly once.
fn run_client(socket: &std::path::Path, name: &str, streams: u32, n: u64) -> Tally {
    let mut c = Client::connect(socket, name).expect("connect");
    let mut answers = Vec::new();
    for seq in 0..n {
        for s in 0..streams {
            c.send_frame(&frame(s, seq)).expect("send");
        }
    }
    answers.extend(c.bye().expect("bye"));
    let mut seen = HashSet::new();
    let mut tally = Tally::default();
    for m in answers {
        let k = key(&m).unwrap_or_else(|| panic!("unexpected answer {m:?}"));
        assert!(seen.insert(k), "{k:?} answered twice");
        tally.add(m);
    }
    assert_eq!(
        seen.len() as u64,
        u64::from(streams) * n,
        "every frame answered"
    );
    tally
}

#[test]
fn pipelined_frames_on_many_streams_are_all_answered() {
    let p = FakeProcessor::new(Some(Duration::from_millis(1)), 8);
    let server = TestServer::start(cfg(), p.clone());
    let c = Client::connect(&server.socket, "probe").expect("connect");
    assert_eq!(c.welcome().version, camdnn_protocol::PROTOCOL_VERSION);
    assert_eq!(c.welcome().window, 4);
    drop(c);
    let tally = run_client(&server.socket, "cam", 3, 40);
    assert!(tally.results > 0);
    assert!(tally.other.is_empty(), "{:?}", tally.other);
    assert!(
        p.peak.load(Ordering::SeqCst) <= 8,
        "processor limit respected"
    );
    server.shutdown();
}

#[test]
fn many_clients_at_once() {
    let p = FakeProcessor::new(Some(Duration::from_millis(2)), 4);
    let server = TestServer::start(cfg(), p.clone());
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let socket = server.socket.clone();
            std::thread::spawn(move || run_client(&socket, &format!("cam{i}"), 2, 30))
        })
        .collect();
    for t in threads {
        let tally = t.join().expect("client thread");
        assert!(tally.results > 0, "every client gets results");
    }
    assert!(p.peak.load(Ordering::SeqCst) <= 4);
    server.shutdown();
}

#[test]
fn a_stream_that_falls_behind_gets_its_newest_frame_processed() {
    // One frame at a time, slow: a stream sending 4 at once gets the first
    // processed, the middle ones superseded and the newest processed.
    let p = FakeProcessor::new(Some(Duration::from_millis(200)), 1);
    let mut c = cfg();
    c.stream_max_in_flight = 1;
    let server = TestServer::start(c, p.clone());
    let mut client = Client::connect(&server.socket, "cam").expect("connect");
    for seq in 0..4 {
        client.send_frame(&frame(0, seq)).expect("send");
    }
    let answers = client.bye().expect("bye");
    let mut by_seq: Vec<(u64, String)> = answers
        .iter()
        .map(|m| {
            let (_, seq) = key(m).expect("frame answer");
            let what = match m {
                ServerMessage::Result(_) => "result".to_owned(),
                ServerMessage::Dropped(d) => format!("{:?}", d.reason),
                other => format!("{other:?}"),
            };
            (seq, what)
        })
        .collect();
    by_seq.sort();
    assert_eq!(
        by_seq,
        vec![
            (0, "result".into()),
            (1, "Superseded".into()),
            (2, "Superseded".into()),
            (3, "result".into())
        ]
    );
    // The pipeline hears of both: its scheduler may re-plan early.
    assert_eq!(p.dropped.load(Ordering::SeqCst), 2);
    server.shutdown();
}

#[test]
fn frames_beyond_the_window_are_dropped_not_queued() {
    // A client ignoring the window: raw pipelining of 10 frames with window 2
    // and a processor that never answers.
    let p = FakeProcessor::new(None, 1);
    let mut c = cfg();
    c.window = 2;
    c.drain_timeout_ms = 100;
    let server = TestServer::start(c, p.clone());
    let mut raw = raw::Raw::connect(&server.socket);
    for seq in 0..10 {
        raw.send_frame(&frame(5, seq));
    }
    let mut tally = Tally::default();
    for _ in 0..8 {
        tally.add(raw.recv());
    }
    assert_eq!(tally.dropped.get(&DropReason::WindowExceeded), Some(&8));
    // The two within the window are answered at shutdown.
    server.handle.shutdown();
    for _ in 0..2 {
        tally.add(raw.recv());
    }
    assert_eq!(tally.dropped.get(&DropReason::ShuttingDown), Some(&2));
    assert_eq!(tally.total(), 10);
    server.rt.block_on(server.done).expect("server");
}

#[test]
fn deadlines_drop_frames_before_they_reach_the_processor() {
    let p = FakeProcessor::new(Some(Duration::from_millis(300)), 1);
    let server = TestServer::start(cfg(), p.clone());
    let mut client = Client::connect(&server.socket, "cam").expect("connect");
    // Already past on arrival: absolute deadline at the epoch.
    let mut late = frame(1, 0);
    late.deadline = Some(Deadline::AbsoluteUs(1));
    client.send_frame(&late).expect("send");
    // Occupies the processor for 300 ms ...
    client.send_frame(&frame(2, 0)).expect("send");
    // ... while this one waits with a 5 ms deadline.
    let mut short = frame(3, 0);
    short.deadline = Some(Deadline::RelativeUs(5_000));
    client.send_frame(&short).expect("send");
    let answers = client.bye().expect("bye");
    let mut got: Vec<(u32, String)> = answers
        .iter()
        .map(|m| match m {
            ServerMessage::Result(r) => (r.stream_id, "result".to_owned()),
            ServerMessage::Dropped(d) => (d.stream_id, format!("{:?}", d.reason)),
            other => panic!("{other:?}"),
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            (1, "DeadlinePassed".into()),
            (2, "result".into()),
            (3, "DeadlinePassed".into())
        ]
    );
    assert_eq!(
        p.submitted.load(Ordering::SeqCst),
        1,
        "expired frames never submitted"
    );
    server.shutdown();
}

/// A stalled processor moves nothing in the admission table: a frame that
/// waits is answered at its deadline all the same, long before the stalled
/// frame comes back.
#[test]
fn a_waiting_frame_is_answered_at_its_deadline_while_the_processor_is_stalled() {
    let p = FakeProcessor::new(Some(Duration::from_secs(10)), 1);
    let server = TestServer::start(cfg(), p.clone());
    let mut raw = raw::Raw::connect(&server.socket);
    raw.send_frame(&frame(2, 0)); // stalls the processor for 10 s
    let mut waiting = frame(3, 0);
    waiting.deadline = Some(Deadline::RelativeUs(100_000));
    raw.send_frame(&waiting);
    // Raw's read timeout (20 s) is past the stall: the first answer is
    // the waiting frame's drop only if a timer sent it.
    match raw.recv() {
        ServerMessage::Dropped(d) => {
            assert_eq!((d.stream_id, d.reason), (3, DropReason::DeadlinePassed));
        }
        other => panic!("expected the waiting frame's drop first, got {other:?}"),
    }
    assert_eq!(
        p.submitted.load(Ordering::SeqCst),
        1,
        "it was never submitted"
    );
    server.shutdown();
}

/// The processor's room can grow with nothing finishing (a pipeline lets
/// more frames in while some are stuck on a stalled unit): a waiting frame
/// is admitted then, without waiting for the stalled frame to come back.
#[test]
fn a_waiting_frame_enters_when_the_processor_makes_room_while_stalled() {
    let p = FakeProcessor::new(Some(Duration::from_secs(10)), 1);
    let server = TestServer::start(cfg(), p.clone());
    let mut raw = raw::Raw::connect(&server.socket);
    raw.send_frame(&frame(2, 0)); // stalls the processor for 10 s
    while p.submitted.load(Ordering::SeqCst) < 1 {
        std::thread::sleep(Duration::from_millis(5));
    }
    raw.send_frame(&frame(3, 0));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(p.submitted.load(Ordering::SeqCst), 1, "no room yet");
    p.limit.store(2, Ordering::SeqCst);
    // Nothing else happens on the server: only its own look at the room
    // lets the waiting frame in, long before the stalled one is back.
    let t0 = std::time::Instant::now();
    while p.submitted.load(Ordering::SeqCst) < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the waiting frame was not admitted while the processor stalled"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    server.shutdown();
}

#[test]
fn priority_decides_which_waiting_frame_goes_first() {
    let p = FakeProcessor::new(Some(Duration::from_millis(300)), 1);
    let server = TestServer::start(cfg(), p.clone());
    let mut client = Client::connect(&server.socket, "cam").expect("connect");
    client.send_frame(&frame(0, 0)).expect("send"); // occupies the processor
    let mut low = frame(1, 0);
    low.priority = Some(1);
    let mut high = frame(2, 0);
    high.priority = Some(250);
    client.send_frame(&low).expect("send");
    client.send_frame(&high).expect("send");
    let order: Vec<u32> = client
        .bye()
        .expect("bye")
        .iter()
        .map(|m| key(m).expect("answer").0)
        .collect();
    assert_eq!(order, vec![0, 2, 1]);
    server.shutdown();
}

#[test]
fn drain_answers_every_frame_in_flight_with_its_result() {
    let p = FakeProcessor::new(Some(Duration::from_millis(300)), 4);
    let server = TestServer::start(cfg(), p.clone());
    let mut client = Client::connect(&server.socket, "cam").expect("connect");
    for s in 0..4 {
        client.send_frame(&frame(s, 0)).expect("send");
    }
    // Wait until all four are inside the processor, then drain.
    while p.submitted.load(Ordering::SeqCst) < 4 {
        std::thread::sleep(Duration::from_millis(5));
    }
    server.handle.shutdown();
    let mut tally = Tally::default();
    for _ in 0..4 {
        tally.add(client.recv().expect("answer"));
    }
    assert_eq!(tally.results, 4, "frames in flight finish during the drain");
    assert!(matches!(client.recv(), Err(ClientError::Closed)));
    let socket = server.socket.clone();
    server.rt.block_on(server.done).expect("server");
    assert!(
        Client::connect(&socket, "late").is_err(),
        "no new connections after the drain"
    );
}

#[test]
fn drain_limit_answers_stuck_frames_shutting_down() {
    let p = FakeProcessor::new(None, 2);
    let mut c = cfg();
    c.drain_timeout_ms = 200;
    let server = TestServer::start(c, p.clone());
    let mut client = Client::connect(&server.socket, "cam").expect("connect");
    for s in 0..3 {
        client.send_frame(&frame(s, 0)).expect("send");
    }
    while p.submitted.load(Ordering::SeqCst) < 2 {
        std::thread::sleep(Duration::from_millis(5));
    }
    server.handle.shutdown();
    let mut tally = Tally::default();
    for _ in 0..3 {
        tally.add(client.recv().expect("answer"));
    }
    assert_eq!(tally.dropped.get(&DropReason::ShuttingDown), Some(&3));
    server.rt.block_on(server.done).expect("server");
}

/// Over the limit, a connection waiting for an answer keeps its slot (an
/// idle one would give it up: `service_door.rs`), so a new one is refused.
#[test]
fn connections_over_the_limit_are_refused_with_an_error() {
    let p = FakeProcessor::new(Some(Duration::from_millis(1500)), 2);
    let mut c = cfg();
    c.max_connections = 1;
    let server = TestServer::start(c, p.clone());
    let mut first = Client::connect(&server.socket, "first").expect("connect");
    first.send_frame(&frame(0, 0)).expect("send");
    while p.submitted.load(Ordering::SeqCst) < 1 {
        std::thread::sleep(Duration::from_millis(5));
    }
    match Client::connect(&server.socket, "second") {
        Err(ClientError::Refused(e)) => {
            assert_eq!(e.code, ErrorCode::ConnectionLimit);
            assert!(e.message.contains("at most 1"), "{}", e.message);
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(matches!(first.recv(), Ok(ServerMessage::Result(_))));
    drop(first);
    server.shutdown();
}

#[test]
fn replacing_the_processor_keeps_every_frame() {
    let old = FakeProcessor::new(Some(Duration::from_millis(100)), 2);
    let server = TestServer::start(cfg(), old.clone());
    let mut client = Client::connect(&server.socket, "cam").expect("connect");
    client.send_frame(&frame(0, 0)).expect("send");
    client.send_frame(&frame(1, 0)).expect("send");
    while old.submitted.load(Ordering::SeqCst) < 2 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let new = FakeProcessor::new(Some(Duration::from_millis(1)), 2);
    server.handle.replace_processor(new.clone());
    client.send_frame(&frame(0, 1)).expect("send");
    let answers = client.bye().expect("bye");
    assert_eq!(answers.len(), 3);
    assert!(answers
        .iter()
        .all(|m| matches!(m, ServerMessage::Result(_))));
    assert_eq!(new.submitted.load(Ordering::SeqCst), 1);
    server.shutdown();
}

#[test]
fn readiness_follows_the_processor_and_the_drain() {
    let p = FakeProcessor::new(Some(Duration::from_millis(1)), 2);
    p.ready.store(false, Ordering::SeqCst);
    let server = TestServer::start(cfg(), p.clone());
    assert!(!server.handle.is_ready());
    p.ready.store(true, Ordering::SeqCst);
    assert!(server.handle.is_ready());
    server.handle.shutdown();
    assert!(!server.handle.is_ready());
    server.rt.block_on(server.done).expect("server");
}

#[test]
fn drain_answers_frames_still_unread_in_the_socket() {
    let p = FakeProcessor::new(Some(Duration::from_millis(20)), 1);
    let server = TestServer::start(cfg(), p);
    let mut client = Client::connect(&server.socket, "cam").expect("connect");
    for s in 0..4 {
        for seq in 0..4 {
            client.send_frame(&frame(s, seq)).expect("send");
        }
    }
    server.handle.shutdown();
    let mut tally = Tally::default();
    loop {
        match client.recv() {
            Ok(m) => tally.add(m),
            Err(ClientError::Closed) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(tally.total(), 16, "every frame answered: {tally:?}");
    assert!(tally.other.is_empty());
    server.rt.block_on(server.done).expect("server");
}

#[test]
fn a_client_that_never_reads_does_not_stall_the_others() {
    let p = FakeProcessor::new(Some(Duration::from_millis(1)), 2);
    let mut c = cfg();
    c.drain_timeout_ms = 300;
    c.stream_max_in_flight = 4;
    let server = TestServer::start(c, p);
    // The stuck client: pipelines frames far past its window and never
    // reads, until the server's answers fill the socket and it stops reading.
    let mut stuck = raw::Raw::connect(&server.socket);
    let stuck_socket = stuck.socket().try_clone().expect("clone");
    let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = std::sync::Arc::clone(&count);
    let writer = std::thread::spawn(move || {
        let mut seq = 0;
        while stuck.try_send_frame(&frame(1, seq)) {
            seq += 1;
            counter.store(seq, Ordering::SeqCst);
        }
    });
    // Wait until the server stops reading it (its answers fill the socket
    // and the bounded write queue): the count stops growing.
    let t0 = std::time::Instant::now();
    let mut last = u64::MAX;
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = count.load(Ordering::SeqCst);
        if now == last {
            break;
        }
        last = now;
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the server kept reading a client that never reads ({now} frames)"
        );
    }
    // Another client is served meanwhile.
    let tally = run_client(&server.socket, "healthy", 2, 20);
    assert!(tally.results > 0, "{tally:?}");
    assert!(tally.other.is_empty());
    let before = count.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        count.load(Ordering::SeqCst),
        before,
        "the server stopped reading the stuck client (backpressure)"
    );
    server.shutdown();
    stuck_socket
        .shutdown(std::net::Shutdown::Both)
        .expect("shutdown");
    writer.join().expect("writer thread");
}

/// An object the way a tracked stream answers it: a track, a carried box, a reused output.
fn tracked_object() -> ObjectResult {
    ObjectResult {
        bbox: BBox {
            x0: 1.0,
            y0: 2.0,
            x1: 30.0,
            y1: 60.0,
        },
        class: ClassRef::Name("person".into()),
        score: 0.9,
        track_id: 12,
        box_age: 2,
        outputs: vec![Output {
            model: "faceres".into(),
            value: OutputValue::TopK(vec![Label {
                label: "male".into(),
                score: 0.8,
            }]),
            age: 4,
        }],
    }
}

#[test]
fn each_client_gets_results_in_the_version_it_speaks() {
    let p = FakeProcessor::with_objects(Duration::from_millis(1), 4, vec![tracked_object()]);
    let server = TestServer::start(cfg(), p);
    let mut sizes = Vec::new();
    for (offered, want) in [(&[1u16][..], 1u16), (&[1, 2], 2), (&[1, 2, 3], 3)] {
        let (mut raw, version) = raw::Raw::connect_offering(&server.socket, offered);
        assert_eq!(version, want, "offered {offered:?}");
        raw.send_frame(&frame(3, 9));
        let bytes = raw.recv_bytes();
        // The header's version field (after the magic) is the connection's version.
        assert_eq!(u16::from_le_bytes([bytes[4], bytes[5]]), want);
        let ServerMessage::Result(r) = ServerMessage::decode_exact(&bytes, 1 << 20).unwrap() else {
            panic!("version {want}: not a Result")
        };
        let o = &r.objects[0];
        let tracked = (o.track_id, o.box_age, o.outputs[0].age);
        if want >= 3 {
            assert_eq!(tracked, (12, 2, 4));
        } else {
            // An older client's decoder has no such fields: they are not on the wire.
            assert_eq!(tracked, (0, 0, 0), "version {want}");
        }
        assert_eq!(
            (o.class.clone(), o.outputs[0].model.as_str()),
            (ClassRef::Name("person".into()), "faceres")
        );
        sizes.push(bytes.len());
    }
    // Version 2 adds objects_dropped (4 bytes); version 3 the track id, the box age and the
    // output's age (12 bytes).
    assert_eq!(
        (sizes[1] - sizes[0], sizes[2] - sizes[1]),
        (4, 12),
        "{sizes:?}"
    );
    server.shutdown();
}
