//! The pipeline's own account of its health, read by `/health/ready`, the
//! `camdnn_ready` gauge and the systemd watchdog:
//!
//! - a heartbeat of the scheduler thread (its loop runs at least every
//!   [`HEARTBEAT`]);
//! - progress: when a frame last entered or left the pipeline or a batch
//!   finished; frames inside with no progress for the progress timeout mean
//!   the pipeline is stalled, whatever part of it hangs;
//! - the processors' workers: threads stuck in an engine call past its
//!   limit (each was replaced) or a worker that retired;
//! - the problems the scheduler thread publishes (pairs out of service after
//!   a failed load, an engine panic or a timeout; worker threads that ended).
//!
//! Alive (feeds the watchdog): the scheduler thread runs and the pipeline is
//! not stalled. Ready: alive, no stuck worker thread and no known problem.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use camdnn_engine::WorkerHandle;

use crate::telemetry as names;

/// Longest sleep of the scheduler thread's loop (it beats at least this often).
pub const HEARTBEAT: Duration = Duration::from_millis(500);
/// A heartbeat older than this means the scheduler thread is stuck.
pub const STALE_AFTER: Duration = Duration::from_secs(10);
/// How often the workers' metrics are recorded at most.
pub const RECORD_EVERY: Duration = Duration::from_millis(250);

/// Shared between the scheduler thread (writer) and the server (reader).
#[derive(Debug)]
pub struct PipelineHealth {
    start: Instant,
    /// Last heartbeat, ms since `start`.
    beat_ms: AtomicU64,
    /// Last progress, ms since `start`.
    progress_ms: AtomicU64,
    progress_timeout: Duration,
    /// The processors' workers, in processor order.
    workers: Vec<WorkerHandle>,
    /// Per worker: its engine timeouts already counted in the metrics.
    timeouts_counted: Mutex<Vec<u64>>,
    /// When the workers' metrics were last recorded, ms since `start`.
    recorded_ms: AtomicU64,
    /// What keeps the pipeline from being ready (empty: nothing).
    problems: Mutex<Vec<String>>,
}

fn since_ms(start: Instant, now: Instant) -> u64 {
    u64::try_from(now.saturating_duration_since(start).as_millis()).unwrap_or(u64::MAX)
}

impl PipelineHealth {
    /// Healthy, with a heartbeat and progress now; `workers` are watched for
    /// stuck threads, and frames inside without progress for
    /// `progress_timeout` make the pipeline stalled.
    pub fn new(workers: Vec<WorkerHandle>, progress_timeout: Duration) -> Self {
        Self {
            start: Instant::now(),
            beat_ms: AtomicU64::new(0),
            progress_ms: AtomicU64::new(0),
            progress_timeout,
            timeouts_counted: Mutex::new(vec![0; workers.len()]),
            recorded_ms: AtomicU64::new(0),
            workers,
            problems: Mutex::new(Vec::new()),
        }
    }

    /// The scheduler thread is running its loop.
    pub fn beat(&self) {
        self.beat_ms
            .store(since_ms(self.start, Instant::now()), Ordering::Release);
    }

    /// Something moved: a frame entered or was answered, or a batch finished.
    pub fn progressed(&self) {
        self.progress_ms
            .store(since_ms(self.start, Instant::now()), Ordering::Release);
    }

    /// Replaces the list of known problems.
    pub fn set_problems(&self, problems: Vec<String>) {
        *self.problems.lock().unwrap_or_else(PoisonError::into_inner) = problems;
    }

    /// Whether the pipeline is alive at `now` with `in_flight` frames inside:
    /// its scheduler thread has not ended (`thread_ended`) and beats, and it
    /// is not stalled. `Err` says why not.
    pub fn alive_at(
        &self,
        now: Instant,
        thread_ended: bool,
        in_flight: usize,
    ) -> Result<(), String> {
        if thread_ended {
            return Err("the scheduler thread has ended".into());
        }
        let elapsed = now.saturating_duration_since(self.start);
        let beat = Duration::from_millis(self.beat_ms.load(Ordering::Acquire));
        let silent = elapsed.saturating_sub(beat);
        if silent > STALE_AFTER {
            return Err(format!(
                "the scheduler thread has not run for {:.1} s",
                silent.as_secs_f64()
            ));
        }
        let progress = Duration::from_millis(self.progress_ms.load(Ordering::Acquire));
        let still = elapsed.saturating_sub(progress);
        if in_flight > 0 && still > self.progress_timeout {
            return Err(format!(
                "stalled: {in_flight} frame(s) inside and none entered or left and no batch finished for {:.1} s (progress_timeout_ms {})",
                still.as_secs_f64(),
                self.progress_timeout.as_millis()
            ));
        }
        Ok(())
    }

