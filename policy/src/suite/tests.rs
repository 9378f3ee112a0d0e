use super::*;
use crate::bound::frame_bound;
use crate::sim::FrameOutcome;

fn report(delays: &[Option<f64>]) -> SimReport {
    SimReport {
        scheduler: "x".into(),
        frames: delays
            .iter()
            .map(|&d| FrameOutcome {
                arrival_ms: 0.0,
                delay_ms: d,
                loads: 0,
                busy_ms: Vec::new(),
                rem_at_arrival_ms: Vec::new(),
                bound_ms: f64::NAN,
            })
            .collect(),
        busy_ms: Vec::new(),
        loads: 0,
        load_ms: 0.0,
        evictions: 0,
        decisions: 0,
        served: Vec::new(),
        flushes: [0; 3],
        epochs: 0,
        triggered_epochs: 0,
        drop_epochs: 0,
        admission_drops: 0,
        adapt: None,
        epoch_loads: 0,
        duration_ms: 0.0,
    }
}

/// A headline with nothing dropped whose delays around the median are
/// the median itself.
fn headline_at(on_time: f64, median_ms: f64) -> Headline {
    Headline {
        on_time,
        median_ms,
        dropped: 0.0,
        band_ms: [median_ms; 2],
    }
}

#[test]
fn a_dropped_frame_is_a_miss_and_an_infinite_delay() {
    // Serving the heavy frames late still beats dropping them.
    let served = headline(&report(&[Some(10.0), Some(150.0), Some(20.0)]), 100.0);
    let dropped = headline(&report(&[Some(10.0), None, Some(20.0)]), 100.0);
    assert_eq!(served.on_time, dropped.on_time);
    assert_eq!((served.median_ms, dropped.median_ms), (20.0, 20.0));
    let mostly_dropped = headline(&report(&[Some(10.0), None, None]), 100.0);
    assert!(mostly_dropped.on_time < served.on_time);
    assert!(mostly_dropped.median_ms.is_infinite());
    assert!((mostly_dropped.dropped - 2.0 / 3.0).abs() < 1e-12);
}

#[test]
fn the_band_around_the_median_shows_a_half_empty_traces_step() {
    // Ten frames, five fast (empty) and five slow (heavy), one heavy
    // frame dropped: the nearest-rank median (5th) is the slowest empty
    // frame, the 45th percentile (5th of 10, ceil 4.5) the same, the
    // 55th (6th) the fastest heavy one.
    let delays = [
        Some(4.0),
        Some(5.0),
        Some(5.0),
        Some(6.0),
        Some(9.0),
        Some(40.0),
        Some(60.0),
        Some(80.0),
        Some(90.0),
        None,
    ];
    let h = headline(&report(&delays), 100.0);
    assert_eq!((h.band_ms[0], h.median_ms, h.band_ms[1]), (9.0, 9.0, 40.0));
    // The same frames with the heavy ones all dropped: the median and
    // the 45th percentile do not see it, the 55th is a miss.
    let shed = headline(
        &report(&[
            Some(4.0),
            Some(5.0),
            Some(5.0),
            Some(6.0),
            Some(6.0),
            None,
            None,
            None,
            None,
            None,
        ]),
        100.0,
    );
    assert_eq!((shed.band_ms[0], shed.median_ms), (6.0, 6.0));
    assert!(shed.band_ms[1].is_infinite());
    // By rank over two cases: the reference serves both traces' heavy
    // frames (median 9, p55 40); the base sheds them on the first (6,
    // miss) and serves them slower on the second (12, 80). p45 and the
    // median: sqrt(6/9 * 12/9); p55: 80/40 over the one finite pair.
    let case = |shape: &str, r: Headline, b: Headline| Case {
        board: "b".into(),
        shape: shape.into(),
        results: vec![("ref".into(), r), ("base".into(), b)],
        median_bound_ms: 1.0,
        on_time_ceiling: 1.0,
        own_board: vec![],
    };
    let band = |p45, p50, p55| Headline {
        on_time: 0.9,
        median_ms: p50,
        dropped: 0.0,
        band_ms: [p45, p55],
    };
    let cases = [
        case("bursts", h, shed),
        case("walk", h, band(12.0, 12.0, 80.0)),
    ];
    let [p45, p50, p55] = median_speedup_by_rank(&cases, "ref", "base");
    let both = ((6.0_f64 / 9.0) * (12.0 / 9.0)).sqrt();
    assert!((p45.0 - both).abs() < 1e-12 && p45.1 == 2, "{p45:?}");
    assert!((p50.0 - both).abs() < 1e-12 && p50.1 == 2, "{p50:?}");
    assert!((p55.0 - 2.0).abs() < 1e-12 && p55.1 == 1, "{p55:?}");
}

