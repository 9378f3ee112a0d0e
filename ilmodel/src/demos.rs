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

/// One of `count` index-addressed parts of a run: the chunks `c` with
/// `c mod count == index`. Interleaved rather than contiguous, so every
/// shard gets a like share of the grid's easy and hard scenes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// 0-based index of this shard.
    pub index: u64,
    /// Number of shards.
    pub count: u64,
}

/// Environment variables [`Shard::parse`] reads an index from when named:
/// a Kubernetes Indexed Job's and a Slurm job array's.
pub const SHARD_INDEX_VARS: [&str; 2] = ["JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID"];

impl Shard {
    /// Parses `I/N`, where `I` is a number or one of [`SHARD_INDEX_VARS`],
    /// read through `env` (for `SLURM_ARRAY_TASK_ID`, minus
    /// `SLURM_ARRAY_TASK_MIN` when set, so `--array=1-8` works as well as
    /// `--array=0-7`).
    pub fn parse(spec: &str, env: impl Fn(&str) -> Option<String>) -> Result<Shard, DemoError> {
        let bad = |reason: String| DemoError::BadShard {
            spec: spec.to_owned(),
            reason,
        };
        let (i, n) = spec
            .split_once('/')
            .ok_or_else(|| bad("expected I/N, e.g. 3/8 or JOB_COMPLETION_INDEX/8".into()))?;
        let count: u64 = n
            .trim()
            .parse()
            .map_err(|_| bad(format!("N = {n:?} is not a whole number")))?;
        if count == 0 {
            return Err(bad("N must be at least 1".into()));
        }
        let number = |what: &str, v: &str| -> Result<u64, DemoError> {
            v.trim()
                .parse()
                .map_err(|_| bad(format!("{what} = {v:?} is not a whole number")))
        };
        let i = i.trim();
        let index = if SHARD_INDEX_VARS.contains(&i) {
            let v =
                env(i).ok_or_else(|| bad(format!("the environment variable {i} is not set")))?;
            let mut index = number(i, &v)?;
            if i == "SLURM_ARRAY_TASK_ID" {
                if let Some(min) = env("SLURM_ARRAY_TASK_MIN") {
                    let min = number("SLURM_ARRAY_TASK_MIN", &min)?;
                    index = index
                        .checked_sub(min)
                        .ok_or_else(|| bad(format!("{i} = {v} is below SLURM_ARRAY_TASK_MIN")))?;
                }
            }
            index
        } else if i.chars().all(|c| c.is_ascii_digit()) && !i.is_empty() {
            number("I", i)?
        } else {
            return Err(bad(format!(
                "I = {i:?} is neither a number nor one of {SHARD_INDEX_VARS:?}"
            )));
        };
        if index >= count {
            return Err(bad(format!("index {index} is not below N = {count}")));
        }
        Ok(Shard { index, count })
    }

