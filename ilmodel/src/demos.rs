//! Optimal demonstrations for imitation learning (paper Sec. 5.1.2): scene
//! complexities enumerated like the paper (0..=max_objects objects per
//! classifier), random rem_j and random previous residencies, each solved by
//! the ILP oracle.
//!
//! A run is split into chunks of consecutive demonstration indices. Every
//! demonstration draws its random state from its own stream
//! (`SplitMix64::for_item(seed, index)`), so its content depends on the seed
//! and its index only; chunks are solved in parallel, each written to its own
//! file atomically, and merged in index order at the end. The same seed and
//! parameters therefore give byte-identical `demos.jsonl` whatever the number
//! of threads, and a killed run resumes by skipping the chunks it finished.
//! Solve times are wall-clock measurements and go to a separate file,
//! `solve_times.jsonl`, so they do not break that identity. The format is
//! documented in ilmodel/README.md.
//!
//! A run also splits across machines: [`Shard`] `i` of `N` solves the chunks
//! `c` with `c mod N == i` into the shared output folder
//! ([`generate_shard`]; the index may come from a Kubernetes Indexed Job's
//! `JOB_COMPLETION_INDEX` or a Slurm array's `SLURM_ARRAY_TASK_ID`), and
//! [`merge_run`] then writes the same `demos.jsonl`, byte for byte, as one
//! machine would have.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use camdnn_policy::{Detector, ModelId, PlanInput, System};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::oracle::{first_root, solve, OracleOptions, SolveStatus};
use crate::rng::SplitMix64;
use crate::{DemoError, OracleError};

mod files;
mod label;
mod shard;

pub use files::chunk_path;
use files::{chunk_range, fnv1a64, io, merge, times_path, write_atomic};
pub use label::{instance, label};
pub use shard::{Shard, SHARD_INDEX_VARS};

/// Version tag of the files written here.
pub const FORMAT: &str = "camdnn-demos/1";

/// Probability that a processor starts a demonstration idle (rem_j = 0).
pub const IDLE_PROBABILITY: f64 = 0.25;

/// Probability that a model which fits is drawn resident in a_old.
pub const RESIDENT_PROBABILITY: f64 = 0.5;

/// Parameters of a run.
#[derive(Clone, Debug)]
pub struct DemoConfig {
    /// The system file's text (its hash goes in the manifest).
    pub system_toml: String,
    /// Output folder.
    pub out: PathBuf,
    /// Seed of every random draw.
    pub seed: u64,
    /// Largest r_i per classifier (the paper: 14).
    pub max_objects: u32,
    /// Number of demonstrations.
    pub samples: u64,
    /// rem_j is 0 with [`IDLE_PROBABILITY`], else uniform in [0, rem_max_ms).
    pub rem_max_ms: f64,
    /// F, frames per epoch (the paper: 5 s at 14 fps = 70).
    pub frames_per_epoch: f64,
    /// Demonstrations per chunk file.
    pub chunk_size: u64,
    /// Worker threads (one HiGHS solve each).
    pub jobs: usize,
    /// HiGHS time limit per solve stage, seconds.
    pub time_limit_s: f64,
    /// Draw a progress bar on stderr.
    pub progress: bool,
}

/// The parameters that fix a run's content, stored as `manifest.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// The system's name.
    pub system_name: String,
    /// FNV-1a 64 of the system file's text, hex.
    pub system_fnv1a64: String,
    /// Seed.
    pub seed: u64,
    /// Largest r_i per classifier.
    pub max_objects: u32,
    /// Number of demonstrations.
    pub samples: u64,
    /// Upper end of rem_j, ms.
    pub rem_max_ms: f64,
    /// Probability of rem_j = 0.
    pub idle_probability: f64,
    /// Probability of drawing a fitting model resident in a_old.
    pub resident_probability: f64,
    /// F.
    pub frames_per_epoch: f64,
    /// Demonstrations per chunk.
    pub chunk_size: u64,
    /// HiGHS time limit per stage, s.
    pub time_limit_s: f64,
    /// Model names, by `ModelId`.
    pub models: Vec<String>,
    /// Processor names, by `ProcId`.
    pub processors: Vec<String>,
    /// n_b.
    pub max_batch: usize,
    /// Ids of the classifiers (the models that take requests).
    pub request_models: Vec<usize>,
    /// The detector model id, its processor id and t_det.
    pub detector: DetectorInfo,
    /// Number of scenes of the full grid, (max_objects+1)^classifiers, when
    /// it fits in u64.
    pub scene_grid: Option<u64>,
    /// `grid` (index n uses grid scene n mod grid size) or `sampled`.
    pub scene_mode: String,
}

