//! Live estimates of t_e(i,j,k) and t_l(i,j), refined by every finished
//! batch: an exponential moving average (smoothing 0.1, as Band's online
//! estimator) with an exponentially weighted variance beside it, so that a
//! decision that needs a tail (deadline admission) can take mean + z sd.
//!
//! A single sample far outside a cell's spread is held, not learned: only a
//! second one on the same side (a lasting change) is taken, with the first.
//! Sizes never observed are inferred from the nearest observed size of the
//! same pair (the profile's batch curve scaled by the measured / profiled
//! ratio there); pairs never observed, and load times, from the processor's
//! measured / profiled ratio over the pairs it ran.

use crate::{ModelId, ProcId, System};

/// Knobs of [`LiveEstimates`].
#[derive(Clone, Debug, PartialEq)]
pub struct EstimateConfig {
    /// Weight of a new sample in the moving average (Band: 0.1).
    pub smoothing: f64,
    /// Samples averaged plainly before the moving average takes over (and
    /// before outliers are recognised).
    pub warmup: u32,
    /// A sample further than this many standard deviations from the mean
    /// (and beyond `outlier_ratio`) is an outlier.
    pub outlier_sd: f64,
    /// ... and further than this factor from the mean, either way.
    pub outlier_ratio: f64,
    /// Standard deviations over the mean taken for a tail estimate.
    pub tail_z: f64,
}

impl Default for EstimateConfig {
    fn default() -> Self {
        EstimateConfig {
            smoothing: 0.1,
            warmup: 3,
            outlier_sd: 4.0,
            outlier_ratio: 1.5,
            tail_z: 2.0,
        }
    }
}

/// What a sample did to its cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sample {
    /// Learned.
    Taken,
    /// Held as a possible outlier (learned only if the next one agrees).
    Held,
    /// Learned together with the held one before it (a lasting change).
    Confirmed,
    /// Not a usable time (not finite, not positive, unsupported size).
    Refused,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Cell {
    mean: f64,
    var: f64,
    n: u32,
    held: Option<f64>,
}

impl Cell {
    fn learn(&mut self, x: f64, cfg: &EstimateConfig) {
        self.n = self.n.saturating_add(1);
        let a = cfg.smoothing.max(1.0 / self.n as f64);
        let d = x - self.mean;
        self.mean += a * d;
        self.var = (1.0 - a) * (self.var + a * d * d);
    }

    fn sd(&self) -> f64 {
        self.var.max(0.0).sqrt()
    }

    fn observe(&mut self, x: f64, cfg: &EstimateConfig) -> Sample {
        if !(x.is_finite() && x > 0.0) {
            return Sample::Refused;
        }
        if self.n < cfg.warmup {
            self.held = None;
            self.learn(x, cfg);
            return Sample::Taken;
        }
        // A floor on the spread: a cell of identical samples still takes a
        // few per cent of jitter.
        let sd = self.sd().max(0.02 * self.mean);
        let far = (x - self.mean).abs() > cfg.outlier_sd * sd
            && (x > self.mean * cfg.outlier_ratio || x * cfg.outlier_ratio < self.mean);
        if !far {
            self.held = None;
            self.learn(x, cfg);
            return Sample::Taken;
        }
        match self.held.take() {
            Some(h) if (h > self.mean) == (x > self.mean) => {
                // A lasting change: restart the average from the new level.
                self.n = 0;
                self.var = 0.0;
                self.learn(h, cfg);
                self.learn(x, cfg);
                Sample::Confirmed
            }
            _ => {
                self.held = Some(x);
                Sample::Held
            }
        }
    }
}

/// Live t_e and t_l estimates with their spread, over a profile's prior.
#[derive(Clone, Debug)]
pub struct LiveEstimates {
    cfg: EstimateConfig,
    np: usize,
    nb: usize,
    prior_exec: Vec<f64>,
    prior_load: Vec<f64>,
    exec: Vec<Cell>,
    load: Vec<Cell>,
}

impl LiveEstimates {
    /// Estimates that start from `system`'s profile.
    pub fn new(system: &System, cfg: EstimateConfig) -> Self {
        let (nm, np, nb) = (
            system.num_models(),
            system.num_processors(),
            system.max_batch,
        );
        let mut prior_exec = vec![f64::INFINITY; nm * np * nb];
        let mut prior_load = vec![f64::INFINITY; nm * np];
        for i in system.model_ids() {
            for j in system.proc_ids() {
                prior_load[i.0 * np + j.0] = system.load_ms(i, j);
                for k in 1..=nb {
                    prior_exec[(i.0 * np + j.0) * nb + k - 1] = system.exec_ms(i, j, k);
                }
            }
        }
        LiveEstimates {
            cfg,
            np,
            nb,
            exec: vec![Cell::default(); prior_exec.len()],
            load: vec![Cell::default(); prior_load.len()],
            prior_exec,
            prior_load,
        }
    }

