//! From a config to a running pipeline: engines and their workers, the
//! scheduler's system, the start-up residency (loaded and warmed up before
//! the pipeline reports ready).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use camdnn_engine::{
    DType, Dim, Engine, EngineKind, OrtEngine, SimEngine, SimModelSpec, Tensor, TensorInfo,
    TractEngine, Worker,
};
use camdnn_policy::admission::FrameAdmission;
use camdnn_policy::mlp::learned::Learned;
use camdnn_policy::scheduler::Scheduler;
use camdnn_policy::schedulers::{by_name, Camdnn, GreedyPlanner};
use camdnn_policy::{Cluster, System};
use camdnn_vision::Layout;

use super::clock::Clock;
use super::config::{ModelEntry, PipelineConfig, ProcessorEntry};
use super::models::ModelRuntime;
use super::runtime::{self, Parts, Pipeline};
use camdnn_policy::flow::{Behind, FlowConfig};

/// A started pipeline and the workers it owns (kept alive with it).
pub struct Built {
    /// The pipeline.
    pub pipeline: Pipeline,
    /// The worker threads (shut down when dropped).
    pub workers: Vec<Worker>,
    /// Measured start-up load time per (model, processor) loaded.
    pub loads: Vec<(String, String, Duration)>,
}

impl super::FrameProcessor for Built {
    fn submit(
        &self,
        frame: camdnn_protocol::Frame,
        received: std::time::Instant,
        deadline: Option<std::time::Instant>,
        reply: tokio::sync::oneshot::Sender<super::Outcome>,
    ) {
        self.pipeline.submit(frame, received, deadline, reply)
    }

    fn submit_from(
        &self,
        conn: u64,
        frame: camdnn_protocol::Frame,
        received: std::time::Instant,
        deadline: Option<std::time::Instant>,
        reply: tokio::sync::oneshot::Sender<super::Outcome>,
    ) {
        self.pipeline
            .submit_from(conn, frame, received, deadline, reply)
    }

    fn connection_closed(&self, conn: u64) {
        self.pipeline.connection_closed(conn)
    }

    fn max_in_flight(&self) -> usize {
        self.pipeline.max_in_flight()
    }

    fn is_ready(&self) -> bool {
        self.pipeline.is_ready()
    }

    fn not_ready_reason(&self) -> Option<String> {
        self.pipeline.not_ready_reason()
    }

    fn is_alive(&self) -> bool {
        self.pipeline.is_alive()
    }

    fn liveness(&self) -> Result<(), String> {
        self.pipeline.liveness()
    }

    fn expected_work_ms(&self, frame: &camdnn_protocol::Frame) -> f64 {
        self.pipeline.expected_work_ms(frame)
    }

    fn frame_dropped(&self) {
        self.pipeline.frame_dropped()
    }
}

/// Dropping a pipeline never blocks the dropping thread (often an async
/// task: the last reference to a pipeline a reload replaced goes with the
/// last frame it answers): the scheduler thread is told to stop, and joining
/// it and the workers, which unload every model, happens on a dedicated
/// `camdnn-teardown` thread.
impl Drop for Built {
    fn drop(&mut self) {
        let scheduler = self.pipeline.stop();
        let workers = std::mem::take(&mut self.workers);
        let teardown = move || {
            if let Some(t) = scheduler {
                let _ = t.join();
            }
            drop(workers);
            crate::allocator::release_freed_memory();
        };
        if let Err(e) = std::thread::Builder::new()
            .name("camdnn-teardown".into())
            .spawn(teardown)
        {
            // The closure (and with it the workers) was dropped here already.
            tracing::warn!("no teardown thread ({e}); the old pipeline was torn down in place");
        }
    }
}

/// Validates the pipeline `p` without starting anything: the
/// system (profile included), every model's pre/post-processing files, and
/// every engine's availability. Returns the system.
pub fn check(p: &PipelineConfig) -> anyhow::Result<System> {
    p.check()?;
    let system = p.system(|f| p.resolve(f))?;
    if let Some(warning) = p.stall.progress_warning(&system) {
        tracing::warn!("{warning}");
    }
    scheduler(p, &system)?;
    for m in &p.models {
        ModelRuntime::new(m, &|f| p.resolve(f))?;
        if let (Some(path), true) = (
            &m.path,
            p.processors.iter().any(|x| x.engine != EngineKind::Sim),
        ) {
            let path = p.resolve(path);
            if !path.exists() {
                bail!(
                    "model {:?}: file {} does not exist (run scripts/setup.sh to fetch models)",
                    m.name,
                    path.display()
                );
            }
        }
    }
    Ok(system)
}