#[test]
fn tally_counts_wins_losses_and_the_worst_case() {
    let h = headline_at;
    let case = |shape: &str, r: Headline, o: Headline| Case {
        board: "b".into(),
        shape: shape.into(),
        results: vec![("ref".into(), r), ("other".into(), o)],
        median_bound_ms: 20.0,
        on_time_ceiling: 1.0,
        own_board: Vec::new(),
    };
    let cases = [
        case("a", h(0.9, 50.0), h(0.8, 100.0)),
        case("b", h(0.5, 50.0), h(1.0, 25.0)),
        case("c", h(0.7, 40.0), h(0.7, 40.0)),
    ];
    let t = &tally(&cases, "ref", 0.001)[0];
    assert_eq!(
        (t.other.as_str(), t.cases, t.wins, t.losses),
        ("other", 3, 1, 1)
    );
    assert_eq!((t.worst_ratio, t.worst_case.as_str()), (0.5, "b/b"));
    assert_eq!(t.under_floor, 1);
    // (2 * 0.5 * 1) ^ (1/3) = 1.
    assert!((t.median_speedup - 1.0).abs() < 1e-12);
    // The other's medians over the bound: (5 * 1.25 * 2) ^ (1/3).
    assert!((t.median_ceiling - 12.5f64.powf(1.0 / 3.0)).abs() < 1e-12);
    // Over "other", the oracle takes "ref" only where it is as often on
    // time (a, c): 100/50 and 40/40; on b "other" stays (25/25).
    let oracle = hindsight_speedup(&cases, "other", &["ref"], 0.001);
    assert!((oracle - 2f64.powf(1.0 / 3.0)).abs() < 1e-12, "{oracle}");
    // Over "ref", "other" is as often on time only on b and c: 50/25.
    let oracle = hindsight_speedup(&cases, "ref", &["other"], 0.001);
    assert!((oracle - 2f64.powf(1.0 / 3.0)).abs() < 1e-12, "{oracle}");
    // Over "other" at ref's on-time share: a: only ref qualifies, 100/50;
    // b: both do, other's own 25/25; c: 40/40.
    let at = hindsight_speedup_at(&cases, "other", "ref", &[], 0.001);
    assert!((at - 2f64.powf(1.0 / 3.0)).abs() < 1e-12, "{at}");
    // Over "ref" at other's share: a: ref itself, 50/50; b: only other
    // qualifies, 50/25; c: 40/40.
    let at = hindsight_speedup_at(&cases, "ref", "other", &[], 0.001);
    assert!((at - 2f64.powf(1.0 / 3.0)).abs() < 1e-12, "{at}");
}

#[test]
fn hindsight_at_a_floor_never_trades_the_floors_on_time_share() {
    let h = headline_at;
    // "fast" has the lowest median but is less often on time than
    // "ours"; "same" is as often on time as "ours" and a little faster.
    let case = Case {
        board: "b".into(),
        shape: "bursts".into(),
        results: vec![
            ("base".into(), h(0.5, 10.0)),
            ("ours".into(), h(0.9, 40.0)),
            ("fast".into(), h(0.6, 5.0)),
            ("same".into(), h(0.9, 20.0)),
        ],
        median_bound_ms: 5.0,
        on_time_ceiling: 1.0,
        own_board: Vec::new(),
    };
    let pool = ["ours", "fast", "same"];
    // At base's own floor the oracle takes "fast": 10/5.
    assert!(
        (hindsight_speedup(std::slice::from_ref(&case), "base", &pool, 0.001) - 2.0).abs() < 1e-12
    );
    // At ours' floor only "ours" and "same" qualify: 10/20.
    let at = hindsight_speedup_at(std::slice::from_ref(&case), "base", "ours", &pool, 0.001);
    assert!((at - 0.5).abs() < 1e-12, "{at}");
    // Without "same" in the pool, "ours" itself: 10/40.
    let at = hindsight_speedup_at(
        std::slice::from_ref(&case),
        "base",
        "ours",
        &["fast"],
        0.001,
    );
    assert!((at - 0.25).abs() < 1e-12, "{at}");
    // A case where every scheduler as often on time as "ours" has an
    // infinite median (more than half dropped) is left out, not a 0x:
    // only the second case counts, "ours" at 40 there: 10/40.
    let mut dropped = case;
    dropped.results[1].1.median_ms = f64::INFINITY;
    dropped.results[3].1.median_ms = f64::INFINITY;
    let mut two = [dropped.clone(), dropped];
    two[1].results[1].1.median_ms = 40.0;
    let at = hindsight_speedup_at(&two, "base", "ours", &["same"], 0.001);
    assert!((at - 0.25).abs() < 1e-12, "{at}");
}