/// Where the detector sits in every demonstration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetectorInfo {
    /// Model id of the detector (the first root).
    pub model: usize,
    /// Processor id p_d.
    pub proc: usize,
    /// t_det, ms.
    pub exec_ms: f64,
}

/// Outcome of one demonstration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DemoStatus {
    /// Proven optimal.
    Optimal,
    /// Best plan found when the time limit hit.
    TimeLimit,
    /// No plan respects the residency limits; no plan fields.
    Infeasible,
}

/// One line of `demos.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Demo {
    /// Demonstration index, 0-based, consecutive in the file.
    pub index: u64,
    /// r_i by model id (detectors 0).
    pub scene: Vec<u32>,
    /// rem_j by processor id, ms.
    pub rem_ms: Vec<f64>,
    /// a_old[i][j].
    pub a_old: Vec<Vec<bool>>,
    /// F.
    pub frames_per_epoch: f64,
    /// Outcome.
    pub status: DemoStatus,
    /// Optimal T, ms (absent when infeasible).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_ms: Option<f64>,
    /// a[i][j] of the optimal plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resident: Option<Vec<Vec<bool>>>,
    /// b[i][j][k-1] = b_k(i,j) of the optimal plan, k = 1..=n_b.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batches: Option<Vec<Vec<Vec<u32>>>>,
}

impl Demo {
    /// The demonstration's planning input, its a_old flattened into
    /// `a_old` (`i * n_p + j`, sized models x processors of `system`);
    /// an error naming the demonstration when a_old has another shape.
    pub fn input<'a>(
        &'a self,
        system: &System,
        a_old: &'a mut [bool],
    ) -> Result<PlanInput<'a>, String> {
        let np = system.num_processors();
        if self.a_old.len() != system.num_models()
            || self.a_old.iter().any(|r| r.len() != np)
            || a_old.len() != system.num_models() * np
        {
            return Err(format!(
                "demonstration {} has an a_old of the wrong shape",
                self.index
            ));
        }
        for (i, row) in self.a_old.iter().enumerate() {
            a_old[i * np..(i + 1) * np].copy_from_slice(row);
        }
        Ok(PlanInput {
            scene: &self.scene,
            rem_ms: &self.rem_ms,
            residency: a_old,
            frames_per_epoch: self.frames_per_epoch,
        })
    }
}

/// One line of `solve_times.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SolveTime {
    /// Demonstration index.
    pub index: u64,
    /// Wall time of the oracle (both stages), ms.
    pub solve_ms: f64,
}

/// What a run did.
#[derive(Clone, Debug, PartialEq)]
pub struct DemoSummary {
    /// Demonstrations in the dataset.
    pub samples: u64,
    /// Chunks of the run.
    pub chunks: usize,
    /// Chunks found finished and reused.
    pub chunks_reused: usize,
    /// Chunks solved by this invocation.
    pub chunks_solved: usize,
    /// Demonstrations without a feasible plan.
    pub infeasible: u64,
    /// Demonstrations stopped by the time limit.
    pub time_limited: u64,
    /// The merged dataset.
    pub demos_path: PathBuf,
    /// The merged solve times.
    pub times_path: PathBuf,
}

/// What one shard did.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardSummary {
    /// The shard.
    pub shard: Shard,
    /// Chunks of the whole run.
    pub chunks: usize,
    /// Chunks this shard owns.
    pub owned: usize,
    /// Owned chunks found finished and reused.
    pub chunks_reused: usize,
    /// Owned chunks solved by this invocation.
    pub chunks_solved: usize,
}

/// Generates (or resumes) a run; see the module doc.
pub fn generate(config: &DemoConfig) -> Result<DemoSummary, DemoError> {
    let run = Run::open(config)?;
    let (reused, solved) = run.solve(config, |_| true)?;
    run.merge(config, reused, solved)
}

/// Solves the chunks of `shard` into `config.out` (resuming like
/// [`generate`]) without merging: the other shards may still be running.
/// Shards of one run may share the folder (a shared volume).
pub fn generate_shard(config: &DemoConfig, shard: Shard) -> Result<ShardSummary, DemoError> {
    let run = Run::open(config)?;
    let (chunks_reused, chunks_solved) = run.solve(config, |c| shard.owns(c))?;
    Ok(ShardSummary {
        shard,
        chunks: run.chunks,
        owned: (0..run.chunks).filter(|&c| shard.owns(c)).count(),
        chunks_reused,
        chunks_solved,
    })
}

/// Merges a run whose chunks the shards have all written (solves nothing):
/// the same `demos.jsonl` as [`generate`] on one machine. Fails naming the
/// unfinished chunks if any shard has not finished.
pub fn merge_run(config: &DemoConfig) -> Result<DemoSummary, DemoError> {
    let run = Run::open(config)?;
    let missing: Vec<usize> = (0..run.chunks)
        .filter(|&c| !chunk_finished(&run.chunk_dir, c))
        .collect();
    if !missing.is_empty() {
        return Err(DemoError::Incomplete {
            dir: config.out.clone(),
            missing: missing.len(),
            chunks: run.chunks,
            first: missing.into_iter().take(8).collect(),
        });
    }
    run.merge(config, run.chunks, 0)
}

