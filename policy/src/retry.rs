//! What to do when a model cannot be kept on a processor: its load failed,
//! or the engine panicked and lost it. The pair is taken out of service in
//! the [`Cluster`] (no scheduler places or loads it there, so the dispatcher
//! never believes it resident) and its load is retried with exponential
//! backoff: `base_ms`, then doubled per consecutive failure up to `max_ms`.
//! Pure: time is the caller's `now`, ms.

use std::collections::BTreeMap;

use crate::{Cluster, ModelId, ProcId, System};

/// First retry delay after a failure, ms.
pub const DEFAULT_BASE_MS: f64 = 250.0;
/// Longest retry delay, ms.
pub const DEFAULT_MAX_MS: f64 = 30_000.0;

/// A pair waiting for its next load attempt.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outage {
    /// Consecutive failures so far.
    pub failures: u32,
    /// When the next load is tried, ms.
    pub retry_at_ms: f64,
}

/// Load retries of the pairs out of service, with their backoff.
#[derive(Clone, Debug)]
pub struct LoadRetries {
    base_ms: f64,
    max_ms: f64,
    /// Pairs out of service now.
    waiting: BTreeMap<(ModelId, ProcId), Outage>,
    /// Pairs whose retry load is under way: their failure count, so another
    /// failure backs off further.
    trying: BTreeMap<(ModelId, ProcId), u32>,
}

impl Default for LoadRetries {
    fn default() -> Self {
        Self::new(DEFAULT_BASE_MS, DEFAULT_MAX_MS)
    }
}

impl LoadRetries {
    /// Retries first after `base_ms`, doubling up to `max_ms`.
    pub fn new(base_ms: f64, max_ms: f64) -> Self {
        Self {
            base_ms: base_ms.max(0.0),
            max_ms: max_ms.max(base_ms),
            waiting: BTreeMap::new(),
            trying: BTreeMap::new(),
        }
    }

    /// Model i could not be kept on p_j at `now`: the pair leaves service
    /// and its retry is scheduled. Returns the outage.
    pub fn failed(
        &mut self,
        system: &System,
        cluster: &mut Cluster,
        i: ModelId,
        j: ProcId,
        now: f64,
    ) -> Outage {
        cluster.set_unavailable(system, i, j);
        let before = self
            .trying
            .remove(&(i, j))
            .or_else(|| self.waiting.get(&(i, j)).map(|o| o.failures))
            .unwrap_or(0);
        let failures = before.saturating_add(1);
        let delay = (self.base_ms * 2f64.powi(failures.min(30) as i32 - 1)).min(self.max_ms);
        let outage = Outage {
            failures,
            retry_at_ms: now + delay,
        };
        self.waiting.insert((i, j), outage);
        outage
    }

    /// A load of model i on p_j succeeded: its failure count is forgotten.
    pub fn succeeded(&mut self, i: ModelId, j: ProcId) {
        self.trying.remove(&(i, j));
    }

    /// The pairs whose retry is due at `now`: each is back in service and,
    /// where the processor can host it (not full of pinned models), made
    /// resident again: that load is for the caller to start.
    pub fn due(
        &mut self,
        system: &System,
        cluster: &mut Cluster,
        now: f64,
    ) -> Vec<(ModelId, ProcId)> {
        let ready: Vec<(ModelId, ProcId)> = self
            .waiting
            .iter()
            .filter(|(_, o)| o.retry_at_ms <= now)
            .map(|(k, _)| *k)
            .collect();
        let mut out = Vec::new();
        for (i, j) in ready {
            let Some(o) = self.waiting.remove(&(i, j)) else {
                continue;
            };
            cluster.set_available(i, j);
            self.trying.insert((i, j), o.failures);
            cluster.load(system, now, i, j);
            out.push((i, j));
        }
        out
    }

    /// When the next retry is due, ms (`None` when nothing waits).
    pub fn next_due(&self) -> Option<f64> {
        self.waiting
            .values()
            .map(|o| o.retry_at_ms)
            .min_by(f64::total_cmp)
    }

    /// The pairs out of service now, with their outage.
    pub fn outages(&self) -> impl Iterator<Item = ((ModelId, ProcId), Outage)> + '_ {
        self.waiting.iter().map(|(k, o)| (*k, *o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Plan;

    const TINY: &str = include_str!("../tests/fixtures/tiny.toml");

    #[test]
    fn a_failed_pair_is_out_of_service_until_its_backed_off_retry() {
        let system = System::from_toml(TINY).unwrap();
        let (a, cpu) = (ModelId(1), ProcId(0));
        let mut cluster = Cluster::new(&system);
        let mut plan = Plan::empty(&system);
        plan.set_resident(a, cpu, true);
        cluster.preload(&system, &plan);
        let mut r = LoadRetries::new(100.0, 1000.0);

        let o = r.failed(&system, &mut cluster, a, cpu, 0.0);
        assert_eq!(o.retry_at_ms, 100.0);
        assert!(!cluster.is_resident(a, cpu), "not believed resident");
        assert!(!cluster.can_host(&system, a, cpu), "never placed meanwhile");
        assert!(r.due(&system, &mut cluster, 99.0).is_empty());
        assert_eq!(r.due(&system, &mut cluster, 100.0), vec![(a, cpu)]);
        assert!(cluster.is_resident(a, cpu), "the retry loads it");

        // The retry fails too: twice the delay, then the cap.
        assert_eq!(
            r.failed(&system, &mut cluster, a, cpu, 200.0).retry_at_ms,
            400.0
        );
        r.due(&system, &mut cluster, 400.0);
        assert_eq!(
            r.failed(&system, &mut cluster, a, cpu, 500.0).retry_at_ms,
            900.0
        );
        for t in [900.0, 2000.0, 3000.0, 4000.0] {
            r.due(&system, &mut cluster, t);
            r.failed(&system, &mut cluster, a, cpu, t);
        }
        assert_eq!(r.next_due(), Some(5000.0), "capped at max_ms");

        // A success forgets the failures.
        r.due(&system, &mut cluster, 5000.0);
        r.succeeded(a, cpu);
        assert_eq!(
            r.failed(&system, &mut cluster, a, cpu, 6000.0).retry_at_ms,
            6100.0
        );
        assert_eq!(r.outages().count(), 1);
    }
}
