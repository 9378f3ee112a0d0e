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

pub mod report;
pub mod svg;

use std::time::Instant;

use camdnn_policy::mlp::search::Search;
use camdnn_policy::mlp::MlpPolicy;
use camdnn_policy::scheduler::Scheduler;
use camdnn_policy::schedulers::{self, stay_plan, Camdnn, Fixed};
use camdnn_policy::sim::{
    rate_bound, simulate, Accounting, BoundRatio, RateBound, SimConfig, SimReport, Trace,
};
use camdnn_policy::stats::Summary;
use camdnn_policy::{repair, Detector, GlobalPolicy, ModelId, Plan, PlanInput, System};

use crate::demos::instance;
use crate::oracle::{solve, IlpPolicy, OracleOptions};
use crate::train::is_heldout;

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

fn full(system: &System, scene: &[u32]) -> Vec<u32> {
    camdnn_policy::sim::full_scene(system, scene)
}

fn fig6(system: &System, policy: &PolicyFiles) -> Result<Fig6, ReproError> {
    let scene = vec![13, 11, 2];
    let r = full(system, &scene);
    let np = system.num_processors();
    let rem = vec![0.0; np];
    let residency = vec![false; system.num_models() * np];
    // The optimum of the scene itself: loads free, as in the initialisation.
    let input = PlanInput {
        scene: &r,
        rem_ms: &rem,
        residency: &residency,
        frames_per_epoch: 1e9,
    };
    let det = Detector::fastest(system);
    let opt = solve(system, &input, det, &OracleOptions::default())?;
    let fixed = Fixed::static_dist(system, WAIT_MS);
    let mut raw = Plan::empty(system);
    for i in system.request_models() {
        let j = fixed.host(i);
        raw.set_batches(i, j, 1, r[i.0]);
        raw.set_resident(i, j, true);
    }
    for root in system.roots() {
        raw.set_resident(root, det.proc, true);
    }
    let static_plan = Search::new(system)
        .by_shares(system, &input, &raw)
        .unwrap_or(raw);
    let static_t = static_plan.makespan_ms(system, &input, det);
    let trace = Trace {
        segments: vec![camdnn_policy::sim::Segment {
            frames: 1,
            scene: scene.clone(),
        }],
    };
    let mut first_frame = Vec::new();
    for name in [CAMDNN, ORACLE, "camdnn-local", "static-dist", "heft"] {
        let mut s = scheduler(system, policy, name, WAIT_MS)?;
        let rep = sim(system, s.as_mut(), &trace, &SimConfig::default())?;
        first_frame.push((name.to_string(), rep.frames[0].delay_ms.unwrap_or(f64::NAN)));
    }
    Ok(Fig6 {
        scene,
        optimal: (opt.plan, opt.makespan_ms),
        static_dist: (static_plan, static_t),
        first_frame,
    })
}

fn walkthrough(system: &System, policy: &PolicyFiles) -> Result<Walkthrough, ReproError> {
    let trace = Trace {
        segments: vec![camdnn_policy::sim::Segment {
            frames: 140,
            scene: vec![13, 11, 2],
        }],
    };
    let no_drop = SimConfig::default().no_drop();
    let mut delays = Vec::new();
    let mut local_rem = Vec::new();
    let mut camdnn_rem = Vec::new();
    let marks = [1usize, 2, 10, 35, 69, 70, 71, 100, 139];
    for name in [CAMDNN, ORACLE, "camdnn-local"] {
        let mut s = scheduler(system, policy, name, WAIT_MS)?;
        let r = sim(system, s.as_mut(), &trace, &no_drop)?;
        let rems: Vec<(usize, Vec<f64>)> = marks
            .iter()
            .map(|&f| (f, r.frames[f].rem_at_arrival_ms.clone()))
            .collect();
        match name {
            "camdnn-local" => local_rem = rems,
            CAMDNN => camdnn_rem = rems,
            _ => {}
        }
        delays.push((
            name.to_string(),
            r.frames.iter().map(|f| f.delay_ms).collect(),
        ));
    }
    Ok(Walkthrough {
        delays,
        local_rem,
        camdnn_rem,
    })
}

/// The scenes of the grid, every `step`-th in nested-loop order.
pub fn grid(max_objects: u32, step: usize) -> Vec<Vec<u32>> {
    let b = max_objects + 1;
    (0..b * b * b)
        .step_by(step.max(1))
        .map(|n| vec![n / (b * b), (n / b) % b, n % b])
        .collect()
}

