//! The work split bound of `policy::bound` (an exact dual simplex written for
//! n_p <= 5) against the primal linear program solved by HiGHS, on random
//! instances with unsupported pairs.

use camdnn_policy::bound::min_split_ms;
use camdnn_policy::rng::Rng;
use good_lp::solvers::highs::highs;
use good_lp::{variable, Expression, ProblemVariables, Solution, SolverModel};

/// min T s.t. sum_j x_ij = 1, sum_i w_ij x_ij <= T, x >= 0 (x_ij only where
/// w_ij is finite).
fn primal(work: &[Vec<f64>]) -> f64 {
    let mut vars = ProblemVariables::new();
    let t = vars.add(variable().min(0.0));
    let p = work[0].len();
    let x: Vec<Vec<Option<good_lp::Variable>>> = work
        .iter()
        .map(|w| {
            w.iter()
                .map(|v| v.is_finite().then(|| vars.add(variable().min(0.0))))
                .collect()
        })
        .collect();
    let mut problem = vars.minimise(t).using(highs);
    for row in &x {
        let sum: Expression = row.iter().flatten().copied().sum();
        problem.add_constraint(sum.eq(1.0));
    }
    for j in 0..p {
        let load: Expression = work
            .iter()
            .zip(&x)
            .filter_map(|(w, row)| row[j].map(|v| w[j] * v))
            .sum();
        problem.add_constraint(load.leq(t));
    }
    problem.solve().unwrap().value(t)
}

#[test]
fn the_dual_simplex_matches_highs_on_random_splits() {
    let mut rng = Rng::new(13);
    for _ in 0..300 {
        let p = 1 + rng.below(5) as usize;
        let n = 1 + rng.below(6) as usize;
        let work: Vec<Vec<f64>> = (0..n)
            .map(|_| {
                let mut w: Vec<f64> = (0..p)
                    .map(|_| {
                        if rng.below(3) == 0 {
                            f64::INFINITY
                        } else {
                            0.5 + rng.below(2000) as f64 / 7.0
                        }
                    })
                    .collect();
                if w.iter().all(|v| !v.is_finite()) {
                    w[rng.below(p as u64) as usize] = 3.0;
                }
                w
            })
            .collect();
        let ours = min_split_ms(&work);
        let lp = primal(&work);
        assert!(
            (ours - lp).abs() <= 1e-6 * lp.max(1.0),
            "{work:?}: ours {ours}, HiGHS {lp}"
        );
    }
}
