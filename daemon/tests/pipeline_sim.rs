//! The real pipeline (scheduler thread, preparation pool, workers) on the sim
//! engine with the shipped simulated-RB5 config: every frame is answered,
//! every routed object gets its classifier's output.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use camdnn_daemon::config::DaemonConfig;
use camdnn_daemon::pipeline::{self, FrameProcessor, Outcome};
use camdnn_engine::SimFaults;
use camdnn_policy::scheduler::{Batching, EpochJob, EpochOutcome, Scheduler};
use camdnn_policy::schedulers::{Recording, StepLog};
use camdnn_policy::{Cluster, ModelId, Plan, ProcId, System};
use camdnn_protocol::{
    BBox, ClassRef, DropReason, Frame, OutputValue, PixelFormat, UpstreamDetection,
};
use tokio::sync::oneshot;

fn config() -> DaemonConfig {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/camdnnd-sim.toml");
    DaemonConfig::load(&path).unwrap()
}

fn frame(seq: u64, objects: &[(&str, f32)]) -> Frame {
    let (w, h) = (64u32, 48u32);
    let detections = objects
        .iter()
        .enumerate()
        .map(|(n, &(class, score))| UpstreamDetection {
            bbox: BBox {
                x0: n as f32,
                y0: 2.0,
                x1: n as f32 + 20.0,
                y1: 30.0,
            },
            class: ClassRef::Name(class.into()),
            score,
        })
        .collect();
    Frame {
        stream_id: 7,
        seq,
        capture_ts_us: 0,
        width: w,
        height: h,
        pixel_format: PixelFormat::Rgb24,
        priority: None,
        deadline: None,
        detections: Some(detections),
        payload: Bytes::from(vec![100u8; (w * h * 3) as usize]),
    }
}

#[test]
fn upstream_detections_are_classified_by_their_routed_models() {
    classifies_every_routed_object(&config());
}

/// Late binding at its tightest (a batch waits in the scheduler until its
/// host is idle) still answers every frame with every output.
#[test]
fn held_batches_are_all_placed_with_a_zero_dispatch_horizon() {
    let mut cfg = config();
    cfg.pipeline.dispatch_ahead_ms = Some(0.0);
    classifies_every_routed_object(&cfg);
}

/// With adaptation on (live estimates from every batch, early global
/// steps), every frame is still answered with every output, and at
/// shutdown the estimates are written as a profile the daemon can read.
#[test]
fn adapting_pipeline_answers_every_frame_and_writes_its_estimates() {
    let out = std::env::temp_dir().join(format!("camdnn-adapt-{}.toml", std::process::id()));
    let _ = std::fs::remove_file(&out);
    let mut cfg = config();
    cfg.pipeline.adapt = true;
    cfg.pipeline.adapt_profile_out = Some(out.clone());
    classifies_every_routed_object(&cfg);
    let text = std::fs::read_to_string(&out).expect("the estimates were written at shutdown");
    let _ = std::fs::remove_file(&out);
    let spec = camdnn_policy::spec::SystemSpec::from_toml(&text).expect("a profile file");
    let profile = cfg.pipeline.system_spec(spec.name.clone(), spec.profile);
    let system = camdnn_policy::System::from_spec(&profile).expect("the daemon reads it back");
    assert_eq!(
        system.num_processors(),
        cfg.pipeline.processors.len(),
        "{text}"
    );
}