/// Mean delay (and drop fraction, 0 in this no-drop mode) of the frames
/// after the first epoch of a constant scene.
fn steady(
    system: &System,
    s: &mut dyn Scheduler,
    scene: &[u32],
    frames: usize,
) -> Result<(Option<f64>, f64), ReproError> {
    let cfg = SimConfig::default().no_drop();
    let warm = (cfg.epoch_ms * cfg.fps / 1000.0).ceil() as usize;
    let trace = Trace {
        segments: vec![camdnn_policy::sim::Segment {
            frames: frames.max(warm + 1),
            scene: scene.to_vec(),
        }],
    };
    let r = sim(system, s, &trace, &cfg)?;
    let window = &r.frames[warm.min(r.frames.len() - 1)..];
    let d: Vec<f64> = window.iter().filter_map(|f| f.delay_ms).collect();
    let dropped = (window.len() - d.len()) as f64 / window.len() as f64;
    Ok((
        (!d.is_empty()).then(|| d.iter().sum::<f64>() / d.len() as f64),
        dropped,
    ))
}

/// Names in the static sweep, in report order.
pub const SWEEP: [&str; 7] = [
    CAMDNN,
    ORACLE,
    "camdnn-local",
    "camdnn-local-eft",
    "static-dist",
    "cpu-only",
    "gpu-only",
];

fn sweep(
    system: &System,
    policy: &PolicyFiles,
    config: &ReproConfig,
) -> Result<StaticSweep, ReproError> {
    let scenes = grid(config.max_objects, config.scene_step);
    let oracle_every = (config.oracle_scene_step / config.scene_step.max(1)).max(1);
    let jobs = config.jobs.max(1);
    type Row = (usize, Vec<(Option<f64>, f64)>);
    let rows: Vec<Result<Vec<Row>, ReproError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..jobs)
            .map(|t| {
                let scenes = &scenes;
                scope.spawn(move || -> Result<Vec<Row>, ReproError> {
                    let mut scheds = SWEEP
                        .iter()
                        .map(|n| scheduler(system, policy, n, WAIT_MS))
                        .collect::<Result<Vec<_>, _>>()?;
                    let mut out = Vec::new();
                    for (n, scene) in scenes.iter().enumerate().skip(t).step_by(jobs) {
                        let mut row = Vec::new();
                        for (name, s) in SWEEP.iter().zip(scheds.iter_mut()) {
                            if *name == ORACLE && n % oracle_every != 0 {
                                row.push((None, f64::NAN));
                                continue;
                            }
                            row.push(steady(system, s.as_mut(), scene, config.steady_frames)?);
                        }
                        out.push((n, row));
                    }
                    Ok(out)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a sweep worker panicked"))
            .collect()
    });
    let mut delays: Vec<(String, Vec<Option<f64>>, Vec<f64>)> = SWEEP
        .iter()
        .map(|n| {
            (
                n.to_string(),
                vec![None; scenes.len()],
                vec![f64::NAN; scenes.len()],
            )
        })
        .collect();
    for part in rows {
        for (n, row) in part? {
            for (k, (d, drop)) in row.into_iter().enumerate() {
                delays[k].1[n] = d;
                delays[k].2[n] = drop;
            }
        }
    }
    Ok(StaticSweep { scenes, delays })
}

/// A trace of `scenes` random scenes, each held for `interval_ms` of
/// camera time (frames are assigned to the scene current at their arrival).
pub fn interval_trace(seed: u64, scenes: usize, interval_ms: f64, max_objects: u32) -> Trace {
    let fps = SimConfig::default().fps;
    let period = 1000.0 / fps;
    let drawn = Trace::random(seed, 3, scenes, 1, max_objects);
    let total = (scenes as f64 * interval_ms / period).ceil() as usize;
    let mut counts = vec![0usize; scenes];
    for f in 0..total {
        let s = ((f as f64 * period) / interval_ms).floor() as usize;
        counts[s.min(scenes - 1)] += 1;
    }
    Trace {
        segments: drawn
            .segments
            .into_iter()
            .zip(counts)
            .filter(|(_, c)| *c > 0)
            .map(|(mut s, c)| {
                s.frames = c;
                s
            })
            .collect(),
    }
}

/// Content-change intervals of Table 6, ms.
pub const INTERVALS: [f64; 4] = [5000.0, 1000.0, 500.0, 100.0];

fn table6(
    system: &System,
    policy: &PolicyFiles,
    config: &ReproConfig,
) -> Result<Vec<Table6Row>, ReproError> {
    let run_one = |name: &str, trace: &Trace| -> Result<Cell, ReproError> {
        let mut s = scheduler(system, policy, name, WAIT_MS)?;
        Ok(cell(
            name,
            &sim(system, s.as_mut(), trace, &SimConfig::default().no_drop())?,
        ))
    };
    let mut rows = Vec::new();
    for interval in INTERVALS {
        let trace = interval_trace(
            config.seed,
            config.table6_scenes,
            interval,
            config.max_objects,
        );
        let small = interval_trace(
            config.seed,
            config.table6_oracle_scenes.min(config.table6_scenes),
            interval,
            config.max_objects,
        );
        let jobs: Vec<(&str, &Trace, bool)> = vec![
            (CAMDNN, &trace, false),
            ("camdnn-local", &trace, false),
            ("heft", &trace, false),
            (ORACLE, &small, true),
            (CAMDNN, &small, true),
            ("heft", &small, true),
        ];
        let results: Vec<Result<(bool, Cell), ReproError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = jobs
                .iter()
                .map(|&(name, tr, sub)| scope.spawn(move || run_one(name, tr).map(|c| (sub, c))))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a Table 6 worker panicked"))
                .collect()
        });
        let mut row = Table6Row {
            interval_ms: interval,
            cells: Vec::new(),
            oracle_subset: Vec::new(),
        };
        for r in results {
            let (sub, c) = r?;
            if sub {
                row.oracle_subset.push(c);
            } else {
                row.cells.push(c);
            }
        }
        rows.push(row);
    }
    Ok(rows)
}