    /// [`PipelineHealth::alive_at`] now.
    pub fn alive(&self, thread_ended: bool, in_flight: usize) -> Result<(), String> {
        self.alive_at(Instant::now(), thread_ended, in_flight)
    }

    /// Ready when alive, no worker has a thread stuck in an engine call and
    /// no problem is known; `Err` names every reason.
    pub fn ready(&self, thread_ended: bool, in_flight: usize) -> Result<(), String> {
        self.alive(thread_ended, in_flight)?;
        let mut reasons = self.stuck_workers(Instant::now());
        reasons.extend(
            self.problems
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .cloned(),
        );
        if reasons.is_empty() {
            Ok(())
        } else {
            Err(reasons.join("; "))
        }
    }

    /// One reason per worker with a thread stuck in an engine call past its
    /// limit, or retired.
    fn stuck_workers(&self, now: Instant) -> Vec<String> {
        let mut out = Vec::new();
        for w in &self.workers {
            let status = w.status();
            let Some(oldest) = status.stuck.first() else {
                continue;
            };
            let what = if status.retired {
                "the worker retired: it allows no more stuck threads (a reload starts a new one)"
            } else {
                "a fresh worker thread took over"
            };
            out.push(format!(
                "processor {}: {} thread(s) stuck in the engine, the oldest {} model {} for {:.1} s (limit {:.1} s); {what}",
                w.processor(),
                status.stuck.len(),
                oldest.stage,
                oldest.model,
                now.saturating_duration_since(oldest.since).as_secs_f64(),
                oldest.limit.as_secs_f64(),
            ));
        }
        out
    }

    /// Updates the workers' metrics, at most every [`RECORD_EVERY`]: threads
    /// stuck now, and the engine calls that timed out since the last time
    /// (each replaced a thread or retired the worker).
    pub fn record_worker_metrics(&self) {
        let now = since_ms(self.start, Instant::now());
        let last = self.recorded_ms.load(Ordering::Relaxed);
        if now.saturating_sub(last) < RECORD_EVERY.as_millis() as u64 && last > 0 {
            return;
        }
        self.recorded_ms.store(now.max(1), Ordering::Relaxed);
        let mut counted = self
            .timeouts_counted
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (w, seen) in self.workers.iter().zip(counted.iter_mut()) {
            let status = w.status();
            let timeouts = status.replaced + u64::from(status.retired);
            let p = w.processor().to_owned();
            if timeouts > *seen {
                metrics::counter!(names::ENGINE_TIMEOUTS, "processor" => p.clone())
                    .increment(timeouts - *seen);
                *seen = timeouts;
            }
            metrics::gauge!(names::WORKER_THREADS_STUCK, "processor" => p)
                .set(status.stuck.len() as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_thread_or_a_known_problem_is_not_ready() {
        let h = PipelineHealth::new(Vec::new(), Duration::from_secs(60));
        h.beat();
        assert_eq!(h.ready(false, 0), Ok(()));
        assert!(h
            .ready(true, 0)
            .unwrap_err()
            .contains("scheduler thread has ended"));
        h.set_problems(vec!["model a on cpu: load failed".into()]);
        assert_eq!(
            h.ready(false, 0).unwrap_err(),
            "model a on cpu: load failed"
        );
        assert_eq!(h.alive(false, 0), Ok(()), "alive all the same");
    }

    #[test]
    fn frames_inside_without_progress_past_the_timeout_are_a_stall() {
        let h = PipelineHealth::new(Vec::new(), Duration::from_secs(60));
        h.progressed();
        let later = Instant::now() + Duration::from_secs(61);
        // The heartbeat is checked first: beat "then", as a live thread would.
        h.beat_ms.store(since_ms(h.start, later), Ordering::Release);
        let e = h.alive_at(later, false, 2).unwrap_err();
        assert!(e.starts_with("stalled: 2 frame(s) inside"), "{e}");
        assert_eq!(h.alive_at(later, false, 0), Ok(()), "nothing waits");
        let soon = Instant::now() + Duration::from_secs(59);
        assert_eq!(h.alive_at(soon, false, 2), Ok(()), "within the timeout");
    }
}
