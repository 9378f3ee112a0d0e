use super::*;

const INF: f64 = f64::INFINITY;

/// detector: cpu 10 ms (load 5); a: cpu 8/14/21 ms for k = 1/2/3 (load
/// 6), gpu 4/6/7.5 (load 12); b: gpu only, 5/9 for k = 1/2 (load 10).
fn tiny() -> System {
    System::from_toml(include_str!("../tests/fixtures/tiny.toml")).unwrap()
}

#[test]
fn frame_bound_hand_checked_with_everything_resident() {
    // Scene: detector 1, a 3, b 2, all resident.
    // Critical path: detector 10; a: min(cpu 10 + 8, gpu 10 + 4) = 14;
    // b: gpu 10 + 5 = 15 -> 15.
    // Split, level 1 (from t = 10): a costs 3 x min(8, 14/2, 21/3) = 21
    // on cpu or 3 x min(4, 6/2, 7.5/3) = 7.5 on gpu; b 2 x 4.5 = 9 on
    // gpu only. b on gpu, a split x on cpu: 21x = 9 + 7.5(1 - x) ->
    // x = 16.5/28.5, T = 21 x = 12.1579 -> 22.1579 from arrival.
    // Level 0 (from 0, detector 10 on cpu too): 10 + 21x = 16.5 - 7.5x
    // -> T = 14.789, below level 1's.
    let b = frame_bound(&tiny(), &[1, 3, 2], |_, _| true);
    assert!(close(b.critical_path_ms, 15.0), "{b:?}");
    assert!(close(b.work_split_ms, 10.0 + 21.0 * 16.5 / 28.5), "{b:?}");
    assert!(close(b.bound_ms(), 22.157_894_736_842_1), "{b:?}");
}

#[test]
fn frame_bound_hand_checked_with_nothing_resident() {
    // Scene: detector 1, a 1. Detector: load 5 + 10 = 15. a: cpu
    // max(15, load 6) + 8 = 23, gpu max(15, load 12) + 4 = 19 -> 19.
    // Split level 1 from 15: 8x = 4(1 - x) -> T = 8/3 -> 17.667 < 19.
    let b = frame_bound(&tiny(), &[1, 1, 0], |_, _| false);
    assert!(close(b.critical_path_ms, 19.0), "{b:?}");
    assert!(close(b.work_split_ms, 15.0 + 8.0 / 3.0), "{b:?}");
    assert!(close(b.bound_ms(), 19.0));
    // Only the detector resident: a's loads start at arrival, beside
    // the detector; on gpu the 12 ms load outlasts the detector's 10:
    // cpu max(10, 6) + 8 = 18, gpu max(10, 12) + 4 = 16 -> 16.
    let det_only = frame_bound(&tiny(), &[1, 1, 0], |i, _| i.0 == 0);
    assert!(close(det_only.critical_path_ms, 16.0), "{det_only:?}");
}

#[test]
fn whole_requests_bind_where_the_fractional_split_shares_a_batch() {
    // Scene: detector 1, a 2, everything resident. Critical path: 10 +
    // gpu 4 = 14. Fractional split from 10: a costs 2 x min(8, 14/2) =
    // 14 on cpu or 2 x min(4, 6/2) = 6 on gpu: 14x = 6(1 - x) -> T = 4.2
    // -> 14.2. Whole requests: gpu ends one at 14, both (a batch of 2)
    // at 16; cpu ends one at 18: the two earliest ends are 14 and 16,
    // so at best both are done at 16, above the other two parts.
    let b = frame_bound(&tiny(), &[1, 2, 0], |_, _| true);
    assert!(close(b.critical_path_ms, 14.0), "{b:?}");
    assert!(close(b.work_split_ms, 14.2), "{b:?}");
    assert!(close(b.whole_split_ms, 16.0), "{b:?}");
    assert!(close(b.bound_ms(), 16.0), "{b:?}");
    // a not resident on the gpu: its 12 ms load starts at arrival and
    // ends after the detector, so the gpu ends one at 16 and two at 18,
    // the cpu one at 18: both done at 18 at best.
    let cold_gpu = frame_bound(&tiny(), &[1, 2, 0], |i, j| i.0 == 0 || j.0 == 0);
    assert!(close(cold_gpu.whole_split_ms, 18.0), "{cold_gpu:?}");
}

#[test]
fn least_run_takes_the_best_partition_into_batches() {
    let system = tiny();
    let (a, gpu) = (ModelId(1), ProcId(1));
    // gpu: 4 / 6 / 7.5 ms for 1 / 2 / 3; four requests: 7.5 + 4 = 11.5
    // (6 + 6 = 12 is worse); five: 7.5 + 6 = 13.5.
    let t = least_run_ms(&system, a, gpu, 5);
    for (got, want) in t.iter().zip([4.0, 6.0, 7.5, 11.5, 13.5]) {
        assert!(close(*got, want), "{t:?}");
    }
    // A profile where a batch of 2 runs faster than one request: one
    // request is never taken as slower than two (the value stays a bound).
    let mut odd = tiny();
    odd.set_pair_timings(a, gpu, &[5.0, 4.0, 7.5], 12.0);
    let t = least_run_ms(&odd, a, gpu, 2);
    assert!(close(t[0], 4.0) && close(t[1], 4.0), "{t:?}");
}

