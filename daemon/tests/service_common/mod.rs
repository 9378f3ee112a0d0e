//! Shared helpers of the service tests: a test-only frame processor and an
//! in-process server on a real Unix socket in a temporary folder.

#![allow(dead_code)] // each test binary uses a subset

pub mod raw;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use camdnn_daemon::pipeline::{FrameProcessor, Outcome};
use camdnn_daemon::server::config::ServerConfig;
use camdnn_daemon::server::{Server, ServerHandle};
use camdnn_protocol::{Frame, FrameResult, ObjectResult, PixelFormat, ServerMessage, Timing};
use tokio::sync::oneshot;

/// A test-only processor: answers every frame with a `Result` echoing stream
/// and seq and carrying `objects` (none unless set) after `delay` (never, if
/// `delay` is `None`).
pub struct FakeProcessor {
    /// Time to "process" a frame; `None`: never answer (hold the reply).
    pub delay: Option<Duration>,
    /// The admission limit it reports (a test may raise it, as a pipeline
    /// does while frames are stuck on a stalled unit).
    pub limit: AtomicUsize,
    /// What `is_ready` says.
    pub ready: AtomicBool,
    /// Frames submitted.
    pub submitted: AtomicUsize,
    /// Frames inside now.
    pub inside: Arc<AtomicUsize>,
    /// Most frames inside at once.
    pub peak: Arc<AtomicUsize>,
    /// Frames the server told it it dropped before submitting them.
    pub dropped: AtomicUsize,
    /// The objects every `Result` carries.
    pub objects: Vec<ObjectResult>,
    held: std::sync::Mutex<Vec<oneshot::Sender<Outcome>>>,
}

impl FakeProcessor {
    /// A ready processor answering after `delay` with at most `limit` frames inside.
    pub fn new(delay: Option<Duration>, limit: usize) -> Arc<Self> {
        Arc::new(Self {
            delay,
            limit: AtomicUsize::new(limit),
            ready: AtomicBool::new(true),
            submitted: AtomicUsize::new(0),
            inside: Arc::new(AtomicUsize::new(0)),
            peak: Arc::new(AtomicUsize::new(0)),
            dropped: AtomicUsize::new(0),
            objects: Vec::new(),
            held: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// As [`FakeProcessor::new`], every `Result` carrying `objects`.
    pub fn with_objects(delay: Duration, limit: usize, objects: Vec<ObjectResult>) -> Arc<Self> {
        let mut p = Self::new(Some(delay), limit);
        Arc::get_mut(&mut p).expect("not shared yet").objects = objects;
        p
    }
}

impl FrameProcessor for FakeProcessor {
    fn submit(
        &self,
        frame: Frame,
        _received: Instant,
        _deadline: Option<Instant>,
        reply: oneshot::Sender<Outcome>,
    ) {
        self.submitted.fetch_add(1, Ordering::SeqCst);
        let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let Some(delay) = self.delay else {
            self.held.lock().unwrap().push(reply);
            return;
        };
        let inside = Arc::clone(&self.inside);
        let objects = self.objects.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            inside.fetch_sub(1, Ordering::SeqCst);
            let _ = reply.send(Outcome::Done(FrameResult {
                stream_id: frame.stream_id,
                seq: frame.seq,
                timing: Timing::default(),
                objects,
                objects_dropped: 0,
            }));
        });
    }

    fn max_in_flight(&self) -> usize {
        self.limit.load(Ordering::SeqCst)
    }

    fn frame_dropped(&self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }

    fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
}

/// An in-process server on a socket in a temporary folder.
pub struct TestServer {
    /// Keeps the folder alive.
    pub dir: tempfile::TempDir,
    /// The socket.
    pub socket: PathBuf,
    /// Shutdown and processor control.
    pub handle: ServerHandle,
    /// The runtime the server runs on.
    pub rt: tokio::runtime::Runtime,
    /// Ends when `Server::run` returns.
    pub done: tokio::task::JoinHandle<()>,
}

impl TestServer {
    /// Starts a server with `cfg` (its socket path is replaced) and `processor`.
    pub fn start(mut cfg: ServerConfig, processor: Arc<dyn FrameProcessor>) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("camdnnd.sock");
        cfg.socket = socket.clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let server = Server::new(cfg.clone(), processor);
        let handle = server.handle();
        let listener = {
            let _guard = rt.enter();
            tokio::net::UnixListener::bind(&cfg.socket).expect("bind")
        };
        let done = rt.spawn(server.run(listener));
        Self {
            dir,
            socket,
            handle,
            rt,
            done,
        }
    }

    /// Starts the drain and waits until the server has returned.
    pub fn shutdown(self) {
        self.handle.shutdown();
        self.rt.block_on(self.done).expect("server task");
    }
}

/// A valid 2x2 RGB24 frame.
pub fn frame(stream_id: u32, seq: u64) -> Frame {
    Frame {
        stream_id,
        seq,
        capture_ts_us: 0,
        width: 2,
        height: 2,
        pixel_format: PixelFormat::Rgb24,
        priority: None,
        deadline: None,
        detections: None,
        payload: Bytes::from(vec![7u8; 12]),
    }
}

/// (stream, seq) an answer is about, or `None` for `Error`/`Welcome`.
pub fn key(m: &ServerMessage) -> Option<(u32, u64)> {
    match m {
        ServerMessage::Result(r) => Some((r.stream_id, r.seq)),
        ServerMessage::Dropped(d) => Some((d.stream_id, d.seq)),
        ServerMessage::Rejected(r) => Some((r.stream_id, r.seq)),
        _ => None,
    }
}