fn classifies_every_routed_object(cfg: &DaemonConfig) {
    let built = pipeline::start(&cfg.pipeline).unwrap();
    assert!(built.pipeline.is_ready());
    let objects = [
        ("person", 0.9),
        ("car", 0.8),
        ("car", 0.7),
        ("bicycle", 0.6),
        ("dog", 0.5),
    ];
    let rxs: Vec<_> = (0..6)
        .map(|s| built.pipeline.submit_now(frame(s, &objects)))
        .collect();
    for (s, rx) in rxs.into_iter().enumerate() {
        let Outcome::Done(r) = rx.blocking_recv().unwrap() else {
            panic!("frame {s} not processed")
        };
        assert_eq!((r.stream_id, r.seq), (7, s as u64));
        assert_eq!(r.objects.len(), 5);
        let models: Vec<Vec<&str>> = r
            .objects
            .iter()
            .map(|o| o.outputs.iter().map(|x| x.model.as_str()).collect())
            .collect();
        assert_eq!(
            models,
            [
                vec!["inception_v1"],
                vec!["squeezenet"],
                vec!["squeezenet"],
                vec!["mobilenet_v1"],
                vec![]
            ]
        );
        for o in &r.objects[..4] {
            let OutputValue::TopK(labels) = &o.outputs[0].value else {
                panic!("top-k expected")
            };
            assert_eq!(labels.len(), 3);
        }
        assert!(r.timing.total_us >= r.timing.classify_us);
        assert!(r.timing.total_us > 0);
    }
    assert_eq!(built.pipeline.in_flight(), 0);
    // The pipeline's own counters saw the same work: one crop and one request per
    // routed object, each batch's run on some processor's busy time.
    let stats = built.pipeline.stats();
    let requests: Vec<u64> = ["inception_v1", "squeezenet", "mobilenet_v1"]
        .map(|m| stats.requests_of(m))
        .to_vec();
    assert_eq!(requests, [6, 12, 6]);
    assert_eq!(stats.crop.count, 24);
    let batches: u64 = stats.batches.values().map(|b| b.batches).sum();
    assert_eq!(stats.hand_over.count, batches);
    assert!(stats.busy_s.values().sum::<f64>() > 0.0);
    built.pipeline.shutdown();
}

/// The pipeline of `cfg` with its scheduler wrapped in a [`Recording`]:
/// every global step the scheduler thread runs, as (ms, frames).
fn start_recording(cfg: &DaemonConfig) -> (pipeline::Built, StepLog) {
    let steps = Arc::new(Mutex::new(None));
    let log = Arc::clone(&steps);
    let built = pipeline::start_with(&cfg.pipeline, move |inner| {
        let (recording, steps) = Recording::new(inner);
        *log.lock().unwrap() = Some(steps);
        Box::new(recording)
    })
    .unwrap();
    let steps = steps
        .lock()
        .unwrap()
        .clone()
        .expect("the scheduler was wrapped");
    (built, steps)
}

