//! The simulator and the daemon run one frame flow: this drives the
//! daemon's scheduler thread (its actor, with its real preparation pool and
//! step thread) on a virtual clock, the processors replaced at their seam
//! ([`super::units::Unit`]) by virtual ones that answer after the profiled
//! time, and the simulator on the same board, trace and scheduler, and
//! checks that both logs of decisions are the same: every placement (frame,
//! model, processor, batch size, start), load, eviction, drop, answer and
//! global step.
//!
//! The virtual processors keep time with the simulator's own physics
//! ([`camdnn_policy::sim::Units`]) and both drivers order events with its
//! [`Agenda`], so a difference in the logs is a difference in what the
//! daemon's actor tells the flow. The detector's outputs are made to find
//! the trace's objects: each frame's pixels carry its number, and the
//! virtual detector answers with YOLOv8 columns for that frame's objects.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use camdnn_engine::{BatchMode, Command, EngineError, RunReport, Tensor};
use camdnn_policy::admission::FrameAdmission;
use camdnn_policy::flow::Decision;
use camdnn_policy::scheduler::Scheduler;
use camdnn_policy::schedulers::by_name;
use camdnn_policy::sim::{simulate_logged, Agenda, SceneObjects, SimConfig, Trace, Units};
use camdnn_policy::{Cluster, System};
use camdnn_protocol::{Frame, PixelFormat};
use tokio::sync::oneshot;

use super::actor::{Actor, Event};
use super::clock::{Clock, VirtualTime};
use super::runtime::{actor, Parts};
use super::units::Unit;
use super::Outcome;
use crate::config::DaemonConfig;

/// Side of the frames sent, pixels (the detector's input side: its boxes
/// are the frame's).
const SIDE: u32 = 64;
/// The detector's YOLOv8 columns.
const COLUMNS: usize = 96;
/// The detector's input side, pixels.
const NET: u32 = 64;

/// What is due on the virtual clock.
enum Due {
    Camera(usize),
    Wake,
    /// A processor finished a command: answer it.
    Done(Box<dyn FnOnce() + Send>),
}

type SharedAgenda = Arc<Mutex<Agenda<Due>>>;

/// The board's physics and the frames' scenes, shared by the virtual processors.
struct World {
    units: Units<'static>,
    system: &'static System,
    scenes: Vec<Vec<u32>>,
}

/// One processor on the virtual clock.
struct VirtualUnit {
    j: camdnn_policy::ProcId,
    world: Arc<Mutex<World>>,
    agenda: SharedAgenda,
    time: Clock,
}

impl Unit for VirtualUnit {
    fn send(&self, cmd: Command) -> Result<(), EngineError> {
        let now = self.time.now_ms();
        let mut w = self.world.lock().unwrap();
        let system = w.system;
        let model_id = |name: &str| {
            system
                .model_ids()
                .find(|m| system.models[m.0].name == name)
                .expect("a model of the board")
        };
        match cmd {
            Command::Load { model, reply, .. } => {
                let span = w.units.load(now, model_id(&model.name), self.j);
                let info = camdnn_engine::ModelInfo {
                    name: model.name.clone(),
                    engine: camdnn_engine::EngineKind::Sim,
                    inputs: Vec::new(),
                    outputs: Vec::new(),
                    batch: BatchMode::Native,
                    load_time: Duration::from_secs_f64((span.finish_ms - span.start_ms) / 1e3),
                    detail: "virtual".into(),
                };
                let t0 = Instant::now();
                let report = camdnn_engine::LoadReport {
                    info,
                    already_resident: false,
                    started: t0,
                    finished: t0 + Duration::from_secs_f64((span.finish_ms - span.start_ms) / 1e3),
                };
                let done: Box<dyn FnOnce() + Send> = Box::new(move || reply_ok(reply, report));
                self.agenda
                    .lock()
                    .unwrap()
                    .push(span.finish_ms, Due::Done(done));
            }
            Command::Run {
                model,
                inputs,
                reply,
                ..
            } => {
                let i = model_id(&model);
                let k = inputs[0].shape()[0];
                let (span, exec_ms) = w.units.run(now, i, self.j, k);
                let outputs = fake_outputs(&w, i, &inputs[0], k);
                let t0 = Instant::now();
                let report = RunReport {
                    model,
                    outputs,
                    batch: k,
                    mode: BatchMode::Native,
                    submitted: t0,
                    started: t0,
                    finished: t0 + Duration::from_secs_f64(exec_ms / 1e3),
                };
                let done: Box<dyn FnOnce() + Send> = Box::new(move || reply_ok(reply, report));
                self.agenda
                    .lock()
                    .unwrap()
                    .push(span.finish_ms, Due::Done(done));
            }
            Command::Unload { .. } | Command::Shutdown => {}
        }
        Ok(())
    }

