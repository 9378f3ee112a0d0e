//! `[pipeline]`: the processors (with their engines), the models (files,
//! graph, pre- and post-processing), the profile the scheduler plans with,
//! and the scheduler's knobs. Together with the profile file it yields the
//! policy crate's `System`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use camdnn_policy::spec::{ModelSpec, ProcessorSpec, SystemSpec};
use camdnn_policy::System;
use serde::Deserialize;

mod model;
mod output;
mod processor;
mod track;

pub use model::{CropMode, InputSpec, ModelEntry, PlacementSpec, Resize};
pub use output::{FaceFromPose, OutputSpec};
pub use processor::{ProcessorEntry, ThrottleDrill};

/// `[pipeline]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// System file whose `[profile]` gives t_e / t_l for these processors and
    /// models (as written by `camdnnd profile`); a missing pair = unsupported.
    pub profile: PathBuf,
    /// n_b: the largest batch the scheduler forms.
    #[serde(default = "d_max_batch")]
    pub max_batch: usize,
    /// Sync-timer WaitTime, ms.
    #[serde(default = "d_wait")]
    pub wait_ms: f64,
    /// Global step interval, ms: the longest time between two global
    /// steps, counted from the last one, timer or trigger (0: no timer;
    /// `policy::stepper`).
    #[serde(default = "d_epoch")]
    pub epoch_ms: f64,
    /// A dropped frame (its deadline passed, or the server superseded it or
    /// was overloaded) brings the global step forward when none has run yet
    /// or the last one ran at least this long ago, ms (0: the epoch timer alone;
    /// `policy::stepper`).
    #[serde(default = "d_drop_step_gap")]
    pub drop_step_gap_ms: f64,
    /// Adapt while running: every finished batch refines the live
    /// estimates the scheduler plans with, and a lasting change of a
    /// processor's speed or of the scene mix runs the global step at once
    /// (`policy::adapt`).
    #[serde(default)]
    pub adapt: bool,
    /// With `adapt`: where the live estimates are written as a profile file
    /// (the format `camdnnd profile` writes) when the pipeline stops, at
    /// shutdown and for the old pipeline on a SIGHUP reload.
    #[serde(default)]
    pub adapt_profile_out: Option<PathBuf>,
    /// Frames processed at once; more wait at the server (newest wins).
    #[serde(default = "d_in_flight")]
    pub max_in_flight: usize,
    /// Threads preparing frames and crops.
    #[serde(default = "d_prep")]
    pub prep_threads: usize,
    /// Most objects one frame may bring (its upstream boxes, or what its detector found):
    /// the highest scores are kept before any crop is cut, the rest are answered as
    /// `objects_dropped` in the frame's `Result`. Bounds a frame's crops and memory
    /// (`docs/operations.md`, "Limits").
    #[serde(default = "d_max_objects")]
    pub max_objects: usize,
    /// Late binding: the most queued work, ms, a processor may have for the
    /// scheduler to place another batch on it. A batch whose chosen host is
    /// further behind waits in the scheduler and is placed when some host
    /// catches up, with what is known then (absent: place every batch at
    /// once, as the paper's dispatcher does).
    #[serde(default)]
    pub dispatch_ahead_ms: Option<f64>,
    /// Deadline admission (`policy::admission`): a frame with a deadline
    /// that cannot be answered by it, even with every t_e at the live
    /// estimates' mean + this many standard deviations (0: the mean;
    /// without `adapt` there is no spread), is answered `Dropped` at once
    /// instead of taking processor time (absent: off).
    #[serde(default)]
    pub deadline_admission: Option<f64>,
    /// Real-time dropping (`policy::admission`, the simulator's default),
    /// ms: a frame whose detector no processor could start within this long
    /// (queued and held work, and its load) is answered `Dropped`
    /// (`overloaded`) before it costs any work; one with objects is, after
    /// its detector, when some processor has more queued work than what its
    /// age leaves of this. The frames already in the pipeline keep their
    /// deadlines; a frame with no objects is always answered. One camera
    /// frame period is the simulator's setting (absent: off).
    #[serde(default)]
    pub drop_behind_ms: Option<f64>,
    /// Real-time dropping held to each camera's own period, estimated from
    /// its frames (`policy::frame_period`: their capture times, else their
    /// arrival, per sequence number): a frame is dropped as with
    /// `drop_behind_ms` at this many of its stream's frame periods, so the
    /// operator need not know the cameras' rates. 1 is the simulator's
    /// setting. A stream's first frame has no period yet and is not dropped.
    /// Not with `drop_behind_ms` (absent: off).
    #[serde(default)]
    pub drop_behind_periods: Option<f64>,
    /// Optional learned global policy (ONNX + sidecar from `ilmodel export`).
    #[serde(default)]
    pub policy: Option<PolicyFiles>,
    /// The scheduler that places batches: `camdnn` (local dispatcher plus the
    /// global step, with `policy` when given, else the greedy planner), or a
    /// baseline of the simulator by name (`camdnn-local`, `heft`, `cq`, ...)
    /// for side-by-side comparisons on the real pipeline.
    #[serde(default = "d_scheduler")]
    pub scheduler: String,
    /// Limits on engine calls and on a pipeline that makes no progress
    /// (`[pipeline.stall]`, `pipeline::stall`).
    #[serde(default)]
    pub stall: super::stall::StallConfig,
    /// Following each stream's objects across frames, and the detector interval
    /// (`config/track.rs`; absent: off).
    #[serde(default)]
    pub track: Option<camdnn_vision::track::TrackerConfig>,
    /// The processing units.
    #[serde(rename = "processor")]
    pub processors: Vec<ProcessorEntry>,
    /// The models, detectors first or not: the graph comes from `parent`.
    #[serde(rename = "model")]
    pub models: Vec<ModelEntry>,
    /// Folder the relative paths above are resolved against (the config
    /// file's own folder); set when the file is loaded, not read from it.
    #[serde(skip)]
    pub base_dir: PathBuf,
}

