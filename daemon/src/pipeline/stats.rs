//! What the pipeline did since its scheduler thread started, counted beside its metrics
//! as typed values: model loads, each processor's busy time, the batches each (model,
//! processor) ran with their measured / profiled time, and the host's own costs (a
//! frame's preparation, a crop, a batch's hand-over, a global step). Tools that measure the pipeline
//! (`camdnnd bench`) take two snapshots and read the difference
//! ([`StatsSnapshot::since`]) instead of parsing the metrics text.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Samples of one duration: how many and their sum, seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Durations {
    /// Samples.
    pub count: u64,
    /// Their sum, seconds.
    pub sum_s: f64,
}

impl Durations {
    fn record(&mut self, d: Duration) {
        self.count += 1;
        self.sum_s += d.as_secs_f64();
    }

    /// The mean, ms (`None`: no sample).
    pub fn mean_ms(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_s / self.count as f64 * 1e3)
    }

    fn since(&self, before: &Durations) -> Durations {
        Durations {
            count: self.count.saturating_sub(before.count),
            sum_s: self.sum_s - before.sum_s,
        }
    }
}

/// The batches one (model, processor) pair ran.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PairBatches {
    /// Batches run.
    pub batches: u64,
    /// Requests in them (the sum of the batch sizes).
    pub requests: u64,
    /// Batches with a profiled time to compare with.
    pub profiled: u64,
    /// Sum over those of measured / profiled run time.
    pub exec_vs_profile_sum: f64,
}

impl PairBatches {
    fn since(&self, before: &PairBatches) -> PairBatches {
        PairBatches {
            batches: self.batches.saturating_sub(before.batches),
            requests: self.requests.saturating_sub(before.requests),
            profiled: self.profiled.saturating_sub(before.profiled),
            exec_vs_profile_sum: self.exec_vs_profile_sum - before.exec_vs_profile_sum,
        }
    }
}

/// A (model, processor) pair by name.
pub type PairName = (String, String);

/// The pipeline's counters at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatsSnapshot {
    /// Loads started, per (model, processor).
    pub loads: BTreeMap<PairName, u64>,
    /// Time each processor spent running batches, seconds.
    pub busy_s: BTreeMap<String, f64>,
    /// Batches per (model, processor).
    pub batches: BTreeMap<PairName, PairBatches>,
    /// Preparing a frame's detector input (decode, resize, normalise).
    pub frame_prep: Durations,
    /// Cutting and preparing one object's crop.
    pub crop: Durations,
    /// A batch's time beyond its run: hand-over to its processor and back.
    pub hand_over: Durations,
    /// A global step's computation on the step thread.
    pub global_step: Durations,
}

impl StatsSnapshot {
    /// What happened between `before` (an earlier snapshot of the same pipeline) and this one.
    pub fn since(&self, before: &StatsSnapshot) -> StatsSnapshot {
        StatsSnapshot {
            loads: self
                .loads
                .iter()
                .map(|(k, n)| {
                    (
                        k.clone(),
                        n.saturating_sub(before.loads.get(k).copied().unwrap_or(0)),
                    )
                })
                .collect(),
            busy_s: self
                .busy_s
                .iter()
                .map(|(k, s)| (k.clone(), s - before.busy_s.get(k).copied().unwrap_or(0.0)))
                .collect(),
            batches: self
                .batches
                .iter()
                .map(|(k, b)| {
                    let was = before.batches.get(k).copied().unwrap_or_default();
                    (k.clone(), b.since(&was))
                })
                .collect(),
            frame_prep: self.frame_prep.since(&before.frame_prep),
            crop: self.crop.since(&before.crop),
            hand_over: self.hand_over.since(&before.hand_over),
            global_step: self.global_step.since(&before.global_step),
        }
    }

    /// Loads over every pair.
    pub fn total_loads(&self) -> u64 {
        self.loads.values().sum()
    }

    /// Mean measured / profiled batch time over every pair (`None`: no profiled batch ran).
    pub fn exec_vs_profile(&self) -> Option<f64> {
        let (sum, n) = self.batches.values().fold((0.0, 0), |(s, n), b| {
            (s + b.exec_vs_profile_sum, n + b.profiled)
        });
        (n > 0).then(|| sum / n as f64)
    }

    /// Requests `model` ran on every processor.
    pub fn requests_of(&self, model: &str) -> u64 {
        self.batches
            .iter()
            .filter(|((m, _), _)| m == model)
            .map(|(_, b)| b.requests)
            .sum()
    }
}

/// The shared counters: the scheduler thread and the preparation threads record, any
/// thread takes a snapshot.
#[derive(Clone, Debug, Default)]
pub struct Stats(Arc<Mutex<StatsSnapshot>>);

impl Stats {
    fn with(&self, f: impl FnOnce(&mut StatsSnapshot)) {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// The counters now.
    pub fn snapshot(&self) -> StatsSnapshot {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(super) fn load(&self, model: &str, proc: &str) {
        self.with(|s| *s.loads.entry((model.into(), proc.into())).or_default() += 1);
    }

    /// A batch of `requests` ran `exec` on `proc`, `ratio` times its profiled time (`None`:
    /// no profiled time), handed over in `hand_over`.
    pub(super) fn batch(
        &self,
        (model, proc): (&str, &str),
        requests: usize,
        exec: Duration,
        ratio: Option<f64>,
        hand_over: Duration,
    ) {
        self.with(|s| {
            *s.busy_s.entry(proc.into()).or_default() += exec.as_secs_f64();
            let b = s.batches.entry((model.into(), proc.into())).or_default();
            b.batches += 1;
            b.requests += requests as u64;
            if let Some(r) = ratio {
                b.profiled += 1;
                b.exec_vs_profile_sum += r;
            }
            s.hand_over.record(hand_over);
        });
    }

    pub(super) fn frame_prep(&self, took: Duration) {
        self.with(|s| s.frame_prep.record(took));
    }

    pub(super) fn crop(&self, took: Duration) {
        self.with(|s| s.crop.record(took));
    }

    pub(super) fn global_step(&self, took: Duration) {
        self.with(|s| s.global_step.record(took));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_difference_counts_only_what_happened_between_the_snapshots() {
        let stats = Stats::default();
        stats.load("det", "cpu");
        let ms = Duration::from_millis;
        stats.batch(("cls", "cpu"), 4, ms(8), Some(1.0), ms(1));
        let before = stats.snapshot();
        stats.load("cls", "gpu");
        stats.batch(("cls", "cpu"), 2, ms(4), Some(2.0), ms(3));
        stats.batch(("cls", "gpu"), 1, ms(2), None, ms(1));
        stats.crop(ms(2));
        let d = stats.snapshot().since(&before);
        assert_eq!(d.total_loads(), 1);
        assert_eq!(d.requests_of("cls"), 3);
        assert_eq!(d.exec_vs_profile(), Some(2.0));
        assert!((d.busy_s["cpu"] - 0.004).abs() < 1e-12);
        assert_eq!(d.hand_over.count, 2);
        assert!((d.hand_over.mean_ms().unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(d.crop.mean_ms(), Some(2.0));
        assert_eq!(d.frame_prep.mean_ms(), None);
    }
}
