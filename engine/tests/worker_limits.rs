//! Limits on a worker's engine calls: a run or a load stuck past its limit is
//! answered `TimedOut`, its thread is abandoned and a fresh one serves the
//! processor; beyond the allowed abandoned threads the worker retires. The
//! stalls come from the sim engine's test-only fault injection. Nothing here
//! compares measured durations: each case waits for an outcome.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use camdnn_engine::{
    DType, Engine, EngineError, EngineKind, LoadedModel, ModelInfo, ModelSource, ProcessorConfig,
    Reply, RunLimit, SimEngine, SimFaults, Supervision, Tensor, Worker, WorkerHandle,
};
use common::sim_spec;

fn x(k: usize) -> Vec<Tensor> {
    vec![Tensor::zeros("x", DType::F32, vec![k, 4])]
}

fn limit(ms: u64) -> Option<RunLimit> {
    let d = Duration::from_millis(ms);
    Some(RunLimit { warm: d, cold: d })
}

/// A worker on a sim processor whose model `m` has `faults`.
fn worker(faults: SimFaults, supervision: Supervision) -> Worker {
    let engine = SimEngine::default()
        .with_model("m", sim_spec())
        .with_model("other", sim_spec())
        .with_faults("m", faults);
    Worker::spawn_supervised(
        ProcessorConfig::new("p", EngineKind::Sim),
        Arc::new(engine),
        supervision,
    )
    .expect("worker")
}

/// Queues a run of `m` under `limit`; the receiver of its answer.
fn run(
    h: &WorkerHandle,
    model: &str,
    limit: Option<RunLimit>,
) -> std::sync::mpsc::Receiver<Result<camdnn_engine::RunReport, EngineError>> {
    let (reply, rx) = Reply::channel();
    h.run_within(model, x(1), 0, limit, reply).expect("queued");
    rx
}

/// Waits (up to 30 s) until `cond` holds.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(30), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_run_stuck_past_its_limit_is_answered_and_a_fresh_thread_serves_on() {
    let faults = SimFaults {
        stall_on_runs: vec![2],
        stall_ms: 3_000,
        ..SimFaults::default()
    };
    let w = worker(faults, Supervision::default());
    let h = w.handle();
    h.load_blocking(ModelSource::new("m", "unused")).unwrap();
    h.load_blocking(ModelSource::new("other", "unused"))
        .unwrap();
    run(&h, "m", limit(1_000)).recv().unwrap().expect("run 1");
    // Run 2 hangs for 3 s under a 200 ms limit; a run queued behind it waits.
    let stuck = run(&h, "m", limit(200));
    let behind = run(&h, "other", limit(1_000));
    match stuck.recv().unwrap().unwrap_err() {
        EngineError::TimedOut {
            stage,
            limit_ms,
            restarted,
            ..
        } => assert!(stage == "running" && limit_ms == 200 && restarted),
        e => panic!("expected TimedOut, got {e}"),
    }
    // The fresh thread started empty: the run queued behind is NotLoaded.
    let e = behind.recv().unwrap().unwrap_err();
    assert!(matches!(e, EngineError::NotLoaded { .. }), "{e}");
    let status = h.status();
    assert!(status.alive && !status.retired, "{status:?}");
    assert_eq!(status.replaced, 1);
    assert_eq!(
        status.stuck.len(),
        1,
        "the abandoned thread is still inside"
    );
    assert_eq!(status.stuck[0].model, "m");
    // It serves on once the owner loads again.
    h.load_blocking(ModelSource::new("m", "unused")).unwrap();
    run(&h, "m", limit(1_000)).recv().unwrap().expect("run 3");
    // The stuck thread ends when the engine returns; its answer is discarded.
    wait_for("the stuck thread returns", || h.status().stuck.is_empty());
    w.shutdown();
    assert!(!h.is_alive());
}

