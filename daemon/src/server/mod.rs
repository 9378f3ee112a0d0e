//! The service shell around the frame path: Unix socket server, flow
//! control, metrics and health, signals and systemd integration.
//!
//! [`Server::run`] accepts connections until [`ServerHandle::shutdown`], then
//! drains: it stops accepting, answers waiting frames `ShuttingDown`, awaits
//! frames in flight up to the drain limit and returns once every answer has
//! been written (or the writers' grace period is over).

pub mod admission;
pub mod config;
mod conn;
mod dispatch;
pub mod door;
pub mod http;
pub mod listener;
pub mod log_dedup;
pub mod logging;
pub mod systemd;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use camdnn_protocol::ErrorCode;
use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use self::config::ServerConfig;
use self::dispatch::{Dispatch, Phase};
use self::door::{Door, DoorLimits, Entry, Peer};
use crate::pipeline::FrameProcessor;
use crate::telemetry;

/// Extra time connection writers get after the drain limit to flush answers.
const WRITE_GRACE: Duration = Duration::from_millis(500);

/// Longest a refused client has to send its `Hello` (less when the handshake
/// timeout is shorter).
const REFUSE_WAIT: Duration = Duration::from_secs(2);

/// The socket server with its flow control.
pub struct Server {
    cfg: Arc<ServerConfig>,
    dispatch: Arc<Dispatch>,
    door: Arc<Door>,
    stop: watch::Sender<bool>,
    connections: Arc<AtomicUsize>,
}

/// Controls a running [`Server`] from elsewhere (signal handlers, tests).
#[derive(Clone)]
pub struct ServerHandle {
    dispatch: Arc<Dispatch>,
    stop: watch::Sender<bool>,
    connections: Arc<AtomicUsize>,
}

impl ServerHandle {
    /// Starts the drain (idempotent).
    pub fn shutdown(&self) {
        self.stop.send_replace(true);
    }

    /// Sends new frames to `processor` from now on; frames in flight finish
    /// on the old one, so none is dropped by the switch.
    pub fn replace_processor(&self, processor: Arc<dyn FrameProcessor>) {
        self.dispatch.set_processor(processor);
    }

    /// Applies the reloadable flow-control limits of `cfg`.
    pub fn apply_limits(&self, cfg: &ServerConfig) {
        self.dispatch
            .set_limits(cfg.max_pending, cfg.stream_max_in_flight);
    }

    /// True once [`ServerHandle::shutdown`] has been called.
    pub fn is_draining(&self) -> bool {
        *self.stop.borrow()
    }

    /// True while serving (not draining) and the processor is ready.
    pub fn is_ready(&self) -> bool {
        self.readiness().is_ok()
    }

    /// `Ok` while serving and the processor is ready, else why not.
    pub fn readiness(&self) -> Result<(), String> {
        if *self.stop.borrow() {
            return Err("draining".into());
        }
        match self.dispatch.processor().not_ready_reason() {
            None => Ok(()),
            Some(reason) => Err(reason),
        }
    }

    /// True while the processor's control thread runs and makes progress
    /// (the systemd watchdog is fed only then).
    pub fn is_alive(&self) -> bool {
        self.dispatch.processor().is_alive()
    }

    /// `Ok` while alive, else why not.
    pub fn liveness(&self) -> Result<(), String> {
        self.dispatch.processor().liveness()
    }

    /// Frames waiting for admission, frames in the processor, open connections.
    pub fn load(&self) -> (usize, usize, usize) {
        let (p, f) = self.dispatch.load();
        (p, f, self.connections.load(Ordering::Relaxed))
    }
}