fn chunk_finished(dir: &Path, c: usize) -> bool {
    chunk_path(dir, c).exists() && times_path(dir, c).exists()
}

/// A run's folder, manifest checked: what solving and merging share.
struct Run {
    system: System,
    detector: Detector,
    chunk_dir: PathBuf,
    chunks: usize,
}

impl Run {
    /// Checks the parameters, then creates the folder and its manifest or
    /// checks the manifest already there.
    fn open(config: &DemoConfig) -> Result<Run, DemoError> {
        check_config(config)?;
        let system = System::from_toml(&config.system_toml)?;
        let detector = Detector::fastest(&system);
        let manifest = manifest(config, &system, detector);
        let chunk_dir = config.out.join("chunks");
        fs::create_dir_all(&chunk_dir).map_err(|e| io(&chunk_dir, e))?;
        let manifest_path = config.out.join("manifest.json");
        if manifest_path.exists() {
            let text = fs::read_to_string(&manifest_path).map_err(|e| io(&manifest_path, e))?;
            let found: Manifest = serde_json::from_str(&text).map_err(|e| DemoError::Corrupt {
                path: manifest_path.clone(),
                reason: e.to_string(),
            })?;
            compare_manifest(&config.out, &found, &manifest)?;
        } else {
            let text =
                serde_json::to_string_pretty(&manifest).expect("a manifest serialises") + "\n";
            write_atomic(&manifest_path, text.as_bytes())?;
        }
        Ok(Run {
            system,
            detector,
            chunk_dir,
            chunks: config.samples.div_ceil(config.chunk_size) as usize,
        })
    }

    /// Solves the unfinished chunks `wanted` accepts; (reused, solved).
    fn solve(
        &self,
        config: &DemoConfig,
        wanted: impl Fn(usize) -> bool,
    ) -> Result<(usize, usize), DemoError> {
        let (system, detector, chunk_dir) = (&self.system, self.detector, &self.chunk_dir);
        let mine: Vec<usize> = (0..self.chunks).filter(|&c| wanted(c)).collect();
        let pending: Vec<usize> = mine
            .iter()
            .copied()
            .filter(|&c| !chunk_finished(chunk_dir, c))
            .collect();
        let reused = mine.len() - pending.len();
        let total: u64 = mine
            .iter()
            .map(|&c| chunk_range(config, c).count() as u64)
            .sum();
        let done_demos: u64 = mine
            .iter()
            .filter(|c| pending.binary_search(c).is_err())
            .map(|&c| chunk_range(config, c).count() as u64)
            .sum();

        let bar = if config.progress {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:40}] {pos}/{len} demos ({per_sec}, {eta} left)",
                )
                .expect("a valid template")
                .progress_chars("=> "),
            );
            bar
        } else {
            ProgressBar::hidden()
        };
        bar.set_position(done_demos);

        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let failure: Mutex<Option<DemoError>> = Mutex::new(None);
        let jobs = config.jobs.clamp(1, pending.len().max(1));
        std::thread::scope(|scope| {
            for _ in 0..jobs {
                scope.spawn(|| loop {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&c) = pending.get(n) else { return };
                    if let Err(e) = solve_chunk(config, system, detector, chunk_dir, c, &bar, &stop)
                    {
                        stop.store(true, Ordering::Relaxed);
                        let mut slot = failure.lock().unwrap_or_else(|p| p.into_inner());
                        slot.get_or_insert(e);
                        return;
                    }
                });
            }
        });
        bar.finish_and_clear();
        if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        Ok((reused, pending.len()))
    }

    /// Merges every chunk into `demos.jsonl` and `solve_times.jsonl`.
    fn merge(
        &self,
        config: &DemoConfig,
        reused: usize,
        solved: usize,
    ) -> Result<DemoSummary, DemoError> {
        let (infeasible, time_limited) = merge(config, &self.chunk_dir, self.chunks)?;
        Ok(DemoSummary {
            samples: config.samples,
            chunks: self.chunks,
            chunks_reused: reused,
            chunks_solved: solved,
            infeasible,
            time_limited,
            demos_path: config.out.join("demos.jsonl"),
            times_path: config.out.join("solve_times.jsonl"),
        })
    }
}

