//! The board and scene generators: deterministic for a seed, and within the
//! ranges the suite promises.

use camdnn_policy::gen::{board, heavy_count, Shape, LOAD_RANGE_MS, SPEED_RANGE};
use camdnn_policy::schedulers::{by_name, BASELINES};
use camdnn_policy::sim::{simulate, SimConfig};
use camdnn_policy::System;

#[test]
fn the_same_seed_gives_the_same_board_and_traces() {
    for seed in [0, 1, 17, 12345] {
        assert_eq!(board(seed), board(seed));
        let system = System::from_spec(&board(seed)).unwrap();
        let heavy = heavy_count(&system, 14.0);
        for shape in Shape::ALL {
            assert_eq!(
                shape.trace(&system, seed, heavy),
                shape.trace(&system, seed, heavy)
            );
        }
    }
    assert_ne!(board(1), board(2));
    let system = System::from_spec(&board(3)).unwrap();
    assert_ne!(
        Shape::RandomWalk.trace(&system, 1, 8),
        Shape::RandomWalk.trace(&system, 2, 8)
    );
}

#[test]
fn boards_stay_within_the_promised_ranges() {
    let (mut unsupported, mut deep, mut procs_seen, mut cls_seen) = (0, 0, [false; 6], [false; 5]);
    for seed in 0..200 {
        let spec = board(seed);
        let system = System::from_spec(&spec)
            .unwrap_or_else(|e| panic!("board {seed} does not validate: {e}"));
        let np = system.num_processors();
        assert!((2..=5).contains(&np), "board {seed}: {np} processors");
        procs_seen[np] = true;
        let classifiers = system
            .request_models()
            .filter(|&i| system.models[i.0].level == 1)
            .count();
        assert!((1..=4).contains(&classifiers), "board {seed}");
        cls_seen[classifiers] = true;
        if system.models.iter().any(|m| m.level == 2) {
            deep += 1;
        }
        let cpu = system.proc_by_name("cpu").unwrap();
        for p in &system.processors {
            assert!((1..=4).contains(&p.max_resident), "board {seed}: {p:?}");
        }
        for i in system.model_ids() {
            assert!(system.supports(i, cpu), "the CPU runs every model");
            for j in system.proc_ids() {
                if !system.supports(i, j) {
                    unsupported += 1;
                    continue;
                }
                let load = system.load_ms(i, j);
                assert!(
                    (LOAD_RANGE_MS.0..=LOAD_RANGE_MS.1).contains(&load),
                    "board {seed}: load {load}"
                );
                // Concave batch curves: t(k) grows, t(k)/k does not.
                for k in 2..=system.max_batch {
                    let (a, b) = (system.exec_ms(i, j, k - 1), system.exec_ms(i, j, k));
                    assert!(b >= a, "board {seed}: t({k}) < t({})", k - 1);
                    assert!(b / k as f64 <= a / (k - 1) as f64 + 0.1, "board {seed}");
                }
                // Speed against the CPU within 0.25x-8x, times the model's
                // affinity (0.6-1.6 on each side, with 0.1 ms rounding).
                let ratio = system.exec_ms(i, cpu, 1) / system.exec_ms(i, j, 1);
                let (lo, hi) = (SPEED_RANGE.0 * 0.6 / 1.6, SPEED_RANGE.1 * 1.6 / 0.6);
                assert!(
                    ratio > lo * 0.9 && ratio < hi * 1.1,
                    "board {seed}: {ratio}"
                );
            }
        }
    }
    assert!(
        unsupported > 100,
        "unsupported pairs are common: {unsupported}"
    );
    assert!(deep > 20, "deeper graphs appear: {deep}");
    assert!(
        procs_seen[2..=5].iter().all(|&s| s),
        "2 to 5 processors all appear"
    );
    assert!(
        cls_seen[1..=4].iter().all(|&s| s),
        "1 to 4 classifiers all appear"
    );
}

#[test]
fn every_shape_fits_its_board_and_every_scheduler_runs_it() {
    for seed in [4, 9] {
        let system = System::from_spec(&board(seed)).unwrap();
        let heavy = heavy_count(&system, 14.0);
        assert!((2..=20).contains(&heavy));
        for shape in Shape::ALL {
            let trace = shape.trace(&system, seed, heavy);
            trace.validate(&system).unwrap();
            assert!(
                trace.frames() >= 400,
                "{}: {}",
                shape.name(),
                trace.frames()
            );
            assert!(trace
                .segments
                .iter()
                .all(|s| s.scene.iter().all(|&r| r <= heavy)));
            assert_eq!(Shape::by_name(shape.name()), Some(shape));
        }
        let trace = Shape::Bursts.trace(&system, seed, heavy);
        for name in BASELINES {
            let mut s = by_name(&system, name, 5.0).unwrap();
            let r = simulate(&system, s.as_mut(), &trace, &SimConfig::default())
                .unwrap_or_else(|e| panic!("board {seed}, {name}: {e}"));
            assert_eq!(r.frames.len(), trace.frames());
        }
    }
}

#[test]
fn shapes_have_their_defining_features() {
    let system = System::from_spec(&board(5)).unwrap();
    let n = system.request_models().count();
    let bursts = Shape::Bursts.trace(&system, 1, 10);
    assert!(bursts
        .segments
        .iter()
        .any(|s| s.scene.iter().all(|&r| r == 0)));
    assert!(bursts.segments.iter().any(|s| s.scene.contains(&10)));
    let empty = Shape::EmptyScenes.trace(&system, 1, 10);
    let empty_frames: usize = empty
        .segments
        .iter()
        .filter(|s| s.scene.iter().all(|&r| r == 0))
        .map(|s| s.frames)
        .sum();
    assert!(empty_frames >= 320, "{empty_frames}");
    let absent = Shape::AbsentType.trace(&system, 1, 10);
    // The first classifier has no objects for the first 200 frames.
    assert!(absent.segments[..4].iter().all(|s| s.scene[0] == 0));
    assert!(absent.segments.iter().all(|s| s.scene.len() == n));
}

#[test]
fn every_baseline_runs_on_every_board_even_with_fewer_slots_than_models() {
    // A board whose static host for a classifier has all its slots taken by
    // pinned detectors (gen-1020: five models, three slots) once failed the
    // whole suite with "static-dist found no processor that can host cls0".
    let mut tight = 0;
    for seed in 1000..1100 {
        let system = System::from_spec(&board(seed)).unwrap();
        let slots: usize = system.processors.iter().map(|p| p.max_resident).sum();
        if slots < system.models.len() {
            tight += 1;
        }
        let heavy = heavy_count(&system, 14.0);
        let full = Shape::Bursts.trace(&system, seed, heavy);
        // Ten empty frames and ten heavy ones: every model runs.
        let trace = camdnn_policy::sim::Trace {
            segments: full.segments[..2].to_vec(),
        };
        for name in BASELINES {
            let mut s = by_name(&system, name, 5.0).unwrap();
            let r = simulate(&system, s.as_mut(), &trace, &SimConfig::default())
                .unwrap_or_else(|e| panic!("board {seed}, {name}: {e}"));
            assert_eq!(r.frames.len(), trace.frames());
        }
    }
    assert!(
        tight > 5,
        "boards with fewer slots than models appear: {tight}"
    );
}