/// The scheduler thread runs the global step as `policy::stepper` says:
/// the first an epoch after the start with the frames offered before it,
/// the next an epoch after that one with none offered (so 1), never early.
#[test]
fn the_global_step_runs_an_epoch_after_the_last_with_the_frames_offered() {
    let mut cfg = config();
    cfg.pipeline.epoch_ms = 1000.0;
    let (built, steps) = start_recording(&cfg);
    let rxs: Vec<_> = (0..6)
        .map(|s| {
            built
                .pipeline
                .submit_now(frame(s, &[("person", 0.9), ("car", 0.8)]))
        })
        .collect();
    for rx in rxs {
        assert!(matches!(rx.blocking_recv().unwrap(), Outcome::Done(_)));
    }
    let waited = Instant::now();
    while steps.lock().unwrap().len() < 2 {
        assert!(
            waited.elapsed() < Duration::from_secs(20),
            "no second global step"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    built.pipeline.shutdown();
    let steps = steps.lock().unwrap();
    let (first, second) = (steps[0], steps[1]);
    assert_eq!((first.1, second.1), (6.0, 1.0), "{steps:?}");
    assert!(first.0 >= 1000.0, "{steps:?}");
    assert!(second.0 - first.0 >= 1000.0, "{steps:?}");
}

/// A frame the server dropped (superseded, overloaded, past its deadline)
/// reaches the scheduler thread, whose stepper brings the global step
/// forward: long before the epoch timer's.
#[test]
fn a_frame_the_server_dropped_brings_the_global_step_forward() {
    let mut cfg = config();
    cfg.pipeline.epoch_ms = 600_000.0;
    cfg.pipeline.drop_step_gap_ms = 100.0;
    let (built, steps) = start_recording(&cfg);
    // Past the drop gap from the start.
    std::thread::sleep(Duration::from_millis(150));
    built.frame_dropped();
    let waited = Instant::now();
    while steps.lock().unwrap().is_empty() {
        assert!(
            waited.elapsed() < Duration::from_secs(20),
            "no global step after a drop"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    built.pipeline.shutdown();
    let at = steps.lock().unwrap()[0].0;
    assert!((100.0..600_000.0).contains(&at), "stepped at {at} ms");
}

/// A frame whose deadline passes while its batch runs is answered at its
/// deadline by the flow's timer (dropped, `deadline_passed`), not when the
/// run ends, and, as any drop for being behind, brings the global step
/// forward long before the epoch timer's. The frame's detector run stalls
/// 1.5 s (sim fault) against a 500 ms deadline.
#[test]
fn a_frame_whose_deadline_passes_in_a_stalled_run_is_answered_at_it() {
    let mut cfg = config();
    cfg.pipeline.epoch_ms = 600_000.0;
    cfg.pipeline.drop_step_gap_ms = 100.0;
    let detector = cfg
        .pipeline
        .models
        .iter_mut()
        .find(|m| m.parent.is_none())
        .expect("a detector");
    // Run 1 is the start-up warm-up; run 2 is the frame's.
    detector.sim_faults = Some(SimFaults {
        stall_on_runs: vec![2],
        stall_ms: 1500,
        ..SimFaults::default()
    });
    let (built, steps) = start_recording(&cfg);
    // Past the drop gap from the start.
    std::thread::sleep(Duration::from_millis(150));
    let mut f = frame(1, &[]);
    f.detections = None;
    f.deadline = Some(camdnn_protocol::Deadline::RelativeUs(500_000));
    let submitted = Instant::now();
    match built.pipeline.submit_now(f).blocking_recv().unwrap() {
        Outcome::Dropped(DropReason::DeadlinePassed) => {}
        other => panic!("expected a drop at the deadline, got {other:?}"),
    }
    let took = submitted.elapsed();
    assert!(
        took >= Duration::from_millis(500),
        "before its deadline: {took:?}"
    );
    assert!(
        took < Duration::from_millis(1500),
        "only when the run ended: {took:?}"
    );
    wait_for("no global step after a drop at the deadline", || {
        !steps.lock().unwrap().is_empty()
    });
    built.pipeline.shutdown();
    let at = steps.lock().unwrap()[0].0;
    assert!((100.0..600_000.0).contains(&at), "stepped at {at} ms");
}

#[test]
fn frames_without_detections_run_the_detector() {
    let built = pipeline::start(&config().pipeline).unwrap();
    let mut f = frame(1, &[]);
    f.detections = None;
    let Outcome::Done(r) = built.pipeline.submit_now(f).blocking_recv().unwrap() else {
        panic!()
    };
    // The sim detector returns zeros: nothing scores above the threshold.
    assert!(r.objects.is_empty());
    assert!(r.timing.detect_us > 0, "{:?}", r.timing);
}

#[test]
fn undecodable_frames_are_rejected_and_others_still_served() {
    let built = pipeline::start(&config().pipeline).unwrap();
    let mut bad = frame(1, &[("person", 0.9)]);
    bad.pixel_format = PixelFormat::Jpeg;
    bad.payload = Bytes::from_static(b"not a jpeg at all");
    let bad_rx = built.pipeline.submit_now(bad);
    let good_rx = built.pipeline.submit_now(frame(2, &[("person", 0.9)]));
    match bad_rx.blocking_recv().unwrap() {
        Outcome::Rejected(_, msg) => assert!(!msg.is_empty()),
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert!(matches!(good_rx.blocking_recv().unwrap(), Outcome::Done(_)));
}

#[test]
fn shutdown_answers_every_frame_in_flight() {
    let built = pipeline::start(&config().pipeline).unwrap();
    let many: Vec<(&str, f32)> = (0..20).map(|_| ("person", 0.9)).collect();
    let rxs: Vec<_> = (0..5)
        .map(|s| built.pipeline.submit_now(frame(s, &many)))
        .collect();
    built.pipeline.shutdown();
    for rx in rxs {
        let o = rx.blocking_recv().expect("every frame is answered");
        assert!(matches!(o, Outcome::Done(_) | Outcome::Dropped(_)), "{o:?}");
    }
}

/// Names of this process's threads now.
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task (Linux)")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_owned())
        .collect()
}

/// The last reference to a replaced pipeline may be dropped inside a tokio
/// task, and joining worker threads that unload every model must not block
/// it: a drop returns at once, even inside the runtime with a worker stuck in a
/// long run: the frame is answered and the joins happen on the
/// `camdnn-teardown` thread, which is still waiting for that worker.
#[test]
fn dropping_a_pipeline_inside_the_runtime_does_not_wait_for_its_workers() {
    let mut cfg = config();
    for m in &mut cfg.pipeline.models {
        // Run 1 is the start-up warm-up where the model is resident at start;
        // the second run of a model on a processor hangs for 20 s.
        m.sim_faults = Some(SimFaults {
            stall_on_runs: vec![2],
            stall_ms: 20_000,
            ..SimFaults::default()
        });
    }
    let built = pipeline::start(&cfg.pipeline).unwrap();
    let objects = [("person", 0.9), ("car", 0.8), ("bicycle", 0.7)];
    let rxs: Vec<_> = (0..3)
        .map(|s| built.pipeline.submit_now(frame(s, &objects)))
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async move { drop(built) });
    // A spawned thread names itself once it runs, a moment after the spawn
    // returned: look for up to 10 s, well inside the 20 s the stuck worker
    // keeps the teardown waiting.
    let named = (0..1000).any(|_| {
        let found = thread_names().iter().any(|n| n == "camdnn-teardown");
        if !found {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        found
    });
    assert!(
        named,
        "the drop returned while the teardown still waits for the stuck worker: {:?}",
        thread_names()
    );
    let outcomes: Vec<Outcome> = rxs
        .into_iter()
        .map(|rx| rx.blocking_recv().expect("answered"))
        .collect();
    assert!(
        outcomes.contains(&Outcome::Dropped(DropReason::ShuttingDown)),
        "a frame waiting for the stuck run is answered: {outcomes:?}"
    );
}

/// Readiness follows the scheduler thread: a pipeline whose scheduler
/// thread has ended reports neither ready nor alive (and stops feeding the
/// watchdog).
#[test]
fn a_pipeline_whose_scheduler_thread_ended_is_neither_ready_nor_alive() {
    let built = pipeline::start(&config().pipeline).unwrap();
    assert!(built.is_ready() && built.is_alive());
    built.pipeline.shutdown();
    assert!(!built.is_ready());
    assert!(!built.is_alive(), "the watchdog is no longer fed");
    let reason = built.not_ready_reason().expect("a reason");
    assert!(reason.contains("scheduler thread has ended"), "{reason}");
}

/// Deadline admission: a frame whose deadline is shorter than its earliest
/// possible answer (one classifier run on the sim engines takes longer) is
/// answered `Dropped` by the admission (its counter says so: without it the
/// frame would also end as a deadline drop, after running), and a frame with
/// time to spare beside it is answered in full. The only test of this binary
/// that installs the metrics recorder.
#[test]
fn a_frame_that_cannot_make_its_deadline_is_dropped_at_admission() {
    let prom = camdnn_daemon::telemetry::install(&Default::default(), "test").unwrap();
    let mut cfg = config();
    cfg.pipeline.deadline_admission = Some(0.0);
    let built = pipeline::start(&cfg.pipeline).unwrap();
    let p = &built.pipeline;
    let objects = [("person", 0.9), ("car", 0.8), ("bicycle", 0.7)];
    let mut hopeless = frame(1, &objects);
    hopeless.deadline = Some(camdnn_protocol::Deadline::RelativeUs(500));
    let mut relaxed = frame(2, &objects);
    relaxed.deadline = Some(camdnn_protocol::Deadline::RelativeUs(60_000_000));
    let rx_hopeless = p.submit_now(hopeless);
    let rx_relaxed = p.submit_now(relaxed);
    match rx_hopeless.blocking_recv().unwrap() {
        Outcome::Dropped(DropReason::DeadlinePassed) => {}
        other => panic!("expected a deadline drop, got {other:?}"),
    }
    match rx_relaxed.blocking_recv().unwrap() {
        Outcome::Done(r) => assert_eq!(r.objects.len(), objects.len()),
        other => panic!("expected an answer, got {other:?}"),
    }
    let text = prom.render();
    let drops = text
        .lines()
        .find(|l| l.starts_with("camdnn_deadline_admission_drops_total"))
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse::<f64>().ok());
    assert_eq!(drops, Some(1.0), "{text}");
}

/// Real-time dropping (`pipeline.drop_behind_ms`, the rule the simulator
/// measures by): while a heavy frame's classifications are queued, a frame
/// submitted with the pipeline further behind than the limit is answered
/// `Dropped{overloaded}` at once, and the heavy frame is still answered in
/// full. Small frames are submitted every 5 ms until the heavy frame is
/// answered; every one is answered, and some found the pipeline behind.
#[test]
fn a_frame_submitted_while_the_pipeline_is_behind_is_dropped_as_overloaded() {
    let mut cfg = config();
    for bad in [-1.0, f64::NAN] {
        cfg.pipeline.drop_behind_ms = Some(bad);
        let err = cfg.pipeline.check().unwrap_err().to_string();
        assert!(err.contains("pipeline.drop_behind_ms"), "{err}");
    }
    // The heavy frame's own fan-out check counts its age: a limit of a few
    // ms would drop it whenever the scheduler thread is that slow to reach
    // it. Its hundreds of ms of classifications are far over 20 ms.
    cfg.pipeline.drop_behind_ms = Some(20.0);
    frames_find_the_pipeline_behind(&cfg);
}

/// `drop_behind_periods`: the limit is the frame's own stream period,
/// learnt from its frames (here their arrival, 5 ms apart: the test's
/// frames carry no capture time), so the small frames find the pipeline
/// behind while the heavy one runs. Set with `drop_behind_ms`, or not a
/// positive number, it is refused.
#[test]
fn a_frame_is_dropped_when_the_pipeline_is_a_period_of_its_own_stream_behind() {
    let mut cfg = config();
    for bad in [0.0, -1.0, f64::NAN] {
        cfg.pipeline.drop_behind_periods = Some(bad);
        let err = cfg.pipeline.check().unwrap_err().to_string();
        assert!(err.contains("pipeline.drop_behind_periods"), "{err}");
    }
    cfg.pipeline.drop_behind_periods = Some(1.0);
    cfg.pipeline.drop_behind_ms = Some(71.4);
    let err = cfg.pipeline.check().unwrap_err().to_string();
    assert!(err.contains("both set"), "{err}");
    cfg.pipeline.drop_behind_ms = None;
    frames_find_the_pipeline_behind(&cfg);
}

/// Submits a frame of 60 objects, then a frame of one object every 5 ms
/// until the first is answered: that answer, and the small frames'.
fn small_frames_while_a_heavy_one_runs(p: &dyn FrameProcessor) -> (Outcome, Vec<Outcome>) {
    frames_while_a_heavy_one_runs(p, |_| &[("car", 0.8)])
}

/// Submits a frame of 60 objects, then every 5 ms a frame with
/// `objects(n)` for the n-th, until the first is answered: that answer, and
/// the later frames'.
fn frames_while_a_heavy_one_runs(
    p: &dyn FrameProcessor,
    objects: impl Fn(usize) -> &'static [(&'static str, f32)],
) -> (Outcome, Vec<Outcome>) {
    let classes = ["person", "car", "bicycle"];
    let heavy: Vec<(&str, f32)> = (0..60).map(|n| (classes[n % 3], 0.9)).collect();
    let mut first = p.submit_now(frame(1, &heavy));
    let mut small = Vec::new();
    let answer = loop {
        match first.try_recv() {
            Ok(answer) => break answer,
            Err(oneshot::error::TryRecvError::Empty) => {}
            Err(e) => panic!("the heavy frame's answer was lost: {e}"),
        }
        // A guard against a heavy frame that is never answered, loose enough for a loaded host.
        assert!(small.len() < 6000, "the heavy frame took over 30 s");
        small.push(p.submit_now(frame(2 + small.len() as u64, objects(small.len()))));
        std::thread::sleep(Duration::from_millis(5));
    };
    let outcomes = small
        .into_iter()
        .map(|rx| rx.blocking_recv().expect("every frame is answered"))
        .collect();
    (answer, outcomes)
}

/// Real-time dropping spares a frame with no objects: with the pipeline
/// behind, frames with no detections submitted between frames of one object
/// are all answered, while some of the one-object frames are dropped
/// `overloaded` (`policy::admission::behind_at_fan_out`: the limit is for
/// the classifiers' backlog, which a frame with no objects adds nothing to).
#[test]
fn a_frame_with_no_objects_is_answered_however_far_behind_the_pipeline_is() {
    let mut cfg = config();
    cfg.pipeline.drop_behind_ms = Some(20.0); // see the test above
    let built = pipeline::start(&cfg.pipeline).unwrap();
    let (heavy, outcomes) = frames_while_a_heavy_one_runs(&built.pipeline, |n| {
        if n % 2 == 0 {
            &[]
        } else {
            &[("car", 0.8)]
        }
    });
    assert!(matches!(heavy, Outcome::Done(_)), "{heavy:?}");
    let (empty, with_one): (Vec<_>, Vec<_>) =
        outcomes.iter().enumerate().partition(|(n, _)| n % 2 == 0);
    for (n, o) in &empty {
        match o {
            Outcome::Done(r) => assert!(r.objects.is_empty(), "frame {n}: {r:?}"),
            other => panic!("frame {n} has no objects but got {other:?}"),
        }
    }
    let overloaded = with_one
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Dropped(DropReason::Overloaded)))
        .count();
    assert!(
        overloaded >= 1,
        "no one-object frame of {} found the pipeline behind: {with_one:?}",
        with_one.len()
    );
}

