//! Summary statistics for reports: mean, standard deviation and percentiles.

/// Mean, standard deviation and percentiles of a sample.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    /// Sample size.
    pub n: usize,
    /// Arithmetic mean (0 for an empty sample).
    pub mean: f64,
    /// Population standard deviation.
    pub std: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Largest value.
    pub max: f64,
}

impl Summary {
    /// Summarises `values` (any order).
    pub fn of(values: &[f64]) -> Summary {
        if values.is_empty() {
            return Summary::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        Summary {
            n,
            mean,
            std: var.sqrt(),
            p50: percentile(&v, 0.50),
            p99: percentile(&v, 0.99),
            max: v[n - 1],
        }
    }
}

/// Nearest-rank percentile of sorted values, q in [0, 1].
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A median with its percentile-bootstrap confidence interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MedianCi {
    /// The sample's median (nearest rank).
    pub median: f64,
    /// Lower end of the interval.
    pub lo: f64,
    /// Upper end of the interval.
    pub hi: f64,
}

impl MedianCi {
    /// Whether the two intervals share no value.
    pub fn disjoint(&self, other: &MedianCi) -> bool {
        self.hi < other.lo || other.hi < self.lo
    }
}

/// The median of `values` and a percentile-bootstrap interval at `level`
/// (e.g. 0.95): `resamples` resamples with replacement, drawn from a
/// generator seeded with `seed`, so the same sample gives the same
/// interval. `None` for an empty sample.
pub fn bootstrap_median(
    values: &[f64],
    level: f64,
    resamples: usize,
    seed: u64,
) -> Option<MedianCi> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = percentile(&sorted, 0.5);
    let mut state = seed;
    let mut medians: Vec<f64> = (0..resamples.max(1))
        .map(|_| {
            let mut r: Vec<f64> = (0..values.len())
                .map(|_| values[(splitmix(&mut state) % values.len() as u64) as usize])
                .collect();
            r.sort_by(f64::total_cmp);
            percentile(&r, 0.5)
        })
        .collect();
    medians.sort_by(f64::total_cmp);
    let tail = (1.0 - level.clamp(0.0, 1.0)) / 2.0;
    Some(MedianCi {
        median,
        lo: percentile(&medians, tail),
        hi: percentile(&medians, 1.0 - tail),
    })
}

/// SplitMix64: a small deterministic generator (no dependency needed).
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_sample() {
        let s = Summary::of(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!((s.n, s.mean, s.p50, s.max), (4, 2.5, 2.0, 4.0));
        assert!((s.std - 1.118_033_988).abs() < 1e-6);
        assert_eq!(Summary::of(&[]).n, 0);
    }

    #[test]
    fn bootstrap_interval_is_deterministic_and_brackets_the_median() {
        let v = [5.0, 7.0, 6.0, 9.0, 4.0, 6.5, 8.0];
        let a = bootstrap_median(&v, 0.95, 2000, 7).unwrap();
        assert_eq!(a, bootstrap_median(&v, 0.95, 2000, 7).unwrap());
        assert_eq!(a.median, 6.5);
        assert!(a.lo <= a.median && a.median <= a.hi, "{a:?}");
        assert!(a.lo >= 4.0 && a.hi <= 9.0, "{a:?}");
        // A constant sample has a point interval; far apart samples do not overlap.
        let c = bootstrap_median(&[3.0; 5], 0.95, 500, 1).unwrap();
        assert_eq!((c.lo, c.hi), (3.0, 3.0));
        let d = bootstrap_median(&[10.0, 11.0, 10.5, 10.2, 10.8], 0.95, 500, 1).unwrap();
        assert!(a.disjoint(&d) && d.disjoint(&a));
        assert!(!a.disjoint(&a));
        assert!(bootstrap_median(&[], 0.95, 10, 1).is_none());
    }
}