#[test]
fn a_load_stuck_past_its_limit_is_answered_and_the_thread_replaced() {
    let faults = SimFaults {
        stall_on_loads: vec![1],
        load_stall_ms: 3_000,
        ..SimFaults::default()
    };
    let w = worker(faults, Supervision::default());
    let h = w.handle();
    let (reply, rx) = Reply::channel();
    h.load_within(
        ModelSource::new("m", "unused"),
        Some(Duration::from_millis(200)),
        reply,
    )
    .unwrap();
    let e = rx.recv().unwrap().unwrap_err();
    assert!(
        matches!(
            e,
            EngineError::TimedOut {
                stage: "loading",
                restarted: true,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("after its limit of 200 ms"), "{e}");
    // Load 2 is not stalled.
    h.load_blocking(ModelSource::new("m", "unused")).unwrap();
    run(&h, "m", limit(1_000)).recv().unwrap().expect("served");
    w.shutdown();
}

/// Beyond `max_abandoned` stuck threads the worker retires: no thread is
/// started, it is not alive, and every command is answered WorkerGone.
#[test]
fn beyond_its_abandoned_threads_the_worker_retires() {
    let faults = SimFaults {
        stall_ms: 5_000,
        ..SimFaults::default()
    };
    let w = worker(faults, Supervision { max_abandoned: 1 });
    let h = w.handle();
    h.load_blocking(ModelSource::new("m", "unused")).unwrap();
    let e = run(&h, "m", limit(100)).recv().unwrap().unwrap_err();
    assert!(
        matches!(
            e,
            EngineError::TimedOut {
                restarted: true,
                ..
            }
        ),
        "{e}"
    );
    h.load_blocking(ModelSource::new("m", "unused")).unwrap();
    let queued = run(&h, "m", limit(100));
    let behind = run(&h, "other", limit(100));
    let e = queued.recv().unwrap().unwrap_err();
    assert!(
        matches!(
            e,
            EngineError::TimedOut {
                restarted: false,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("retired"), "{e}");
    let e = behind.recv().unwrap().unwrap_err();
    assert!(matches!(e, EngineError::WorkerGone { .. }), "{e}");
    let status = h.status();
    assert!(!status.alive && status.retired, "{status:?}");
    assert_eq!(status.stuck.len(), 2);
    let e = run(&h, "m", None).recv().unwrap().unwrap_err();
    assert!(matches!(e, EngineError::WorkerGone { .. }), "{e}");
    // Shutting down does not wait for the stuck threads.
    w.shutdown();
    wait_for("both stuck threads return", || h.status().stuck.is_empty());
}

/// A worker whose thread is stuck past a limit still shuts down: the
/// replacement takes the Shutdown queued behind the stuck run.
#[test]
fn a_worker_stuck_past_a_limit_shuts_down() {
    let faults = SimFaults {
        stall_on_runs: vec![1],
        stall_ms: 60_000,
        ..SimFaults::default()
    };
    let w = worker(faults, Supervision::default());
    let h = w.handle();
    h.load_blocking(ModelSource::new("m", "unused")).unwrap();
    let stuck = run(&h, "m", limit(100));
    w.shutdown();
    assert!(matches!(
        stuck.recv().unwrap(),
        Err(EngineError::TimedOut { .. })
    ));
    assert!(!h.is_alive());
    assert_eq!(h.status().stuck.len(), 1, "left behind, not joined");
}

/// An engine whose model takes 300 ms per run and is prepared only for
/// batch 1, like tract before a batch size's first run.
struct Unprepared;

struct UnpreparedModel(ModelInfo);

impl Engine for Unprepared {
    fn kind(&self) -> EngineKind {
        EngineKind::Sim
    }

    fn check_processor(&self, _: &ProcessorConfig) -> Result<(), EngineError> {
        Ok(())
    }

    fn load(
        &self,
        model: &ModelSource,
        _: &ProcessorConfig,
    ) -> Result<Box<dyn LoadedModel>, EngineError> {
        let s = sim_spec();
        Ok(Box::new(UnpreparedModel(ModelInfo {
            name: model.name.clone(),
            engine: EngineKind::Sim,
            inputs: s.inputs,
            outputs: s.outputs,
            batch: camdnn_engine::BatchMode::Native,
            load_time: Duration::ZERO,
            detail: String::new(),
        })))
    }
}

impl LoadedModel for UnpreparedModel {
    fn info(&self) -> &ModelInfo {
        &self.0
    }

    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>, EngineError> {
        std::thread::sleep(Duration::from_millis(300));
        let k = inputs[0].batch().unwrap_or(1);
        Ok(vec![Tensor::zeros("y", DType::F32, vec![k, 2])])
    }

    fn prepared_for(&self, batch: usize) -> bool {
        batch == 1
    }
}

/// A batch size the model is not prepared for gets the cold limit.
#[test]
fn a_run_that_prepares_its_batch_size_gets_the_cold_limit() {
    let w = Worker::spawn(
        ProcessorConfig::new("p", EngineKind::Sim),
        Arc::new(Unprepared),
    )
    .unwrap();
    let h = w.handle();
    h.load_blocking(ModelSource::new("m", "unused")).unwrap();
    let limit = Some(RunLimit {
        warm: Duration::from_millis(50),
        cold: Duration::from_secs(20),
    });
    let (reply, rx) = Reply::channel();
    h.run_within("m", x(2), 0, limit, reply).unwrap();
    assert_eq!(rx.recv().unwrap().expect("cold: 20 s").batch, 2);
    let (reply, rx) = Reply::channel();
    h.run_within("m", x(1), 0, limit, reply).unwrap();
    let e = rx.recv().unwrap().unwrap_err();
    assert!(
        matches!(e, EngineError::TimedOut { limit_ms: 50, .. }),
        "{e}"
    );
    w.shutdown();
}
