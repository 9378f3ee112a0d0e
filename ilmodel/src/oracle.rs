//! The exact global step: the corrected ILP of the design brief (Sec. 4),
//! solved with HiGHS (through `good_lp`), and [`IlpPolicy`], a
//! [`GlobalPolicy`] backed by it.
//!
//! Formulation (ms throughout; F = max(frames_per_epoch, 1) as in
//! [`Plan::work_ms`]):
//! - a(i,j) binary for every classifier i with r_i > 0 and every p_j that
//!   supports it; y_n(i,j) binary on the same pairs for 1 <= n <= r_i: p_j
//!   serves exactly n requests of i, at c_ij(n), the cheapest batching of n
//!   with the profiled batch sizes (a small dynamic programme; the plan's
//!   b_k(i,j) are that batching's). No variable (so a = 0) elsewhere. This is
//!   the design brief's b_k(i,j) ILP with each pair's batching solved
//!   ahead: any batching of n costs at least c_ij(n), so T* is the same, and
//!   HiGHS no longer searches the many equivalent batchings of one count;
//! - the detector (first root) is fixed resident on the given detector
//!   processor p_d: it counts toward N_d and the budget, and its load is paid
//!   when it was not resident before; other roots get a(i,j) binaries with
//!   sum_j a(i,j) >= 1;
//! - W_j = sum y_n(i,j) c_ij(n) + sum a(i,j) (1 - a_old(i,j)) t_l(i,j) / F;
//! - D = rem_d + t_det; T >= max(rem_j, D) + W_j for every j; T >= D;
//! - sum_j sum_n n y_n(i,j) = r_i; sum_n y_n(i,j) <= a(i,j);
//! - sum_i a(i,j) <= N_j; sum_i size_mb(i,j) a(i,j) <= budget_j where given.
//!
//! Stage 1 minimises T. With [`OracleOptions::tie_break`], stage 2 keeps
//! T <= T* (plus 1e-7 ms) and minimises the total busy time sum_j W_j plus
//! 1e-3 ms per resident model: among the optimal plans it picks the least
//! wasteful one and drops idle residents, so a(i,j) = 1 exactly where
//! b(i,j) > 0 (and for the detector on p_d). The value that counts is T.
//!
//! With [`OracleOptions::warm_start`] HiGHS starts stage 1 from the greedy
//! planner's plan and stage 2 from stage 1's. Both changes only make the
//! solves faster (about 3x on rb5, gen-3 and gen-28 together; docs/decisions.md).

use std::time::{Duration, Instant};

use camdnn_policy::schedulers::GreedyPlanner;
use camdnn_policy::{repair, Detector, GlobalPolicy, ModelId, Plan, PlanInput, ProcId, System};
use good_lp::solvers::highs::{highs, HighsProblem};
use good_lp::{
    variable, Constraint, Expression, ProblemVariables, ResolutionError, Solution, SolutionStatus,
    SolverModel, Variable, WithInitialSolution,
};
use serde::{Deserialize, Serialize};

use crate::OracleError;

/// Knobs of the oracle.
#[derive(Clone, Debug, PartialEq)]
pub struct OracleOptions {
    /// HiGHS time limit per stage, seconds. When it is reached the best plan
    /// found so far is returned with [`SolveStatus::TimeLimit`].
    pub time_limit_s: f64,
    /// Run the deterministic tie-breaking second stage (see the module doc).
    pub tie_break: bool,
    /// Give HiGHS a feasible plan to start from: the greedy planner's for
    /// stage 1, stage 1's optimum for stage 2. It only prunes the search
    /// sooner; the optimum T is the same either way.
    pub warm_start: bool,
}

impl Default for OracleOptions {
    fn default() -> Self {
        OracleOptions {
            time_limit_s: 10.0,
            tie_break: true,
            warm_start: true,
        }
    }
}

/// Whether the returned plan is proven optimal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SolveStatus {
    /// Proven optimal (relative gap 1e-9).
    Optimal,
    /// The time limit stopped HiGHS; the plan is the best one found.
    TimeLimit,
}

/// An optimal (or best-found) plan and how it was obtained.
#[derive(Clone, Debug, PartialEq)]
pub struct IlpSolution {
    /// a(i,j) and b_k(i,j); feasible for the input.
    pub plan: Plan,
    /// T of `plan`, computed exactly by [`Plan::makespan_ms`].
    pub makespan_ms: f64,
    /// T as the solver reported it at the end of stage 1 (the optimum).
    pub objective_ms: f64,
    /// Wall time of both stages, model building included.
    pub solve_time: Duration,
    /// Proven optimal or stopped by the time limit.
    pub status: SolveStatus,
}

