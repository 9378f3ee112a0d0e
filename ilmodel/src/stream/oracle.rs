//! The stream ILP of [`super`] built for HiGHS (through `good_lp`) and
//! solved; its plan is checked by [`super::evaluate`] before it is returned.

use std::time::{Duration, Instant};

use camdnn_policy::{ModelId, Plan, PlanInput, ProcId, System};
use good_lp::solvers::highs::{highs, HighsProblem};
use good_lp::{
    variable, Constraint, Expression, ProblemVariables, ResolutionError, Solution, SolutionStatus,
    SolverModel, Variable,
};

use super::{evaluate, StreamCost, StreamProblem, RESIDENT_EPSILON_MS};
use crate::oracle::{configure, OracleOptions, Partitions, SolveStatus, Tolerance};
use crate::OracleError;

/// Knobs of the stream oracle.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamOptions {
    /// HiGHS time limit, seconds: the best plan found by then is returned
    /// with [`SolveStatus::TimeLimit`].
    pub time_limit_s: f64,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions { time_limit_s: 2.0 }
    }
}

/// The stream oracle's plan and what it costs.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamSolution {
    /// The residency (the detector on its unit) and the latest scene's
    /// batches.
    pub plan: Plan,
    /// The first detector's unit.
    pub detector: ProcId,
    /// J and its parts, computed from the plan by [`evaluate`].
    pub cost: StreamCost,
    /// Scenes planned for: the epoch's, or the latest alone when the
    /// epoch's together need more models than the units hold.
    pub scenes: usize,
    /// Wall time of the solve, model building included.
    pub solve_time: Duration,
    /// Proven optimal or stopped by the time limit.
    pub status: SolveStatus,
}

/// Solves the stream ILP. When the epoch's scenes together need more models
/// than the units hold, the latest scene is planned alone.
pub fn solve_stream(
    system: &System,
    problem: &StreamProblem,
    options: &StreamOptions,
) -> Result<StreamSolution, OracleError> {
    check(system, problem, options)?;
    let start = Instant::now();
    match solve_fixed(system, problem, options, None) {
        Err(OracleError::Infeasible(_)) if problem.epoch.scenes.len() > 1 => {
            let latest = camdnn_policy::epoch::EpochScenes::latest(
                problem.input.scene,
                problem.epoch.period_ms,
            );
            let alone = StreamProblem {
                input: problem.input,
                epoch: &latest,
            };
            let mut s = solve_fixed(system, &alone, options, None)?;
            s.solve_time = start.elapsed();
            Ok(s)
        }
        other => other,
    }
}

/// The same with the residency and the detector's unit fixed (`fixed`):
/// only the splits and batches are chosen. J of a plan a policy proposed,
/// at its best split. `None`: nothing fixed.
pub fn solve_fixed(
    system: &System,
    problem: &StreamProblem,
    options: &StreamOptions,
    fixed: Option<(&Plan, ProcId)>,
) -> Result<StreamSolution, OracleError> {
    check(system, problem, options)?;
    let start = Instant::now();
    let f = Formulation::new(system, problem, fixed)?;
    let (plan, detector, work, status) = f.solve(system, problem, options)?;
    let np = system.num_processors();
    let resident: Vec<bool> = system
        .model_ids()
        .flat_map(|m| system.proc_ids().map(move |j| (m, j)))
        .map(|(m, j)| plan.resident(m, j))
        .collect();
    debug_assert_eq!(resident.len(), system.num_models() * np);
    let roots: Vec<ProcId> = system
        .roots()
        .skip(1)
        .map(|r| {
            system
                .proc_ids()
                .find(|&j| plan.resident(r, j))
                .unwrap_or(ProcId(0))
        })
        .collect();
    let cost = evaluate(system, problem, &resident, detector, &roots, &work).ok_or_else(|| {
        OracleError::Solver("the solver's residency breaks N_j or a memory budget".into())
    })?;
    if let Some(why) = plan.infeasibility(system, &problem.input) {
        return Err(OracleError::Solver(format!(
            "the solver's plan is infeasible: {why}"
        )));
    }
    Ok(StreamSolution {
        plan,
        detector,
        cost,
        scenes: problem.epoch.scenes.len(),
        solve_time: start.elapsed(),
        status,
    })
}

