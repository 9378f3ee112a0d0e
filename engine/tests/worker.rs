//! Worker threads: load / run / unload round trips with measured times, ordering, and
//! clear errors for misconfigured processors.

mod common;

use std::sync::Arc;
use std::time::Duration;

use camdnn_engine::{
    BatchMode, Command, DType, EngineError, EngineKind, ModelSource, OrtProvider, ProcessorConfig,
    Reply, SimEngine, SimFaults, Tensor, TractEngine, Worker,
};
use common::sim_spec;

fn sim_engine() -> Arc<SimEngine> {
    Arc::new(SimEngine::default().with_model("m", sim_spec()))
}

/// An engine that panics must not leave the worker answering NotLoaded
/// while its owner believes the model resident, with no sign of the panic:
/// the panic is reported as such, the worker restarts empty (every model
/// dropped) and serves on, and injected load failures are plain errors.
#[test]
fn an_engine_panic_restarts_the_worker_empty_and_it_serves_on() {
    let faults = SimFaults {
        panic_on_runs: vec![2],
        fail_loads: vec![2],
        ..SimFaults::default()
    };
    let engine = SimEngine::default()
        .with_model("m", sim_spec())
        .with_model("other", sim_spec())
        .with_faults("m", faults);
    let worker =
        Worker::spawn(ProcessorConfig::new("p", EngineKind::Sim), Arc::new(engine)).unwrap();
    let h = worker.handle();
    let x = || vec![Tensor::zeros("x", DType::F32, vec![1, 4])];
    h.load_blocking(ModelSource::new("m", "unused")).unwrap();
    h.load_blocking(ModelSource::new("other", "unused"))
        .unwrap();
    h.run_blocking("m", x()).expect("run 1 is fine");
    match h.run_blocking("m", x()).unwrap_err() {
        EngineError::Panicked {
            stage, restarted, ..
        } => assert!(stage == "running" && restarted),
        e => panic!("expected Panicked, got {e}"),
    }
    assert!(h.is_alive(), "the worker thread survived the panic");
    let err = h.run_blocking("other", x()).unwrap_err();
    assert!(
        matches!(err, EngineError::NotLoaded { .. }),
        "every model was dropped: {err}"
    );
    let err = h
        .load_blocking(ModelSource::new("m", "unused"))
        .unwrap_err();
    assert!(err.to_string().contains("injected fault: load 2"), "{err}");
    h.load_blocking(ModelSource::new("m", "unused"))
        .expect("load 3 is fine");
    h.run_blocking("m", x()).expect("run 3 is fine");
    worker.shutdown();
    assert!(!h.is_alive(), "not alive once the thread ended");
}

#[test]
fn sim_worker_round_trip() {
    let mut proc = ProcessorConfig::new("dsp", EngineKind::Sim);
    proc.core = Some(0);
    let worker = Worker::spawn(proc, sim_engine()).unwrap();
    let h = worker.handle();
    assert_eq!(h.processor(), "dsp");

    let err = h
        .run_blocking("m", vec![Tensor::zeros("x", DType::F32, vec![1, 4])])
        .unwrap_err();
    assert!(matches!(err, EngineError::NotLoaded { .. }), "{err}");

    let load = h.load_blocking(ModelSource::new("m", "unused")).unwrap();
    assert!(!load.already_resident);
    assert!(load.finished >= load.started);
    assert!(
        h.load_blocking(ModelSource::new("m", "unused"))
            .unwrap()
            .already_resident
    );

    // Several runs queued at once come back in order, each with its own timestamps.
    let mut rxs = Vec::new();
    for k in 1..=4 {
        let (reply, rx) = Reply::channel();
        h.run("m", vec![Tensor::zeros("x", DType::F32, vec![k, 4])], reply)
            .unwrap();
        rxs.push((k, rx));
    }
    let mut last_finish = None;
    for (k, rx) in rxs {
        let r = rx.recv().unwrap().unwrap();
        assert_eq!(r.batch, k);
        assert_eq!(r.mode, BatchMode::Native);
        assert_eq!(r.outputs[0].shape(), &[k, 2]);
        assert!(r.started >= r.submitted && r.finished >= r.started);
        if let Some(prev) = last_finish {
            assert!(r.started >= prev, "commands run sequentially");
        }
        last_finish = Some(r.finished);
    }

    assert!(h.unload_blocking("m").unwrap());
    assert!(!h.unload_blocking("m").unwrap());
    worker.shutdown();
    assert!(matches!(
        h.send(Command::Shutdown),
        Err(EngineError::WorkerGone { .. })
    ));
}

