//! The simulator's event loop: a camera at F fps offers the trace's frames,
//! the admission rule lets them in, the frame flow decides, and the
//! physics ([`super::physics`]) carries out what it decides, handing the
//! flow back the events the board would.

use std::collections::VecDeque;

use super::agenda::Agenda;
use super::physics::{crop_waves, root_requests, SceneObjects, Span, Units};
use super::{frame_scene, FrameOutcome, SimConfig, SimError, SimReport};
use crate::admission::FrameAdmission;
use crate::bound::frame_bound;
use crate::flow::{
    BatchOutcome, Decision, DropCause, Effect, Event, FrameFlow, FrameId, FrameIn, Run,
};
use crate::scheduler::Scheduler;
use crate::{Cluster, System};

/// What the agenda holds.
enum Due {
    /// The camera delivers frame f.
    Camera(usize),
    /// The flow is woken.
    Wake,
    /// An event for the flow.
    Flow(Event),
}

/// One run of the simulator.
pub(super) struct Driver<'a> {
    system: &'a System,
    cfg: &'a SimConfig,
    flow: FrameFlow<&'a mut dyn Scheduler>,
    units: Units<'a>,
    /// Each frame's scene (index = `ModelId`).
    scenes: Vec<Vec<u32>>,
    agenda: Agenda<Due>,
    /// Zero-time events, handled before anything later.
    inline: VecDeque<Event>,
    /// Per frame: its detector requests still running.
    roots_left: Vec<u32>,
    /// Frames in the pipeline, and the one waiting for a place
    /// ([`FrameAdmission::InFlight`]).
    in_flight: usize,
    waiting: Option<usize>,
    /// The last frame bound computed: (scene, residency, bound ms).
    last_bound: Option<(Vec<u32>, Vec<bool>, f64)>,
    /// Per processor: the last load it started, for the batch behind it.
    last_load: Vec<Option<Span>>,
    report: SimReport,
}

impl<'a> Driver<'a> {
    /// A run of `scheduler` over the frames of `scenes` (one per frame),
    /// from `cluster` at `t0`.
    pub fn new(
        system: &'a System,
        scheduler: &'a mut dyn Scheduler,
        scenes: Vec<Vec<u32>>,
        cfg: &'a SimConfig,
        cluster: Cluster,
        t0: f64,
        log: bool,
    ) -> Result<Self, SimError> {
        let mut units = Units::new(system, &cfg.throttles, cfg.batch_overhead_ms, t0);
        for j in system.proc_ids() {
            units.busy_until(j, cluster.busy_until(j));
        }
        // The step plans for the first frame's scene until one is seen,
        // each detector counted once.
        let mut first_scene = scenes[0].clone();
        for r in system.roots() {
            first_scene[r.0] = 1;
        }
        let name = scheduler.name();
        let mut flow_cfg = cfg.flow_config();
        flow_cfg.log = log;
        let mut flow = FrameFlow::new(
            system.clone(),
            scheduler,
            cluster,
            flow_cfg,
            t0,
            first_scene,
        )
        .map_err(|e| SimError::Config {
            field: e.field,
            value: e.value,
            reason: e.reason,
        })?;
        let n = scenes.len();
        flow.stop_steps_at(t0 + n as f64 * 1000.0 / cfg.fps);
        Ok(Driver {
            system,
            cfg,
            flow,
            units,
            agenda: Agenda::new(n),
            inline: VecDeque::new(),
            roots_left: vec![0; n],
            in_flight: 0,
            waiting: None,
            last_bound: None,
            last_load: vec![None; system.num_processors()],
            report: SimReport::empty(name, system, n),
            scenes,
        })
    }