/// Small frames submitted every 5 ms while a heavy one runs: at least one
/// is answered `Dropped(Overloaded)`, the rest and the heavy one are served.
fn frames_find_the_pipeline_behind(cfg: &DaemonConfig) {
    let built = pipeline::start(&cfg.pipeline).unwrap();
    let (heavy, outcomes) = small_frames_while_a_heavy_one_runs(&built.pipeline);
    match heavy {
        Outcome::Done(r) => assert_eq!(r.objects.len(), 60),
        other => panic!("expected the heavy frame's answer, got {other:?}"),
    }
    let overloaded = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Dropped(DropReason::Overloaded)))
        .count();
    assert!(
        overloaded >= 1,
        "no frame of {} found the pipeline behind while the heavy frame ran",
        outcomes.len()
    );
    assert!(
        outcomes.iter().all(|o| matches!(
            o,
            Outcome::Done(_) | Outcome::Dropped(DropReason::Overloaded)
        )),
        "{outcomes:?}"
    );
}

/// Wraps the pipeline's scheduler: each global step's job waits for the
/// test's go-ahead (or its sender's drop) before the inner step is
/// computed, or panics instead when `panic_first` is set, for its first
/// step; "start" and "finish" are logged as the scheduler thread starts and
/// applies each step.
struct Gated {
    inner: Box<dyn Scheduler + Send>,
    gate: Arc<Mutex<std::sync::mpsc::Receiver<()>>>,
    panic_first: bool,
    log: Arc<Mutex<Vec<&'static str>>>,
    delivered: Delivered,
}

