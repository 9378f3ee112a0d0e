//! The load `camdnnd profile` keeps on the other processors while it measures
//! one: processors of one host share caches, memory bandwidth and often
//! physical cores, so a model runs slower while its neighbours work, and the
//! pipeline runs them all at once. Each other processor gets its own pinned
//! worker running its models (those the pipeline would put on it) round-robin,
//! one item at a time, until the measurement is done.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;
use camdnn_engine::{Tensor, Worker};

use crate::config::DaemonConfig;
use crate::pipeline::real_engine as engine_for;

/// Workers busy on every processor but the measured one; stopped on drop.
pub(super) struct Background {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Background {
    /// Starts the load on every processor j except `measured`, each with the
    /// models `on[j]` names that it can load (a model an engine refuses is
    /// skipped), each running its `samples` items in turn (index = config order).
    pub(super) fn start(
        cfg: &DaemonConfig,
        measured: usize,
        on: &[Vec<String>],
        samples: &[Vec<Tensor>],
    ) -> anyhow::Result<Self> {
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
            let wanted = |name: &String| on.get(j).is_some_and(|names| names.contains(name));
            for (m, sample) in p
                .models
                .iter()
                .zip(samples)
                .filter(|(m, _)| !m.output.is_upstream() && wanted(&m.name))
            {
                if h.load_blocking(m.source(|f| cfg.resolve(f), 1)).is_ok() {
                    models.push((m.name.clone(), sample.clone()));
                }
            }
            let stop = Arc::clone(&stop);
            threads.push(std::thread::spawn(move || {
                'run: for n in 0.. {
                    if models.is_empty() {
                        break;
                    }
                    for (name, items) in &models {
                        let input = items[n % items.len()].clone();
                        if stop.load(Ordering::Relaxed)
                            || h.run_blocking(name, vec![input]).is_err()
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