    fn cell(&self, i: ModelId, j: ProcId, k: usize) -> Option<usize> {
        (k >= 1 && k <= self.nb && j.0 < self.np)
            .then(|| (i.0 * self.np + j.0) * self.nb + k - 1)
            .filter(|&c| c < self.exec.len() && self.prior_exec[c].is_finite())
    }

    /// A batch of k requests of model i ran on p_j in `ms` (execution only).
    pub fn observe_exec(&mut self, i: ModelId, j: ProcId, k: usize, ms: f64) -> Sample {
        match self.cell(i, j, k) {
            Some(c) => self.exec[c].observe(ms, &self.cfg),
            None => Sample::Refused,
        }
    }

    /// Model i took `ms` to load on p_j.
    pub fn observe_load(&mut self, i: ModelId, j: ProcId, ms: f64) -> Sample {
        let c = i.0 * self.np + j.0;
        if j.0 >= self.np || c >= self.load.len() || !self.prior_load[c].is_finite() {
            return Sample::Refused;
        }
        // Loads are rare and noisy; a zero-length load is a real value.
        self.load[c].observe(ms.max(1e-6), &self.cfg)
    }

    /// Samples learned for (i, j, k).
    pub fn observed(&self, i: ModelId, j: ProcId, k: usize) -> u32 {
        self.cell(i, j, k).map_or(0, |c| self.exec[c].n)
    }

    /// Measured / profiled time on p_j over the sizes it ran, weighted by
    /// their samples (a geometric mean); 1 when nothing ran there.
    pub fn speed_ratio(&self, j: ProcId) -> f64 {
        let (mut sum, mut w) = (0.0, 0.0);
        for (c, cell) in self.exec.iter().enumerate() {
            if cell.n > 0 && (c / self.nb) % self.np == j.0 {
                let n = f64::from(cell.n.min(20));
                sum += n * (cell.mean / self.prior_exec[c]).ln();
                w += n;
            }
        }
        if w > 0.0 {
            (sum / w).exp()
        } else {
            1.0
        }
    }

    /// The estimate of t_e(i,j,k), ms (`f64::INFINITY` when unsupported).
    pub fn exec_ms(&self, i: ModelId, j: ProcId, k: usize) -> f64 {
        let Some(c) = self.cell(i, j, k) else {
            return f64::INFINITY;
        };
        if self.exec[c].n > 0 {
            return self.exec[c].mean;
        }
        // The nearest observed size of the same pair, smaller first.
        let row = c - (k - 1);
        let nearest = (1..self.nb)
            .flat_map(|d| [k.checked_sub(d), Some(k + d)])
            .flatten()
            .filter(|&kk| kk >= 1 && kk <= self.nb)
            .map(|kk| row + kk - 1)
            .find(|&cc| self.exec[cc].n > 0);
        let ratio = match nearest {
            Some(cc) => self.exec[cc].mean / self.prior_exec[cc],
            None => self.speed_ratio(j),
        };
        self.prior_exec[c] * ratio
    }

    /// Standard deviation of t_e(i,j,k), ms: the cell's own once observed,
    /// else its inferred mean times the spread share of the pair's nearest
    /// observed size (0 with nothing observed).
    pub fn exec_sd_ms(&self, i: ModelId, j: ProcId, k: usize) -> f64 {
        let Some(c) = self.cell(i, j, k) else {
            return 0.0;
        };
        if self.exec[c].n > 0 {
            return self.exec[c].sd();
        }
        let row = c - (k - 1);
        let share = (0..self.nb)
            .map(|kk| &self.exec[row + kk])
            .filter(|cell| cell.n > 0 && cell.mean > 0.0)
            .map(|cell| cell.sd() / cell.mean)
            .fold(0.0, f64::max);
        self.exec_ms(i, j, k) * share
    }

    /// A tail estimate of t_e(i,j,k): mean + `tail_z` standard deviations.
    pub fn exec_tail_ms(&self, i: ModelId, j: ProcId, k: usize) -> f64 {
        self.exec_ms(i, j, k) + self.cfg.tail_z * self.exec_sd_ms(i, j, k)
    }