/// What the pipeline told a scheduler of the frames that left it.
type Delivered = Arc<Mutex<Vec<Option<f64>>>>;

impl Scheduler for Gated {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn batching(&self) -> Batching {
        self.inner.batching()
    }
    fn place(
        &mut self,
        system: &System,
        cluster: &Cluster,
        now: f64,
        i: ModelId,
        waiting: usize,
    ) -> Option<(ProcId, usize)> {
        self.inner.place(system, cluster, now, i, waiting)
    }
    fn batch_target(&self, system: &System, cluster: &Cluster, i: ModelId) -> usize {
        self.inner.batch_target(system, cluster, i)
    }
    fn initial_plan(&mut self, system: &System) -> Plan {
        self.inner.initial_plan(system)
    }
    fn observe_scene(&mut self, system: &System, cluster: &Cluster, now: f64, scene: &[u32]) {
        self.inner.observe_scene(system, cluster, now, scene)
    }
    fn frame_done(&mut self, now: f64, delay_ms: Option<f64>) {
        self.delivered.lock().unwrap().push(delay_ms);
        self.inner.frame_done(now, delay_ms)
    }
    fn start_epoch(
        &mut self,
        system: &System,
        cluster: &Cluster,
        now: f64,
        scene: &[u32],
        frames: f64,
        epoch_ms: f64,
    ) -> Option<EpochJob> {
        self.log.lock().unwrap().push("start");
        let mut inner = self
            .inner
            .start_epoch(system, cluster, now, scene, frames, epoch_ms);
        let gate = Arc::clone(&self.gate);
        let panics = std::mem::take(&mut self.panic_first);
        Some(EpochJob::new(move || {
            assert!(!panics, "a bug in the global step");
            let _ = gate.lock().unwrap().recv();
            if let Some(job) = &mut inner {
                job.run();
            }
            inner
        }))
    }
    fn finish_epoch(
        &mut self,
        system: &System,
        cluster: &mut Cluster,
        now: f64,
        job: EpochJob,
    ) -> EpochOutcome {
        self.log.lock().unwrap().push("finish");
        match job.into_result::<Option<EpochJob>>() {
            Some(Some(inner)) => self.inner.finish_epoch(system, cluster, now, inner),
            _ => EpochOutcome::default(),
        }
    }
}

