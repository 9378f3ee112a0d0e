//! The runtime around [`Admission`]: answers frames, submits them to the
//! frame processor, awaits their outcomes and runs the drain.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant};

use camdnn_protocol::{DropReason, Dropped, Frame, Rejected, ServerMessage};
use tokio::sync::{mpsc, oneshot, watch, Notify};

use super::admission::{Admission, Next, Offer, StreamKey, Waiting};
use crate::pipeline::{deadline_instant, FrameProcessor, Outcome};
use crate::telemetry;

/// While frames wait for room, the table is pumped at least this often.
pub const ROOM_POLL: Duration = Duration::from_millis(50);

/// Where the server is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Accepting connections and frames.
    Running,
    /// Stopped accepting; new frames are answered `ShuttingDown`; frames in
    /// flight are awaited.
    Draining,
    /// The drain is over: frames still in flight are answered `ShuttingDown`
    /// and connections close once their answers are written.
    Closing,
}

/// Per-stream bookkeeping of one connection.
#[derive(Debug, Default)]
pub(crate) struct StreamState {
    /// Frames received and not yet answered (counted against the window).
    pub in_flight: usize,
    /// Last sequence number seen.
    pub last_seq: Option<u64>,
}

/// What frames of one connection share: the answer queue and stream states.
pub(crate) struct ConnShared {
    /// Connection id (unique in this process).
    pub id: u64,
    /// Answers to the connection's writer (bounded: backpressure on the reader).
    pub tx: mpsc::Sender<ServerMessage>,
    /// Streams of this connection.
    pub streams: Mutex<HashMap<u32, StreamState>>,
}

impl ConnShared {
    /// Locks the stream table (a poisoned lock is still usable: the table holds plain counters).
    pub fn streams(&self) -> MutexGuard<'_, HashMap<u32, StreamState>> {
        self.streams.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The handle to answer one frame exactly once.
pub(crate) struct Reply {
    /// The frame's connection.
    pub conn: Arc<ConnShared>,
    /// Stream.
    pub stream_id: u32,
    /// Sequence number.
    pub seq: u64,
    /// When it was read.
    pub received: Instant,
    /// Whether the frame counts against its stream's window.
    pub counted: bool,
}

impl Reply {
    /// Sends `outcome` to the client, counting it; `admitted` is when the
    /// frame was handed to the processor (for the admission-wait metric).
    pub async fn answer(self, outcome: Outcome, admitted: Option<Instant>) {
        let msg = match outcome {
            Outcome::Done(mut r) => {
                let total = self.received.elapsed();
                r.stream_id = self.stream_id;
                r.seq = self.seq;
                r.timing.total_us = u32::try_from(total.as_micros()).unwrap_or(u32::MAX);
                let wait = admitted.map_or(Duration::ZERO, |a| a - self.received);
                telemetry::frame_completed(total, wait, &r.timing);
                ServerMessage::Result(r)
            }
            Outcome::Dropped(reason) => {
                telemetry::frame_dropped(reason);
                ServerMessage::Dropped(Dropped {
                    stream_id: self.stream_id,
                    seq: self.seq,
                    reason,
                })
            }
            Outcome::Rejected(reason, message) => {
                telemetry::frame_rejected(reason);
                ServerMessage::Rejected(Rejected {
                    stream_id: self.stream_id,
                    seq: self.seq,
                    reason,
                    message,
                })
            }
        };
        if self.counted {
            if let Some(s) = self.conn.streams().get_mut(&self.stream_id) {
                s.in_flight = s.in_flight.saturating_sub(1);
            }
        }
        // A closed connection cannot be answered; the outcome is counted all the same.
        let _ = self.conn.tx.send(msg).await;
    }
}

/// State shared by the listener, every connection and every frame task.
pub(crate) struct Dispatch {
    admission: Mutex<Admission<Reply>>,
    processor: RwLock<Arc<dyn FrameProcessor>>,
    phase: watch::Sender<Phase>,
    idle: Notify,
    /// A frame was queued to wait (the waiting timer looks again).
    frame_queued: Notify,
    /// Whether the waiting timer runs ([`Dispatch::watch_waiting`]).
    waiting_timer: AtomicBool,
}

impl Dispatch {
    /// A dispatcher feeding `processor`.
    pub fn new(
        processor: Arc<dyn FrameProcessor>,
        max_pending: usize,
        stream_max_in_flight: usize,
    ) -> Self {
        Self {
            admission: Mutex::new(Admission::new(max_pending, stream_max_in_flight)),
            processor: RwLock::new(processor),
            phase: watch::channel(Phase::Running).0,
            idle: Notify::new(),
            frame_queued: Notify::new(),
            waiting_timer: AtomicBool::new(false),
        }
    }