    /// Runs to the last frame's end.
    pub fn run(mut self, t0: f64) -> Result<(SimReport, Vec<Decision>), SimError> {
        let period = 1000.0 / self.cfg.fps;
        for f in 0..self.scenes.len() {
            self.report.frames.push(FrameOutcome {
                arrival_ms: t0 + f as f64 * period,
                delay_ms: None,
                loads: 0,
                busy_ms: vec![0.0; self.system.num_processors()],
                rem_at_arrival_ms: Vec::new(),
                bound_ms: f64::NAN,
            });
        }
        self.push_camera(0);
        self.schedule_wake(t0);
        while let Some((t, due)) = self.agenda.pop() {
            match due {
                Due::Camera(f) => {
                    self.push_camera(f + 1);
                    self.camera(t, f);
                }
                Due::Wake => self.flow.handle(t, Event::Tick),
                Due::Flow(ev) => self.flow.handle(t, ev),
            }
            self.carry_out(t)?;
            while let Some(ev) = self.inline.pop_front() {
                self.flow.handle(t, ev);
                self.carry_out(t)?;
            }
            self.schedule_wake(t);
        }
        let stats = self.flow.stats().clone();
        let r = &mut self.report;
        r.admission_drops = stats.dropped(DropCause::CannotMeetDeadline) as u32;
        r.loads = stats.placement_loads + stats.step_loads;
        r.evictions = stats.evictions;
        r.decisions = stats.batches;
        r.served = stats.served;
        r.flushes = stats.flushes;
        r.epochs = stats.steps;
        r.epoch_loads = stats.step_loads;
        r.triggered_epochs = stats.triggered_steps;
        r.drop_epochs = stats.drop_steps;
        r.adapt = self.flow.stepper().adapt().map(|a| a.counts());
        let log = self.flow.log().to_vec();
        Ok((self.report, log))
    }

    fn push(&mut self, t: f64, due: Due) {
        self.agenda.push(t, due);
    }

    /// At `t` or later, an event for the flow (zero time: before anything
    /// else).
    fn deliver(&mut self, now: f64, t: f64, ev: Event) {
        if t <= now {
            self.inline.push_back(ev);
        } else {
            self.push(t, Due::Flow(ev));
        }
    }

    fn push_camera(&mut self, f: usize) {
        if let Some(o) = self.report.frames.get(f) {
            self.agenda.push_frame(f, o.arrival_ms, Due::Camera(f));
        }
    }

    fn schedule_wake(&mut self, now: f64) {
        let wake = self.flow.next_wake_ms();
        self.agenda.wake(now, wake, || Due::Wake);
    }

    /// The camera delivers frame f: its backlog and bound are noted, and
    /// the admission rule lets it in, or makes it wait.
    fn camera(&mut self, now: f64, f: usize) {
        let cluster = self.flow.cluster();
        self.report.frames[f].rem_at_arrival_ms = cluster.rem_all(now);
        let scene = &self.scenes[f];
        let fresh = match &self.last_bound {
            Some((s, a, _)) => s != scene || a.as_slice() != cluster.residency(),
            None => true,
        };
        if fresh {
            let b = frame_bound(self.system, scene, |i, j| cluster.is_resident(i, j));
            let residency = cluster.residency().to_vec();
            self.last_bound = Some((scene.clone(), residency, b.bound_ms()));
        }
        self.report.frames[f].bound_ms = self.last_bound.as_ref().map_or(f64::NAN, |b| b.2);
        match self.cfg.admission {
            FrameAdmission::InFlight(limit) if self.in_flight >= limit => {
                if self.waiting.replace(f).is_some() {
                    // The older waiting frame is superseded: newest wins.
                    self.flow.handle(now, Event::DroppedBeforeEntry);
                }
            }
            _ => self.enter(now, f),
        }
    }

    fn enter(&mut self, now: f64, f: usize) {
        self.in_flight += 1;
        let arrival = self.report.frames[f].arrival_ms;
        let frame = FrameIn {
            frame: FrameId(f as u64),
            stream: 0,
            seq: f as u64,
            capture_ms: None,
            arrival_ms: arrival,
            deadline_ms: Some(arrival + self.cfg.frame_deadline_ms()),
            priority: 0,
            upstream: None,
            tracked: false,
        };
        self.flow.handle(now, Event::FrameIn(frame));
    }

    /// A frame left the pipeline: the waiting one takes its place.
    fn left(&mut self, now: f64) {
        self.in_flight -= 1;
        if let Some(next) = self.waiting.take() {
            self.enter(now, next);
        }
    }

    /// Carries out the flow's effects at `now`, and those that carrying
    /// them out brings (a waiting frame let in when one is answered).
    fn carry_out(&mut self, now: f64) -> Result<(), SimError> {
        loop {
            let effects: Vec<Effect> = self.flow.take_effects().collect();
            if effects.is_empty() {
                return Ok(());
            }
            for e in effects {
                self.carry_out_one(now, e)?;
            }
        }
    }

