//! The load `camdnnd profile` keeps on the other processors while it measures
//! one: processors of one host share caches, memory bandwidth and often
//! physical cores, so a model runs slower while its neighbours work, and the
//! pipeline runs them all at once. Each other processor gets its own pinned
//! worker running the config's models round-robin, one item at a time, until
//! the measurement is done.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;
use camdnn_engine::{DType, Tensor, Worker};

use super::input_dims;
use crate::config::DaemonConfig;
use crate::pipeline::real_engine as engine_for;

/// Workers busy on every processor but the measured one; stopped on drop.
pub(super) struct Background {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Background {
    /// Starts the load on every processor except `measured`, each with the
    /// models it can load (a model an engine refuses is skipped).
    pub(super) fn start(cfg: &DaemonConfig, measured: usize) -> anyhow::Result<Self> {
        let p = &cfg.pipeline;
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for (j, proc) in p.processors.iter().enumerate() {
            if j == measured {
                continue;
            }
            let engine = engine_for(proc)?;
            let worker = Worker::spawn(proc.engine_config(), engine).with_context(|| {
                format!("starting processor {:?} for background load", proc.name)
            })?;
            let h = worker.handle();
            let mut models = Vec::new();
            for m in p.models.iter().filter(|m| !m.output.is_upstream()) {
                if h.load_blocking(m.source(|f| cfg.resolve(f), 1)).is_ok() {
                    models.push((
                        m.name.clone(),
                        Tensor::zeros("", DType::F32, input_dims(m, 1)),
                    ));
                }
            }
            let stop = Arc::clone(&stop);
            threads.push(std::thread::spawn(move || {
                'run: while !models.is_empty() {
                    for (name, input) in &models {
                        if stop.load(Ordering::Relaxed)
                            || h.run_blocking(name, vec![input.clone()]).is_err()
                        {
                            break 'run;
                        }
                    }
                }
                worker.shutdown();
            }));
        }
        Ok(Background { stop, threads })
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
