//! One client connection: handshake, reading frames (window, sequence and
//! stream checks), and the writer task that sends every answer.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use camdnn_protocol::{
    negotiate, ClientMessage, CodecError, DropReason, ErrorCode, Frame, RejectReason, Rejected,
    ServerCodec, ServerError, ServerMessage, Welcome, DEFAULT_MAX_MESSAGE_SIZE,
};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::net::unix::OwnedReadHalf;
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite};

use super::config::ServerConfig;
use super::dispatch::{ConnShared, Dispatch, Phase, Reply};
use super::door::Slot;
use crate::pipeline::Outcome;
use crate::telemetry;

/// When the server closes, how long a connection may stay quiet before its
/// reader stops (frames already sent are still read and answered).
const CLOSING_QUIET: std::time::Duration = std::time::Duration::from_millis(50);

/// The `Error` text of a connection whose slot went to a new one (`door.rs`).
const EVICTED: &str = "evicted: the server was at a connection limit and this connection had \
                       no frame in flight and had been idle the longest";

/// After a fatal error: most bytes and time spent discarding the client's input.
const FATAL_DRAIN_BYTES: u64 = 1 << 20;
/// See [`FATAL_DRAIN_BYTES`].
const FATAL_DRAIN_TIME: std::time::Duration = std::time::Duration::from_millis(500);

/// Serves one accepted connection until its last answer is written.
pub(crate) async fn serve(
    id: u64,
    stream: UnixStream,
    cfg: Arc<ServerConfig>,
    dispatch: Arc<Dispatch>,
    slot: Arc<Slot>,
) {
    let accepted = Instant::now();
    let (read, write) = stream.into_split();
    let (tx, rx) = mpsc::channel(cfg.write_queue);
    // Answers may be larger than what we accept from clients; clients accept 32 MiB by default.
    let out_max = cfg.max_message_size.max(DEFAULT_MAX_MESSAGE_SIZE);
    let writer = tokio::spawn(write_answers(
        FramedWrite::new(write, ServerCodec::new(out_max)),
        rx,
        Duration::from_millis(cfg.write_timeout_ms),
    ));
    let conn = Arc::new(ConnShared {
        id,
        tx,
        streams: Mutex::new(HashMap::new()),
    });
    let weak = Arc::downgrade(&conn);
    slot.set_busy(move || {
        weak.upgrade()
            .is_some_and(|c| c.streams().values().any(|s| s.in_flight > 0))
    });
    let timed = Timed {
        inner: read,
        started: None,
    };
    let mut frames = FramedRead::new(timed, ServerCodec::new(cfg.max_message_size));
    let fatal = read_loop(&mut frames, &conn, &cfg, &dispatch, (accepted, &slot)).await;
    if fatal {
        // Keep reading (and discarding) for a moment while the writer sends
        // the Error, so the client is not reset under bytes it already sent.
        let mut rest = frames.into_inner().take(FATAL_DRAIN_BYTES);
        let _ = tokio::time::timeout(
            FATAL_DRAIN_TIME,
            tokio::io::copy(&mut rest, &mut tokio::io::sink()),
        )
        .await;
    } else {
        drop(frames);
    }
    drop(conn);
    // The writer ends once every frame of this connection has been answered.
    let _ = writer.await;
    // Its streams end with it: the processor frees their tracks.
    dispatch.processor().connection_closed(id);
}

/// The read half, noting when the first byte of the message being read arrived (the
/// reader clears it after each whole message), for the message timeout.
struct Timed {
    inner: OwnedReadHalf,
    started: Option<Instant>,
}

impl AsyncRead for Timed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.started.get_or_insert_with(Instant::now);
        }
        polled
    }
}

type Frames = FramedRead<Timed, ServerCodec>;

/// What the reader waits for next, and until when (the timeouts of `[server]`).
fn next_deadline(
    frames: &Frames,
    cfg: &ServerConfig,
    welcomed: bool,
    accepted: Instant,
    last_message: Instant,
) -> Option<(Instant, &'static str)> {
    let ms = Duration::from_millis;
    if !welcomed {
        return Some((accepted + ms(cfg.handshake_timeout_ms), "handshake"));
    }
    if let Some(first_byte) = frames.get_ref().started {
        return Some((first_byte + ms(cfg.message_timeout_ms), "message"));
    }
    (cfg.idle_timeout_ms > 0).then(|| (last_message + ms(cfg.idle_timeout_ms), "idle"))
}