fn d_scheduler() -> String {
    "camdnn".into()
}
fn d_max_batch() -> usize {
    4
}
fn d_wait() -> f64 {
    5.0
}
fn d_epoch() -> f64 {
    5000.0
}
fn d_drop_step_gap() -> f64 {
    camdnn_policy::stepper::DROP_STEP_GAP_MS
}
fn d_in_flight() -> usize {
    2
}
fn d_prep() -> usize {
    1
}
fn d_max_objects() -> usize {
    64
}

/// Files of a learned global policy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFiles {
    /// The ONNX network.
    pub onnx: PathBuf,
    /// Its sidecar (feature layout, decoding).
    pub sidecar: PathBuf,
}

impl PipelineConfig {
    /// A path from the config, resolved against [`PipelineConfig::base_dir`].
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }

    /// The scheduler's view: processors and graph from this config, timings
    /// from the profile file (resolved with `resolve`).
    pub fn system(&self, resolve: impl Fn(&Path) -> PathBuf) -> anyhow::Result<System> {
        let path = resolve(&self.profile);
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading profile {} (write one with `camdnnd profile`)",
                path.display()
            )
        })?;
        let measured = SystemSpec::from_toml(&text)
            .with_context(|| format!("in profile {}", path.display()))?;
        let spec = self.system_spec(measured.name, measured.profile);
        System::from_spec(&spec)
            .with_context(|| format!("pipeline config with the profile {}", path.display()))
    }

    /// The system spec for these processors and models with a given profile
    /// table; `name` is the board's (a learned policy is checked against it).
    pub fn system_spec(
        &self,
        name: String,
        profile: camdnn_policy::spec::ProfileSpec,
    ) -> SystemSpec {
        SystemSpec {
            name,
            max_batch: self.max_batch,
            processors: self
                .processors
                .iter()
                .map(|p| ProcessorSpec {
                    utilisation_cap: p.utilisation_cap,
                    name: p.name.clone(),
                    kind: p.kind,
                    max_resident: p.max_resident,
                    memory_budget_mb: p.memory_budget_mb,
                })
                .collect(),
            models: self
                .models
                .iter()
                .map(|m| ModelSpec {
                    name: m.name.clone(),
                    parent: m.parent.clone(),
                    classes: m.classes.clone(),
                })
                .collect(),
            profile,
        }
    }

    /// Cross-checks that the graph and the output kinds agree.
    pub fn check(&self) -> anyhow::Result<()> {
        self.stall.validate()?;
        if self.processors.is_empty() {
            bail!("[pipeline] needs at least one [[pipeline.processor]]");
        }
        if self.models.is_empty() {
            bail!("[pipeline] needs at least one [[pipeline.model]]");
        }
        for m in &self.models {
            match (&m.parent, m.output.is_detector()) {
                (None, false) => bail!(
                    "model {:?} has no parent, so it is a detector, but its output kind is not one (yolov8, centernet, ssd, dbnet, mtcnn_pnet, upstream)",
                    m.name
                ),
                (Some(_), true) => bail!("model {:?} has a detector output but a parent; detectors are graph roots", m.name),
                _ => {}
            }
            if !m.output.is_upstream() && (m.input.width == 0 || m.input.height == 0) {
                bail!(
                    "model {:?}: input width and height must be positive",
                    m.name
                );
            }
            match (&m.path, m.output.is_upstream()) {
                (Some(p), true) => bail!(
                    "model {:?} is an upstream detector (never loaded) but names the file {}; remove `path`",
                    m.name,
                    p.display()
                ),
                (None, false) => bail!("model {:?} needs `path` (its model file)", m.name),
                _ => {}
            }
            let pnet = matches!(m.output, OutputSpec::MtcnnPnet { .. });
            match (&m.input.pyramid, pnet) {
                (None, true) => bail!(
                    "model {:?}: output kind mtcnn_pnet needs input.pyramid (P-Net runs on an image pyramid)",
                    m.name
                ),
                (Some(_), false) => bail!(
                    "model {:?}: input.pyramid is only supported with output kind mtcnn_pnet",
                    m.name
                ),
                _ => {}
            }
            if matches!(m.output, OutputSpec::Movenet { .. }) && m.input.crop != CropMode::Fit {
                bail!(
                    "model {:?}: output kind movenet needs input.crop = \"fit\" (its keypoints are read back through the fit crop)",
                    m.name
                );
            }
            if let OutputSpec::Movenet { face: Some(face) } = &m.output {
                face.rule(&m.name)?;
            }
            if let OutputSpec::Ctc {
                dict_file,
                dict_metadata,
                ..
            } = &m.output
            {
                if dict_file.is_some() == dict_metadata.is_some() {
                    bail!(
                        "model {:?}: output kind ctc needs exactly one of dict_file and dict_metadata",
                        m.name
                    );
                }
            }
        }
        if !(self.wait_ms.is_finite() && self.wait_ms >= 0.0) {
            bail!("pipeline.wait_ms = {}: must be >= 0", self.wait_ms);
        }
        if !(self.drop_step_gap_ms.is_finite() && self.drop_step_gap_ms >= 0.0) {
            bail!(
                "pipeline.drop_step_gap_ms = {}: must be >= 0 (0: the epoch timer alone)",
                self.drop_step_gap_ms
            );
        }
        for q in &self.processors {
            if let Some(drill) = &q.throttle_drill {
                drill
                    .throttle()
                    .with_context(|| format!("pipeline.processor {:?}", q.name))?;
            }
        }
        if let Some(z) = self.deadline_admission {
            if !(z.is_finite() && z >= 0.0) {
                bail!("pipeline.deadline_admission = {z}: must be a finite number of standard deviations >= 0 (or left out)");
            }
        }
        if let Some(b) = self.drop_behind_ms {
            if !(b.is_finite() && b >= 0.0) {
                bail!("pipeline.drop_behind_ms = {b}: must be a finite number of ms >= 0 (or left out)");
            }
        }
        if let Some(n) = self.drop_behind_periods {
            if !(n.is_finite() && n > 0.0) {
                bail!("pipeline.drop_behind_periods = {n}: must be a finite number of frame periods > 0 (or left out)");
            }
            if self.drop_behind_ms.is_some() {
                bail!("pipeline.drop_behind_periods and pipeline.drop_behind_ms are both set: set one (a fixed limit in ms, or one held to each camera's period)");
            }
        }
        if let Some(h) = self.dispatch_ahead_ms {
            if !(h.is_finite() && h >= 0.0) {
                bail!("pipeline.dispatch_ahead_ms = {h}: must be >= 0 (or left out)");
            }
        }
        track::check(self)?;
        if self.max_in_flight == 0 || self.prep_threads == 0 || self.max_objects == 0 {
            bail!(
                "pipeline.max_in_flight, pipeline.prep_threads and pipeline.max_objects must be at least 1"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