/// Starts the pipeline described by `p`.
pub fn start(p: &PipelineConfig) -> anyhow::Result<Built> {
    start_with(p, |s| s)
}

/// The pipeline's admission as the simulator names it, for the global
/// step's replays ([`Scheduler::set_admission`]): real-time dropping at a
/// fixed limit, or at one frame period for `drop_behind_periods` (the
/// replay's period; N other than 1 is replayed as 1), else
/// `max_in_flight` with newest-wins.
fn frame_admission(behind: Option<Behind>, max_in_flight: usize) -> FrameAdmission {
    match behind {
        Some(Behind::Ms(ms)) => FrameAdmission::Behind(Some(ms)),
        Some(Behind::Periods(_)) => FrameAdmission::Behind(None),
        None => FrameAdmission::InFlight(max_in_flight),
    }
}

/// The frame flow's knobs of a pipeline config (the simulator's
/// [`camdnn_policy::sim::SimConfig::flow_config`] maps onto the same).
pub fn flow_config(p: &PipelineConfig) -> FlowConfig {
    FlowConfig {
        epoch_ms: p.epoch_ms,
        drop_step_gap_ms: p.drop_step_gap_ms,
        late_steps: true,
        behind: match (p.drop_behind_ms, p.drop_behind_periods) {
            (Some(ms), _) => Some(Behind::Ms(ms)),
            (None, Some(n)) => Some(Behind::Periods(n)),
            (None, None) => None,
        },
        dispatch_ahead_ms: p.dispatch_ahead_ms,
        deadline_admission_z: p.deadline_admission,
        expire_at_deadline: true,
        adapt: p.adapt.then(camdnn_policy::adapt::AdaptConfig::default),
        log: false,
    }
}

/// Starts the pipeline described by `p`, its scheduler passed through
/// `wrap` first: a wrapper that records or logs the decisions the
/// scheduler thread asks for (the tests check when it runs the global step).
pub fn start_with(
    p: &PipelineConfig,
    wrap: impl FnOnce(Box<dyn Scheduler + Send>) -> Box<dyn Scheduler + Send>,
) -> anyhow::Result<Built> {
    let system = check(p)?;
    let models: Vec<ModelRuntime> = p
        .models
        .iter()
        .map(|m| ModelRuntime::new(m, &|f| p.resolve(f)))
        .collect::<anyhow::Result<_>>()?;
    let sources: Vec<_> = p
        .models
        .iter()
        .map(|m| m.source(|f| p.resolve(f), p.max_batch))
        .collect();
    let mut workers = Vec::new();
    for (j, proc) in p.processors.iter().enumerate() {
        let mut engine: Arc<dyn Engine> = match proc.engine {
            EngineKind::Sim => Arc::new(sim_engine(&system, p, j)?),
            _ => real_engine(proc)?,
        };
        if let Some(drill) = &proc.throttle_drill {
            // Valid: `check` above refused a bad drill.
            let t = drill.throttle()?;
            tracing::warn!(processor = %proc.name, factor = t.factor, from = ?t.from, until = ?t.until, "throttling drill: this processor's batches will be slowed");
            engine = Arc::new(camdnn_engine::ThrottledEngine::new(engine, t)?);
        }
        let w = Worker::spawn_supervised(proc.engine_config(), engine, p.stall.supervision())
            .with_context(|| format!("starting processor {:?}", proc.name))?;
        workers.push(w);
    }
    let handles: Vec<_> = workers.iter().map(Worker::handle).collect();

    // Start-up residency: the scheduler's initial plan (for camdnn, its global
    // step for one request of each model: every model on its fastest units,
    // free slots filled), loaded and warmed up (one batch-1 run) before we
    // report ready. An upstream detector holds its slot in the scheduler's
    // residency but is never loaded.
    let flow = flow_config(p);
    let mut scheduler = wrap(scheduler(p, &system)?);
    log_scheduler(p);
    scheduler.set_admission(frame_admission(flow.behind, p.max_in_flight));
    let plan = scheduler.initial_plan(&system);
    let mut cluster = Cluster::new(&system);
    cluster.preload(&system, &plan);
    let mut loads = Vec::new();
    for i in system.model_ids() {
        for j in system.proc_ids() {
            if !cluster.is_resident(i, j) || p.models[i.0].output.is_upstream() {
                continue;
            }
            let (mname, pname) = (&system.models[i.0].name, &system.processors[j.0].name);
            let report = handles[j.0]
                .load_blocking(sources[i.0].clone())
                .with_context(|| format!("loading {mname} on {pname}"))?;
            let took = report.finished.duration_since(report.started);
            metrics::counter!("camdnn_model_loads_total", "model" => mname.clone(), "processor" => pname.clone()).increment(1);
            metrics::histogram!("camdnn_model_load_seconds", "model" => mname.clone(), "processor" => pname.clone())
                .record(took.as_secs_f64());
            loads.push((mname.clone(), pname.clone(), took));
            let warm = warm_up_input(&p.models[i.0]);
            handles[j.0]
                .run_blocking(mname, vec![warm])
                .with_context(|| format!("warming up {mname} on {pname}"))?;
        }
    }
    for j in system.proc_ids() {
        let pname = system.processors[j.0].name.clone();
        metrics::gauge!("camdnn_resident_models", "processor" => pname)
            .set(cluster.resident_count(j) as f64);
    }
    let units = handles
        .into_iter()
        .map(|h| Box::new(h) as Box<dyn super::units::Unit>)
        .collect();
    let pipeline = runtime::start(Parts {
        system,
        models,
        sources,
        units,
        workers: workers.iter().map(Worker::handle).collect(),
        stall: p.stall.clone(),
        cluster,
        scheduler,
        flow,
        adapt_profile_out: p.adapt_profile_out.clone(),
        max_in_flight: p.max_in_flight,
        prep_threads: p.prep_threads,
        max_objects: p.max_objects,
        clock: Clock::wall(),
        track: p.track,
        reuse: p.models.iter().map(|m| m.reuse.clone()).collect(),
    })?;
    Ok(Built {
        pipeline,
        workers,
        loads,
    })
}

