//! `ilmodel reproduce`: every experiment of the CAMDNN paper re-run on one
//! profile with the simulator, the learned policy and the ILP oracle:
//! Fig. 6, the Sec. 5.3 walk-through, Fig. 10 with Tables 3 and 4, Table 5
//! with Fig. 11, Table 6, the IL fidelity and the step timings, in the
//! paper's no-drop mode (every frame queued); then the real-time measures
//! that dropping cannot game (on-time share and delay over all offered
//! frames) with the distance to the bound, and the scheduler suite over
//! generated boards (`camdnnd suite`'s own run and report,
//! [`camdnn_policy::suite::report`]). The numbers go to a Markdown report
//! ([`report`]) with SVG plots ([`svg`]).

pub mod cli;
mod paper;
mod realtime;
pub mod report;
pub mod svg;

use paper::{fidelity, fig6, sweep, table6, walkthrough};
pub use paper::{grid, interval_trace, INTERVALS, SWEEP};
pub use realtime::{bursty_trace, realtime_schedulers, request_index};
use realtime::{realtime, suite};

use std::time::Instant;

use camdnn_policy::mlp::MlpPolicy;
use camdnn_policy::scheduler::Scheduler;
use camdnn_policy::schedulers::{self, Camdnn};
use camdnn_policy::sim::{
    simulate, Accounting, BoundRatio, RateBound, SimConfig, SimReport, Trace,
};
use camdnn_policy::stats::Summary;
use camdnn_policy::{Plan, System};

use crate::oracle::{IlpPolicy, OracleOptions};

/// Report name of camdnn with the learned policy: the suite's own, so its
/// report ([`camdnn_policy::suite::report`]) finds the column.
pub use camdnn_policy::suite::report::CAMDNN;
/// Report name of camdnn with the ILP solved at every global step.
pub const ORACLE: &str = "camdnn-oracle";
/// camdnn whose global step is the MLP's decoding alone (repaired, no local
/// search): the ablation's "MLP alone".
pub const MLP_ALONE: &str = "camdnn-mlp-alone";

/// How much of each experiment to run.
#[derive(Clone, Debug, PartialEq)]
pub struct ReproConfig {
    /// Take every `scene_step`-th scene of the (max_objects+1)^3 grid for
    /// Fig. 10 and Tables 3-4 (1 = all).
    pub scene_step: usize,
    /// The same for the oracle-mode column (solves are slow).
    pub oracle_scene_step: usize,
    /// Random scenes of Table 6.
    pub table6_scenes: usize,
    /// Of those, how many the oracle-mode column runs (a prefix).
    pub table6_oracle_scenes: usize,
    /// Held-out instances of the fidelity check.
    pub fidelity_instances: usize,
    /// Repetitions of each timed global step.
    pub timing_runs: usize,
    /// Worker threads for the per-scene experiments and the suite's cases.
    pub jobs: usize,
    /// Seed of the random scenes and instances.
    pub seed: u64,
    /// Largest number of objects per class (the paper: 14).
    pub max_objects: u32,
    /// Frames per scene in the steady-state experiments: the first epoch
    /// warms up, the second is measured.
    pub steady_frames: usize,
    /// Deadline of the real-time measures, ms (`None`: two frame periods).
    pub deadline_ms: Option<f64>,
    /// Generated boards of the scheduler suite (seeds 1..=N), run beside
    /// the system itself.
    pub suite_boards: u64,
}

impl ReproConfig {
    /// The full reproduction (about ten minutes on 2 cores).
    pub fn full(jobs: usize) -> Self {
        ReproConfig {
            scene_step: 1,
            oracle_scene_step: 8,
            table6_scenes: 10_000,
            table6_oracle_scenes: 300,
            fidelity_instances: 300,
            timing_runs: 20,
            jobs: jobs.max(1),
            seed: 2022,
            max_objects: 14,
            steady_frames: 140,
            deadline_ms: None,
            suite_boards: 30,
        }
    }