    fn is_alive(&self) -> bool {
        true
    }
}

fn reply_ok<T: Send + 'static>(reply: camdnn_engine::Reply<Result<T, EngineError>>, v: T) {
    reply.answer(Ok(v));
}

/// The frame number a detector input carries: its first pixel's red and
/// green channels (the input is `x / 255` of a uniform frame, NCHW or NHWC).
fn frame_of(input: &Tensor, item: usize) -> usize {
    let shape = input.shape();
    let per_item: usize = shape[1..].iter().product();
    let green = if shape[1] == 3 { per_item / 3 } else { 1 };
    let v = input.as_f32().expect("f32 input");
    let px = |at: usize| (v[item * per_item + at] * 255.0).round() as usize;
    px(0) + 256 * px(green)
}

/// What the virtual processor answers for a batch of model i: for the
/// detector, one YOLOv8 column per object of the frame, in the order the
/// simulator numbers them (scores falling, so that order survives); for a
/// classifier, one class score.
fn fake_outputs(w: &World, i: camdnn_policy::ModelId, input: &Tensor, k: usize) -> Vec<Tensor> {
    let system = w.system;
    if system.models[i.0].parent.is_some() {
        return vec![Tensor::from_f32(vec![k, 2], vec![0.5; k * 2]).expect("a shape")];
    }
    let classes: Vec<camdnn_policy::ModelId> = system
        .model_ids()
        .filter(|m| system.models[m.0].level == 1)
        .collect();
    let rows = 4 + classes.len();
    let mut out = vec![0f32; k * rows * COLUMNS];
    for item in 0..k {
        let f = frame_of(input, item);
        let scene = &w.scenes[f];
        let objects = SceneObjects::new(system, scene).level1();
        assert!(
            objects.len() <= COLUMNS,
            "a test scene of at most {COLUMNS} objects"
        );
        let base = item * rows * COLUMNS;
        for (n, r) in objects.iter().enumerate() {
            // Disjoint boxes on a grid of the 64 x 64 input.
            let (gx, gy) = ((n % 12) as f32, (n / 12) as f32);
            let col = |row: usize| base + row * COLUMNS + n;
            out[col(0)] = 2.5 + gx * 5.0;
            out[col(1)] = 2.5 + gy * 5.0;
            out[col(2)] = 4.0;
            out[col(3)] = 4.0;
            let c = classes
                .iter()
                .position(|&m| m == r.model)
                .expect("a level-1 model");
            out[col(4 + c)] = 0.99 - n as f32 * 1e-4;
        }
    }
    vec![Tensor::from_f32(vec![k, rows, COLUMNS], out).expect("a shape")]
}