#[test]
fn hindsight_at_every_baseline_keeps_up_with_the_best_of_them() {
    let h = headline_at;
    // The best baseline ("eft", 0.8) sets the floor, not "base" (0.5)
    // nor "ours" (0.9); "ours" and its variant are not baselines.
    let case = |own_board: Vec<String>| Case {
        board: "b".into(),
        shape: "bursts".into(),
        results: vec![
            ("base".into(), h(0.5, 10.0)),
            ("ours".into(), h(0.9, 40.0)),
            ("variant".into(), h(0.95, 8.0)),
            ("eft".into(), h(0.8, 25.0)),
            ("fast".into(), h(0.6, 5.0)),
        ],
        median_bound_ms: 5.0,
        on_time_ceiling: 1.0,
        own_board,
    };
    let pool = ["ours", "variant", "eft", "fast"];
    let at = |cases: &[Case], not_baselines: &[&str]| {
        hindsight_speedup_at_every_baseline(cases, "base", "ours", not_baselines, &pool, 0.001)
    };
    // "fast" is under the floor; of those that keep up, "variant" is
    // fastest: 10/8.
    let one = [case(Vec::new())];
    assert!((at(&one, &["variant"]) - 1.25).abs() < 1e-12);
    // With "variant" a baseline, it sets the floor at 0.95: still 10/8.
    assert!((at(&one, &[]) - 1.25).abs() < 1e-12);
    // "eft" on a board of its own is no baseline: the floor is "fast"'s
    // 0.6 and "fast" qualifies: 10/5.
    let own = [case(vec!["eft".into()])];
    assert!((at(&own, &["variant"]) - 2.0).abs() < 1e-12);
    // A case "ours" did not run on as given is left out.
    let mut not_ours = case(vec!["ours".into()]);
    not_ours.results[2].1.median_ms = 1.0;
    assert!((at(&[not_ours, case(Vec::new())], &["variant"]) - 1.25).abs() < 1e-12);
}

#[test]
fn against_every_baseline_counts_a_case_lost_to_any_of_them_once() {
    let h = |on_time| headline_at(on_time, 50.0);
    let case = |shape: &str, scores: [f64; 4], own: &[&str]| Case {
        board: "b".into(),
        shape: shape.into(),
        results: ["ref", "variant", "one", "two"]
            .iter()
            .zip(scores)
            .map(|(n, s)| (n.to_string(), h(s)))
            .collect(),
        median_bound_ms: 20.0,
        on_time_ceiling: 1.0,
        own_board: own.iter().map(|n| n.to_string()).collect(),
    };
    let cases = [
        // "one" beats ref by a little, "two" by more: one loss, under
        // the floor against "two" only.
        case("a", [0.90, 1.0, 0.91, 0.95], &[]),
        // ref ahead of both; the variant is not a baseline.
        case("b", [0.90, 1.0, 0.80, 0.85], &[]),
        // "two" ahead, but on a board of its own: not compared.
        case("c", [0.50, 0.5, 0.50, 1.00], &["two"]),
        // Within the tie.
        case("d", [0.70, 0.7, 0.7005, 0.70], &[]),
    ];
    let v = against_every_baseline(&cases, "ref", &["variant"], 0.001);
    assert_eq!((v.cases, v.losses, v.under_floor), (4, 1, 1));
    assert!((v.worst_ratio - 0.90 / 0.95).abs() < 1e-12);
    assert_eq!(
        (v.worst_case.as_str(), v.worst_other.as_str()),
        ("b/a", "two")
    );
    // Each tally row sees one loss of its own; at once it is one case.
    let t = tally(&cases, "ref", 0.001);
    let losses = |n: &str| t.iter().find(|t| t.other == n).unwrap().losses;
    assert_eq!((losses("one"), losses("two")), (1, 1));
    // Counting the variant as a baseline adds its wins.
    let v = against_every_baseline(&cases, "ref", &[], 0.001);
    assert_eq!((v.losses, v.under_floor), (2, 2));
}