    /// A smoke test in well under a minute.
    pub fn quick(jobs: usize) -> Self {
        ReproConfig {
            scene_step: 29,
            oracle_scene_step: 290,
            table6_scenes: 300,
            table6_oracle_scenes: 20,
            fidelity_instances: 30,
            timing_runs: 3,
            suite_boards: 3,
            ..Self::full(jobs)
        }
    }
}

/// Mean and standard deviation of one scheduler's delays, ms.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// Scheduler report name.
    pub scheduler: String,
    /// Mean delay, ms.
    pub mean: f64,
    /// Standard deviation, ms.
    pub std: f64,
    /// Fraction of frames dropped.
    pub dropped: f64,
    /// How many values the statistics cover (frames or scenes).
    pub n: usize,
}

/// Fig. 6: the optimum of one scene against Static-DIST's plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Fig6 {
    /// The scene (request models in system order).
    pub scene: Vec<u32>,
    /// Optimal plan and its T, ms.
    pub optimal: (Plan, f64),
    /// Static-DIST's hosts, best batching, and its T, ms.
    pub static_dist: (Plan, f64),
    /// Delay of that scene as the first frame on idle processors, per
    /// scheduler (simulated), ms.
    pub first_frame: Vec<(String, f64)>,
}

/// The Sec. 5.3 walk-through on a constant (13,11,2) scene.
#[derive(Clone, Debug, PartialEq)]
pub struct Walkthrough {
    /// Per scheduler: delays of every frame, ms (None = dropped).
    pub delays: Vec<(String, Vec<Option<f64>>)>,
    /// rem_j at the arrival of chosen frames, without frame dropping, for
    /// the local dispatcher alone: (frame index, rem per processor).
    pub local_rem: Vec<(usize, Vec<f64>)>,
    /// The same for camdnn.
    pub camdnn_rem: Vec<(usize, Vec<f64>)>,
}

/// Fig. 10 and Tables 3-4: steady-state delay of every scene per scheduler.
#[derive(Clone, Debug, PartialEq)]
pub struct StaticSweep {
    /// Scenes measured (request models in system order).
    pub scenes: Vec<Vec<u32>>,
    /// Per scheduler: mean delay of the measured window per scene (None =
    /// scene not run for that scheduler, or every frame dropped), and the
    /// fraction of frames dropped per scene.
    pub delays: Vec<(String, Vec<Option<f64>>, Vec<f64>)>,
}

/// Table 6: one content-change interval.
#[derive(Clone, Debug, PartialEq)]
pub struct Table6Row {
    /// Interval between scene changes, ms.
    pub interval_ms: f64,
    /// Cells per scheduler.
    pub cells: Vec<Cell>,
    /// The oracle-mode column on its subset, with camdnn (MLP) and HEFT on
    /// the same subset.
    pub oracle_subset: Vec<Cell>,
}

/// IL fidelity and timings.
#[derive(Clone, Debug, PartialEq)]
pub struct Fidelity {
    /// Held-out instances.
    pub instances: usize,
    /// Extra makespan of the MLP plan over the ILP: mean, p50, p99, max.
    pub extra: Summary,
    /// The same for the MLP alone: its decoding repaired, no local search.
    pub extra_alone: Summary,
    /// Fraction of instances where the MLP plan is optimal.
    pub optimal: f64,
    /// ILP solve times over the instances, ms.
    pub ilp_ms: Summary,
    /// One global step (MLP, repair, stay plan, adoption test), us.
    pub step_us: Summary,
}

/// One scheduler's real-time figures on one trace.
#[derive(Clone, Debug, PartialEq)]
pub struct RealTimeRow {
    /// Scheduler report name.
    pub scheduler: String,
    /// Every offered frame on time / late / dropped, delays over all of them.
    pub accounting: Accounting,
    /// Each frame's delay over its makespan lower bound.
    pub bound: BoundRatio,
    /// Achieved vs sustainable frame rate (overload run, no drops).
    pub rate: RateBound,
}