/// A pipeline config for `system` on virtual processors: a YOLOv8 detector
/// whose labels are the classifiers' classes, each classifier a top-1.
fn config_toml(system: &System, profile: &std::path::Path, wait_ms: f64) -> String {
    let mut s = format!(
        "[server]\nsocket = \"/nonexistent/camdnnd.sock\"\n[pipeline]\nprofile = {:?}\nmax_batch = {}\nwait_ms = {wait_ms}\nprep_threads = 1\nmax_objects = 1000\n",
        profile.display().to_string(),
        system.max_batch
    );
    for p in &system.processors {
        s += &format!(
            "[[pipeline.processor]]\nname = {:?}\nkind = {:?}\nmax_resident = {}\nengine = \"sim\"\n",
            p.name,
            format!("{:?}", p.kind).to_lowercase(),
            p.max_resident
        );
    }
    let labels: Vec<String> = system
        .model_ids()
        .filter(|m| system.models[m.0].level == 1)
        .map(|m| format!("{:?}", system.models[m.0].classes[0]))
        .collect();
    for m in &system.models {
        s += &format!(
            "[[pipeline.model]]\nname = {:?}\npath = \"virtual.onnx\"\n",
            m.name
        );
        match m.parent {
            None => {
                s += &format!(
                    "input = {{ width = {NET}, height = {NET}, resize = \"stretch\", norm = {{ scale = 0.0039215686 }} }}\noutput = {{ kind = \"yolov8\", labels = [{}] }}\nsim_outputs = {{ out = [{}, {COLUMNS}] }}\n",
                    labels.join(", "),
                    4 + labels.len()
                );
            }
            Some(p) => {
                s += &format!("parent = {:?}\n", system.models[p.0].name);
                if !m.classes.is_empty() {
                    s += &format!("classes = [{:?}]\n", m.classes[0]);
                }
                s += "input = { width = 8, height = 8, norm = { scale = 0.0039215686 } }\noutput = { kind = \"topk\", k = 1 }\nsim_outputs = { prob = [2] }\n";
            }
        }
    }
    s
}

/// The daemon's scheduler thread on a virtual clock.
struct Rig {
    actor: Actor,
    rx: mpsc::Receiver<Event>,
    agenda: SharedAgenda,
    time: VirtualTime,
    answers: Vec<oneshot::Receiver<Outcome>>,
}

impl Rig {
    /// Handles what the actor has been sent, and waits for the off-thread
    /// work it asked for (preparations, steps): it takes no virtual time.
    fn settle(&mut self) {
        loop {
            match self.rx.try_recv() {
                Ok(ev) => {
                    self.actor.handle(ev);
                }
                Err(mpsc::TryRecvError::Empty) if self.actor.outstanding() == 0 => return,
                Err(mpsc::TryRecvError::Empty) => {
                    let ev = self
                        .rx
                        .recv_timeout(Duration::from_secs(60))
                        .expect("the preparation pool or the step thread answers");
                    self.actor.handle(ev);
                }
                Err(mpsc::TryRecvError::Disconnected) => return,
            }
        }
    }

    fn submit(&mut self, f: usize, deadline_ms: f64) {
        let px = [(f % 256) as u8, (f / 256) as u8, 0];
        let payload: Vec<u8> = (0..SIDE * SIDE).flat_map(|_| px).collect();
        let frame = Frame {
            stream_id: 1,
            seq: f as u64,
            capture_ts_us: 0,
            width: SIDE,
            height: SIDE,
            pixel_format: PixelFormat::Rgb24,
            priority: None,
            deadline: None,
            detections: None,
            payload: Bytes::from(payload),
        };
        let (tx, rx) = oneshot::channel();
        self.answers.push(rx);
        let received = Instant::now();
        let deadline = received.checked_add(Duration::from_secs_f64(deadline_ms / 1e3));
        self.actor.handle(Event::Submit {
            conn: 0,
            frame,
            received,
            deadline,
            reply: tx,
        });
    }

    /// Runs the camera's frames to the end; the flow's decisions.
    fn run(mut self, arrivals: &[f64], deadline_ms: f64) -> Vec<Decision> {
        {
            let mut a = self.agenda.lock().unwrap();
            a.push_frame(0, arrivals[0], Due::Camera(0));
            a.wake(arrivals[0], self.actor.flow.next_wake_ms(), || Due::Wake);
        }
        // A bound on the events, so a flow that keeps waking fails the test.
        let most = 1000 * arrivals.len();
        for handled in 0.. {
            assert!(
                handled < most,
                "more than {most} events: the flow keeps waking"
            );
            let next = self.agenda.lock().unwrap().pop();
            let Some((t, due)) = next else { break };
            self.time.set(t);
            match due {
                Due::Camera(f) => {
                    if let Some(&at) = arrivals.get(f + 1) {
                        self.agenda
                            .lock()
                            .unwrap()
                            .push_frame(f + 1, at, Due::Camera(f + 1));
                    }
                    self.submit(f, deadline_ms);
                }
                Due::Wake => {
                    self.actor.handle(Event::Tick);
                }
                Due::Done(answer) => answer(),
            }
            self.settle();
            let wake = self.actor.flow.next_wake_ms();
            self.agenda.lock().unwrap().wake(t, wake, || Due::Wake);
        }
        for (f, mut rx) in self.answers.drain(..).enumerate() {
            assert!(rx.try_recv().is_ok(), "frame {f} was answered");
        }
        let log = self.actor.flow.log().to_vec();
        self.actor.shut_down();
        log
    }
}