/// Solves the ILP for one scene: the plan of minimum makespan T.
pub fn solve(
    system: &System,
    input: &PlanInput,
    detector: Detector,
    options: &OracleOptions,
) -> Result<IlpSolution, OracleError> {
    let start = Instant::now();
    check_input(system, input, detector, options)?;
    let stage1 = Formulation::new(system, input, detector)?;
    let start_plan = if options.warm_start {
        heuristic_start(system, input, detector)
    } else {
        None
    };
    let start_plan = start_plan
        .as_ref()
        .map(|p| (p, p.makespan_ms(system, input, detector)));
    let (plan1, t1, status1) = match stage1.solve(
        system,
        options,
        Goal::Makespan,
        Tolerance::Strict,
        start_plan,
    ) {
        // HiGHS can fail outright on a numerically hard model at the strict
        // feasibility tolerances (seen once in 60,000 generated-board
        // solves); its default tolerances then solve it, and the plan is
        // checked exactly below like every other.
        Err(OracleError::Solver(strict)) => Formulation::new(system, input, detector)?
            .solve(system, options, Goal::Makespan, Tolerance::Default, None)
            .map_err(|e| {
                OracleError::Solver(format!("{strict}; at HiGHS's default tolerances: {e}"))
            })?,
        other => other?,
    };
    if let Some(why) = plan1.infeasibility(system, input) {
        return Err(OracleError::Solver(format!(
            "the solver's plan is infeasible: {why}"
        )));
    }
    let m1 = plan1.makespan_ms(system, input, detector);
    let mut best = (plan1, m1, status1);
    if options.tie_break {
        let cap = t1.max(m1) + 1e-7 + 1e-10 * t1.abs();
        let stage2 = Formulation::new(system, input, detector)?;
        // Stage 2 only refines; if it fails, stage 1's plan stands.
        let start = options.warm_start.then_some((&best.0, best.1));
        if let Ok((plan2, _, status2)) = stage2.solve(
            system,
            options,
            Goal::TieBreak(cap),
            Tolerance::Strict,
            start,
        ) {
            let m2 = plan2.makespan_ms(system, input, detector);
            if m2 <= m1 + 1e-6 && plan2.infeasibility(system, input).is_none() {
                let status = if status1 == SolveStatus::Optimal {
                    SolveStatus::Optimal
                } else {
                    status2
                };
                best = (plan2, m2, status);
            }
        }
    }
    let (plan, makespan_ms, status) = best;
    Ok(IlpSolution {
        plan,
        makespan_ms,
        objective_ms: t1,
        solve_time: start.elapsed(),
        status,
    })
}

fn check_input(
    system: &System,
    input: &PlanInput,
    detector: Detector,
    options: &OracleOptions,
) -> Result<(), OracleError> {
    input.validate(system)?;
    for (j, &r) in input.rem_ms.iter().enumerate() {
        if !(r.is_finite() && r >= 0.0) {
            return Err(bad(format!("rem_ms[{j}]"), r, "must be finite and >= 0"));
        }
    }
    let f = input.frames_per_epoch;
    if !(f.is_finite() && f > 0.0) {
        return Err(bad("frames_per_epoch", f, "must be finite and > 0"));
    }
    if !(options.time_limit_s.is_finite() && options.time_limit_s > 0.0) {
        return Err(bad(
            "time_limit_s",
            options.time_limit_s,
            "must be finite and > 0",
        ));
    }
    let root = first_root(system);
    if detector.proc.0 >= system.num_processors() || !system.supports(root, detector.proc) {
        return Err(bad(
            "detector.proc",
            detector.proc.0,
            "must be a processor that runs the first detector",
        ));
    }
    if !(detector.exec_ms.is_finite() && detector.exec_ms >= 0.0) {
        return Err(bad(
            "detector.exec_ms",
            detector.exec_ms,
            "must be finite and >= 0",
        ));
    }
    Ok(())
}

fn bad(what: impl Into<String>, value: impl ToString, reason: &'static str) -> OracleError {
    OracleError::BadValue {
        what: what.into(),
        value: value.to_string(),
        reason,
    }
}

/// The detector whose placement the oracle fixes: the system's first root.
pub fn first_root(system: &System) -> ModelId {
    system
        .roots()
        .next()
        .expect("a validated system has a root")
}