/// The real-time measures on one trace, with real-time dropping at one frame
/// period ([`camdnn_policy::admission::FrameAdmission::Behind`]).
#[derive(Clone, Debug, PartialEq)]
pub struct RealTime {
    /// What the trace is.
    pub trace: String,
    /// Frames offered.
    pub frames: usize,
    /// The deadline, ms.
    pub deadline_ms: f64,
    /// The on-time share no schedule can beat on the trace
    /// ([`camdnn_policy::suite::ceiling::on_time_ceiling`]).
    pub on_time_ceiling: f64,
    /// The median delay no schedule can beat on the trace
    /// ([`camdnn_policy::suite::median_bound_ms`]), ms.
    pub median_bound_ms: f64,
    /// One row per scheduler, ranked best first on the headline measure.
    pub rows: Vec<RealTimeRow>,
}

/// The scheduler suite over `boards` generated boards and the system itself
/// (six shapes each), as `camdnnd suite` runs it.
#[derive(Clone, Debug, PartialEq)]
pub struct SuiteRun {
    /// Generated boards.
    pub boards: u64,
    /// Cases run (boards x shapes).
    pub cases: usize,
    /// The report, exactly as `camdnnd suite` prints it after the cases.
    pub summary: String,
}

/// Everything [`run`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Results {
    /// The configuration.
    pub config: ReproConfig,
    /// System name.
    pub system: String,
    /// Fig. 6.
    pub fig6: Fig6,
    /// Sec. 5.3.
    pub walkthrough: Walkthrough,
    /// Fig. 10, Tables 3 and 4.
    pub sweep: StaticSweep,
    /// Table 5: cells over the Fig. 11 trace.
    pub table5: Vec<Cell>,
    /// Fig. 11: per-frame delays per scheduler.
    pub fig11: Vec<(String, Vec<Option<f64>>)>,
    /// The Fig. 11 trace's scenes.
    pub fig11_scenes: Vec<(usize, Vec<u32>)>,
    /// Table 6.
    pub table6: Vec<Table6Row>,
    /// IL fidelity and timings.
    pub fidelity: Fidelity,
    /// Real-time measures and the distance to the bound, per trace.
    pub realtime: Vec<RealTime>,
    /// The scheduler suite.
    pub suite: SuiteRun,
    /// Wall time of the whole reproduction, s.
    pub wall_s: f64,
}

