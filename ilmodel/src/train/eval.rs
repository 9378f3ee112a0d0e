//! IL fidelity: the extra makespan of the learned policy's (repaired) plans
//! over the ILP optimum T of held-out demonstrations, both measured with
//! [`Plan::makespan_ms`] and [`Detector::fastest`].

use camdnn_policy::mlp::MlpPolicy;
use camdnn_policy::{Detector, GlobalPolicy, Plan, System};

use super::TrainError;
use crate::demos::{Demo, DemoStatus};

/// Distribution of the extra latency (T_policy / T_ilp - 1) over instances.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fidelity {
    /// Instances evaluated.
    pub instances: usize,
    /// Mean extra latency (0.02 = +2 %).
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Worst instance.
    pub max: f64,
    /// Fraction of instances within 1e-6 relative of the optimum.
    pub optimal: f64,
}

/// Evaluates `policy` on the optimal demonstrations among `demos`; any
/// infeasible plan is an error (repair must never let one through).
pub fn fidelity(
    system: &System,
    policy: &mut MlpPolicy,
    demos: &[&Demo],
) -> Result<Fidelity, TrainError> {
    let np = system.num_processors();
    let det = Detector::fastest(system);
    let mut extra = Vec::new();
    let mut a_old = vec![false; system.num_models() * np];
    for d in demos {
        let (DemoStatus::Optimal, Some(t)) = (d.status, d.t_ms) else {
            continue;
        };
        let input = d.input(system, &mut a_old).map_err(TrainError::Invalid)?;
        let plan: Plan = policy.plan(system, &input);
        if let Some(why) = plan.infeasibility(system, &input) {
            return Err(TrainError::Invalid(format!(
                "demonstration {}: the policy's plan is infeasible: {why} ({})",
                d.index,
                policy.last_error().unwrap_or("no error recorded")
            )));
        }
        extra.push(plan.makespan_ms(system, &input, det) / t - 1.0);
    }
    if extra.is_empty() {
        return Err(TrainError::Invalid(
            "no optimal held-out demonstration to evaluate".into(),
        ));
    }
    extra.sort_by(f64::total_cmp);
    let n = extra.len();
    let rank = |q: f64| extra[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
    Ok(Fidelity {
        instances: n,
        mean: extra.iter().sum::<f64>() / n as f64,
        p50: rank(0.5),
        p99: rank(0.99),
        max: extra[n - 1],
        optimal: extra.iter().filter(|&&e| e <= 1e-6).count() as f64 / n as f64,
    })
}