    /// The estimate of t_l(i,j), ms: measured loads, else the profile's
    /// scaled by the processor's speed ratio.
    pub fn load_ms(&self, i: ModelId, j: ProcId) -> f64 {
        let c = i.0 * self.np + j.0;
        match self.load.get(c) {
            Some(cell) if cell.n > 0 => cell.mean,
            Some(_) => self.prior_load[c] * self.speed_ratio(j),
            None => f64::INFINITY,
        }
    }

    /// Scales every estimate on p_j by `factor` (a detected change of the
    /// processor's speed), so plans made now use its new speed at once;
    /// except the cell (i, k) of `learned`, which already learned the new
    /// level (its sample confirmed the change) and would be scaled twice.
    pub fn rescale(&mut self, j: ProcId, factor: f64, learned: Option<(ModelId, usize)>) {
        if !(factor.is_finite() && factor > 0.0) || j.0 >= self.np {
            return;
        }
        let skip = learned.and_then(|(i, k)| self.cell(i, j, k));
        for (c, cell) in self.exec.iter_mut().enumerate() {
            // Unobserved cells follow their observed neighbours.
            if (c / self.nb) % self.np == j.0 && cell.n > 0 && Some(c) != skip {
                cell.mean *= factor;
                cell.var *= factor * factor;
                cell.held = None;
            }
        }
        for (c, cell) in self.load.iter_mut().enumerate() {
            if c % self.np == j.0 && cell.n > 0 {
                cell.mean *= factor;
                cell.var *= factor * factor;
            }
        }
        let unobserved: Vec<usize> = (0..self.prior_exec.len())
            .filter(|&c| (c / self.nb) % self.np == j.0 && self.exec[c].n == 0)
            .collect();
        if unobserved.len() == self.exec.len() / self.np {
            // Nothing observed on p_j yet: scale its prior instead.
            for c in unobserved {
                self.prior_exec[c] *= factor;
            }
            for (c, p) in self.prior_load.iter_mut().enumerate() {
                if c % self.np == j.0 {
                    *p *= factor;
                }
            }
        }
    }

    /// The profile's t_e(i,j,k) the estimates started from, ms
    /// (`f64::INFINITY` when unsupported).
    pub fn profile_exec_ms(&self, i: ModelId, j: ProcId, k: usize) -> f64 {
        self.cell(i, j, k)
            .map_or(f64::INFINITY, |c| self.prior_exec[c])
    }

    /// Gives every estimate on p_j its profile's value back (a re-probe),
    /// each cell's spread scaled with its mean.
    pub fn reset_to_profile(&mut self, j: ProcId) {
        if j.0 >= self.np {
            return;
        }
        let reset = |cell: &mut Cell, prior: f64| {
            if cell.n > 0 && cell.mean > 0.0 && prior.is_finite() {
                let f = prior / cell.mean;
                cell.mean = prior;
                cell.var *= f * f;
            }
        };
        for (c, cell) in self.exec.iter_mut().enumerate() {
            if (c / self.nb) % self.np == j.0 {
                reset(cell, self.prior_exec[c]);
                cell.held = None;
            }
        }
        for (c, cell) in self.load.iter_mut().enumerate() {
            if c % self.np == j.0 {
                reset(cell, self.prior_load[c]);
            }
        }
    }

    /// Writes the estimates of pair (i, j) into `view` (the system the
    /// dispatcher, the batcher and the global step read).
    pub fn apply_pair(&self, view: &mut System, i: ModelId, j: ProcId) {
        if !view.supports(i, j) {
            return;
        }
        let exec: Vec<f64> = (1..=view.max_batch_on(i, j))
            .map(|k| self.exec_ms(i, j, k))
            .collect();
        view.set_pair_timings(i, j, &exec, self.load_ms(i, j));
    }

