//! Classic HEFT (Topcuoglu, Hariri and Wu, IEEE TPDS 2002) for a static task
//! graph: tasks ordered by upward rank, each placed on the processor giving
//! the earliest finish time, with insertion into idle gaps. Static-DIST uses
//! it to map the model graph once; the canonical example is a unit test.

/// A task graph with computation costs per processor and communication costs
/// per edge (paid when the two tasks run on different processors).
#[derive(Clone, Debug)]
pub struct TaskGraph {
    /// cost[task][proc]: computation time; `f64::INFINITY` = cannot run there.
    pub cost: Vec<Vec<f64>>,
    /// (from, to, communication cost).
    pub edges: Vec<(usize, usize, f64)>,
}

/// Where and when each task runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// Processor of each task.
    pub proc: Vec<usize>,
    /// Start time of each task.
    pub start: Vec<f64>,
    /// Finish time of each task.
    pub finish: Vec<f64>,
}

impl Schedule {
    /// Finish time of the last task.
    pub fn makespan(&self) -> f64 {
        self.finish.iter().copied().fold(0.0, f64::max)
    }
}

impl TaskGraph {
    fn mean_cost(&self, t: usize) -> f64 {
        let finite: Vec<f64> = self.cost[t]
            .iter()
            .copied()
            .filter(|c| c.is_finite())
            .collect();
        finite.iter().sum::<f64>() / finite.len().max(1) as f64
    }

    /// Upward rank of every task: mean cost plus the longest path to an exit.
    pub fn upward_ranks(&self) -> Vec<f64> {
        let n = self.cost.len();
        let mut rank = vec![f64::NAN; n];
        fn visit(g: &TaskGraph, t: usize, rank: &mut Vec<f64>) -> f64 {
            if !rank[t].is_nan() {
                return rank[t];
            }
            let tail = g
                .edges
                .iter()
                .filter(|e| e.0 == t)
                .map(|&(_, s, c)| c + visit(g, s, rank))
                .fold(0.0, f64::max);
            rank[t] = g.mean_cost(t) + tail;
            rank[t]
        }
        for t in 0..n {
            visit(self, t, &mut rank);
        }
        rank
    }

    /// Runs HEFT with the insertion-based policy.
    pub fn heft(&self) -> Schedule {
        let n = self.cost.len();
        let np = self.cost.first().map_or(0, Vec::len);
        let rank = self.upward_ranks();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| rank[b].total_cmp(&rank[a]).then(a.cmp(&b)));
        let mut sched = Schedule {
            proc: vec![0; n],
            start: vec![0.0; n],
            finish: vec![0.0; n],
        };
        // Busy intervals per processor, kept sorted by start.
        let mut busy: Vec<Vec<(f64, f64)>> = vec![Vec::new(); np];
        for &t in &order {
            let mut best: Option<(usize, f64, f64)> = None;
            for (p, slots) in busy.iter().enumerate() {
                let w = self.cost[t][p];
                if !w.is_finite() {
                    continue;
                }
                let ready = self
                    .edges
                    .iter()
                    .filter(|e| e.1 == t)
                    .map(|&(f, _, c)| sched.finish[f] + if sched.proc[f] == p { 0.0 } else { c })
                    .fold(0.0, f64::max);
                let start = earliest_gap(slots, ready, w);
                if best.is_none_or(|(_, _, f)| start + w < f) {
                    best = Some((p, start, start + w));
                }
            }
            let (p, s, f) = best.expect("every task runs on some processor");
            sched.proc[t] = p;
            sched.start[t] = s;
            sched.finish[t] = f;
            let at = busy[p].partition_point(|&(bs, _)| bs < s);
            busy[p].insert(at, (s, f));
        }
        sched
    }
}

fn earliest_gap(slots: &[(f64, f64)], ready: f64, len: f64) -> f64 {
    let mut t = ready;
    for &(s, f) in slots {
        if t + len <= s {
            return t;
        }
        t = t.max(f);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 10-task, 3-processor example of Topcuoglu et al. (2002), Fig. 2.
    fn topcuoglu() -> TaskGraph {
        let cost = [
            [14., 16., 9.],
            [13., 19., 18.],
            [11., 13., 19.],
            [13., 8., 17.],
            [12., 13., 10.],
            [13., 16., 9.],
            [7., 15., 11.],
            [5., 11., 14.],
            [18., 12., 20.],
            [21., 7., 16.],
        ];
        let edges = [
            (1, 2, 18.),
            (1, 3, 12.),
            (1, 4, 9.),
            (1, 5, 11.),
            (1, 6, 14.),
            (2, 8, 19.),
            (2, 9, 16.),
            (3, 7, 23.),
            (4, 8, 27.),
            (4, 9, 23.),
            (5, 9, 13.),
            (6, 8, 15.),
            (7, 10, 17.),
            (8, 10, 11.),
            (9, 10, 13.),
        ];
        TaskGraph {
            cost: cost.iter().map(|r| r.to_vec()).collect(),
            edges: edges.iter().map(|&(a, b, c)| (a - 1, b - 1, c)).collect(),
        }
    }

    #[test]
    fn topcuoglu_example_has_makespan_80() {
        let g = topcuoglu();
        let ranks = g.upward_ranks();
        let expected = [
            108.0, 77.0, 80.0, 80.0, 69.0, 63.333, 42.667, 35.667, 44.333, 14.667,
        ];
        for (r, e) in ranks.iter().zip(expected) {
            assert!((r - e).abs() < 1e-3, "rank {r} != {e}");
        }
        let s = g.heft();
        assert_eq!(s.makespan(), 80.0);
        // Task 1 starts on P3 at 0, the exit task ends on P2 at 80 (paper Fig. 4a).
        assert_eq!((s.proc[0], s.start[0]), (2, 0.0));
        assert_eq!((s.proc[9], s.finish[9]), (1, 80.0));
    }

    #[test]
    fn unsupported_processors_are_never_used() {
        let mut g = topcuoglu();
        for row in &mut g.cost {
            row[1] = f64::INFINITY;
        }
        let s = g.heft();
        assert!(s.proc.iter().all(|&p| p != 1));
    }
}