/// The scheduler `p` asks for, its learned policy (if any) loaded and
/// checked against `system` (also what `bench` simulates the pipeline with).
pub fn scheduler(p: &PipelineConfig, system: &System) -> anyhow::Result<Box<dyn Scheduler + Send>> {
    if p.scheduler != "camdnn" {
        if p.policy.is_some() {
            bail!(
                "pipeline.policy is set but pipeline.scheduler = {:?} does not use it (only \"camdnn\" does)",
                p.scheduler
            );
        }
        return by_name(system, &p.scheduler, p.wait_ms).ok_or_else(|| {
            anyhow::anyhow!(
                "pipeline.scheduler = {:?} is not a scheduler; use \"camdnn\" or one of {}",
                p.scheduler,
                camdnn_policy::schedulers::BASELINES.join(", ")
            )
        });
    }
    let Some(files) = &p.policy else {
        return Ok(Box::new(Camdnn::new(GreedyPlanner::default(), p.wait_ms)));
    };
    let onnx_path = p.resolve(&files.onnx);
    let sidecar_path = p.resolve(&files.sidecar);
    let onnx = std::fs::read(&onnx_path)
        .with_context(|| format!("pipeline.policy.onnx: cannot read {}", onnx_path.display()))?;
    let sidecar = std::fs::read_to_string(&sidecar_path).with_context(|| {
        format!(
            "pipeline.policy.sidecar: cannot read {}",
            sidecar_path.display()
        )
    })?;
    let policy = Learned::new(system, &onnx, &sidecar).with_context(|| {
        format!(
            "pipeline.policy: {} does not fit this pipeline's system",
            onnx_path.display()
        )
    })?;
    let drift = match &policy {
        Learned::Frame(frame) => frame.profile_drift(),
        Learned::Stream(_) => 1.0,
    };
    if drift > 1.0 {
        tracing::warn!(
            policy = %onnx_path.display(),
            drift,
            "the learned policy was trained on another measurement of this board (timings up to this factor apart); retrain it with scripts/train_policy.sh for this profile"
        );
    }
    Ok(Box::new(Camdnn::new(policy, p.wait_ms)))
}

/// Says which scheduler the pipeline runs and what its global step plans with.
fn log_scheduler(p: &PipelineConfig) {
    match (&p.policy, p.scheduler.as_str()) {
        (_, name) if name != "camdnn" => tracing::info!(
            scheduler = name,
            "scheduler: the baseline named by pipeline.scheduler (no camdnn global step)"
        ),
        (None, _) => tracing::info!(
            "scheduler: camdnn; its global step runs the greedy planner (no pipeline.policy)"
        ),
        (Some(files), _) => tracing::info!(
            policy = %p.resolve(&files.onnx).display(),
            "scheduler: camdnn; its global step runs the learned policy (pipeline.policy)"
        ),
    }
}

/// For tools that measure a new profile (`profile`, `bench --profile-now`),
/// where a policy trained on another one must not stop the measurement:
/// when `p`'s learned policy does not fit `system`, removes it from `p`
/// (the camdnn scheduler then plans with its greedy planner) and says why.
pub fn drop_unfit_policy(p: &mut PipelineConfig, system: &System) -> Option<String> {
    p.policy.as_ref()?;
    let why = scheduler(p, system).err()?;
    p.policy = None;
    Some(format!("{why:#}"))
}

