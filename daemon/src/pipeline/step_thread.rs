//! The global step's own thread. The scheduler thread starts a step
//! (`policy::stepper::Stepper::start_if_due`: the scheduler packs its work
//! with a snapshot of the cluster) and hands it here; this thread computes
//! it and hands it back, and the scheduler thread
//! applies it. Frames keep being placed meanwhile: a step of ~10 ms on the
//! scheduler thread held every frame that arrived during it, and on bursty
//! scenes that cost camdnn its lead over `camdnn-local` (docs/suite.md).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::thread::JoinHandle;

use camdnn_policy::stepper::StartedStep;

/// The thread and the way to it.
pub struct StepThread {
    tx: Option<mpsc::Sender<(u64, StartedStep)>>,
    thread: Option<JoinHandle<()>>,
}

impl StepThread {
    /// Starts the thread; each computed step goes with its ticket to
    /// `done`, which says whether its receiver is still there.
    pub fn start(done: impl Fn(u64, StartedStep) -> bool + Send + 'static) -> Self {
        // Unbounded, bounded by the stepper: one step is away at a time.
        let (tx, rx) = mpsc::channel::<(u64, StartedStep)>();
        let thread = std::thread::Builder::new()
            .name("camdnn-step".into())
            .spawn(move || {
                for (ticket, mut step) in rx {
                    // A panic in the step loses its planning state: the
                    // scheduler then takes no more global steps (its
                    // dispatcher goes on) and the step comes back empty.
                    let computed = catch_unwind(AssertUnwindSafe(|| {
                        if let Some(job) = &mut step.job {
                            job.run();
                        }
                    }));
                    if computed.is_err() {
                        tracing::error!("the global step panicked: no more global steps; the dispatcher goes on as it was");
                        metrics::counter!("camdnn_global_step_failures_total").increment(1);
                    }
                    if !done(ticket, step) {
                        return;
                    }
                }
            });
        match thread {
            Ok(thread) => StepThread {
                tx: Some(tx),
                thread: Some(thread),
            },
            Err(e) => {
                tracing::warn!(error = %e, "no thread for the global step: it runs on the scheduler thread");
                StepThread {
                    tx: None,
                    thread: None,
                }
            }
        }
    }

    /// Hands `step` to the thread, its result to carry `ticket`; gives both
    /// back if the thread is gone, for the caller to compute the step itself.
    pub fn send(&self, ticket: u64, step: StartedStep) -> Result<(), (u64, StartedStep)> {
        match &self.tx {
            Some(tx) => tx.send((ticket, step)).map_err(|mpsc::SendError(s)| s),
            None => Err((ticket, step)),
        }
    }
}

impl Drop for StepThread {
    /// Closes the way in and waits for a step under way (one step's time).
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