/// The `Error` text for a timeout in `stage`.
fn timeout_message(stage: &str, cfg: &ServerConfig) -> String {
    match stage {
        "handshake" => format!(
            "no whole Hello within {} ms of connecting",
            cfg.handshake_timeout_ms
        ),
        "message" => format!(
            "a message was left half-sent for {} ms",
            cfg.message_timeout_ms
        ),
        _ => format!(
            "nothing sent for {} ms with no frame in flight",
            cfg.idle_timeout_ms
        ),
    }
}

/// Why the reader stopped.
enum Stop {
    /// Bye, end of stream, or the server is closing.
    Done,
    /// A protocol error: send it and close.
    Fatal(ErrorCode, String),
}

/// The reader's state between messages: the server's phase, whether the
/// handshake is done, and the clocks its timeouts run from.
struct Reader {
    phase: tokio::sync::watch::Receiver<Phase>,
    welcomed: bool,
    closing: bool,
    accepted: Instant,
    last_message: Instant,
}

/// What waiting for the next message gave.
enum Wait {
    /// A message, a read error, or the end of the stream (`None`).
    Item(Option<<Frames as futures::Stream>::Item>),
    /// Nothing yet (a deadline not reached, the server starting to close): wait again.
    Again,
    /// Stop reading: a timeout, eviction, or a quiet client while closing.
    Stop(Stop),
}

async fn read_loop(
    frames: &mut Frames,
    conn: &Arc<ConnShared>,
    cfg: &ServerConfig,
    dispatch: &Arc<Dispatch>,
    (accepted, slot): (Instant, &Slot),
) -> bool {
    let mut r = Reader {
        phase: dispatch.phase(),
        welcomed: false,
        closing: false,
        accepted,
        last_message: accepted,
    };
    let stop = loop {
        let item = match wait_next(&mut r, frames, conn, cfg, slot).await {
            Wait::Item(item) => item,
            Wait::Again => continue,
            Wait::Stop(stop) => break stop,
        };
        let is_frame = matches!(item, Some(Ok(Ok(ClientMessage::Frame(_)))));
        let msg = match item {
            None => break Stop::Done,
            Some(Err(CodecError::Decode(e))) => break Stop::Fatal(e.error_code(), e.to_string()),
            Some(Err(e)) => {
                tracing::debug!(conn = conn.id, "connection read failed: {e}");
                break Stop::Done;
            }
            Some(Ok(m)) => m,
        };
        if let Some(stop) = handle_message(&mut r.welcomed, msg, conn, cfg, dispatch).await {
            break stop;
        }
        // The message is handled: the next one's clock starts with its first byte (now, if
        // the buffer already holds part of it; the time we spent is not the client's).
        r.last_message = Instant::now();
        slot.touched(is_frame);
        frames.get_mut().started = (!frames.read_buffer().is_empty()).then_some(r.last_message);
    };
    if let Stop::Fatal(code, message) = stop {
        tracing::info!(conn = conn.id, ?code, "closing connection: {message}");
        telemetry::protocol_error(code);
        let _ = conn
            .tx
            .send(ServerMessage::Error(ServerError {
                code,
                closing: true,
                message,
            }))
            .await;
        return true;
    }
    false
}