#[test]
fn within_slots_the_bound_counts_what_a_unit_cannot_hold_at_once() {
    let system =
        System::from_toml(include_str!("../tests/fixtures/gpu_holds_one_of_two.toml")).unwrap();
    let scene = [1, 1, 1];
    // Everything resident: a and b on the gpu after the detector, 10 +
    // 4 + 5 = 19, or a split off to the cpu: 30x = 9 - 4x -> 17.94.
    let free = frame_bound(&system, &scene, |i, j| system.supports(i, j));
    assert!(close(free.bound_ms(), 10.0 + 9.0 / 34.0 * 30.0), "{free:?}");
    // The gpu holds one of them. Holding a: b loads until 40, done at 45.
    // Holding b: a loads until 50 on the gpu (54) or runs on the cpu
    // from 10 (40); b done at 15. The least of the two is 40, which is
    // also the best schedule.
    assert!(close(frame_bound_within_slots(&system, &scene), 40.0));
    // A frame without b: the gpu holds a, nothing is lost.
    let only_a = [1, 1, 0];
    assert!(close(
        frame_bound_within_slots(&system, &only_a),
        frame_bound(&system, &only_a, |i, j| system.supports(i, j)).bound_ms()
    ));
}

#[test]
fn subsets_of_size_lists_each_set_once() {
    let sets = subsets_of_size(&[0, 2, 5, 7], 2);
    assert_eq!(sets.len(), 6);
    let mut sorted = sets.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 6);
    assert!(sets
        .iter()
        .all(|m| m.count_ones() == 2 && m & !0b1010_0101 == 0));
}

#[test]
fn sustainable_rate_hand_checked() {
    // Per frame: detector 10 on cpu; a 3 x 7 = 21 on cpu or 3 x 2.5 =
    // 7.5 on gpu; b 2 x 4.5 = 9 on gpu. Split: 10 + 21x = 16.5 - 7.5x
    // -> x = 6.5/28.5, T = 14.789 ms per frame -> 67.6 fps.
    let fps = sustainable_fps(&tiny(), &[1.0, 3.0, 2.0]);
    assert!(close(fps, 1000.0 / (10.0 + 21.0 * 6.5 / 28.5)), "{fps}");
    assert_eq!(sustainable_fps(&tiny(), &[0.0, 0.0, 0.0]), INF);
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9 * b.abs().max(1.0)
}

#[test]
fn split_of_one_item_over_two_units_balances_them() {
    // 60 ms of work on p0 or 30 ms on p1: x on p0, (1-x) on p1 with
    // 60x = 30(1-x) -> x = 1/3, T = 20.
    assert!(close(min_split_ms(&[vec![60.0, 30.0]]), 20.0));
}

#[test]
fn split_of_two_items_hand_checked() {
    // Item A: 40 on p0, 40 on p1; item B: 10 on p0, unsupported on p1.
    // B all on p0 (10); A split so that 10 + 40a = 40(1-a) -> a = 3/8,
    // T = 25.
    assert!(close(
        min_split_ms(&[vec![40.0, 40.0], vec![10.0, INF]]),
        25.0
    ));
    // Item A only on p1 (50), item B 10 on p0 or 100 on p1: B all on p0,
    // T = max(50, 10) = 50.
    assert!(close(
        min_split_ms(&[vec![INF, 50.0], vec![10.0, 100.0]]),
        50.0
    ));
}

#[test]
fn split_edge_cases() {
    assert_eq!(min_split_ms(&[]), 0.0);
    assert_eq!(min_split_ms(&[vec![INF, INF]]), INF);
    // Three equal units share 90 ms of work: 30 each.
    assert!(close(min_split_ms(&[vec![90.0, 90.0, 90.0]]), 30.0));
}

/// The split's optimum is never below the work over n_p units at each
/// item's best unit, nor above putting each item on its best unit.
#[test]
fn split_lies_between_simple_bounds() {
    let mut rng = crate::rng::Rng::new(5);
    for _ in 0..200 {
        let p = 1 + rng.below(5) as usize;
        let n = 1 + rng.below(5) as usize;
        let work: Vec<Vec<f64>> = (0..n)
            .map(|_| {
                let mut w: Vec<f64> = (0..p)
                    .map(|_| {
                        if rng.below(4) == 0 {
                            INF
                        } else {
                            1.0 + rng.below(1000) as f64
                        }
                    })
                    .collect();
                if w.iter().all(|x| !x.is_finite()) {
                    w[0] = 7.0;
                }
                w
            })
            .collect();
        let t = min_split_ms(&work);
        let best = |w: &Vec<f64>| w.iter().copied().fold(INF, f64::min);
        let lower = work.iter().map(best).sum::<f64>() / p as f64;
        let upper: f64 = work.iter().map(best).sum();
        assert!(
            t >= lower * (1.0 - 1e-9) && t <= upper * (1.0 + 1e-9),
            "{work:?}: {t}"
        );
        assert!(t >= work.iter().map(best).fold(0.0, f64::max) / p as f64);
    }
}