fn check(
    system: &System,
    problem: &StreamProblem,
    options: &StreamOptions,
) -> Result<(), OracleError> {
    let input = &problem.input;
    input.validate(system)?;
    let bad = |what: String, value: String, reason| OracleError::BadValue {
        what,
        value,
        reason,
    };
    for (j, &r) in input.rem_ms.iter().enumerate() {
        if !(r.is_finite() && r >= 0.0) {
            return Err(bad(
                format!("rem_ms[{j}]"),
                r.to_string(),
                "must be finite and >= 0",
            ));
        }
    }
    let f = input.frames_per_epoch;
    if !(f.is_finite() && f > 0.0) {
        return Err(bad(
            "frames_per_epoch".into(),
            f.to_string(),
            "must be finite and > 0",
        ));
    }
    let p = problem.epoch.period_ms;
    if !(p.is_finite() && p > 0.0) {
        return Err(bad(
            "period_ms".into(),
            p.to_string(),
            "must be finite and > 0",
        ));
    }
    if !(options.time_limit_s.is_finite() && options.time_limit_s > 0.0) {
        let t = options.time_limit_s.to_string();
        return Err(bad("time_limit_s".into(), t, "must be finite and > 0"));
    }
    let scenes = &problem.epoch.scenes;
    if scenes.is_empty() || scenes[0].0 != input.scene {
        return Err(bad(
            "epoch.scenes".into(),
            format!("{} scenes", scenes.len()),
            "must start with the input's latest scene",
        ));
    }
    for (k, (s, w)) in scenes.iter().enumerate() {
        if s.len() != system.num_models() || !(w.is_finite() && *w >= 0.0) {
            return Err(bad(
                format!("epoch.scenes[{k}]"),
                format!("{} counts, weight {w}", s.len()),
                "needs a count per model and a finite weight >= 0",
            ));
        }
    }
    let total: f64 = scenes.iter().map(|s| s.1).sum();
    if (total - 1.0).abs() > 1e-6 {
        return Err(bad(
            "epoch weights".into(),
            total.to_string(),
            "must sum to 1",
        ));
    }
    Ok(())
}

/// One count choice: in scene `scene`, serve exactly `count` requests of
/// `model` on `proc` when `var` is 1.
struct CountChoice {
    scene: usize,
    model: ModelId,
    proc: ProcId,
    count: u32,
    var: Variable,
}

/// One instance: variables, constraints and the objective.
struct Formulation {
    vars: ProblemVariables,
    /// a(m,j), indexed `m * n_p + j`; `None` where not a variable.
    a: Vec<Option<Variable>>,
    /// δ(d,j) of the first detector, per unit; `None` where it cannot run.
    delta: Vec<Option<Variable>>,
    counts: Vec<CountChoice>,
    partitions: Partitions,
    constraints: Vec<Constraint>,
    objective: Expression,
}

impl Formulation {
    fn new(
        system: &System,
        problem: &StreamProblem,
        fixed: Option<(&Plan, ProcId)>,
    ) -> Result<Self, OracleError> {
        let (nm, np) = (system.num_models(), system.num_processors());
        let input = &problem.input;
        let f = problem.frames();
        let scenes = &problem.epoch.scenes;
        let largest = problem.epoch.max_scene();
        let largest_input = PlanInput {
            scene: &largest,
            ..*input
        };
        let partitions = Partitions::new(system, &largest_input);
        let mut vars = ProblemVariables::new();
        let mut constraints = Vec::new();
        let mut a: Vec<Option<Variable>> = vec![None; nm * np];
        let mut slots: Vec<Expression> = vec![Expression::from(0.0); np];
        let mut memory: Vec<Expression> = vec![Expression::from(0.0); np];
        let mut per_frame: Vec<Expression> = system
            .proc_ids()
            .map(|j| Expression::from(input.rem_ms[j.0] / f))
            .collect();
        let mut wait: Vec<Expression> = vec![Expression::from(0.0); np];
        let mut residents = Expression::from(0.0);
        let needed = |m: ModelId| {
            system.models[m.0].parent.is_none() || scenes.iter().any(|(s, _)| s[m.0] > 0)
        };
        for m in system.model_ids().filter(|&m| needed(m)) {
            for j in system.supporting(m) {
                let v = vars.add(variable().binary());
                a[m.0 * np + j.0] = Some(v);
                residents += v;
                slots[j.0] += v;
                memory[j.0] += system.size_mb(m, j) * v;
                if !input.was_resident(system, m, j) {
                    let load = system.load_ms(m, j);
                    per_frame[j.0] += (load / f) * v;
                    wait[j.0] += problem.load_delay_ms(load) * v;
                }
                if let Some((plan, _)) = fixed {
                    let on = f64::from(u8::from(plan.resident(m, j)));
                    constraints.push(Expression::from(v).eq(on));
                }
            }
        }
        // Detectors: each on one unit that holds it.
        let first = system
            .roots()
            .next()
            .expect("a validated system has a root");
        let mut delta: Vec<Option<Variable>> = vec![None; np];
        let mut detector_ms = Expression::from(0.0);
        for r in system.roots() {
            let mut one = Expression::from(0.0);
            for j in system.supporting(r) {
                let d = vars.add(variable().binary());
                one += d;
                let a_rj = a[r.0 * np + j.0].expect("a detector is needed");
                constraints.push(Expression::from(d).leq(a_rj));
                let t = system.exec_ms(r, j, 1);
                per_frame[j.0] += t * d;
                if r == first {
                    delta[j.0] = Some(d);
                    detector_ms += t * d;
                    if let Some((_, unit)) = fixed {
                        constraints.push(Expression::from(d).eq(f64::from(u8::from(j == unit))));
                    }
                }
            }
            constraints.push(one.eq(1.0));
        }
        // Classifiers: per scene, one binary per count a unit may serve.
        let mut counts = Vec::new();
        let mut makespan = Expression::from(0.0);
        for (s, (scene, w)) in scenes.iter().enumerate() {
            let t_s = vars.add(variable().min(0.0));
            makespan += *w * t_s;
            let mut work: Vec<Expression> = vec![Expression::from(0.0); np];
            for i in system.request_models() {
                let r = scene[i.0];
                if r == 0 {
                    continue;
                }
                let mut served = Expression::from(0.0);
                for j in system.supporting(i) {
                    let mut chosen = Expression::from(0.0);
                    for n in 1..=r {
                        let Some(cost) = partitions.cost_ms(i, j, n) else {
                            continue;
                        };
                        let y = vars.add(variable().binary());
                        counts.push(CountChoice {
                            scene: s,
                            model: i,
                            proc: j,
                            count: n,
                            var: y,
                        });
                        chosen += y;
                        served += f64::from(n) * y;
                        work[j.0] += cost * y;
                        per_frame[j.0] += (*w * cost) * y;
                    }
                    let a_ij = a[i.0 * np + j.0].expect("a model with requests is needed");
                    constraints.push(chosen.leq(a_ij));
                }
                constraints.push(served.eq(f64::from(r)));
            }
            constraints.push(Expression::from(t_s).geq(detector_ms.clone()));
            for j in system.proc_ids() {
                let lhs = detector_ms.clone() + work[j.0].clone() + wait[j.0].clone();
                constraints.push(Expression::from(t_s).geq(lhs));
            }
        }
        let e = vars.add(variable().min(0.0));
        for j in system.proc_ids() {
            let behind = per_frame[j.0].clone() - problem.epoch.period_ms;
            constraints.push(Expression::from(e).geq(behind));
            let p = &system.processors[j.0];
            constraints.push(slots[j.0].clone().leq(p.max_resident as f64));
            if let Some(budget) = p.memory_budget_mb {
                constraints.push(memory[j.0].clone().leq(budget + 1e-9));
            }
        }
        let objective = makespan + ((f - 1.0) / 2.0) * e + RESIDENT_EPSILON_MS * residents;
        Ok(Formulation {
            vars,
            a,
            delta,
            counts,
            partitions,
            constraints,
            objective,
        })
    }