    fn table(&self) -> MutexGuard<'_, Admission<Reply>> {
        self.admission
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The current frame processor.
    pub fn processor(&self) -> Arc<dyn FrameProcessor> {
        self.processor
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the frame processor: new frames go to `p`, frames in flight
    /// finish on the old one.
    pub fn set_processor(&self, p: Arc<dyn FrameProcessor>) {
        *self
            .processor
            .write()
            .unwrap_or_else(PoisonError::into_inner) = p;
    }

    /// Changes the admission limits.
    pub fn set_limits(&self, max_pending: usize, stream_max_in_flight: usize) {
        self.table().set_limits(max_pending, stream_max_in_flight);
    }

    /// Watches the phase.
    pub fn phase(&self) -> watch::Receiver<Phase> {
        self.phase.subscribe()
    }

    /// Moves to `p` (never backwards).
    pub fn set_phase(&self, p: Phase) {
        self.phase.send_if_modified(|cur| {
            let later = matches!(
                (*cur, p),
                (Phase::Running, Phase::Draining | Phase::Closing)
                    | (Phase::Draining, Phase::Closing)
            );
            if later {
                *cur = p;
            }
            later
        });
    }

    /// (pending, in flight) now.
    pub fn load(&self) -> (usize, usize) {
        let t = self.table();
        (t.pending(), t.in_flight())
    }

    /// Takes in a valid frame within its stream's window: answers it at once
    /// when its deadline has already passed, else queues it for admission
    /// and, when it has a deadline, answers it then if it still waits.
    pub async fn offer(self: &Arc<Self>, mut frame: Frame, reply: Reply, default_priority: u8) {
        let deadline = deadline_instant(frame.deadline, reply.received);
        if deadline.is_some_and(|d| d <= Instant::now()) {
            reply
                .answer(Outcome::Dropped(DropReason::DeadlinePassed), None)
                .await;
            return;
        }
        frame.priority.get_or_insert(default_priority);
        let key = (reply.conn.id, frame.stream_id);
        let cost_ms = self.processor().expected_work_ms(&frame);
        let waiting = Waiting {
            frame,
            received: reply.received,
            deadline,
            reply,
        };
        let offer = self.table().offer(key, waiting, cost_ms);
        if matches!(
            offer,
            Offer::Superseded(_) | Offer::Overloaded(_) | Offer::Displaced(_)
        ) {
            self.processor().frame_dropped();
        }
        match offer {
            Offer::Queued => {
                self.watch_waiting();
                self.frame_queued.notify_one();
            }
            Offer::Superseded(old) => {
                old.reply
                    .answer(Outcome::Dropped(DropReason::Superseded), None)
                    .await
            }
            Offer::Overloaded(w) | Offer::Displaced(w) => {
                w.reply
                    .answer(Outcome::Dropped(DropReason::Overloaded), None)
                    .await
            }
            Offer::ShuttingDown(w) => {
                w.reply
                    .answer(Outcome::Dropped(DropReason::ShuttingDown), None)
                    .await
            }
        }
        self.pump();
    }

    /// Starts, once, the task that moves the table when nothing else does:
    /// it answers each waiting frame at its deadline, and while frames wait
    /// it pumps at least every [`ROOM_POLL`], because the processor's room
    /// can grow without a frame finishing (frames stuck on a stalled unit
    /// stop counting, `FrameProcessor::max_in_flight`). A frame admitted
    /// meanwhile is the pipeline's own deadline timer's.
    fn watch_waiting(self: &Arc<Self>) {
        if self.waiting_timer.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                let added = this.frame_queued.notified();
                let wake = {
                    let table = this.table();
                    let poll = (table.pending() > 0).then(|| Instant::now() + ROOM_POLL);
                    match (table.earliest_deadline(), poll) {
                        (Some(d), Some(p)) => Some(d.min(p)),
                        (d, p) => d.or(p),
                    }
                };
                match wake {
                    Some(at) => tokio::select! {
                        _ = tokio::time::sleep_until(at.into()) => this.pump(),
                        _ = added => {}
                    },
                    None => added.await,
                }
            }
        });
    }

    /// Moves pending frames into the processor while it has room.
    pub fn pump(self: &Arc<Self>) {
        loop {
            let processor = self.processor();
            let next = self.table().next(Instant::now(), processor.max_in_flight());
            match next {
                None => break,
                // Answered in their own tasks: a client that does not read
                // must not stall admission for everyone else.
                Some(Next::Expired(w)) => {
                    processor.frame_dropped();
                    tokio::spawn(
                        w.reply
                            .answer(Outcome::Dropped(DropReason::DeadlinePassed), None),
                    );
                }
                Some(Next::Submit(key, w)) => self.submit(processor, key, w),
            }
        }
        self.publish_load();
    }

    fn publish_load(&self) {
        let (pending, in_flight) = self.load();
        ::metrics::gauge!(telemetry::PENDING).set(pending as f64);
        ::metrics::gauge!(telemetry::IN_FLIGHT).set(in_flight as f64);
        if in_flight == 0 {
            self.idle.notify_waiters();
        }
    }

    fn submit(
        self: &Arc<Self>,
        processor: Arc<dyn FrameProcessor>,
        key: StreamKey,
        w: Waiting<Reply>,
    ) {
        let (tx, rx) = oneshot::channel();
        let admitted = Instant::now();
        processor.submit_from(key.0, w.frame, w.received, w.deadline, tx);
        let this = Arc::clone(self);
        let mut phase = self.phase();
        tokio::spawn(async move {
            let outcome = tokio::select! {
                r = rx => r.unwrap_or(Outcome::Dropped(DropReason::ProcessingFailed)),
                _ = phase.wait_for(|p| *p == Phase::Closing) => Outcome::Dropped(DropReason::ShuttingDown),
            };
            // The processor that took the frame stays alive until it has
            // answered, even if a reload has replaced it meanwhile.
            drop(processor);
            this.table().finished(key);
            // Admit the next frame before answering: writing the answer
            // waits for this client, the next frame may be someone else's.
            this.pump();
            w.reply.answer(outcome, Some(admitted)).await;
        });
    }

    /// Drains: refuses new frames, answers pending ones `ShuttingDown`,
    /// awaits frames in flight until `limit`, then closes (answering the
    /// rest `ShuttingDown`).
    pub async fn drain(self: &Arc<Self>, limit: Instant) {
        self.set_phase(Phase::Draining);
        let waiting = self.table().drain();
        for w in waiting {
            tokio::spawn(
                w.reply
                    .answer(Outcome::Dropped(DropReason::ShuttingDown), None),
            );
        }
        loop {
            let idle = self.idle.notified();
            if self.load().1 == 0 {
                break;
            }
            tokio::select! {
                _ = idle => {}
                _ = tokio::time::sleep_until(limit.into()) => break,
            }
        }
        self.set_phase(Phase::Closing);
    }
}
