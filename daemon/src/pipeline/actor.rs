//! The scheduler thread: one actor that drives the policy crate's frame
//! flow (`camdnn_policy::flow`, the code the simulator drives too) and
//! turns its effects into commands to the preparation pool, the step thread
//! and the processors, and into replies and metrics. It decides nothing
//! itself; nothing here blocks on inference.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use camdnn_engine::{EngineError, ModelSource, RunReport};
use camdnn_policy::flow::{
    BatchId, Effect, Event as FlowEvent, FrameFlow, FrameId, FrameIn, Request, Run,
};
use camdnn_policy::reuse::Tracked;
use camdnn_policy::scheduler::Scheduler;
use camdnn_policy::stepper::StartedStep;
use camdnn_policy::{ModelId, ProcId};
use camdnn_protocol::{ClassRef, Frame, RejectReason};
use camdnn_vision::track::CarriedBox;
use camdnn_vision::{keep_best, BBox};
use tokio::sync::oneshot;

use super::clock::Clock;
use super::frame_data::{FrameData, ObjectState};
use super::health::PipelineHealth;
use super::models::ModelRuntime;
use super::prep::{CropSpec, PrepPool, Prepared};
use super::reuse::Reuse;
use super::stats::Stats;
use super::step_thread::StepThread;
use super::units::Unit;
use super::work::WorkEstimate;
use super::Outcome;

/// Messages to the scheduler thread.
pub enum Event {
    /// A frame from the server, with its deadline as the server read it.
    Submit {
        /// The connection it came on ([`super::reuse::DIRECT`] for a caller without one).
        conn: u64,
        /// The frame.
        frame: Frame,
        /// When the server had read it.
        received: Instant,
        /// When it must be answered by.
        deadline: Option<Instant>,
        /// Where its outcome goes.
        reply: oneshot::Sender<Outcome>,
    },
    /// Output of the preparation pool (its ticket: the order it was asked for).
    Prepared(u64, Prepared),
    /// A batch finished on a processor.
    BatchDone {
        /// The flow's batch.
        batch: BatchId,
        /// What the worker reported.
        result: Result<RunReport, EngineError>,
    },
    /// A model load on a processor finished (`Err`: the engine's message).
    LoadDone {
        /// The model.
        model: ModelId,
        /// The processor.
        proc: ProcId,
        /// What the worker reported: the load's time on success.
        result: Result<f64, String>,
    },
    /// The server dropped a frame before submitting it (superseded,
    /// overloaded or past its deadline). At most one is queued at a time.
    Dropped,
    /// The step thread computed a global step (its ticket, as for `Prepared`).
    StepComputed(u64, StartedStep),
    /// A connection ended: its streams' tracks and stored results are freed.
    ConnectionClosed(u64),
    /// Time passed (a test's virtual clock moved).
    Tick,
    /// Stop: answer what is left and end the thread.
    Shutdown,
}

/// A batch on a processor, as the scheduler thread tracks it.
pub(super) struct BatchMeta {
    pub run: Run,
    pub dispatched: Instant,
}

/// Everything the actor owns.
pub(super) struct Actor {
    pub clock: Clock,
    pub flow: FrameFlow<Box<dyn Scheduler + Send>>,
    pub models: Vec<ModelRuntime>,
    pub sources: Vec<ModelSource>,
    pub units: Vec<Box<dyn Unit>>,
    pub max_objects: usize,
    /// Limits on engine calls.
    pub stall: super::stall::StallConfig,
    pub frames: BTreeMap<FrameId, FrameData>,
    pub batches: HashMap<BatchId, BatchMeta>,
    pub next_frame: u64,
    /// When each processor's last batch finished (worker clock).
    pub last_finish: Vec<Option<Instant>>,
    /// Per processor: its worker has ended (found at a heartbeat).
    pub dead: Vec<bool>,
    /// When each running global step started, for its time.
    pub step_started: Option<Instant>,
    pub work: Arc<WorkEstimate>,
    pub health: Arc<PipelineHealth>,
    pub adapt_profile_out: Option<std::path::PathBuf>,
    pub tx: mpsc::Sender<Event>,
    pub prep: PrepPool,
    pub step_thread: StepThread,
    pub in_flight: Arc<AtomicUsize>,
    /// Frames the flow sees stuck on a stalled processor
    /// ([`camdnn_policy::flow::FrameFlow::stuck_frames`]).
    pub stuck: Arc<AtomicUsize>,
    pub drop_queued: Arc<AtomicBool>,
    /// Off-thread work asked for (preparations, steps), numbered in order.
    pub next_ticket: u64,
    /// On a virtual clock, results are handled in the order they were asked
    /// for (the simulator's order for work that takes no simulated time):
    /// the next ticket to handle, and the results waiting for their turn.
    pub next_in_order: u64,
    pub parked: BTreeMap<u64, Event>,
    /// Tracking and result reuse (`None`: `[pipeline.track]` is off).
    pub reuse: Option<Reuse>,
    /// What the pipeline did, for [`super::runtime::Pipeline::stats`].
    pub stats: Stats,
}

