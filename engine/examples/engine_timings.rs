//! Prints the measured load time and per-batch time of a few real models on the tract
//! and ort (CPU provider, 1 thread) engines. Needs `scripts/setup.sh` (models and the
//! ONNX Runtime library). Run: `cargo run --release -p camdnn-engine --example engine_timings`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use camdnn_engine::{
    Dim, Engine, EngineKind, ModelSource, OrtEngine, OrtProvider, ProcessorConfig, Tensor,
    TractEngine, Worker,
};

fn models_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models")
}

fn input_for(shape: &[Dim], k: usize) -> Tensor {
    let dims: Vec<usize> = shape
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => *n,
            _ => k,
        })
        .collect();
    let mut dims = dims;
    dims[0] = k;
    let n: usize = dims.iter().product();
    let data = (0..n)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0)
        .collect();
    Tensor::from_f32(dims, data).expect("shape and data agree")
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let models = [
        ModelSource::new(
            "light_squeezenet",
            models_dir().join("light_squeezenet.onnx"),
        ),
        ModelSource::new(
            "light_inception_v1",
            models_dir().join("light_inception_v1.onnx"),
        ),
        ModelSource::new(
            "ppocr_cls",
            models_dir().join("ch_ppocr_mobile_v2.0_cls_infer.onnx"),
        )
        .with_input_shape("x", vec![-1, 3, 48, 192]),
        ModelSource::new("ppocr_det", models_dir().join("ch_PP-OCRv4_det_infer.onnx"))
            .with_input_shape("x", vec![-1, 3, 480, 640]),
    ];
    let mut ort_proc = ProcessorConfig::new("cpu-ort", EngineKind::Ort);
    ort_proc.provider = Some(OrtProvider::Cpu);
    ort_proc.core = Some(0);
    let mut tract_proc = ProcessorConfig::new("cpu-tract", EngineKind::Tract);
    tract_proc.core = Some(1);
    let engines: Vec<(ProcessorConfig, Arc<dyn Engine>)> = vec![
        (tract_proc, Arc::new(TractEngine::new())),
        (ort_proc, Arc::new(OrtEngine::new(None)?)),
    ];
    const RUNS: usize = 15;
    println!("engine  model                 load_ms  mode      k  t_e_median_ms");
    for (proc, engine) in engines {
        let worker = Worker::spawn(proc.clone(), engine)?;
        let h = worker.handle();
        for model in &models {
            let report = h.load_blocking(model.clone())?;
            let info = &report.info;
            for k in [1usize, 2, 4, 8] {
                let inputs: Vec<Tensor> =
                    info.inputs.iter().map(|i| input_for(&i.shape, k)).collect();
                // Warm-up (excluded): tract optimises a plan per new batch size here.
                h.run_blocking(&model.name, inputs.clone())?;
                let times = (0..RUNS)
                    .map(|_| {
                        h.run_blocking(&model.name, inputs.clone())
                            .map(|r| r.exec_time())
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                println!(
                    "{:<7} {:<21} {:>7.1}  {:<8} {:>2}  {:>8.2}",
                    proc.engine.as_str(),
                    model.name,
                    info.load_time.as_secs_f64() * 1e3,
                    if info.dynamic_batch() {
                        "native"
                    } else {
                        "loop"
                    },
                    k,
                    median(times).as_secs_f64() * 1e3
                );
            }
        }
        worker.shutdown();
    }
    Ok(())
}
