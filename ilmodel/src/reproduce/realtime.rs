//! The real-time measures that dropping cannot game (on-time share and
//! delay over all offered frames, the distance to the bound) and the
//! scheduler suite over generated boards.

use camdnn_policy::mlp::MlpPolicy;
use camdnn_policy::scheduler::Scheduler;
use camdnn_policy::schedulers::{self, Camdnn};
use camdnn_policy::sim::{rate_bound, SimConfig, Trace};
use camdnn_policy::{ModelId, System};

use super::*;

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

pub(super) fn realtime(
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
pub(super) fn suite(
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