    /// Solves; returns the plan (residency and the latest scene's batches),
    /// the first detector's unit, every scene's work per unit and the status.
    #[allow(clippy::type_complexity)]
    fn solve(
        self,
        system: &System,
        problem: &StreamProblem,
        options: &StreamOptions,
    ) -> Result<(Plan, ProcId, Vec<Vec<f64>>, SolveStatus), OracleError> {
        let Formulation {
            vars,
            a,
            delta,
            counts,
            partitions,
            constraints,
            objective,
        } = self;
        let np = system.num_processors();
        let frame_options = OracleOptions {
            time_limit_s: options.time_limit_s,
            ..OracleOptions::default()
        };
        let mut model: HighsProblem = configure(
            vars.minimise(objective).using(highs),
            &frame_options,
            Tolerance::Strict,
        );
        for c in constraints {
            model.add_constraint(c);
        }
        let solution = model.solve().map_err(|e| match e {
            ResolutionError::Infeasible => OracleError::Infeasible(
                "the residency limits (N_j, memory budgets) leave no host for some model the epoch's scenes need"
                    .into(),
            ),
            ResolutionError::Other("NoSolutionFound") => OracleError::NoPlanInTime {
                limit_s: frame_options.time_limit_s,
            },
            other => OracleError::Solver(other.to_string()),
        })?;
        let status = match solution.status() {
            SolutionStatus::Optimal | SolutionStatus::GapLimit => SolveStatus::Optimal,
            SolutionStatus::TimeLimit => SolveStatus::TimeLimit,
        };
        let mut plan = Plan::empty(system);
        for m in system.model_ids() {
            for j in system.proc_ids() {
                if a[m.0 * np + j.0].is_some_and(|v| solution.value(v) > 0.5) {
                    plan.set_resident(m, j, true);
                }
            }
        }
        let detector = system
            .proc_ids()
            .find(|j| delta[j.0].is_some_and(|d| solution.value(d) > 0.5))
            .ok_or_else(|| OracleError::Solver("no unit runs the detector".into()))?;
        let mut work = vec![vec![0.0; np]; problem.epoch.scenes.len()];
        for c in counts.iter().filter(|c| solution.value(c.var) > 0.5) {
            for (k, n) in partitions.batches(c.model, c.proc, c.count) {
                let ms = f64::from(n) * system.exec_ms(c.model, c.proc, k);
                work[c.scene][c.proc.0] += ms;
                if c.scene == 0 {
                    let b = plan.batches(c.model, c.proc, k);
                    plan.set_batches(c.model, c.proc, k, b + n);
                }
            }
        }
        Ok((plan, detector, work, status))
    }
}
