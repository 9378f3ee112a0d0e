//! `[pipeline.stall]`: what the pipeline does about engine calls that do not
//! come back. Every run and load carries a limit derived from the profile
//! (a multiple of its t_e or t_l, with a floor); past it the worker answers
//! the call `TimedOut`, abandons the stuck thread and serves on with a fresh
//! one (`camdnn_engine::Supervision`), and the pair backs off as after a
//! failed load. A processor may leave `max_abandoned_threads` stuck threads;
//! the next stuck call retires it. And when nothing moves at all for
//! `progress_timeout_ms` while frames are inside, the pipeline reports
//! itself stalled: not alive, so the systemd watchdog stops being fed.

use std::time::Duration;

use anyhow::bail;
use camdnn_engine::{RunLimit, Supervision};
use camdnn_policy::{ModelId, ProcId, System};
use serde::Deserialize;

/// `[pipeline.stall]`; every field has a default.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StallConfig {
    /// A run's limit is this multiple of the profile's t_e(model, processor,
    /// batch size), and a load's this multiple of its t_l (default 10: a
    /// busy shared host runs models up to 2x slower than profiled).
    #[serde(default = "d_factor")]
    pub timeout_factor: f64,
    /// A run's limit is never shorter than this, ms (default 2000).
    #[serde(default = "d_run_floor")]
    pub run_timeout_floor_ms: f64,
    /// A load's limit is never shorter than this, ms; a run that first
    /// prepares its batch size (tract builds a plan per size) may take a
    /// load's limit more (default 30000: a cold model file, a big graph).
    #[serde(default = "d_load_floor")]
    pub load_timeout_floor_ms: f64,
    /// Per processor, the most worker threads left stuck in an engine call
    /// at once; the next stuck call retires the processor (it serves
    /// nothing until a reload builds a new pipeline). Default 2.
    #[serde(default = "d_abandoned")]
    pub max_abandoned_threads: usize,
    /// When frames are inside the pipeline and for this long none entered,
    /// none was answered and no batch finished, ms, the pipeline is stalled:
    /// neither alive nor ready, and the systemd watchdog is no longer fed
    /// (default 60000; keep it above every run's and load's limit).
    #[serde(default = "d_progress")]
    pub progress_timeout_ms: f64,
}

fn d_factor() -> f64 {
    10.0
}
fn d_run_floor() -> f64 {
    2_000.0
}
fn d_load_floor() -> f64 {
    30_000.0
}
fn d_abandoned() -> usize {
    camdnn_engine::DEFAULT_MAX_ABANDONED
}
fn d_progress() -> f64 {
    60_000.0
}

impl Default for StallConfig {
    fn default() -> Self {
        Self {
            timeout_factor: d_factor(),
            run_timeout_floor_ms: d_run_floor(),
            load_timeout_floor_ms: d_load_floor(),
            max_abandoned_threads: d_abandoned(),
            progress_timeout_ms: d_progress(),
        }
    }
}

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v.max(0.0) / 1e3)
}

impl StallConfig {
    /// Checks the values on their own: a factor of at least 1, positive floors.
    pub fn validate(&self) -> anyhow::Result<()> {
        if !(self.timeout_factor.is_finite() && self.timeout_factor >= 1.0) {
            bail!(
                "[pipeline.stall] timeout_factor must be at least 1, got {}",
                self.timeout_factor
            );
        }
        for (name, v) in [
            ("run_timeout_floor_ms", self.run_timeout_floor_ms),
            ("load_timeout_floor_ms", self.load_timeout_floor_ms),
            ("progress_timeout_ms", self.progress_timeout_ms),
        ] {
            if !(v.is_finite() && v > 0.0) {
                bail!("[pipeline.stall] {name} must be a positive number of ms, got {v}");
            }
        }
        Ok(())
    }