/// The scheduler `name` for `system`: "camdnn" is the full scheduler with
/// the learned policy shipped for rb5, any other a baseline by name.
fn scheduler(system: &System, name: &str, wait_ms: f64) -> Box<dyn Scheduler + Send> {
    if name == "camdnn" {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/policies/");
        let onnx = std::fs::read(format!("{dir}rb5.onnx")).expect("config/policies/rb5.onnx");
        let sidecar = std::fs::read_to_string(format!("{dir}rb5.policy.json"))
            .expect("config/policies/rb5.policy.json");
        let policy = camdnn_policy::mlp::MlpPolicy::new(system, &onnx, &sidecar)
            .expect("rb5's policy fits rb5");
        return Box::new(camdnn_policy::schedulers::Camdnn::new(policy, wait_ms));
    }
    by_name(system, name, wait_ms).unwrap_or_else(|| panic!("scheduler {name}"))
}

/// The daemon's decisions and the simulator's for `name` on `system` over `trace`.
fn both_logs(
    system: System,
    name: &str,
    trace: &Trace,
    sim: &SimConfig,
) -> (Vec<Decision>, Vec<Decision>) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let profile = dir.path().join("profile.toml");
    std::fs::write(&profile, system.to_spec().to_toml()).expect("writing the profile");
    let wait_ms = 5.0;
    let cfg_path = dir.path().join("camdnnd.toml");
    std::fs::write(&cfg_path, config_toml(&system, &profile, wait_ms)).expect("writing the config");
    let cfg = DaemonConfig::load(&cfg_path).expect("the test config is valid");
    let system: &'static System =
        Box::leak(Box::new(super::check(&cfg.pipeline).expect("its system")));

    let mut sim_sched = scheduler(system, name, wait_ms);
    let (_, sim_log) =
        simulate_logged(system, sim_sched.as_mut(), trace, sim).expect("the simulation runs");

    let scenes = camdnn_policy::sim::frame_scenes(system, trace, sim.root_items);
    let arrivals: Vec<f64> = (0..scenes.len())
        .map(|f| f as f64 * (1000.0 / sim.fps))
        .collect();
    let (clock, time) = Clock::virtual_at_zero();
    let agenda: SharedAgenda = Arc::new(Mutex::new(Agenda::new(scenes.len())));
    let world = Arc::new(Mutex::new(World {
        units: Units::new(system, &[], 0.0, 0.0),
        system,
        scenes,
    }));
    let units: Vec<Box<dyn Unit>> = system
        .proc_ids()
        .map(|j| {
            Box::new(VirtualUnit {
                j,
                world: Arc::clone(&world),
                agenda: Arc::clone(&agenda),
                time: clock.clone(),
            }) as Box<dyn Unit>
        })
        .collect();
    let p = &cfg.pipeline;
    let models = p
        .models
        .iter()
        .map(|m| super::models::ModelRuntime::new(m, &|f| cfg.resolve(f)))
        .collect::<anyhow::Result<Vec<_>>>()
        .expect("the models' runtimes");
    let sources = p
        .models
        .iter()
        .map(|m| m.source(|f| cfg.resolve(f), p.max_batch))
        .collect();
    let mut sched = scheduler(system, name, wait_ms);
    sched.set_admission(sim.admission);
    let mut cluster = Cluster::new(system);
    cluster.preload(system, &sched.initial_plan(system));
    let mut flow = sim.flow_config();
    flow.log = true;
    let (tx, rx) = mpsc::channel();
    let parts = Parts {
        system: system.clone(),
        models,
        sources,
        units,
        cluster,
        scheduler: sched,
        flow,
        stall: crate::pipeline::stall::StallConfig::default(),
        workers: Vec::new(),
        adapt_profile_out: None,
        max_in_flight: usize::MAX,
        prep_threads: 1,
        max_objects: 1000,
        clock,
        track: None,
        reuse: Vec::new(),
    };
    let (mut actor, ..) = actor(parts, tx).expect("the actor starts");
    // As the simulator's camera: no global step after the last frame's period.
    actor
        .flow
        .stop_steps_at(arrivals.len() as f64 * 1000.0 / sim.fps);
    let rig = Rig {
        actor,
        rx,
        agenda,
        time,
        answers: Vec::new(),
    };
    let daemon_log = rig.run(&arrivals, sim.frame_deadline_ms());
    (daemon_log, sim_log)
}