    /// Writes every supported pair's estimates into `view`.
    pub fn apply_all(&self, view: &mut System) {
        for i in view.model_ids() {
            for j in view.proc_ids() {
                self.apply_pair(view, i, j);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::rng::Rng;

    /// Two units, a detector on the CPU and one model on both (the GPU
    /// faster): t_e(a) = 10/18/26/34 ms on the CPU, 4/6/8/10 ms on the GPU.
    pub(crate) fn board() -> System {
        System::from_toml(
            r#"
name = "two"
max_batch = 4
[[processor]]
name = "cpu"
kind = "cpu"
max_resident = 2
[[processor]]
name = "gpu"
kind = "gpu"
max_resident = 2
[[model]]
name = "detector"
[[model]]
name = "a"
parent = "detector"
classes = ["person"]
[profile.detector.cpu]
exec_ms = [20.0]
load_ms = 100.0
[profile.a.cpu]
exec_ms = [10.0, 18.0, 26.0, 34.0]
load_ms = 50.0
[profile.a.gpu]
exec_ms = [4.0, 6.0, 8.0, 10.0]
load_ms = 80.0
"#,
        )
        .expect("valid board")
    }

    const A: ModelId = ModelId(1);
    const CPU: ProcId = ProcId(0);
    const GPU: ProcId = ProcId(1);

    #[test]
    fn converges_on_a_noisy_series_around_a_new_level() {
        let system = board();
        let mut est = LiveEstimates::new(&system, EstimateConfig::default());
        let mut rng = Rng::new(7);
        // The profile says 10 ms; the unit now runs at 15 ms +- 10 %.
        for _ in 0..200 {
            let x = 15.0 * (0.9 + 0.2 * rng.unit());
            est.observe_exec(A, CPU, 1, x);
        }
        let m = est.exec_ms(A, CPU, 1);
        assert!((m - 15.0).abs() < 0.6, "mean {m}");
        let sd = est.exec_sd_ms(A, CPU, 1);
        // Uniform +-1.5 ms has sd 0.87 ms.
        assert!(sd > 0.4 && sd < 1.4, "sd {sd}");
        assert!(est.exec_tail_ms(A, CPU, 1) > m + 0.8);
    }

    #[test]
    fn a_single_outlier_is_ignored_but_a_lasting_change_is_taken() {
        let system = board();
        let mut est = LiveEstimates::new(&system, EstimateConfig::default());
        for _ in 0..20 {
            est.observe_exec(A, GPU, 1, 4.0);
        }
        assert_eq!(est.observe_exec(A, GPU, 1, 40.0), Sample::Held);
        assert_eq!(est.exec_ms(A, GPU, 1), 4.0);
        assert_eq!(est.observe_exec(A, GPU, 1, 4.0), Sample::Taken);
        assert_eq!(est.exec_ms(A, GPU, 1), 4.0);
        // Two slow samples in a row: a change, learned at once.
        assert_eq!(est.observe_exec(A, GPU, 1, 8.0), Sample::Held);
        assert_eq!(est.observe_exec(A, GPU, 1, 8.0), Sample::Confirmed);
        assert!((est.exec_ms(A, GPU, 1) - 8.0).abs() < 1e-9);
    }

    #[test]
    fn unobserved_sizes_and_loads_follow_observed_neighbours() {
        let system = board();
        let mut est = LiveEstimates::new(&system, EstimateConfig::default());
        // Batch 2 on the CPU runs at twice the profile.
        for _ in 0..5 {
            est.observe_exec(A, CPU, 2, 36.0);
        }
        // Sizes 1, 3, 4 scale with it; the CPU's load as well.
        assert!((est.exec_ms(A, CPU, 1) - 20.0).abs() < 1e-9);
        assert!((est.exec_ms(A, CPU, 4) - 68.0).abs() < 1e-9);
        assert!((est.speed_ratio(CPU) - 2.0).abs() < 1e-9);
        assert!((est.load_ms(A, CPU) - 100.0).abs() < 1e-9);
        // The GPU saw nothing: its profile stands.
        assert_eq!(est.exec_ms(A, GPU, 3), 8.0);
        assert_eq!(est.load_ms(A, GPU), 80.0);
        // A measured load wins over the inferred one.
        est.observe_load(A, CPU, 60.0);
        assert_eq!(est.load_ms(A, CPU), 60.0);
        // Unsupported stays unsupported.
        assert!(est.exec_ms(ModelId(0), GPU, 1).is_infinite());
        assert_eq!(est.observe_exec(ModelId(0), GPU, 1, 5.0), Sample::Refused);
        assert_eq!(est.observe_exec(A, CPU, 9, 5.0), Sample::Refused);
        assert_eq!(est.observe_exec(A, CPU, 1, f64::NAN), Sample::Refused);
    }

    #[test]
    fn applied_estimates_reach_the_system_the_dispatcher_reads() {
        let mut system = board();
        let mut est = LiveEstimates::new(&system, EstimateConfig::default());
        for _ in 0..5 {
            est.observe_exec(A, GPU, 1, 12.0);
        }
        let before = system.generation();
        est.apply_all(&mut system);
        assert!(system.generation() > before);
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(near(system.exec_ms(A, GPU, 1), 12.0));
        assert!(near(system.exec_ms(A, GPU, 4), 30.0));
        assert!(near(system.load_ms(A, GPU), 240.0));
        assert_eq!(system.exec_ms(A, CPU, 1), 10.0);
        // Rescaling a processor moves its estimates at once.
        est.rescale(GPU, 0.5, None);
        assert!(near(est.exec_ms(A, GPU, 1), 6.0));
    }
}