/// Waits for the next message, or for the first deadline the client misses.
async fn wait_next(
    r: &mut Reader,
    frames: &mut Frames,
    conn: &Arc<ConnShared>,
    cfg: &ServerConfig,
    slot: &Slot,
) -> Wait {
    if r.closing {
        // Closing: answer (shutting down) what the client has already
        // sent, and stop once it has been quiet for a moment.
        return match tokio::time::timeout(CLOSING_QUIET, frames.next()).await {
            Ok(item) => Wait::Item(item),
            Err(_) => Wait::Stop(Stop::Done),
        };
    }
    let deadline = next_deadline(frames, cfg, r.welcomed, r.accepted, r.last_message);
    // A message that starts while we wait brings its own, earlier deadline (the
    // message timeout) and the read future cannot tell us, so look again at least
    // every quarter of that timeout: a half-sent message is closed within 1.25x it.
    let recheck = Instant::now() + Duration::from_millis((cfg.message_timeout_ms / 4).max(10));
    let wake = match deadline {
        Some((at, _)) if at <= recheck => at,
        _ => recheck,
    };
    tokio::select! {
        item = frames.next() => return Wait::Item(item),
        _ = r.phase.wait_for(|p| *p == Phase::Closing) => {
            r.closing = true;
            return Wait::Again;
        }
        () = slot.evict.notified() => {
            return Wait::Stop(Stop::Fatal(ErrorCode::ConnectionLimit, EVICTED.into()));
        }
        () = tokio::time::sleep_until(wake.into()) => {}
    }
    let Some((at, stage)) = next_deadline(frames, cfg, r.welcomed, r.accepted, r.last_message)
    else {
        return Wait::Again;
    };
    if Instant::now() < at {
        return Wait::Again;
    }
    if stage == "idle" && conn.streams().values().any(|s| s.in_flight > 0) {
        // Waiting for our answers is not idling.
        r.last_message = Instant::now();
        return Wait::Again;
    }
    ::metrics::counter!(telemetry::CONNECTION_TIMEOUTS, "stage" => stage).increment(1);
    Wait::Stop(Stop::Fatal(ErrorCode::Timeout, timeout_message(stage, cfg)))
}

/// Handles one message: the handshake first, then frames, bad frames and
/// Bye. `Some`: the reader stops.
async fn handle_message(
    welcomed: &mut bool,
    msg: Result<ClientMessage, Rejected>,
    conn: &Arc<ConnShared>,
    cfg: &ServerConfig,
    dispatch: &Arc<Dispatch>,
) -> Option<Stop> {
    match (*welcomed, msg) {
        (false, Ok(ClientMessage::Hello(h))) => {
            let Some(version) = negotiate(&h.versions) else {
                return Some(Stop::Fatal(
                    ErrorCode::UnsupportedVersion,
                    format!(
                        "no common protocol version: client offers {:?}, server speaks {:?}",
                        h.versions,
                        camdnn_protocol::SUPPORTED_VERSIONS
                    ),
                ));
            };
            tracing::debug!(conn = conn.id, client = %h.client_name, version, "handshake");
            let w = Welcome {
                version,
                max_message_size: cfg.max_message_size,
                window: cfg.window,
                server_name: cfg.server_name.clone(),
            };
            if conn.tx.send(ServerMessage::Welcome(w)).await.is_err() {
                return Some(Stop::Done);
            }
            *welcomed = true;
        }
        (false, _) => {
            return Some(Stop::Fatal(
                ErrorCode::HandshakeRequired,
                "the first message must be Hello".into(),
            ))
        }
        (true, Ok(ClientMessage::Hello(_))) => {
            return Some(Stop::Fatal(
                ErrorCode::UnexpectedMessage,
                "Hello after the handshake".into(),
            ))
        }
        (true, Ok(ClientMessage::Bye)) => return Some(Stop::Done),
        (true, Ok(ClientMessage::Frame(f))) => on_frame(f, conn, cfg, dispatch).await,
        (true, Err(rejected)) => on_rejected(rejected, conn).await,
    }
    None
}

/// A frame whose framing was fine but whose body was not.
async fn on_rejected(r: Rejected, conn: &Arc<ConnShared>) {
    telemetry::frame_received();
    let reply = Reply {
        conn: Arc::clone(conn),
        stream_id: r.stream_id,
        seq: r.seq,
        received: Instant::now(),
        counted: false,
    };
    reply
        .answer(Outcome::Rejected(r.reason, r.message), None)
        .await;
}

/// What the per-connection checks decided for a frame.
enum Check {
    Admit,
    Drop(DropReason),
    Reject(RejectReason, String),
}