#[test]
fn a_baseline_on_a_board_of_its_own_is_left_out_of_the_tally() {
    let h = headline_at;
    let case = |own: bool| Case {
        board: "b".into(),
        shape: "s".into(),
        results: vec![
            ("ref".into(), h(0.5, 50.0)),
            ("gpu-only".into(), h(1.0, 25.0)),
        ],
        median_bound_ms: 20.0,
        on_time_ceiling: 1.0,
        own_board: if own {
            vec!["gpu-only".into()]
        } else {
            Vec::new()
        },
    };
    let cases = [case(true), case(false)];
    let t = &tally(&cases, "ref", 0.001)[0];
    assert_eq!((t.cases, t.losses, t.own_board), (1, 1, 1));
    assert_eq!(cases[0].of("gpu-only"), Some(h(1.0, 25.0)));
    assert_eq!(cases[0].comparable("gpu-only"), None);
    // The hindsight oracle cannot pick it there either: 50/25 on one case.
    let oracle = hindsight_speedup(&cases, "ref", &["gpu-only"], 0.001);
    assert!((oracle - 2f64.sqrt()).abs() < 1e-12, "{oracle}");
}

#[test]
fn single_unit_baselines_are_marked_only_where_they_raise_n_j() {
    // rb5's CPU holds 3 of its 4 models: cpu-only raises its N_j.
    let rb5 = System::from_toml(include_str!("../../../config/profiles/rb5.toml")).unwrap();
    let trace = Trace {
        segments: Trace::paper_fig11().segments[..2].to_vec(),
    };
    let mut scheds: Vec<Box<dyn Scheduler + Send>> = ["camdnn-local", "cpu-only"]
        .iter()
        .map(|n| crate::schedulers::by_name(&rb5, n, 5.0).unwrap())
        .collect();
    let case = run_case(
        &rb5,
        "rb5",
        "paper",
        &trace,
        &mut scheds,
        &SimConfig::default(),
    )
    .unwrap();
    assert_eq!(case.own_board, vec!["cpu-only".to_string()]);
    // A board whose CPU holds every model: cpu-only runs on it as given.
    let roomy = rb5
        .clone()
        .with_max_resident(rb5.proc_by_name("cpu").unwrap(), 4);
    let case = run_case(
        &roomy,
        "roomy",
        "paper",
        &trace,
        &mut scheds,
        &SimConfig::default(),
    )
    .unwrap();
    assert!(case.own_board.is_empty(), "{:?}", case.own_board);
}

#[test]
fn the_median_bound_weighs_each_scene_by_its_frames() {
    let system = crate::estimate::tests::board();
    let trace = |empty: usize, busy: usize| Trace {
        segments: vec![
            crate::sim::Segment {
                frames: empty,
                scene: vec![0],
            },
            crate::sim::Segment {
                frames: busy,
                scene: vec![4],
            },
        ],
    };
    // An empty frame is the detector alone: 20 ms on the CPU.
    assert_eq!(median_bound_ms(&system, &trace(3, 1), 1), 20.0);
    let busy = frame_bound(&system, &[1, 4], |i, j| system.supports(i, j)).bound_ms();
    assert!(busy > 20.0, "{busy}");
    assert_eq!(median_bound_ms(&system, &trace(1, 3), 1), busy);
    // Two detector runs per frame (a pyramid) cost more.
    assert!(median_bound_ms(&system, &trace(3, 1), 2) > 20.0);
}