fn fidelity(
    system: &System,
    policy: &PolicyFiles,
    config: &ReproConfig,
) -> Result<Fidelity, ReproError> {
    let mut mlp = MlpPolicy::new(system, &policy.onnx, &policy.sidecar)?;
    let mut alone = MlpPolicy::new(system, &policy.onnx, &policy.sidecar)?;
    alone.set_local_search(false);
    let mut extra_alone = Vec::new();
    let training = mlp.sidecar().training.clone();
    let det = Detector::fastest(system);
    let f = 70.0;
    let mut extra = Vec::new();
    let mut ilp_ms = Vec::new();
    let mut step_us = Vec::new();
    let mut index = 0u64;
    while extra.len() < config.fidelity_instances {
        // samples = 0: every scene is drawn at random, none from the grid order.
        let (scene, rem, a_old) = instance(
            system,
            det,
            config.seed,
            index,
            config.max_objects,
            0,
            100.0,
        );
        index += 1;
        if !is_heldout(training.seed, &scene, training.heldout_fraction) {
            continue;
        }
        let input = PlanInput {
            scene: &scene,
            rem_ms: &rem,
            residency: &a_old,
            frames_per_epoch: f,
        };
        let opt = solve(system, &input, det, &OracleOptions::default())?;
        ilp_ms.push(opt.solve_time.as_secs_f64() * 1e3);
        let plan = mlp.plan(system, &input);
        let t = plan.makespan_ms(system, &input, det);
        extra.push(t / opt.makespan_ms - 1.0);
        let t_alone = alone.plan(system, &input).makespan_ms(system, &input, det);
        extra_alone.push(t_alone / opt.makespan_ms - 1.0);
        let mut times = Vec::with_capacity(config.timing_runs);
        for _ in 0..config.timing_runs.max(1) {
            let t0 = Instant::now();
            let new = repair(system, &input, &mlp.plan(system, &input));
            let stay = stay_plan(system, &input);
            let adopt = match (&new, &stay) {
                (Ok(n), Some(s)) => {
                    n.makespan_ms(system, &input, det) < s.makespan_ms(system, &input, det)
                }
                _ => false,
            };
            std::hint::black_box(adopt);
            times.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        step_us.push(Summary::of(&times).p50);
    }
    let n = extra.len();
    Ok(Fidelity {
        instances: n,
        optimal: extra.iter().filter(|&&e| e <= 1e-6).count() as f64 / n.max(1) as f64,
        extra: Summary::of(&extra),
        extra_alone: Summary::of(&extra_alone),
        ilp_ms: Summary::of(&ilp_ms),
        step_us: Summary::of(&step_us),
    })
}

/// Schedulers of the real-time section: camdnn, its oracle mode, the MLP
/// alone and every baseline of `camdnnd simulate`, in report order before
/// ranking.
pub fn realtime_schedulers() -> Vec<&'static str> {
    [CAMDNN, ORACLE, MLP_ALONE]
        .into_iter()
        .chain(schedulers::BASELINES.iter().copied())
        .collect()
}

