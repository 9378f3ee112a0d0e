//! The largest camera count that passes a trial, for a pass/fail trial that is (nearly)
//! monotone in the count: gallop from the last known answer, then bisect.

/// The largest `n` in `0..=max` for which `pass(n)` holds, assuming every smaller count
/// passes too; `hint` (an earlier round's answer) is tried first. A count is tried at most
/// once; 0 always passes and is never tried.
pub(crate) fn largest_passing<E>(
    max: usize,
    hint: Option<usize>,
    mut pass: impl FnMut(usize) -> Result<bool, E>,
) -> Result<usize, E> {
    // lo passes, hi fails (max + 1: not known to fail).
    let (mut lo, mut hi) = (0usize, max + 1);
    let mut probe = |n: usize, lo: &mut usize, hi: &mut usize| -> Result<(), E> {
        if pass(n)? {
            *lo = n;
        } else {
            *hi = n;
        }
        Ok(())
    };
    if let Some(h) = hint.map(|h| h.clamp(1, max.max(1))).filter(|_| max > 0) {
        probe(h, &mut lo, &mut hi)?;
    }
    // Gallop away from what is known until the answer is bracketed.
    let mut step = 1;
    while hi - lo > 1 && (lo == 0 || hi == max + 1) && step <= max {
        let n = if hi == max + 1 {
            (lo + step).min(max)
        } else {
            hi.saturating_sub(step).max(1)
        };
        if n <= lo || n >= hi {
            break;
        }
        probe(n, &mut lo, &mut hi)?;
        step *= 2;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        probe(mid, &mut lo, &mut hi)?;
    }
    Ok(lo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Every threshold and hint: the answer is exact and no count is tried twice.
    #[test]
    fn finds_the_threshold_from_any_hint() {
        for max in [0usize, 1, 2, 7, 40] {
            for limit in 0..=max {
                for hint in std::iter::once(None).chain((0..=max + 2).map(Some)) {
                    let mut tried = BTreeSet::new();
                    let got = largest_passing::<()>(max, hint, |n| {
                        assert!((1..=max).contains(&n), "tried {n} of 1..={max}");
                        assert!(tried.insert(n), "tried {n} twice");
                        Ok(n <= limit)
                    })
                    .unwrap();
                    assert_eq!(got, limit, "max {max}, hint {hint:?}");
                }
            }
        }
    }

    #[test]
    fn a_right_hint_costs_two_trials() {
        let mut trials = 0;
        let got = largest_passing::<()>(64, Some(12), |n| {
            trials += 1;
            Ok(n <= 12)
        })
        .unwrap();
        assert_eq!((got, trials), (12, 2));
    }

    #[test]
    fn a_failing_trial_stops_the_search() {
        let r = largest_passing(8, None, |n| if n < 3 { Ok(true) } else { Err(n) });
        assert_eq!(r, Err(3));
    }
}