/// The pipeline of `cfg` with its scheduler [`Gated`]: the pipeline, the
/// gate's sender and the log.
fn start_gated(
    cfg: &DaemonConfig,
    panic_first: bool,
) -> (
    pipeline::Built,
    std::sync::mpsc::Sender<()>,
    Arc<Mutex<Vec<&'static str>>>,
    Delivered,
) {
    let (open, gate) = std::sync::mpsc::channel();
    let log = Arc::new(Mutex::new(Vec::new()));
    let delivered = Delivered::default();
    let (gate, log2, delivered2) = (
        Arc::new(Mutex::new(gate)),
        Arc::clone(&log),
        Arc::clone(&delivered),
    );
    let built = pipeline::start_with(&cfg.pipeline, move |inner| {
        Box::new(Gated {
            inner,
            gate,
            panic_first,
            log: log2,
            delivered: delivered2,
        })
    })
    .unwrap();
    (built, open, log, delivered)
}

/// Waits up to 20 s for `done`, failing with `what`.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let waited = Instant::now();
    while !done() {
        assert!(waited.elapsed() < Duration::from_secs(20), "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `rx`'s outcome, failing if none comes within 20 s.
fn outcome(mut rx: oneshot::Receiver<Outcome>) -> Outcome {
    let mut got = None;
    wait_for(
        "no answer within 20 s: is the scheduler thread blocked?",
        || {
            got = rx.try_recv().ok();
            got.is_some()
        },
    );
    got.expect("answered")
}

/// The global step is computed on the step thread: while one is away
/// (here held until the test lets it go), the scheduler thread goes on
/// answering frames, starts no other step, and applies it when it comes
/// back; the steps then go on.
#[test]
fn frames_are_answered_while_a_global_step_is_computed() {
    let mut cfg = config();
    cfg.pipeline.epoch_ms = 300.0;
    let (built, open, log, _) = start_gated(&cfg, false);
    wait_for("no global step started", || !log.lock().unwrap().is_empty());
    for s in 0..3 {
        let rx = built
            .pipeline
            .submit_now(frame(s, &[("person", 0.9), ("car", 0.8)]));
        assert!(matches!(outcome(rx), Outcome::Done(_)));
    }
    assert_eq!(*log.lock().unwrap(), vec!["start"], "one step, still away");
    open.send(()).unwrap();
    wait_for("the step was not applied", || {
        log.lock().unwrap().len() >= 2
    });
    drop(open); // the later steps' gates stand open
    wait_for("no step after it", || log.lock().unwrap().len() >= 4);
    let rx = built.pipeline.submit_now(frame(3, &[("person", 0.9)]));
    assert!(matches!(outcome(rx), Outcome::Done(_)));
    built.pipeline.shutdown();
    let log = log.lock().unwrap();
    assert_eq!(log[..4], ["start", "finish", "start", "finish"], "{log:?}");
}

/// Every frame that leaves the pipeline is told to the scheduler, as the
/// simulator tells it (`Scheduler::frame_done`): an answered frame with its
/// delay, a frame dropped because the pipeline is behind with none. The
/// global step compares what its last choice delivered with its replay.
#[test]
fn the_scheduler_is_told_what_each_frame_got() {
    let mut cfg = config();
    cfg.pipeline.drop_behind_ms = Some(10.0);
    let (built, open, _, delivered) = start_gated(&cfg, false);
    drop(open);
    // Some of the small frames find the pipeline behind and are dropped.
    let (heavy, small) = small_frames_while_a_heavy_one_runs(&built.pipeline);
    let outcomes: Vec<Outcome> = std::iter::once(heavy).chain(small).collect();
    built.pipeline.shutdown();
    let got = delivered.lock().unwrap().clone();
    let done = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Done(_)))
        .count();
    assert!(
        done >= 1 && done < outcomes.len(),
        "no frame dropped: {outcomes:?}"
    );
    assert_eq!(got.len(), outcomes.len(), "{got:?}");
    assert_eq!(got.iter().flatten().count(), done, "{got:?}");
    assert!(
        got.iter().flatten().all(|&d| d > 0.0 && d < 20_000.0),
        "{got:?}"
    );
}