/// The bursty trace: 10 empty frames, then 10 frames of 14/14/14 objects,
/// ten times.
pub fn bursty_trace() -> Trace {
    let empty = camdnn_policy::sim::Segment {
        frames: 10,
        scene: vec![0, 0, 0],
    };
    let heavy = camdnn_policy::sim::Segment {
        frames: 10,
        scene: vec![14, 14, 14],
    };
    Trace {
        segments: (0..10)
            .flat_map(|_| [empty.clone(), heavy.clone()])
            .collect(),
    }
}

fn realtime(
    system: &System,
    policy: &PolicyFiles,
    config: &ReproConfig,
) -> Result<Vec<RealTime>, ReproError> {
    let cfg = SimConfig::default();
    let deadline_ms = config.deadline_ms.unwrap_or(cfg.default_deadline_ms());
    let traces = [
        (
            "the Fig. 11 trace (16 scenes of 50 frames)",
            Trace::paper_fig11(),
        ),
        (
            "the bursty trace (10 empty frames, then 10 of 14/14/14, ten times)",
            bursty_trace(),
        ),
    ];
    let mut out = Vec::new();
    for (what, trace) in traces {
        let rows: Vec<Result<RealTimeRow, ReproError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = realtime_schedulers()
                .into_iter()
                .map(|name| {
                    let (trace, cfg) = (&trace, &cfg);
                    scope.spawn(move || -> Result<RealTimeRow, ReproError> {
                        let mut s = scheduler(system, policy, name, WAIT_MS)?;
                        let r = sim(system, s.as_mut(), trace, cfg)?;
                        let mut fresh = scheduler(system, policy, name, WAIT_MS)?;
                        let rate =
                            rate_bound(system, fresh.as_mut(), trace, cfg).map_err(|source| {
                                ReproError::Sim {
                                    scheduler: name.to_string(),
                                    source,
                                }
                            })?;
                        Ok(RealTimeRow {
                            scheduler: name.to_string(),
                            accounting: r.accounting(deadline_ms),
                            bound: r.bound_ratio(),
                            rate,
                        })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a real-time worker panicked"))
                .collect()
        });
        let mut rows = rows.into_iter().collect::<Result<Vec<_>, _>>()?;
        rows.sort_by(|a, b| a.accounting.rank_cmp(&b.accounting));
        out.push(RealTime {
            trace: what.to_string(),
            frames: trace.frames(),
            deadline_ms,
            on_time_ceiling: camdnn_policy::suite::ceiling::on_time_ceiling(
                system,
                &trace,
                cfg.fps,
                deadline_ms,
                cfg.root_items,
            ),
            median_bound_ms: camdnn_policy::suite::median_bound_ms(system, &trace, cfg.root_items),
            rows,
        });
    }
    Ok(out)
}

/// The index of model `name` among the request models, for reports.
pub fn request_index(system: &System, i: ModelId) -> Option<usize> {
    system.request_models().position(|m| m == i)
}

/// The scheduler suite: the system with its learned policy (`camdnn` and
/// every baseline) and generated boards 1..=N (every baseline, which
/// includes `camdnn-greedy`), every shape, as `camdnnd suite --boards N
/// --system FILE` runs them.
fn suite(
    system: &System,
    policy: &PolicyFiles,
    config: &ReproConfig,
) -> Result<SuiteRun, ReproError> {
    use camdnn_policy::gen::{self, Shape};
    use camdnn_policy::suite::report::{run_suite, summary, SuiteBoard};
    let mut boards = vec![SuiteBoard {
        system: system.clone(),
        trace_seed: 0,
    }];
    for seed in 1..=config.suite_boards {
        let system = System::from_spec(&gen::board(seed)).map_err(|e| {
            ReproError::Suite(format!("generated board {seed} does not validate: {e}"))
        })?;
        boards.push(SuiteBoard {
            system,
            trace_seed: seed,
        });
    }
    let cases = run_suite(
        &boards,
        &Shape::ALL,
        &SimConfig::default(),
        config.jobs,
        |at, board| {
            let mut out: Vec<Box<dyn Scheduler + Send>> = Vec::new();
            if at == 0 {
                let mlp = MlpPolicy::new(&board.system, &policy.onnx, &policy.sidecar)?;
                out.push(Box::new(Camdnn::new(mlp, WAIT_MS).named(CAMDNN)));
            }
            for name in schedulers::BASELINES {
                out.push(
                    schedulers::by_name(&board.system, name, WAIT_MS)
                        .ok_or_else(|| ReproError::Suite(format!("unknown baseline {name}")))?,
                );
            }
            Ok::<_, ReproError>(out)
        },
        |_, _| {},
    )
    .map_err(|e| ReproError::Suite(e.to_string()))?;
    Ok(SuiteRun {
        boards: config.suite_boards,
        cases: cases.len(),
        summary: summary(&cases),
    })
}
