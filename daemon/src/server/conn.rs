//! One client connection: handshake, reading frames (window, sequence and
//! stream checks), and the writer task that sends every answer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use camdnn_protocol::{
    negotiate, ClientMessage, CodecError, DropReason, ErrorCode, Frame, RejectReason, Rejected,
    ServerCodec, ServerError, ServerMessage, Welcome, DEFAULT_MAX_MESSAGE_SIZE,
};
use futures::{SinkExt, StreamExt};
use tokio::io::AsyncReadExt;
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite};

use super::config::ServerConfig;
use super::dispatch::{ConnShared, Dispatch, Phase, Reply};
use super::metrics;
use crate::pipeline::Outcome;

/// When the server closes, how long a connection may stay quiet before its
/// reader stops (frames already sent are still read and answered).
const CLOSING_QUIET: std::time::Duration = std::time::Duration::from_millis(50);

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
) {
    let (read, write) = stream.into_split();
    let (tx, rx) = mpsc::channel(cfg.write_queue);
    // Answers may be larger than what we accept from clients; clients accept 32 MiB by default.
    let out_max = cfg.max_message_size.max(DEFAULT_MAX_MESSAGE_SIZE);
    let writer = tokio::spawn(write_answers(
        FramedWrite::new(write, ServerCodec::new(out_max)),
        rx,
    ));
    let conn = Arc::new(ConnShared {
        id,
        tx,
        streams: Mutex::new(HashMap::new()),
    });
    let mut frames = FramedRead::new(read, ServerCodec::new(cfg.max_message_size));
    let fatal = read_loop(&mut frames, &conn, &cfg, &dispatch).await;
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
}

/// Why the reader stopped.
enum Stop {
    /// Bye, end of stream, or the server is closing.
    Done,
    /// A protocol error: send it and close.
    Fatal(ErrorCode, String),
}

async fn read_loop(
    frames: &mut FramedRead<tokio::net::unix::OwnedReadHalf, ServerCodec>,
    conn: &Arc<ConnShared>,
    cfg: &ServerConfig,
    dispatch: &Arc<Dispatch>,
) -> bool {
    let mut phase = dispatch.phase();
    let mut welcomed = false;
    let mut closing = false;
    let stop = loop {
        let item = if closing {
            // Closing: answer (shutting down) what the client has already
            // sent, and stop once it has been quiet for a moment.
            match tokio::time::timeout(CLOSING_QUIET, frames.next()).await {
                Ok(item) => item,
                Err(_) => break Stop::Done,
            }
        } else {
            tokio::select! {
                item = frames.next() => item,
                _ = phase.wait_for(|p| *p == Phase::Closing) => {
                    closing = true;
                    continue;
                }
            }
        };
        let msg = match item {
            None => break Stop::Done,
            Some(Err(CodecError::Decode(e))) => break Stop::Fatal(e.error_code(), e.to_string()),
            Some(Err(e)) => {
                tracing::debug!(conn = conn.id, "connection read failed: {e}");
                break Stop::Done;
            }
            Some(Ok(m)) => m,
        };
        match (welcomed, msg) {
            (false, Ok(ClientMessage::Hello(h))) => match negotiate(&h.versions) {
                Some(version) => {
                    tracing::debug!(conn = conn.id, client = %h.client_name, version, "handshake");
                    let w = Welcome {
                        version,
                        max_message_size: cfg.max_message_size,
                        window: cfg.window,
                        server_name: cfg.server_name.clone(),
                    };
                    if conn.tx.send(ServerMessage::Welcome(w)).await.is_err() {
                        break Stop::Done;
                    }
                    welcomed = true;
                }
                None => {
                    break Stop::Fatal(
                        ErrorCode::UnsupportedVersion,
                        format!(
                            "no common protocol version: client offers {:?}, server speaks {:?}",
                            h.versions,
                            camdnn_protocol::SUPPORTED_VERSIONS
                        ),
                    )
                }
            },
            (false, _) => {
                break Stop::Fatal(
                    ErrorCode::HandshakeRequired,
                    "the first message must be Hello".into(),
                )
            }
            (true, Ok(ClientMessage::Hello(_))) => {
                break Stop::Fatal(
                    ErrorCode::UnexpectedMessage,
                    "Hello after the handshake".into(),
                )
            }
            (true, Ok(ClientMessage::Bye)) => break Stop::Done,
            (true, Ok(ClientMessage::Frame(f))) => on_frame(f, conn, cfg, dispatch).await,
            (true, Err(rejected)) => on_rejected(rejected, conn).await,
        }
    };
    if let Stop::Fatal(code, message) = stop {
        tracing::info!(conn = conn.id, ?code, "closing connection: {message}");
        metrics::protocol_error(code);
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

/// A frame whose framing was fine but whose body was not.
async fn on_rejected(r: Rejected, conn: &Arc<ConnShared>) {
    metrics::frame_received();
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
    metrics::frame_received();
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

/// Writes answers until every sender is gone; after a fatal `Error` (or a
/// failed write) the socket is closed and later answers are discarded.
async fn write_answers(
    mut sink: FramedWrite<tokio::net::unix::OwnedWriteHalf, ServerCodec>,
    mut rx: mpsc::Receiver<ServerMessage>,
) {
    let mut open = true;
    while let Some(msg) = rx.recv().await {
        if !open {
            continue;
        }
        let fatal = matches!(msg, ServerMessage::Error(_));
        let res = if fatal || rx.is_empty() {
            sink.send(msg).await
        } else {
            sink.feed(msg).await
        };
        match res {
            Ok(()) if fatal => {
                open = false;
                let _ = SinkExt::<ServerMessage>::close(&mut sink).await;
            }
            Ok(()) => {}
            Err(e) => {
                tracing::debug!("writing an answer failed: {e}");
                open = false;
            }
        }
    }
    if open {
        let _ = SinkExt::<ServerMessage>::close(&mut sink).await;
    }
}

/// Refuses a connection over the limit: reads its `Hello` (so closing does
/// not reset the connection under unread bytes), answers `Error` and closes.
pub(crate) async fn refuse(stream: UnixStream, code: ErrorCode, message: String) {
    metrics::protocol_error(code);
    let mut framed = tokio_util::codec::Framed::new(stream, ServerCodec::new(1 << 16));
    let _ = tokio::time::timeout(REFUSE_WAIT, framed.next()).await;
    let _ = framed
        .send(ServerMessage::Error(ServerError {
            code,
            closing: true,
            message,
        }))
        .await;
    let _ = SinkExt::<ServerMessage>::close(&mut framed).await;
}

/// How long a refused client has to send its `Hello`.
const REFUSE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
