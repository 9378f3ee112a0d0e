//! Runs one model through camdnn's tract engine on raw inputs and writes its outputs:
//! the Rust half of `scripts/tflite_coverage.py`, which compares them with LiteRT's.
//!
//! Usage: `tflite_run MODEL DIR`. Reads `DIR/in_<i>.bin` (little-endian f32, the model's
//! input shapes), writes `DIR/out_<i>.bin` (f32) and `DIR/out_<i>.shape` (dims, one
//! line), and prints one status line: `loaded <detail>` then `ran`, or
//! `load-error <reason>` / `run-error <reason>` (exit code 0 in every case, 2 on bad use).

use std::path::PathBuf;

use camdnn_engine::{Dim, Engine, EngineKind, ModelSource, ProcessorConfig, Tensor, TractEngine};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model, dir] = args.as_slice() else {
        eprintln!("usage: tflite_run MODEL DIR");
        std::process::exit(2);
    };
    let dir = PathBuf::from(dir);
    let src = ModelSource::new("model", model);
    let mut loaded =
        match TractEngine::new().load(&src, &ProcessorConfig::new("cpu", EngineKind::Tract)) {
            Ok(m) => m,
            Err(e) => {
                println!("load-error {}", e.to_string().replace('\n', " "));
                return;
            }
        };
    println!("loaded {}", loaded.info().detail);
    let mut inputs = Vec::new();
    for (i, info) in loaded.info().inputs.iter().enumerate() {
        let shape: Vec<usize> = info
            .shape
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => *n,
                _ => 1,
            })
            .collect();
        let bytes = match std::fs::read(dir.join(format!("in_{i}.bin"))) {
            Ok(b) => b,
            Err(e) => {
                println!("run-error reading in_{i}.bin: {e}");
                return;
            }
        };
        let data = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        match Tensor::from_f32(shape, data) {
            Ok(t) => inputs.push(t.with_name(info.name.clone())),
            Err(e) => {
                println!("run-error input {i}: {e}");
                return;
            }
        }
    }
    let outputs = match loaded.run(&inputs) {
        Ok(o) => o,
        Err(e) => {
            println!("run-error {}", e.to_string().replace('\n', " "));
            return;
        }
    };
    for (i, t) in outputs.iter().enumerate() {
        let Some(v) = t.as_f32() else {
            println!("run-error output {i} is not f32");
            return;
        };
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        let shape: Vec<String> = t.shape().iter().map(usize::to_string).collect();
        let written = std::fs::write(dir.join(format!("out_{i}.bin")), bytes)
            .and_then(|()| std::fs::write(dir.join(format!("out_{i}.shape")), shape.join(" ")));
        if let Err(e) = written {
            println!("run-error writing output {i}: {e}");
            return;
        }
    }
    println!("ran");
}