enum Goal {
    Makespan,
    TieBreak(f64),
}

/// One instance of the ILP: variables, constraints and the work expressions.
struct Formulation {
    vars: ProblemVariables,
    t: Variable,
    /// a(i,j), indexed `i * n_p + j`; `None` where fixed.
    a: Vec<Option<Variable>>,
    /// The count choices: y = 1 serves exactly `count` requests of `model`
    /// on `proc`, as the batches of [`Partitions`] for that count.
    counts: Vec<CountChoice>,
    /// The cheapest batching of every count, per request-model pair.
    partitions: Partitions,
    constraints: Vec<Constraint>,
    /// sum_j W_j.
    total_work: Expression,
    /// sum of the a variables.
    residents: Expression,
    root: ModelId,
    detector_proc: ProcId,
}

impl Formulation {
    fn new(system: &System, input: &PlanInput, det: Detector) -> Result<Self, OracleError> {
        let (nm, np) = (system.num_models(), system.num_processors());
        let f = input.frames_per_epoch.max(1.0);
        let root = first_root(system);
        let d = input.rem_ms[det.proc.0] + det.exec_ms;
        let mut vars = ProblemVariables::new();
        let t = vars.add(variable().min(d));
        let mut a: Vec<Option<Variable>> = vec![None; nm * np];
        let mut constraints = Vec::new();
        let mut work: Vec<Expression> = vec![Expression::from(0.0); np];
        let mut slots: Vec<Expression> = vec![Expression::from(0.0); np];
        let mut memory: Vec<Expression> = vec![Expression::from(0.0); np];
        let mut residents = Expression::from(0.0);
        let new_load = |i: ModelId, j: ProcId| {
            if input.was_resident(system, i, j) {
                0.0
            } else {
                system.load_ms(i, j) / f
            }
        };

        // The detector, fixed on p_d.
        work[det.proc.0] += new_load(root, det.proc);
        slots[det.proc.0] += 1.0;
        memory[det.proc.0] += system.size_mb(root, det.proc);

        // Further roots: resident somewhere.
        for r in system.roots().filter(|&r| r != root) {
            let mut somewhere = Expression::from(0.0);
            for j in system.supporting(r) {
                let v = vars.add(variable().binary());
                a[r.0 * np + j.0] = Some(v);
                somewhere += v;
                residents += v;
                work[j.0] += new_load(r, j) * v;
                slots[j.0] += v;
                memory[j.0] += system.size_mb(r, j) * v;
            }
            constraints.push(somewhere.geq(1.0));
        }

        // Classifiers with requests: on each host, one binary per count it
        // may serve there, at that count's cheapest batching.
        let partitions = Partitions::new(system, input);
        let mut counts = Vec::new();
        for i in system.request_models() {
            let r = input.scene[i.0];
            if r == 0 {
                continue;
            }
            let mut served = Expression::from(0.0);
            for j in system.supporting(i) {
                let v = vars.add(variable().binary());
                a[i.0 * np + j.0] = Some(v);
                residents += v;
                work[j.0] += new_load(i, j) * v;
                slots[j.0] += v;
                memory[j.0] += system.size_mb(i, j) * v;
                let mut chosen = Expression::from(0.0);
                for n in 1..=r {
                    let Some(cost) = partitions.cost_ms(i, j, n) else {
                        continue;
                    };
                    let y = vars.add(variable().binary());
                    counts.push(CountChoice {
                        model: i,
                        proc: j,
                        count: n,
                        var: y,
                    });
                    chosen += y;
                    served += f64::from(n) * y;
                    work[j.0] += cost * y;
                }
                constraints.push(chosen.leq(v));
            }
            constraints.push(served.eq(r as f64));
        }

        for j in system.proc_ids() {
            let p = &system.processors[j.0];
            constraints.push(slots[j.0].clone().leq(p.max_resident as f64));
            if let Some(budget) = p.memory_budget_mb {
                let fixed = if j == det.proc {
                    system.size_mb(root, j)
                } else {
                    0.0
                };
                if fixed > budget + 1e-9 {
                    return Err(OracleError::Infeasible(format!(
                        "detector {} needs {fixed} MB on {} but its budget is {budget} MB",
                        system.models[root.0].name, p.name
                    )));
                }
                constraints.push(memory[j.0].clone().leq(budget + 1e-9));
            }
            let ready = input.rem_ms[j.0].max(d);
            constraints.push((ready + work[j.0].clone()).leq(t));
        }
        let total_work = work
            .into_iter()
            .fold(Expression::from(0.0), |acc, w| acc + w);
        Ok(Formulation {
            vars,
            t,
            a,
            counts,
            partitions,
            constraints,
            total_work,
            residents,
            root,
            detector_proc: det.proc,
        })
    }