/// A global step that panics on the step thread takes neither the
/// scheduler thread nor the stepper with it: frames are still answered and
/// the next step starts.
#[test]
fn a_global_step_that_panics_leaves_the_pipeline_serving() {
    let mut cfg = config();
    cfg.pipeline.epoch_ms = 300.0;
    let (built, open, log, _) = start_gated(&cfg, true);
    drop(open);
    wait_for("no step after the one that panicked", || {
        log.lock().unwrap().len() >= 3
    });
    assert!(built.is_alive());
    let rx = built
        .pipeline
        .submit_now(frame(1, &[("person", 0.9), ("car", 0.8)]));
    assert!(matches!(outcome(rx), Outcome::Done(_)));
    built.pipeline.shutdown();
    let log = log.lock().unwrap();
    assert_eq!(log[..3], ["start", "finish", "start"], "{log:?}");
}

/// A CPU and a GPU with one slot each for four models, and a detector whose
/// load (500 ms) is longer than the drop limit: no plan hosts every model,
/// so start-up leaves the detector resident nowhere.
const TWO_SLOTS: &str = r#"
name = "two-slots"
max_batch = 1

[[processor]]
name = "cpu"
kind = "cpu"
max_resident = 1

[[processor]]
name = "gpu"
kind = "gpu"
max_resident = 1