impl Server {
    /// A server with `cfg`'s limits feeding `processor`.
    pub fn new(cfg: ServerConfig, processor: Arc<dyn FrameProcessor>) -> Self {
        let dispatch = Arc::new(Dispatch::new(
            processor,
            cfg.max_pending,
            cfg.stream_max_in_flight,
        ));
        let door = Arc::new(Door::new(DoorLimits {
            total: cfg.max_connections,
            per_uid: cfg.max_connections_per_uid,
            per_pid: cfg.max_connections_per_pid,
        }));
        Self {
            cfg: Arc::new(cfg),
            dispatch,
            door,
            stop: watch::channel(false).0,
            connections: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// A handle for shutdown, processor replacement and readiness.
    pub fn handle(&self) -> ServerHandle {
        ServerHandle {
            dispatch: Arc::clone(&self.dispatch),
            stop: self.stop.clone(),
            connections: Arc::clone(&self.connections),
        }
    }

    /// Serves `listener` until shutdown, then drains (see the module docs).
    pub async fn run(self, listener: UnixListener) {
        static NEXT_CONN: AtomicU64 = AtomicU64::new(0);
        let mut stop = self.stop.subscribe();
        let mut tasks = JoinSet::new();
        let refusing = Arc::new(AtomicUsize::new(0));
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = stop.wait_for(|s| *s) => break,
            };
            let stream = match accepted {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            };
            // Reap finished connection tasks so the set stays small.
            while tasks.try_join_next().is_some() {}
            let id = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
            let slot = match self.door.enter(id, peer_of(&stream)) {
                Entry::Admitted { slot, evicted } => {
                    for v in evicted {
                        ::metrics::counter!(telemetry::CONNECTIONS_TOTAL, "result" => "evicted")
                            .increment(1);
                        tracing::debug!(conn = v.id, uid = v.peer.uid, pid = ?v.peer.pid, "evicted an idle connection to admit a new one");
                    }
                    slot
                }
                Entry::Refused(message) => {
                    ::metrics::counter!(telemetry::CONNECTIONS_TOTAL, "result" => "refused")
                        .increment(1);
                    // Refusals in progress are bounded too: past as many again, close at once.
                    if refusing.load(Ordering::Relaxed) >= self.cfg.max_connections {
                        drop(stream);
                        continue;
                    }
                    refusing.fetch_add(1, Ordering::Relaxed);
                    let refusing = Arc::clone(&refusing);
                    let wait =
                        Duration::from_millis(self.cfg.handshake_timeout_ms).min(REFUSE_WAIT);
                    tasks.spawn(async move {
                        conn::refuse(stream, ErrorCode::ConnectionLimit, message, wait).await;
                        refusing.fetch_sub(1, Ordering::Relaxed);
                    });
                    continue;
                }
            };
            ::metrics::counter!(telemetry::CONNECTIONS_TOTAL, "result" => "accepted").increment(1);
            let (cfg, dispatch, count, door) = (
                Arc::clone(&self.cfg),
                Arc::clone(&self.dispatch),
                Arc::clone(&self.connections),
                Arc::clone(&self.door),
            );
            count.fetch_add(1, Ordering::Relaxed);
            ::metrics::gauge!(telemetry::CONNECTIONS).increment(1.0);
            tasks.spawn(async move {
                conn::serve(id, stream, cfg, dispatch, Arc::clone(&slot)).await;
                door.leave(&slot);
                count.fetch_sub(1, Ordering::Relaxed);
                ::metrics::gauge!(telemetry::CONNECTIONS).decrement(1.0);
            });
        }
        drop(listener);
        let limit = Instant::now() + self.cfg.drain_timeout();
        let (pending, in_flight) = self.dispatch.load();
        tracing::info!(pending, in_flight, "draining");
        self.dispatch.drain(limit).await;
        let (_, left) = self.dispatch.load();
        if left > 0 {
            tracing::warn!(
                left,
                "drain limit reached; answered frames still in flight as shutting down"
            );
        }
        let flushed = tokio::time::timeout_at((limit + WRITE_GRACE).into(), async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        if flushed.is_err() {
            tracing::warn!(
                connections = tasks.len(),
                "some clients did not read their answers in time; closing them"
            );
            tasks.abort_all();
        }
        debug_assert!(*self.dispatch.phase().borrow() == Phase::Closing);
    }
}

/// The peer of a connection (`SO_PEERCRED`); one that cannot be read
/// counts as uid `u32::MAX` without a pid.
fn peer_of(stream: &tokio::net::UnixStream) -> Peer {
    match stream.peer_cred() {
        Ok(c) => Peer {
            uid: c.uid(),
            pid: c.pid(),
        },
        Err(_) => Peer {
            uid: u32::MAX,
            pid: None,
        },
    }
}