    /// Solves for `goal`; returns the plan, the solver's T and the status.
    fn solve(
        self,
        system: &System,
        options: &OracleOptions,
        goal: Goal,
        tolerance: Tolerance,
        start: Option<(&Plan, f64)>,
    ) -> Result<(Plan, f64, SolveStatus), OracleError> {
        let Formulation {
            vars,
            t,
            a,
            counts,
            partitions,
            mut constraints,
            total_work,
            residents,
            root,
            detector_proc,
        } = self;
        let objective: Expression = match goal {
            Goal::Makespan => t.into(),
            Goal::TieBreak(cap) => {
                constraints.push(Expression::from(t).leq(cap));
                total_work + 1e-3 * residents
            }
        };
        let np = system.num_processors();
        let mut problem: HighsProblem =
            configure(vars.minimise(objective).using(highs), options, tolerance);
        if let Some((plan, t_ms)) = start {
            // A plan's own batching costs at least the cheapest one, so its
            // makespan is a feasible T for its counts.
            let mut values = vec![(t, t_ms)];
            for i in system.model_ids() {
                for j in system.proc_ids() {
                    if let Some(v) = a[i.0 * np + j.0] {
                        values.push((v, f64::from(u8::from(plan.resident(i, j)))));
                    }
                }
            }
            for c in &counts {
                let on = plan.served_on(c.model, c.proc) == c.count;
                values.push((c.var, f64::from(u8::from(on))));
            }
            problem = problem.with_initial_solution(values);
        }
        for c in constraints {
            problem.add_constraint(c);
        }
        let solution = problem.solve().map_err(|e| match e {
            ResolutionError::Infeasible => OracleError::Infeasible(
                "the residency limits (N_j, memory budgets) leave no host for some model the scene needs"
                    .into(),
            ),
            ResolutionError::Other("NoSolutionFound") => OracleError::NoPlanInTime {
                limit_s: options.time_limit_s,
            },
            other => OracleError::Solver(other.to_string()),
        })?;
        let status = match solution.status() {
            SolutionStatus::Optimal | SolutionStatus::GapLimit => SolveStatus::Optimal,
            SolutionStatus::TimeLimit => SolveStatus::TimeLimit,
        };
        let mut plan = Plan::empty(system);
        plan.set_resident(root, detector_proc, true);
        for i in system.model_ids() {
            for j in system.proc_ids() {
                if let Some(v) = a[i.0 * np + j.0] {
                    if solution.value(v) > 0.5 {
                        plan.set_resident(i, j, true);
                    }
                }
            }
        }
        for c in &counts {
            if solution.value(c.var) > 0.5 {
                for (k, n) in partitions.batches(c.model, c.proc, c.count) {
                    plan.set_batches(c.model, c.proc, k, plan.batches(c.model, c.proc, k) + n);
                }
            }
        }
        Ok((plan, solution.value(t), status))
    }
}

/// One count choice of the formulation: serve exactly `count` requests of
/// `model` on `proc` when `var` is 1.
struct CountChoice {
    model: ModelId,
    proc: ProcId,
    count: u32,
    var: Variable,
}

/// The cheapest batching of n requests of model i on p_j, for every
/// request-model pair and n up to r_i: c(0) = 0, c(n) = min over profiled k
/// <= n of c(n - k) + t_e(i,j,k). Whatever batches a plan serves n requests
/// with cost it at least c(n), so choosing counts at these costs leaves the
/// optimum T unchanged and removes the many equivalent batchings of one
/// count from the search.
pub(crate) struct Partitions {
    np: usize,
    /// Per `i * n_p + j`: (c(n), the last batch size of its batching) for
    /// n = 0..=r_i; empty where i has no requests or p_j does not run it.
    table: Vec<Vec<(f64, usize)>>,
}

impl Partitions {
    pub(crate) fn new(system: &System, input: &PlanInput) -> Self {
        let np = system.num_processors();
        let mut table = vec![Vec::new(); system.num_models() * np];
        for i in system.request_models() {
            let r = input.scene[i.0] as usize;
            if r == 0 {
                continue;
            }
            for j in system.supporting(i) {
                let mut best = vec![(f64::INFINITY, 0); r + 1];
                best[0] = (0.0, 0);
                for n in 1..=r {
                    // Larger batches first: on a tie the fewer batches win.
                    for k in (1..=system.max_batch_on(i, j).min(n)).rev() {
                        let cost = best[n - k].0 + system.exec_ms(i, j, k);
                        if cost < best[n].0 {
                            best[n] = (cost, k);
                        }
                    }
                }
                table[i.0 * np + j.0] = best;
            }
        }
        Partitions { np, table }
    }

