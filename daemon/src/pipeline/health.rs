//! The pipeline's own account of its health, written by the scheduler thread
//! and read by `/health/ready`, the `camdnn_ready` gauge and the systemd
//! watchdog: a heartbeat (the thread's loop runs at least every
//! [`HEARTBEAT`]) and the problems it knows of (pairs out of service after a
//! failed load or an engine panic, worker threads that ended).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Longest sleep of the scheduler thread's loop (it beats at least this often).
pub const HEARTBEAT: Duration = Duration::from_millis(500);
/// A heartbeat older than this means the scheduler thread is stuck.
pub const STALE_AFTER: Duration = Duration::from_secs(10);

/// Shared between the scheduler thread (writer) and the server (reader).
#[derive(Debug)]
pub struct PipelineHealth {
    start: Instant,
    /// Last heartbeat, ms since `start`.
    beat_ms: AtomicU64,
    /// What keeps the pipeline from being ready (empty: nothing).
    problems: Mutex<Vec<String>>,
}

impl PipelineHealth {
    /// Healthy, with a heartbeat now.
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            beat_ms: AtomicU64::new(0),
            problems: Mutex::new(Vec::new()),
        }
    }

    /// The scheduler thread is running its loop.
    pub fn beat(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.beat_ms.store(ms, Ordering::Release);
    }

    /// Replaces the list of known problems.
    pub fn set_problems(&self, problems: Vec<String>) {
        *self.problems.lock().unwrap_or_else(PoisonError::into_inner) = problems;
    }

    /// Whether the scheduler thread is alive: not ended (`thread_ended`) and
    /// beating. `Err` says why not.
    pub fn alive(&self, thread_ended: bool) -> Result<(), String> {
        if thread_ended {
            return Err("the scheduler thread has ended".into());
        }
        let beat = Duration::from_millis(self.beat_ms.load(Ordering::Acquire));
        let silent = self.start.elapsed().saturating_sub(beat);
        if silent > STALE_AFTER {
            return Err(format!(
                "the scheduler thread has not run for {:.1} s",
                silent.as_secs_f64()
            ));
        }
        Ok(())
    }

    /// Ready when the scheduler thread is alive and no problem is known;
    /// `Err` names every reason.
    pub fn ready(&self, thread_ended: bool) -> Result<(), String> {
        self.alive(thread_ended)?;
        let problems = self.problems.lock().unwrap_or_else(PoisonError::into_inner);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

impl Default for PipelineHealth {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_thread_or_a_known_problem_is_not_ready() {
        let h = PipelineHealth::new();
        h.beat();
        assert_eq!(h.ready(false), Ok(()));
        assert!(h
            .ready(true)
            .unwrap_err()
            .contains("scheduler thread has ended"));
        h.set_problems(vec!["model a on cpu: load failed".into()]);
        assert_eq!(h.ready(false).unwrap_err(), "model a on cpu: load failed");
        assert_eq!(h.alive(false), Ok(()), "alive all the same");
    }
}