/// Why a reproduction could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReproError {
    /// The learned policy does not load for the system.
    #[error("the learned policy does not load for this system: {0}")]
    Policy(#[from] camdnn_policy::mlp::MlpError),
    /// The system does not have the paper's shape.
    #[error("{0}")]
    Shape(String),
    /// A simulation failed.
    #[error("simulation of {scheduler}: {source}")]
    Sim {
        /// Which scheduler.
        scheduler: String,
        /// Why.
        source: camdnn_policy::sim::SimError,
    },
    /// The oracle failed.
    #[error(transparent)]
    Oracle(#[from] crate::OracleError),
    /// The scheduler suite failed (which board and shape, and why).
    #[error("the scheduler suite: {0}")]
    Suite(String),
}

/// The learned policy's files, kept as bytes so each thread can load its own.
#[derive(Clone, Debug)]
pub struct PolicyFiles {
    /// ONNX bytes.
    pub onnx: Vec<u8>,
    /// Sidecar JSON.
    pub sidecar: String,
}

/// Builds a scheduler by report name: [`CAMDNN`], [`ORACLE`] or a name of
/// [`schedulers::by_name`].
pub fn scheduler(
    system: &System,
    policy: &PolicyFiles,
    name: &str,
    wait_ms: f64,
) -> Result<Box<dyn Scheduler>, ReproError> {
    Ok(match name {
        CAMDNN => Box::new(
            Camdnn::new(
                MlpPolicy::new(system, &policy.onnx, &policy.sidecar)?,
                wait_ms,
            )
            .named(CAMDNN),
        ),
        MLP_ALONE => {
            let mut mlp = MlpPolicy::new(system, &policy.onnx, &policy.sidecar)?;
            mlp.set_local_search(false);
            Box::new(Camdnn::new(mlp, wait_ms).named(MLP_ALONE))
        }
        ORACLE => Box::new(
            Camdnn::new(
                IlpPolicy::new(OracleOptions {
                    time_limit_s: 10.0,
                    tie_break: false,
                    ..OracleOptions::default()
                }),
                wait_ms,
            )
            .named(ORACLE),
        ),
        other => schedulers::by_name(system, other, wait_ms)
            .ok_or_else(|| ReproError::Shape(format!("unknown scheduler {other:?}")))?,
    })
}

const WAIT_MS: f64 = 5.0;

fn sim(
    system: &System,
    s: &mut dyn Scheduler,
    trace: &Trace,
    cfg: &SimConfig,
) -> Result<SimReport, ReproError> {
    simulate(system, s, trace, cfg).map_err(|source| ReproError::Sim {
        scheduler: s.name(),
        source,
    })
}

fn cell(name: &str, r: &SimReport) -> Cell {
    let d = r.delay();
    Cell {
        scheduler: name.to_string(),
        mean: d.mean,
        std: d.std,
        dropped: r.dropped() as f64 / r.frames.len().max(1) as f64,
        n: d.n,
    }
}

/// Runs every experiment.
pub fn run(
    system: &System,
    policy: &PolicyFiles,
    config: &ReproConfig,
    mut progress: impl FnMut(&str),
) -> Result<Results, ReproError> {
    let start = Instant::now();
    if system.request_models().count() != 3 {
        return Err(ReproError::Shape(format!(
            "the paper's experiments need 3 classifier models; {} has {}",
            system.name,
            system.request_models().count()
        )));
    }
    // Fail early on a policy that does not fit.
    MlpPolicy::new(system, &policy.onnx, &policy.sidecar)?;
    progress("Fig. 6");
    let fig6 = fig6(system, policy)?;
    progress("Sec. 5.3 walk-through");
    let walkthrough = walkthrough(system, policy)?;
    progress("Fig. 10, Tables 3-4 (steady state per scene)");
    let sweep = sweep(system, policy, config)?;
    progress("Table 5, Fig. 11");
    let trace = Trace::paper_fig11();
    let mut table5 = Vec::new();
    let mut fig11 = Vec::new();
    for name in [CAMDNN, ORACLE, "camdnn-local", "heft", "cq"] {
        let mut s = scheduler(system, policy, name, WAIT_MS)?;
        let r = sim(system, s.as_mut(), &trace, &SimConfig::default().no_drop())?;
        table5.push(cell(name, &r));
        fig11.push((
            name.to_string(),
            r.frames.iter().map(|f| f.delay_ms).collect(),
        ));
    }
    let mut at = 0;
    let fig11_scenes = trace
        .segments
        .iter()
        .map(|s| {
            at += s.frames;
            (at - s.frames, s.scene.clone())
        })
        .collect();
    progress("Table 6 (content-change intervals)");
    let table6 = table6(system, policy, config)?;
    progress("IL fidelity and timings");
    let fidelity = fidelity(system, policy, config)?;
    progress("Real-time measures and the distance to the bound");
    let realtime = realtime(system, policy, config)?;
    progress("The scheduler suite");
    let suite = suite(system, policy, config)?;
    Ok(Results {
        config: config.clone(),
        system: system.name.clone(),
        fig6,
        walkthrough,
        sweep,
        table5,
        fig11,
        fig11_scenes,
        table6,
        fidelity,
        realtime,
        suite,
        wall_s: start.elapsed().as_secs_f64(),
    })
}