    /// c(n) for `n` requests of i on p_j; `None` when no batching serves them.
    pub(crate) fn cost_ms(&self, i: ModelId, j: ProcId, n: u32) -> Option<f64> {
        let cost = self.table[i.0 * self.np + j.0].get(n as usize)?.0;
        cost.is_finite().then_some(cost)
    }

    /// The batches of c(n): (batch size, how many), each size once. Empty
    /// when no batching serves n (the formulation has no choice for it).
    pub(crate) fn batches(&self, i: ModelId, j: ProcId, n: u32) -> Vec<(usize, u32)> {
        let row = &self.table[i.0 * self.np + j.0];
        let mut out: Vec<(usize, u32)> = Vec::new();
        if self.cost_ms(i, j, n).is_none() {
            return out;
        }
        let mut left = n as usize;
        while left > 0 {
            // A finite c(left) has a last batch k >= 1 and a finite c(left - k).
            let k = row[left].1;
            match out.iter_mut().find(|(size, _)| *size == k) {
                Some((_, count)) => *count += 1,
                None => out.push((k, 1)),
            }
            left -= k;
        }
        out
    }
}

/// The greedy planner's plan when it is feasible: a cheap incumbent that
/// lets HiGHS prune from its first node.
fn heuristic_start(system: &System, input: &PlanInput, detector: Detector) -> Option<Plan> {
    let plan = GreedyPlanner::default().plan(system, input);
    let detector_kept = plan.resident(first_root(system), detector.proc);
    (detector_kept && plan.infeasibility(system, input).is_none()).then_some(plan)
}

/// HiGHS's feasibility tolerances for a solve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tolerance {
    /// 1e-9: plans exact to the batch.
    Strict,
    /// HiGHS's own defaults: the fallback when it fails at the strict ones.
    Default,
}

pub(crate) fn configure(
    problem: HighsProblem,
    options: &OracleOptions,
    tolerance: Tolerance,
) -> HighsProblem {
    let problem = problem
        // One thread per solve: the demos already run one solve per core,
        // and HiGHS is safest and deterministic single-threaded.
        .set_threads(1)
        .set_time_limit(options.time_limit_s)
        .set_option("mip_rel_gap", 1e-9)
        .set_option("mip_abs_gap", 1e-9)
        .set_option("output_flag", false);
    match tolerance {
        Tolerance::Strict => problem
            .set_option("mip_feasibility_tolerance", 1e-9)
            .set_option("primal_feasibility_tolerance", 1e-9),
        Tolerance::Default => problem,
    }
}

/// A [`GlobalPolicy`] that solves the ILP at every global step, with the
/// detector on [`Detector::fastest`]. Offline use only (simulator and
/// evaluation): a solve takes milliseconds to seconds.
#[derive(Debug, Default)]
pub struct IlpPolicy {
    options: OracleOptions,
    last: Option<Result<(f64, Duration, SolveStatus), OracleError>>,
}

impl IlpPolicy {
    /// A policy with the given solver options.
    pub fn new(options: OracleOptions) -> Self {
        IlpPolicy {
            options,
            last: None,
        }
    }

    /// The last step's outcome: (T, solve time, status), or why it failed.
    /// When it failed, [`GlobalPolicy::plan`] returned the repaired empty
    /// plan (or the empty plan when even repair found no residency).
    pub fn last_outcome(&self) -> Option<&Result<(f64, Duration, SolveStatus), OracleError>> {
        self.last.as_ref()
    }
}

impl GlobalPolicy for IlpPolicy {
    fn name(&self) -> &str {
        "ilp"
    }

    fn plan(&mut self, system: &System, input: &PlanInput) -> Plan {
        match solve(system, input, Detector::fastest(system), &self.options) {
            Ok(s) => {
                self.last = Some(Ok((s.makespan_ms, s.solve_time, s.status)));
                s.plan
            }
            Err(e) => {
                self.last = Some(Err(e));
                repair(system, input, &Plan::empty(system)).unwrap_or_else(|_| Plan::empty(system))
            }
        }
    }
}