[[model]]
name = "detector"

[[model]]
name = "inception_v1"
parent = "detector"
classes = ["person"]

[[model]]
name = "squeezenet"
parent = "detector"
classes = ["car"]

[[model]]
name = "mobilenet_v1"
parent = "detector"
classes = ["bicycle"]

[profile.detector.cpu]
exec_ms = [5.0]
load_ms = 500.0

[profile.detector.gpu]
exec_ms = [8.0]
load_ms = 500.0

[profile.inception_v1.cpu]
exec_ms = [3.0]
load_ms = 20.0

[profile.squeezenet.cpu]
exec_ms = [3.0]
load_ms = 20.0

[profile.mobilenet_v1.gpu]
exec_ms = [3.0]
load_ms = 20.0
"#;

/// Real-time dropping does not drop every frame for a detector load that
/// only a frame would start (`policy::admission::detector_behind`): the
/// first frame on idle units loads the detector and is answered, and so is
/// the next. Before, the daemon answered every frame `overloaded` and never
/// loaded the detector.
#[test]
fn the_first_frame_loads_a_detector_resident_nowhere_instead_of_being_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("two-slots.toml");
    std::fs::write(&profile, TWO_SLOTS).unwrap();
    let mut cfg = config();
    cfg.pipeline.profile = profile;
    cfg.pipeline.policy = None;
    cfg.pipeline.max_batch = 1;
    cfg.pipeline.drop_behind_ms = Some(71.4);
    cfg.pipeline.processors.retain(|p| p.name != "dsp");
    for p in &mut cfg.pipeline.processors {
        p.max_resident = 1;
    }
    let built = pipeline::start(&cfg.pipeline).unwrap();
    for seq in 1..=2 {
        let mut f = frame(seq, &[]);
        f.detections = None;
        match built.pipeline.submit_now(f).blocking_recv().unwrap() {
            Outcome::Done(r) => assert!(r.objects.is_empty(), "{r:?}"),
            other => panic!("frame {seq}: {other:?}"),
        }
    }
}