impl Actor {
    pub(super) fn now(&self) -> f64 {
        self.clock.now_ms()
    }

    /// Handles one message; `false` when the thread should end.
    pub fn handle(&mut self, ev: Event) -> bool {
        if self.clock.is_virtual() {
            match ev {
                Event::Prepared(t, _) | Event::StepComputed(t, _) => {
                    self.parked.insert(t, ev);
                    while let Some(next) = self.parked.remove(&self.next_in_order) {
                        self.next_in_order += 1;
                        self.dispatch(next);
                    }
                    return true;
                }
                _ => {}
            }
        }
        self.dispatch(ev)
    }

    /// Off-thread work asked for and not yet handled.
    #[cfg(test)]
    pub fn outstanding(&self) -> u64 {
        self.next_ticket - self.next_in_order
    }

    fn dispatch(&mut self, ev: Event) -> bool {
        let now = self.now();
        match ev {
            Event::Shutdown => return false,
            Event::Submit {
                conn,
                frame,
                received,
                deadline,
                reply,
            } => self.submit(now, conn, frame, received, deadline, reply),
            Event::ConnectionClosed(conn) => {
                if let Some(r) = &mut self.reuse {
                    r.connection_closed(conn);
                }
                for f in self.frames.values_mut() {
                    // Still in flight: answered untracked, nothing stored.
                    if let Some(t) = f.track.as_mut().filter(|t| t.key.0 == conn) {
                        t.frame = None;
                    }
                }
            }
            Event::Prepared(_, p) => self.prepared(now, p),
            Event::BatchDone { batch, result } => self.batch_done(now, batch, result),
            Event::LoadDone {
                model,
                proc,
                result,
            } => self.load_done(now, model, proc, result),
            Event::Dropped => {
                self.drop_queued.store(false, Ordering::Release);
                self.step(now, FlowEvent::DroppedBeforeEntry);
            }
            Event::StepComputed(_, step) => {
                if let Some(t0) = self.step_started.take() {
                    let took = t0.elapsed();
                    metrics::histogram!("camdnn_global_step_seconds").record(took.as_secs_f64());
                    self.stats.global_step(took);
                }
                self.step(now, FlowEvent::StepComputed(step));
            }
            Event::Tick => self.step(now, FlowEvent::Tick),
        }
        true
    }

    /// Hands the flow an event and carries out what it decides.
    pub fn step(&mut self, now: f64, ev: FlowEvent) {
        let before = self.flow.stats().clone();
        let t0 = Instant::now();
        self.flow.handle(now, ev);
        let took = t0.elapsed();
        let after = self.flow.stats();
        let placed = after.batches - before.batches;
        if placed > 0 {
            metrics::histogram!("camdnn_dispatch_decision_seconds")
                .record(took.as_secs_f64() / placed as f64);
        }
        for (slot, reason) in ["full", "complete", "timer"].iter().enumerate() {
            let n = after.flushes[slot] - before.flushes[slot];
            if n > 0 {
                metrics::counter!("camdnn_batch_flushes_total", "reason" => *reason).increment(n);
            }
        }
        if after.drop_steps > before.drop_steps {
            metrics::counter!("camdnn_drop_steps_total")
                .increment(u64::from(after.drop_steps - before.drop_steps));
        }
        if after.triggered_steps > before.triggered_steps {
            metrics::counter!("camdnn_adapt_triggers_total")
                .increment(u64::from(after.triggered_steps - before.triggered_steps));
        }
        if after.step_loads > before.step_loads {
            metrics::counter!("camdnn_global_step_reallocations_total")
                .increment(u64::from(after.step_loads - before.step_loads));
        }
        let effects: Vec<Effect> = self.flow.take_effects().collect();
        for e in effects {
            self.carry_out(e);
        }
        self.stuck
            .store(self.flow.stuck_frames(), Ordering::Release);
    }