    /// Why the progress timeout is too short for `system`, if it is: a call
    /// may take up to its limit without being stuck, so a timeout under the
    /// longest limit can call a slow but working pipeline stalled.
    pub fn progress_warning(&self, system: &System) -> Option<String> {
        let mut longest = (0.0, String::new());
        for i in system.model_ids() {
            for j in system.proc_ids() {
                if !system.supports(i, j) {
                    continue;
                }
                let what = || {
                    format!(
                        "{} on {}",
                        system.models[i.0].name, system.processors[j.0].name
                    )
                };
                let cold = self.run_limit(system, i, j, system.max_batch_on(i, j)).cold;
                let ms = cold.as_secs_f64() * 1e3;
                if ms > longest.0 {
                    longest = (ms, what());
                }
            }
        }
        (self.progress_timeout_ms <= longest.0).then(|| {
            format!(
                "[pipeline.stall] progress_timeout_ms ({}) is not above the longest limit of an engine call ({:.0} ms, a first run of {}): a slow call within its limit can make the pipeline look stalled",
                self.progress_timeout_ms, longest.0, longest.1
            )
        })
    }

    /// What a worker does with stuck threads.
    pub fn supervision(&self) -> Supervision {
        Supervision {
            max_abandoned: self.max_abandoned_threads,
        }
    }

    /// The limits of a batch of `k` of model `i` on `j`: warm is
    /// `timeout_factor` x t_e(i, j, k) with the run floor; cold adds a load's
    /// limit (see the fields).
    pub fn run_limit(&self, system: &System, i: ModelId, j: ProcId, k: usize) -> RunLimit {
        let te = system.exec_ms(i, j, k.max(1));
        let scaled = if te.is_finite() {
            self.timeout_factor * te
        } else {
            0.0
        };
        let warm = scaled.max(self.run_timeout_floor_ms);
        RunLimit {
            warm: ms(warm),
            cold: ms(warm) + self.load_limit(system, i, j),
        }
    }

    /// The limit of a load of model `i` on `j`: `timeout_factor` x t_l with
    /// the load floor.
    pub fn load_limit(&self, system: &System, i: ModelId, j: ProcId) -> Duration {
        let tl = system.load_ms(i, j);
        let scaled = if tl.is_finite() {
            self.timeout_factor * tl
        } else {
            0.0
        };
        ms(scaled.max(self.load_timeout_floor_ms))
    }

    /// The progress timeout as a duration.
    pub fn progress_timeout(&self) -> Duration {
        ms(self.progress_timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rb5() -> System {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/profiles/rb5.toml");
        System::from_toml(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn limits_are_a_multiple_of_the_profile_with_a_floor() {
        let system = rb5();
        let (det, person, cpu) = (ModelId(0), ModelId(1), ProcId(0));
        let c = StallConfig {
            timeout_factor: 100.0,
            run_timeout_floor_ms: 10.0,
            load_timeout_floor_ms: 10.0,
            ..StallConfig::default()
        };
        let te = system.exec_ms(person, cpu, 2);
        let tl = system.load_ms(person, cpu);
        let l = c.run_limit(&system, person, cpu, 2);
        assert!((l.warm.as_secs_f64() * 1e3 - 100.0 * te).abs() < 1e-6);
        assert!((l.cold.as_secs_f64() * 1e3 - 100.0 * (te + tl)).abs() < 1e-6);
        let floor = StallConfig::default();
        assert_eq!(
            floor.run_limit(&system, det, cpu, 1).warm,
            Duration::from_secs(2),
            "a 27 ms run gets the 2 s floor"
        );
        assert_eq!(floor.load_limit(&system, det, cpu), Duration::from_secs(30));
    }

    #[test]
    fn bad_values_are_refused_and_a_progress_timeout_under_a_limit_named() {
        let system = rb5();
        StallConfig::default().validate().unwrap();
        assert_eq!(StallConfig::default().progress_warning(&system), None);
        let c = StallConfig {
            timeout_factor: 0.5,
            ..StallConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("timeout_factor"));
        let c = StallConfig {
            progress_timeout_ms: 5_000.0,
            ..StallConfig::default()
        };
        let e = c
            .progress_warning(&system)
            .expect("5 s is under a load's 30 s");
        assert!(e.contains("progress_timeout_ms (5000)"), "{e}");
    }
}
