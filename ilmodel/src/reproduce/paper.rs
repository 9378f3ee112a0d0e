//! The paper's own experiments in its no-drop mode: Fig. 6, the Sec. 5.3
//! walk-through, Fig. 10 with Tables 3 and 4 (the steady-state sweep),
//! Table 6 (content-change intervals) and the IL fidelity with the step
//! timings.

use std::time::Instant;

use camdnn_policy::mlp::search::Search;
use camdnn_policy::mlp::MlpPolicy;
use camdnn_policy::schedulers::{stay_plan, Fixed};
use camdnn_policy::sim::{SimConfig, Trace};
use camdnn_policy::stats::Summary;
use camdnn_policy::{repair, Detector, GlobalPolicy, Plan, PlanInput, System};

use super::*;
use crate::demos::instance;
use crate::oracle::{solve, OracleOptions};
use crate::train::is_heldout;

fn full(system: &System, scene: &[u32]) -> Vec<u32> {
    camdnn_policy::sim::full_scene(system, scene)
}

pub(super) fn fig6(system: &System, policy: &PolicyFiles) -> Result<Fig6, ReproError> {
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

pub(super) fn walkthrough(
    system: &System,
    policy: &PolicyFiles,
) -> Result<Walkthrough, ReproError> {
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

pub(super) fn sweep(
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

pub(super) fn table6(
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

pub(super) fn fidelity(
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