async fn on_frame(f: Frame, conn: &Arc<ConnShared>, cfg: &ServerConfig, dispatch: &Arc<Dispatch>) {
    telemetry::frame_received();
    let received = Instant::now();
    let check = {
        let mut streams = conn.streams();
        if !streams.contains_key(&f.stream_id) && streams.len() >= cfg.max_streams_per_connection {
            Check::Drop(DropReason::Overloaded)
        } else {
            let s = streams.entry(f.stream_id).or_default();
            match s.last_seq {
                Some(last) if f.seq <= last => Check::Reject(
                    RejectReason::SeqNotIncreasing,
                    format!(
                        "stream {} seq {} is not after the previous seq {last}",
                        f.stream_id, f.seq
                    ),
                ),
                _ => {
                    s.last_seq = Some(f.seq);
                    if s.in_flight >= usize::from(cfg.window) {
                        Check::Drop(DropReason::WindowExceeded)
                    } else {
                        s.in_flight += 1;
                        Check::Admit
                    }
                }
            }
        }
    };
    let mut reply = Reply {
        conn: Arc::clone(conn),
        stream_id: f.stream_id,
        seq: f.seq,
        received,
        counted: false,
    };
    match check {
        Check::Admit => {
            reply.counted = true;
            dispatch.offer(f, reply, cfg.default_priority).await;
        }
        Check::Drop(r) => reply.answer(Outcome::Dropped(r), None).await,
        Check::Reject(r, m) => reply.answer(Outcome::Rejected(r, m), None).await,
    }
}

/// Writes answers until every sender is gone; after a fatal `Error`, a
/// failed write or a write blocked longer than `write_timeout` (a client that
/// does not read) the socket is closed and later answers are discarded.
async fn write_answers(
    mut sink: FramedWrite<tokio::net::unix::OwnedWriteHalf, ServerCodec>,
    mut rx: mpsc::Receiver<ServerMessage>,
    write_timeout: Duration,
) {
    let mut open = true;
    while let Some(msg) = rx.recv().await {
        if !open {
            continue;
        }
        let fatal = matches!(msg, ServerMessage::Error(_));
        let res = tokio::time::timeout(write_timeout, async {
            if fatal || rx.is_empty() {
                sink.send(msg).await
            } else {
                sink.feed(msg).await
            }
        })
        .await;
        match res {
            Ok(Ok(())) if fatal => {
                open = false;
                let _ =
                    tokio::time::timeout(write_timeout, SinkExt::<ServerMessage>::close(&mut sink))
                        .await;
            }
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!("writing an answer failed: {e}");
                open = false;
            }
            Err(_) => {
                tracing::info!(
                    "closing a connection whose client read nothing for {} ms",
                    write_timeout.as_millis()
                );
                ::metrics::counter!(telemetry::CONNECTION_TIMEOUTS, "stage" => "write")
                    .increment(1);
                open = false;
                // Both directions: the reader sees the end and stops too.
                let _ = socket2::SockRef::from(sink.get_ref().as_ref())
                    .shutdown(std::net::Shutdown::Both);
            }
        }
    }
    if open {
        let _ =
            tokio::time::timeout(write_timeout, SinkExt::<ServerMessage>::close(&mut sink)).await;
    }
}

/// Refuses a connection over the limit: reads its `Hello` (so closing does
/// not reset the connection under unread bytes, and to answer in a version the
/// client speaks), answers `Error` and closes.
pub(crate) async fn refuse(stream: UnixStream, code: ErrorCode, message: String, wait: Duration) {
    telemetry::protocol_error(code);
    let mut framed = tokio_util::codec::Framed::new(stream, ServerCodec::new(1 << 16));
    let deadline = tokio::time::Instant::now() + wait;
    if let Ok(Some(Ok(Ok(ClientMessage::Hello(h))))) =
        tokio::time::timeout_at(deadline, framed.next()).await
    {
        // Answer in the client's version (the code falls back for version 1).
        framed.codec_mut().version = negotiate(&h.versions).unwrap_or(1);
    }
    let _ = tokio::time::timeout_at(deadline + wait, async {
        let _ = framed
            .send(ServerMessage::Error(ServerError {
                code,
                closing: true,
                message,
            }))
            .await;
        let _ = SinkExt::<ServerMessage>::close(&mut framed).await;
    })
    .await;
}