#[test]
fn tract_worker_runs_a_real_model() {
    let worker = Worker::spawn(
        ProcessorConfig::new("cpu", EngineKind::Tract),
        Arc::new(TractEngine::new()),
    )
    .unwrap();
    let h = worker.handle();
    let src = ModelSource::new("mtcnn_onet", common::model("mtcnn_onet.onnx"));
    let load = h.load_blocking(src).unwrap();
    assert_eq!(load.info.batch, BatchMode::Native);
    assert!(load.info.load_time > Duration::ZERO);
    let x = common::input(&load.info.inputs[0], 3, 1);
    let r = h.run_blocking("mtcnn_onet", vec![x]).unwrap();
    let names: Vec<&str> = r.outputs.iter().map(|t| t.name()).collect();
    assert_eq!(names, ["dense_5", "dense_6", "softmax_2"]);
    assert_eq!(r.outputs[2].shape(), &[3, 2]);
    // softmax rows of a real model sum to 1
    for row in r.outputs[2].as_f32().unwrap().chunks(2) {
        assert!((row[0] + row[1] - 1.0).abs() < 1e-4, "{row:?}");
    }
}

#[test]
fn misconfigured_processors_fail_at_spawn() {
    let err =
        Worker::spawn(ProcessorConfig::new("gpu", EngineKind::Ort), sim_engine()).unwrap_err();
    assert!(
        err.to_string()
            .contains("configured for engine `ort` but handed to the `sim` engine"),
        "{err}"
    );

    let mut proc = ProcessorConfig::new("cpu", EngineKind::Sim);
    proc.core = Some(4096);
    let err = Worker::spawn(proc, sim_engine()).unwrap_err();
    assert!(
        err.to_string().contains("core 4096 does not exist"),
        "{err}"
    );
}

#[test]
fn ort_provider_missing_from_the_build_is_a_start_up_error() {
    let ort = Arc::new(common::ort());
    // The PyPI CPU wheel has no CUDA, XNNPACK or QNN; asking for one must not silently use CPU.
    for provider in [OrtProvider::Cuda, OrtProvider::Xnnpack] {
        let mut proc = ProcessorConfig::new("gpu", EngineKind::Ort);
        proc.provider = Some(provider);
        let err = Worker::spawn(proc, ort.clone()).unwrap_err().to_string();
        assert!(
            err.contains(provider.ort_name()) && err.contains("is not in the ONNX Runtime build"),
            "{err}"
        );
        assert!(err.contains("it has: CPUExecutionProvider"), "{err}");
    }
    let mut proc = ProcessorConfig::new("cpu", EngineKind::Ort);
    let err = Worker::spawn(proc.clone(), ort.clone())
        .unwrap_err()
        .to_string();
    assert!(err.contains("needs `provider`"), "{err}");
    proc.provider = Some(OrtProvider::Cpu);
    Worker::spawn(proc, ort)
        .expect("cpu provider is available")
        .shutdown();
}

/// Holds the worker inside a run's reply until the returned sender is used, so
/// the commands queued meanwhile are all waiting when it picks the next one.
fn hold_worker(h: &camdnn_engine::WorkerHandle) -> std::sync::mpsc::Sender<()> {
    let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
    let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
    h.run(
        "m",
        vec![Tensor::zeros("x", DType::F32, vec![1, 4])],
        Reply::new(move |_| {
            let _ = started_tx.send(());
            let _ = gate_rx.recv();
        }),
    )
    .unwrap();
    started_rx.recv().unwrap();
    gate_tx
}