fn check_config(c: &DemoConfig) -> Result<(), DemoError> {
    let bad = |what, value: String, reason| {
        Err(DemoError::BadParam {
            what,
            value,
            reason,
        })
    };
    if c.samples == 0 {
        return bad("samples", "0".into(), "must be at least 1");
    }
    if c.chunk_size == 0 {
        return bad("chunk_size", "0".into(), "must be at least 1");
    }
    if !(c.rem_max_ms.is_finite() && c.rem_max_ms >= 0.0) {
        return bad(
            "rem_max_ms",
            c.rem_max_ms.to_string(),
            "must be finite and >= 0",
        );
    }
    if !(c.frames_per_epoch.is_finite() && c.frames_per_epoch > 0.0) {
        return bad(
            "frames_per_epoch",
            c.frames_per_epoch.to_string(),
            "must be finite and > 0",
        );
    }
    if !(c.time_limit_s.is_finite() && c.time_limit_s > 0.0) {
        return bad(
            "time_limit_s",
            c.time_limit_s.to_string(),
            "must be finite and > 0",
        );
    }
    Ok(())
}

fn manifest(config: &DemoConfig, system: &System, detector: Detector) -> Manifest {
    let classifiers = system.request_models().count() as u32;
    let grid = (config.max_objects as u64 + 1).checked_pow(classifiers);
    let mode = match grid {
        Some(g) if g <= config.samples => "grid",
        _ => "sampled",
    };
    Manifest {
        format: FORMAT.into(),
        system_name: system.name.clone(),
        system_fnv1a64: format!("{:016x}", fnv1a64(config.system_toml.as_bytes())),
        seed: config.seed,
        max_objects: config.max_objects,
        samples: config.samples,
        rem_max_ms: config.rem_max_ms,
        idle_probability: IDLE_PROBABILITY,
        resident_probability: RESIDENT_PROBABILITY,
        frames_per_epoch: config.frames_per_epoch,
        chunk_size: config.chunk_size,
        time_limit_s: config.time_limit_s,
        models: system.models.iter().map(|m| m.name.clone()).collect(),
        processors: system.processors.iter().map(|p| p.name.clone()).collect(),
        max_batch: system.max_batch,
        request_models: system.request_models().map(|m| m.0).collect(),
        detector: DetectorInfo {
            model: first_root(system).0,
            proc: detector.proc.0,
            exec_ms: detector.exec_ms,
        },
        scene_grid: grid,
        scene_mode: mode.into(),
    }
}

fn compare_manifest(dir: &Path, found: &Manifest, asked: &Manifest) -> Result<(), DemoError> {
    macro_rules! same {
        ($($field:ident),* $(,)?) => {$(
            if found.$field != asked.$field {
                return Err(DemoError::ManifestMismatch {
                    dir: dir.to_path_buf(),
                    field: stringify!($field).into(),
                    found: json(&found.$field),
                    asked: json(&asked.$field),
                });
            }
        )*};
    }
    same!(
        format,
        system_name,
        system_fnv1a64,
        seed,
        max_objects,
        samples,
        rem_max_ms,
        idle_probability,
        resident_probability,
        frames_per_epoch,
        chunk_size,
        time_limit_s,
        models,
        processors,
        max_batch,
        request_models,
        detector,
        scene_grid,
        scene_mode,
    );
    Ok(())
}

/// Any serialisable value as compact JSON, for error messages.
fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn solve_chunk(
    config: &DemoConfig,
    system: &System,
    detector: Detector,
    dir: &Path,
    c: usize,
    bar: &ProgressBar,
    stop: &AtomicBool,
) -> Result<(), DemoError> {
    let options = OracleOptions {
        time_limit_s: config.time_limit_s,
        ..OracleOptions::default()
    };
    let mut demos = String::new();
    let mut times = String::new();
    for index in chunk_range(config, c) {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let (scene, rem, a_old) = instance(
            system,
            detector,
            config.seed,
            index,
            config.max_objects,
            config.samples,
            config.rem_max_ms,
        );
        let input = PlanInput {
            scene: &scene,
            rem_ms: &rem,
            residency: &a_old,
            frames_per_epoch: config.frames_per_epoch,
        };
        let started = std::time::Instant::now();
        let demo = label(system, index, &input, detector, &options)
            .map_err(|source| DemoError::Oracle { index, source })?;
        let solve_ms = started.elapsed().as_secs_f64() * 1000.0;
        demos.push_str(&serde_json::to_string(&demo).expect("a demo serialises"));
        demos.push('\n');
        times.push_str(
            &serde_json::to_string(&SolveTime { index, solve_ms }).expect("a time serialises"),
        );
        times.push('\n');
        bar.inc(1);
    }
    // Times first: the demos file's presence marks the chunk finished.
    write_atomic(&times_path(dir, c), times.as_bytes())?;
    write_atomic(&chunk_path(dir, c), demos.as_bytes())?;
    Ok(())
}