/// A batch-1 input of the model's configured size (zeros).
fn warm_up_input(m: &ModelEntry) -> Tensor {
    Tensor::zeros("", DType::F32, input_shape(m, 1))
}

fn input_shape(m: &ModelEntry, batch: usize) -> Vec<usize> {
    let (w, h) = (m.input.width as usize, m.input.height as usize);
    match m.input.norm.layout {
        Layout::Nchw => vec![batch, 3, h, w],
        Layout::Nhwc => vec![batch, h, w, 3],
        Layout::Nwhc => vec![batch, w, h, 3],
    }
}

/// The sim engine for processor `j`: each supported model sleeps for its
/// profiled t_e / t_l and returns zeros of its configured `sim_outputs`.
fn sim_engine(system: &System, p: &PipelineConfig, j: usize) -> anyhow::Result<SimEngine> {
    let mut specs = HashMap::new();
    let pj = camdnn_policy::ProcId(j);
    for (i, m) in p.models.iter().enumerate() {
        let mi = camdnn_policy::ModelId(i);
        if !system.supports(mi, pj) || m.output.is_upstream() {
            continue;
        }
        if m.sim_outputs.is_empty() {
            bail!(
                "model {:?} runs on sim processor {:?} but has no sim_outputs",
                m.name,
                p.processors[j].name
            );
        }
        let shape = input_shape(m, 1);
        let inputs = vec![TensorInfo {
            name: "input".into(),
            dtype: DType::F32,
            shape: std::iter::once(Dim::Batch)
                .chain(shape[1..].iter().map(|&d| Dim::Fixed(d)))
                .collect(),
        }];
        let outputs = m
            .sim_outputs
            .iter()
            .map(|(name, dims)| TensorInfo {
                name: name.clone(),
                dtype: DType::F32,
                shape: std::iter::once(Dim::Batch)
                    .chain(dims.iter().map(|&d| Dim::Fixed(d)))
                    .collect(),
            })
            .collect();
        let ms = |t: f64| Duration::from_secs_f64(t / 1e3);
        specs.insert(
            m.name.clone(),
            SimModelSpec {
                inputs,
                outputs,
                load_time: ms(system.load_ms(mi, pj)),
                exec_time: (1..=system.max_batch_on(mi, pj))
                    .map(|k| ms(system.exec_ms(mi, pj, k)))
                    .collect(),
            },
        );
    }
    let mut engine = SimEngine::new(specs);
    for m in &p.models {
        if let Some(f) = &m.sim_faults {
            if f.processor
                .as_ref()
                .is_none_or(|n| *n == p.processors[j].name)
            {
                engine = engine.with_faults(m.name.clone(), f.clone());
            }
        }
    }
    Ok(engine)
}

/// The engine a processor entry names (the ONNX Runtime library is found as
/// `serve` finds it). The sim engine is refused: it has nothing to measure.
pub fn real_engine(proc: &ProcessorEntry) -> anyhow::Result<Arc<dyn Engine>> {
    Ok(match proc.engine {
        EngineKind::Tract => Arc::new(TractEngine::new()),
        EngineKind::Ort => Arc::new(OrtEngine::new(None).with_context(|| {
            format!(
                "processor {:?}: ONNX Runtime (set ORT_DYLIB_PATH or run scripts/setup.sh)",
                proc.name
            )
        })?),
        EngineKind::Sim => bail!(
            "processor {:?} uses the sim engine, which has no real timings to measure",
            proc.name
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use camdnn_policy::ProcId;

    /// The shipped street config (its committed learned policy) and its system.
    fn street() -> (PipelineConfig, System) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/camdnnd.toml");
        let p = crate::config::DaemonConfig::load(&path)
            .expect("the shipped config loads")
            .pipeline;
        let system = p.system(|f| p.resolve(f)).expect("its profile is valid");
        (p, system)
    }

    #[test]
    fn a_fitting_policy_is_kept_and_an_unfit_one_dropped_with_the_reason() {
        let (mut p, system) = street();
        assert!(p.policy.is_some(), "the shipped config has a policy");
        assert_eq!(drop_unfit_policy(&mut p, &system), None);
        assert!(p.policy.is_some());
        // Another structure (one model slot less on a processor): the policy
        // cannot run on it, so a tool measuring this board plans without it.
        let other = system.clone().with_max_resident(ProcId(0), 1);
        let why = drop_unfit_policy(&mut p, &other).expect("an unfit policy is dropped");
        assert!(
            why.contains("does not fit") && why.contains("structure"),
            "{why}"
        );
        assert!(p.policy.is_none());
        assert!(
            scheduler(&p, &other).is_ok(),
            "the greedy planner runs on it"
        );
    }
}