    fn submit(
        &mut self,
        now: f64,
        conn: u64,
        frame: Frame,
        received: Instant,
        deadline: Option<Instant>,
        reply: oneshot::Sender<Outcome>,
    ) {
        self.health.progressed();
        let id = FrameId(self.next_frame);
        self.next_frame += 1;
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        metrics::counter!("camdnn_pipeline_frames_total").increment(1);
        let root = self
            .flow
            .view()
            .roots()
            .next()
            .expect("a validated system has a detector");
        let arrival_ms = self.clock.ms_of(received);
        let frame_in = FrameIn {
            frame: id,
            stream: u64::from(frame.stream_id),
            seq: frame.seq,
            capture_ms: (frame.capture_ts_us > 0).then(|| frame.capture_ts_us as f64 / 1e3),
            arrival_ms,
            // From the arrival, so a virtual clock reads it exactly too.
            deadline_ms: deadline
                .map(|d| arrival_ms + d.saturating_duration_since(received).as_secs_f64() * 1e3),
            priority: frame.priority.unwrap_or(0),
            upstream: None,
            tracked: false,
        };
        let dets = frame.detections.clone();
        let key = (conn, frame.stream_id);
        let mut data = FrameData::new(frame, received, reply);
        if dets.is_none() && self.models[root.0].decoder.is_upstream() {
            let name = &self.flow.view().models[root.0].name;
            let msg = format!(
                "this pipeline's detector {name:?} runs upstream: frames must carry their detections (boxes and classes)"
            );
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            let _ = data
                .reply
                .send(Outcome::Rejected(RejectReason::BadDetection, msg));
            return;
        }
        let entered = (self.reuse.as_mut()).map(|r| r.enter(key, arrival_ms, dets.is_none()));
        let upstream = match (dets, entered) {
            (Some(dets), None) => Some(self.upstream_objects(&mut data, &dets, root)),
            (None, None) => None,
            (dets, Some((mut track, carried))) => {
                let requests = match (dets, carried) {
                    (Some(dets), _) => {
                        let requests = self.upstream_objects(&mut data, &dets, root);
                        if let Some(r) = self.reuse.as_mut() {
                            r.associate(&mut track, &mut data.objects);
                        }
                        Some(requests)
                    }
                    (None, Some(carried)) => {
                        Some(self.carried_objects(&mut data, key, carried, root))
                    }
                    (None, None) => None,
                };
                data.track = Some(track);
                requests.map(|r| self.plan(&mut data, r))
            }
        };
        let frame_in = FrameIn {
            tracked: upstream.is_some() && data.track.is_some(),
            upstream,
            ..frame_in
        };
        self.frames.insert(id, data);
        self.step(now, FlowEvent::FrameIn(frame_in));
    }

    /// The requests of a tracked frame that are inferred (the rest are answered from their
    /// tracks' stored results).
    pub(super) fn plan(&mut self, data: &mut FrameData, requests: Vec<Request>) -> Vec<Request> {
        match &mut self.reuse {
            Some(r) => r.plan(self.flow.view(), data, requests),
            None => requests,
        }
    }
}

impl Actor {
    /// A frame's upstream detections as its objects (the best `max_objects`
    /// kept; a class id named by the detector's labels); those a model
    /// takes become its level-1 requests.
    fn upstream_objects(
        &self,
        data: &mut FrameData,
        dets: &[camdnn_protocol::UpstreamDetection],
        root: ModelId,
    ) -> Vec<Request> {
        let scores: Vec<f32> = dets.iter().map(|d| d.score).collect();
        let kept = keep_best(&scores, self.max_objects);
        data.objects_dropped = (dets.len() - kept.len()) as u32;
        let labels = self.models[root.0].decoder.labels();
        let mut requests = Vec::new();
        for (n, d) in kept.into_iter().map(|i| &dets[i]).enumerate() {
            // A class id is the detector's label index (protocol.md): route by its name.
            let (name, class) = match &d.class {
                ClassRef::Name(s) => (Some(s.as_str()), ClassRef::Name(s.clone())),
                ClassRef::Id(i) => match labels.get(*i as usize) {
                    Some(l) => (Some(l.as_str()), ClassRef::Name(l.clone())),
                    None => (None, ClassRef::Id(*i)),
                },
            };
            let bbox = BBox::new(d.bbox.x0, d.bbox.y0, d.bbox.x1, d.bbox.y1);
            if let Some(m) = name.and_then(|c| self.flow.view().route(c)) {
                let r = Request {
                    model: m,
                    object: n as u32,
                };
                data.crops.insert(
                    r,
                    CropSpec {
                        object: n,
                        model: m,
                        bbox,
                        rotate: false,
                    },
                );
                requests.push(r);
            }
            data.objects.push(ObjectState::new(bbox, class, d.score));
        }
        requests
    }

    /// A frame the detector skipped: the tracker's carried boxes as its objects (the best
    /// `max_objects` kept), with their tracks and box ages; returns their level-1 requests.
    fn carried_objects(
        &self,
        data: &mut FrameData,
        key: super::frame_data::StreamKey,
        carried: Vec<CarriedBox>,
        root: ModelId,
    ) -> Vec<Request> {
        let reuse = self.reuse.as_ref().expect("carried only when tracking");
        let dets: Vec<camdnn_protocol::UpstreamDetection> = carried
            .iter()
            .map(|c| camdnn_protocol::UpstreamDetection {
                bbox: camdnn_protocol::BBox {
                    x0: c.bbox.x0,
                    y0: c.bbox.y0,
                    x1: c.bbox.x1,
                    y1: c.bbox.y1,
                },
                class: ClassRef::Name(c.class.clone()),
                score: reuse.carried_score(&key, c.track),
            })
            .collect();
        let requests = self.upstream_objects(data, &dets, root);
        // The objects are the kept boxes in their order (`keep_best` is deterministic).
        let scores: Vec<f32> = dets.iter().map(|d| d.score).collect();
        let kept = keep_best(&scores, self.max_objects);
        for (o, c) in data
            .objects
            .iter_mut()
            .zip(kept.into_iter().map(|i| &carried[i]))
        {
            o.track = Some(Tracked {
                id: c.track,
                confirmed: true,
                continued: true,
            });
            o.box_age = c.box_age;
        }
        requests
    }
}
