//! A processor whose batch is overdue is seen busy: frames that arrive
//! while it hangs go to a processor that is not stuck.

use camdnn_policy::flow::{Effect, Event, FlowConfig, FrameFlow, FrameId, FrameIn, Request};
use camdnn_policy::{scheduler, schedulers, Cluster, ModelId, Plan, ProcId, System};

/// A detector on a GPU (10 ms) and a CPU (20 ms), resident on both.
const BOARD: &str = r#"
name = "two-units"
max_batch = 1

[[processor]]
name = "cpu"
kind = "cpu"
max_resident = 2

[[processor]]
name = "gpu"
kind = "gpu"
max_resident = 2

[[model]]
name = "detector"

[profile.detector.cpu]
exec_ms = [20.0]
load_ms = 10.0

[profile.detector.gpu]
exec_ms = [10.0]
load_ms = 10.0
"#;

const CPU: ProcId = ProcId(0);
const GPU: ProcId = ProcId(1);
const DETECTOR: ModelId = ModelId(0);

type Flow = FrameFlow<Box<dyn scheduler::Scheduler + Send>>;

fn flow() -> Flow {
    let system = System::from_toml(BOARD).unwrap();
    let mut plan = Plan::empty(&system);
    plan.set_resident(DETECTOR, CPU, true);
    plan.set_resident(DETECTOR, GPU, true);
    let mut cluster = Cluster::new(&system);
    cluster.preload(&system, &plan);
    let heft = schedulers::by_name(&system, "heft", 0.0).unwrap();
    let cfg = FlowConfig {
        epoch_ms: 0.0,
        drop_step_gap_ms: 0.0,
        ..FlowConfig::default()
    };
    FrameFlow::new(system, heft, cluster, cfg, 0.0, vec![1]).unwrap()
}

/// Frame `id` enters at `now` and its detector input is ready at once:
/// the processor its detector batch runs on.
fn detect(flow: &mut Flow, id: u64, now: f64) -> ProcId {
    let frame = FrameId(id);
    flow.handle(
        now,
        Event::FrameIn(FrameIn {
            frame,
            stream: 0,
            seq: id,
            capture_ms: None,
            arrival_ms: now,
            deadline_ms: None,
            priority: 0,
            upstream: None,
            tracked: false,
        }),
    );
    let requests = vec![Request {
        model: DETECTOR,
        object: 0,
    }];
    flow.handle(now, Event::RootReady { frame, requests });
    let runs: Vec<ProcId> = flow
        .take_effects()
        .filter_map(|e| match e {
            Effect::Run(run) if run.frame == frame => Some(run.proc),
            _ => None,
        })
        .collect();
    assert_eq!(runs.len(), 1, "frame {id} ran once: {runs:?}");
    runs[0]
}

#[test]
fn a_batch_late_by_less_than_its_run_time_keeps_its_processor_in_use() {
    let mut flow = flow();
    assert_eq!(detect(&mut flow, 0, 0.0), GPU);
    // Planned to finish at 10 ms; at 15 ms it is 5 ms late, less than its
    // 10 ms run: the GPU (free at 15, done at 25) still beats the CPU (35).
    assert_eq!(detect(&mut flow, 1, 15.0), GPU);
}

#[test]
fn a_processor_whose_batch_is_late_by_its_run_time_is_passed_over() {
    let mut flow = flow();
    assert_eq!(detect(&mut flow, 0, 0.0), GPU);
    // The flow asks to be woken when the batch is late by its run time.
    assert_eq!(flow.next_wake_ms(), 20.0);
    flow.handle(20.0, Event::Tick);
    // Seen busy until 30 ms (as long again as it is late); at 30 it is 20
    // ms late, so busy until 50: the CPU (done at 50) beats queueing behind
    // it (done at 60).
    assert_eq!(flow.next_wake_ms(), 30.0);
    assert_eq!(detect(&mut flow, 1, 30.0), CPU);
}

#[test]
fn the_batchs_real_finish_brings_its_processor_back() {
    let mut flow = flow();
    assert_eq!(detect(&mut flow, 0, 0.0), GPU);
    flow.handle(40.0, Event::Tick);
    let batch = camdnn_policy::flow::BatchId(0);
    flow.handle(
        41.0,
        Event::BatchDone {
            batch,
            finished_ms: 41.0,
            outcome: camdnn_policy::flow::BatchOutcome::Done {
                exec_ms: 10.0,
                items: vec![Ok(Vec::new())],
            },
        },
    );
    assert_eq!(detect(&mut flow, 1, 41.0), GPU);
}