    /// Whether chunk `c` belongs to this shard.
    pub fn owns(&self, c: usize) -> bool {
        c as u64 % self.count == self.index
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
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

/// The random instance of demonstration `index`: (scene, rem_ms, a_old
/// flattened `i * n_p + j`). Depends on the seed, the index and the
/// parameters only.
pub fn instance(
    system: &System,
    detector: Detector,
    seed: u64,
    index: u64,
    max_objects: u32,
    samples: u64,
    rem_max_ms: f64,
) -> (Vec<u32>, Vec<f64>, Vec<bool>) {
    let (nm, np) = (system.num_models(), system.num_processors());
    let mut rng = SplitMix64::for_item(seed, index);
    let classifiers: Vec<ModelId> = system.request_models().collect();
    let base = max_objects as u64 + 1;
    let grid = base.checked_pow(classifiers.len() as u32);
    let mut scene = vec![0u32; nm];
    match grid {
        Some(g) if g <= samples => {
            // Nested-loop order: the first classifier varies slowest.
            let mut n = index % g;
            for m in classifiers.iter().rev() {
                scene[m.0] = (n % base) as u32;
                n /= base;
            }
        }
        _ => {
            for m in &classifiers {
                scene[m.0] = rng.below(base) as u32;
            }
        }
    }
    let rem: Vec<f64> = (0..np)
        .map(|_| {
            if rng.chance(IDLE_PROBABILITY) {
                0.0
            } else {
                (rng.next_f64() * rem_max_ms * 1000.0).floor() / 1000.0
            }
        })
        .collect();
    let root = first_root(system);
    let mut a_old = vec![false; nm * np];
    a_old[root.0 * np + detector.proc.0] = true;
    for j in system.proc_ids() {
        let p = &system.processors[j.0];
        let mut count = usize::from(j == detector.proc);
        let mut mb = if j == detector.proc {
            system.size_mb(root, j)
        } else {
            0.0
        };
        let mut candidates: Vec<ModelId> = system
            .model_ids()
            .filter(|&i| i != root && system.supports(i, j))
            .collect();
        rng.shuffle(&mut candidates);
        for i in candidates {
            let wanted = rng.chance(RESIDENT_PROBABILITY);
            let size = system.size_mb(i, j);
            let fits =
                count < p.max_resident && p.memory_budget_mb.is_none_or(|b| mb + size <= b + 1e-9);
            if wanted && fits {
                a_old[i.0 * np + j.0] = true;
                count += 1;
                mb += size;
            }
        }
    }
    (scene, rem, a_old)
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

/// The demonstration of one input: the ILP's optimal (or time-limited) plan,
/// or `Infeasible`. Any other oracle error is returned.
pub fn label(
    system: &System,
    index: u64,
    input: &PlanInput,
    detector: Detector,
    options: &OracleOptions,
) -> Result<Demo, OracleError> {
    let (np, nb) = (system.num_processors(), system.max_batch);
    let matrix = |v: &[bool]| -> Vec<Vec<bool>> { v.chunks(np).map(|r| r.to_vec()).collect() };
    let mut demo = Demo {
        index,
        scene: input.scene.to_vec(),
        rem_ms: input.rem_ms.to_vec(),
        a_old: matrix(input.residency),
        frames_per_epoch: input.frames_per_epoch,
        status: DemoStatus::Infeasible,
        t_ms: None,
        resident: None,
        batches: None,
    };
    match solve(system, input, detector, options) {
        Ok(s) => {
            demo.status = match s.status {
                SolveStatus::Optimal => DemoStatus::Optimal,
                SolveStatus::TimeLimit => DemoStatus::TimeLimit,
            };
            demo.t_ms = Some(s.makespan_ms);
            demo.resident = Some(matrix(s.plan.residency()));
            demo.batches = Some(
                system
                    .model_ids()
                    .map(|i| {
                        system
                            .proc_ids()
                            .map(|j| (1..=nb).map(|k| s.plan.batches(i, j, k)).collect())
                            .collect()
                    })
                    .collect(),
            );
        }
        Err(OracleError::Infeasible(_)) => {}
        Err(e) => return Err(e),
    }
    Ok(demo)
}

/// Concatenates the chunks in order, checking every line; returns the
/// counts of infeasible and time-limited demonstrations.
fn merge(config: &DemoConfig, dir: &Path, chunks: usize) -> Result<(u64, u64), DemoError> {
    let mut demos = Vec::new();
    let mut times = Vec::new();
    let (mut infeasible, mut time_limited) = (0, 0);
    for c in 0..chunks {
        let expected: Vec<u64> = chunk_range(config, c).collect();
        let path = chunk_path(dir, c);
        let lines = read_lines(&path)?;
        check_count(&path, lines.len(), expected.len())?;
        for (line, &want) in lines.iter().zip(&expected) {
            let d: Demo = serde_json::from_str(line).map_err(|e| corrupt(&path, e.to_string()))?;
            if d.index != want {
                return Err(corrupt(
                    &path,
                    format!("index {} where {want} was expected", d.index),
                ));
            }
            match d.status {
                DemoStatus::Infeasible => infeasible += 1,
                DemoStatus::TimeLimit => time_limited += 1,
                DemoStatus::Optimal => {}
            }
            demos.extend_from_slice(line.as_bytes());
            demos.push(b'\n');
        }
        let path = times_path(dir, c);
        let lines = read_lines(&path)?;
        check_count(&path, lines.len(), expected.len())?;
        for line in lines {
            let _: SolveTime =
                serde_json::from_str(&line).map_err(|e| corrupt(&path, e.to_string()))?;
            times.extend_from_slice(line.as_bytes());
            times.push(b'\n');
        }
    }
    write_atomic(&config.out.join("demos.jsonl"), &demos)?;
    write_atomic(&config.out.join("solve_times.jsonl"), &times)?;
    Ok((infeasible, time_limited))
}

fn check_count(path: &Path, got: usize, want: usize) -> Result<(), DemoError> {
    if got == want {
        Ok(())
    } else {
        Err(corrupt(
            path,
            format!("{got} lines where {want} were expected; delete it to solve the chunk again"),
        ))
    }
}

fn read_lines(path: &Path) -> Result<Vec<String>, DemoError> {
    let file = fs::File::open(path).map_err(|e| io(path, e))?;
    BufReader::new(file)
        .lines()
        .collect::<Result<_, _>>()
        .map_err(|e| io(path, e))
}

fn chunk_range(config: &DemoConfig, c: usize) -> std::ops::Range<u64> {
    let start = c as u64 * config.chunk_size;
    start..(start + config.chunk_size).min(config.samples)
}

/// The file of chunk `c`'s demonstrations.
pub fn chunk_path(dir: &Path, c: usize) -> PathBuf {
    dir.join(format!("chunk-{c:06}.jsonl"))
}

fn times_path(dir: &Path, c: usize) -> PathBuf {
    dir.join(format!("chunk-{c:06}.times.jsonl"))
}

/// Writes `bytes` to a temporary file beside `path` and renames it. The
/// temporary name is this writer's own (clock, process id and a counter:
/// pods on different machines may share a process id), so shards writing
/// the same manifest into a shared folder never clash.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), DemoError> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let tmp = path.with_extension(format!("tmp-{nanos}-{}-{n}", std::process::id()));
    let mut f = fs::File::create(&tmp).map_err(|e| io(&tmp, e))?;
    f.write_all(bytes).map_err(|e| io(&tmp, e))?;
    f.sync_all().map_err(|e| io(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| io(path, e))
}

fn io(path: &Path, source: std::io::Error) -> DemoError {
    DemoError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn corrupt(path: &Path, reason: String) -> DemoError {
    DemoError::Corrupt {
        path: path.to_path_buf(),
        reason,
    }
}

/// FNV-1a, 64 bits: a stable fingerprint of the system file.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