/// Fails with the first decision where the two logs part, and what led to it.
fn assert_same(name: &str, daemon: &[Decision], sim: &[Decision]) {
    let first = daemon.iter().zip(sim).position(|(a, b)| a != b);
    if let Some(n) = first.or((daemon.len() != sim.len()).then_some(daemon.len().min(sim.len()))) {
        let from = n.saturating_sub(5);
        let lines = |log: &[Decision]| -> String {
            log[from..(n + 3).min(log.len())]
                .iter()
                .map(|d| format!("\n  {d:?}"))
                .collect()
        };
        panic!(
            "{name}: the daemon and the simulator part at decision {n} of {}/{}\n daemon:{}\n simulator:{}",
            daemon.len(),
            sim.len(),
            lines(daemon),
            lines(sim)
        );
    }
    assert!(
        daemon.iter().any(|d| matches!(d, Decision::Place { .. })),
        "{name}: the logs hold placements"
    );
}

/// The paper's board, its trace shortened.
fn rb5() -> (System, Trace) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/profiles/rb5.toml");
    let system = System::from_toml(&std::fs::read_to_string(path).expect("rb5.toml")).expect("rb5");
    let mut trace = Trace::paper_fig11();
    for s in &mut trace.segments {
        s.frames = 12;
    }
    (system, trace)
}

/// Generated board `seed` and a random trace of it; a second-level model
/// gets one request per request of its parent (what a top-1 classifier's
/// answers release).
fn generated(seed: u64) -> (System, Trace) {
    let spec = camdnn_policy::gen::board(seed);
    let system = System::from_spec(&spec).expect("a generated board is valid");
    let request_models: Vec<camdnn_policy::ModelId> = system.request_models().collect();
    let mut trace = Trace::random(seed, request_models.len(), 10, 15, 8);
    for seg in &mut trace.segments {
        for (n, &m) in request_models.iter().enumerate() {
            if let Some(p) = system.models[m.0]
                .parent
                .filter(|_| system.models[m.0].level > 1)
            {
                let pn = request_models
                    .iter()
                    .position(|&x| x == p)
                    .expect("a request model");
                seg.scene[n] = seg.scene[pn];
            }
        }
    }
    (system, trace)
}

fn sim_config(admission: FrameAdmission) -> SimConfig {
    SimConfig {
        fps: 14.0,
        crop_ms: 0.0,
        crop_threads: 1,
        admission,
        ..SimConfig::default()
    }
}

#[test]
fn the_daemon_decides_as_the_simulator_on_rb5() {
    let (system, trace) = rb5();
    for name in ["camdnn", "camdnn-local", "heft", "ltf"] {
        let cfg = sim_config(FrameAdmission::Behind(None));
        let (daemon, sim) = both_logs(system.clone(), name, &trace, &cfg);
        assert_same(name, &daemon, &sim);
    }
}

#[test]
fn the_daemon_decides_as_the_simulator_on_generated_boards() {
    for seed in [3, 17] {
        let (system, trace) = generated(seed);
        for name in ["camdnn-greedy", "camdnn-local", "cq"] {
            let cfg = sim_config(FrameAdmission::QueueAll);
            let (daemon, sim) = both_logs(system.clone(), name, &trace, &cfg);
            assert_same(&format!("gen-{seed}/{name}"), &daemon, &sim);
        }
    }
}