#[test]
fn queued_runs_go_highest_priority_first_and_loads_keep_their_place() {
    let worker = Worker::spawn(ProcessorConfig::new("cpu", EngineKind::Sim), sim_engine()).unwrap();
    let h = worker.handle();
    h.load_blocking(ModelSource::new("m", "unused")).unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let queue_run = |tag: &'static str, priority: u8| {
        let order = Arc::clone(&order);
        h.run_with_priority(
            "m",
            vec![Tensor::zeros("x", DType::F32, vec![1, 4])],
            priority,
            Reply::new(move |r: Result<_, EngineError>| {
                r.unwrap();
                order.lock().unwrap().push(tag);
            }),
        )
        .unwrap();
    };

    // Runs only: priority order, FIFO among equals.
    let gate = hold_worker(&h);
    queue_run("low", 0);
    queue_run("high", 5);
    queue_run("mid-a", 2);
    queue_run("mid-b", 2);
    gate.send(()).unwrap();
    h.load_blocking(ModelSource::new("m", "unused")).unwrap();
    assert_eq!(*order.lock().unwrap(), ["high", "mid-a", "mid-b", "low"]);
    order.lock().unwrap().clear();

    // An unload is a barrier: a high-priority run queued after it does not
    // overtake it (it then finds the model gone), and the low one before it runs.
    let gate = hold_worker(&h);
    queue_run("before-unload", 0);
    let (unload_reply, unload_rx) = Reply::channel();
    h.unload("m", unload_reply).unwrap();
    let (late_reply, late_rx) = Reply::channel();
    h.run_with_priority(
        "m",
        vec![Tensor::zeros("x", DType::F32, vec![1, 4])],
        9,
        late_reply,
    )
    .unwrap();
    gate.send(()).unwrap();
    assert!(unload_rx.recv().unwrap().unwrap());
    let late = late_rx.recv().unwrap().unwrap_err();
    assert!(matches!(late, EngineError::NotLoaded { .. }), "{late}");
    assert_eq!(*order.lock().unwrap(), ["before-unload"]);
    worker.shutdown();
}

/// A capped unit rests after each batch: with a cap of 1/3 the next batch
/// starts no sooner than twice the last batch's own time after it ended
/// (a lower bound: sleeps never end early), and each report still gives
/// the batch's own time. A cap outside (0, 1] is refused at start.
#[test]
fn a_capped_worker_rests_after_each_batch() {
    let mut proc = ProcessorConfig::new("gpu", EngineKind::Sim);
    proc.utilisation_cap = Some(1.0 / 3.0);
    let worker = Worker::spawn(proc.clone(), sim_engine()).unwrap();
    let h = worker.handle();
    h.load_blocking(ModelSource::new("m", "unused")).unwrap();
    let mut rxs = Vec::new();
    for _ in 0..3 {
        let (reply, rx) = Reply::channel();
        h.run("m", vec![Tensor::zeros("x", DType::F32, vec![1, 4])], reply)
            .unwrap();
        rxs.push(rx);
    }
    let reports: Vec<_> = rxs
        .into_iter()
        .map(|rx| rx.recv().unwrap().unwrap())
        .collect();
    for pair in reports.windows(2) {
        let ran = pair[0].finished - pair[0].started;
        assert!(ran >= Duration::from_millis(1), "the sim batch sleeps 1 ms");
        assert!(
            pair[1].started >= pair[0].finished + ran * 2,
            "rested {:?} after a {ran:?} batch",
            pair[1].started - pair[0].finished
        );
    }
    for bad in [0.0, 1.5, f64::NAN] {
        proc.utilisation_cap = Some(bad);
        let err = Worker::spawn(proc.clone(), sim_engine()).unwrap_err();
        assert!(err.to_string().contains("utilisation_cap"), "{err}");
    }
}