    fn carry_out_one(&mut self, now: f64, e: Effect) -> Result<(), SimError> {
        match e {
            Effect::PrepareRoot(frame) => {
                let requests = root_requests(self.system, self.cfg.root_items);
                self.roots_left[frame.0 as usize] = requests.len() as u32;
                let ev = Event::RootReady { frame, requests };
                self.deliver(now, now + self.cfg.frame_prep_ms, ev);
            }
            Effect::Prepare { frame, requests } => {
                let (ms, threads) = (self.cfg.crop_ms, self.cfg.crop_threads);
                for (t, ready) in crop_waves(now, requests, ms, threads) {
                    let ev = Event::Prepared {
                        frame,
                        ready,
                        failed: Vec::new(),
                    };
                    self.deliver(now, t, ev);
                }
            }
            Effect::Unload { .. } => {}
            Effect::Load { model, proc } => {
                let span = self.units.load(now, model, proc);
                self.last_load[proc.0] = Some(span);
                let ev = Event::LoadDone {
                    model,
                    proc,
                    ok: Ok(Some(span.finish_ms - span.start_ms)),
                };
                self.push(span.finish_ms, Due::Flow(ev));
            }
            Effect::Run(run) => self.run_batch(now, run),
            Effect::StartStep(step) => {
                let ev = Event::StepComputed(step);
                self.deliver(now, now + self.cfg.step_cost_ms, ev);
            }
            Effect::Answer { frame, .. } => {
                let o = &mut self.report.frames[frame.0 as usize];
                o.delay_ms = Some(now - o.arrival_ms);
                self.report.duration_ms = self.report.duration_ms.max(now);
                self.left(now);
            }
            Effect::Drop { frame, cause } => {
                if cause == DropCause::NoHost {
                    let model = self.flow.stats().no_host.map_or(0, |m| m.0);
                    return Err(SimError::NoHost {
                        scheduler: self.report.scheduler.clone(),
                        model: self.system.models[model].name.clone(),
                    });
                }
                if cause == DropCause::BehindAtFanOut {
                    // Its detector's work counts in the run's span.
                    self.report.duration_ms = self.report.duration_ms.max(now);
                }
                let _ = frame;
                self.left(now);
            }
        }
        Ok(())
    }

    /// Runs a placed batch: its processor takes the board's time, and the
    /// flow hears of it when it ends, with the children each item releases.
    fn run_batch(&mut self, now: f64, run: Run) {
        let f = run.frame.0 as usize;
        let k = run.objects.len();
        let (span, exec_ms) = self.units.run(now, run.model, run.proc, k);
        // Its busy time: its load (when it had one) and its run, not the
        // rest a utilisation cap adds between them.
        let load_ms = match self.last_load[run.proc.0].take() {
            Some(load) if run.loads => load.finish_ms - load.start_ms,
            _ => 0.0,
        };
        let busy = load_ms + (span.finish_ms - span.start_ms);
        let o = &mut self.report.frames[f];
        o.busy_ms[run.proc.0] += busy;
        self.report.busy_ms[run.proc.0] += busy;
        if run.loads {
            o.loads += 1;
            self.report.load_ms += load_ms;
        }
        let scene = &self.scenes[f];
        let objects = SceneObjects::new(self.system, scene);
        let is_root = self.system.models[run.model.0].parent.is_none();
        let mut items = Vec::with_capacity(k);
        for &object in &run.objects {
            if is_root {
                self.roots_left[f] -= 1;
                let last = self.roots_left[f] == 0;
                items.push(Ok(if last { objects.level1() } else { Vec::new() }));
            } else {
                items.push(Ok(objects.children(run.model, object)));
            }
        }
        let ev = Event::BatchDone {
            batch: run.batch,
            finished_ms: span.finish_ms,
            outcome: BatchOutcome::Done { exec_ms, items },
        };
        self.push(span.finish_ms, Due::Flow(ev));
    }
}

/// Each frame's scene of `trace` (index = `ModelId`; detectors run
/// `root_items` times).
pub fn frame_scenes(system: &System, trace: &super::Trace, root_items: u32) -> Vec<Vec<u32>> {
    let mut out = Vec::with_capacity(trace.frames());
    for seg in &trace.segments {
        let scene = frame_scene(system, &seg.scene, root_items);
        for _ in 0..seg.frames {
            out.push(scene.clone());
        }
    }
    out
}
