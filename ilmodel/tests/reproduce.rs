//! `ilmodel reproduce` on a tiny setting: every experiment runs, the report
//! and its plots are written, and the results obey what must hold whatever
//! the numbers (the ILP is never beaten, every cell has data). Not timed.

use std::path::PathBuf;

use camdnn_ilmodel::reproduce::{self, grid, report, PolicyFiles, ReproConfig, CAMDNN, ORACLE};
use camdnn_policy::System;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn tiny_reproduction_writes_every_section() {
    let root = repo();
    let text = std::fs::read_to_string(root.join("config/profiles/rb5.toml")).unwrap();
    let system = System::from_toml(&text).unwrap();
    let policy = PolicyFiles {
        onnx: std::fs::read(root.join("config/policies/rb5.onnx")).unwrap(),
        sidecar: std::fs::read_to_string(root.join("config/policies/rb5.policy.json")).unwrap(),
    };
    let config = ReproConfig {
        scene_step: 400,
        oracle_scene_step: 1200,
        table6_scenes: 8,
        table6_oracle_scenes: 3,
        fidelity_instances: 3,
        timing_runs: 1,
        jobs: 2,
        seed: 7,
        max_objects: 14,
        steady_frames: 75,
        deadline_ms: None,
        suite_boards: 1,
    };
    let mut stages = Vec::new();
    let r = reproduce::run(&system, &policy, &config, |s| stages.push(s.to_string())).unwrap();
    assert_eq!(stages.len(), 8, "{stages:?}");

    // The ILP optimum is never beaten: not by Static-DIST's plan, not by the MLP.
    assert!(r.fig6.optimal.1 <= r.fig6.static_dist.1 + 1e-9);
    assert_eq!(r.fidelity.instances, 3);
    assert!(r.fidelity.extra.mean >= -1e-9, "{:?}", r.fidelity.extra);
    assert!(r.fidelity.ilp_ms.n == 3 && r.fidelity.step_us.n == 3);

    // Every experiment produced data for every scheduler it names.
    assert_eq!(r.sweep.scenes, grid(14, 400));
    for (name, d, drops) in &r.sweep.delays {
        let have = d.iter().filter(|x| x.is_some()).count();
        if name == ORACLE {
            assert!(have >= 1, "oracle ran on no scene");
        } else {
            // The paper's no-drop mode: every scene has a delay, no drops.
            assert_eq!(have, d.len(), "{name} has scenes without a delay");
            assert!(drops.iter().all(|&x| x == 0.0), "{name} dropped frames");
        }
    }
    assert!(r.table5.iter().any(|c| c.scheduler == CAMDNN));
    assert!(r.table5.iter().all(|c| c.n > 0 && c.mean > 0.0));
    assert_eq!(r.table6.len(), reproduce::INTERVALS.len());
    for row in &r.table6 {
        assert_eq!(row.cells.len(), 3);
        assert_eq!(row.oracle_subset.len(), 3);
    }
    assert_eq!(r.walkthrough.delays.len(), 3);
    assert!(r.walkthrough.delays.iter().all(|(_, d)| d.len() == 140));
    // The real-time section: every scheduler on both traces, every offered
    // frame accounted once, ranked best first, never above the rate bound.
    assert_eq!(r.realtime.len(), 2);
    for t in &r.realtime {
        assert_eq!(t.rows.len(), reproduce::realtime_schedulers().len());
        assert!((t.deadline_ms - 2000.0 / 14.0).abs() < 1e-9);
        for row in &t.rows {
            let a = &row.accounting;
            assert_eq!(a.offered, t.frames);
            assert_eq!(a.on_time + a.late + a.dropped, a.offered, "{row:?}");
            assert!(row.rate.ratio() <= 1.0 + 1e-9, "{row:?}");
            assert!(row.bound.p50 >= 1.0 - 1e-9, "{row:?}");
        }
        for pair in t.rows.windows(2) {
            assert_ne!(
                pair[0].accounting.rank_cmp(&pair[1].accounting),
                std::cmp::Ordering::Greater
            );
        }
    }

    // The suite: rb5 and board gen-1, six shapes each; camdnn only where
    // its learned policy is, camdnn-greedy everywhere.
    assert_eq!((r.suite.boards, r.suite.cases), (1, 12));
    for line in [
        "camdnn against each scheduler over the 6 cases it ran",
        "camdnn-greedy against each scheduler over the 12 cases it ran",
        "against every baseline at once: camdnn-greedy loses to some baseline on",
        "hindsight at every baseline's on-time share",
        "p50 (the headline)",
    ] {
        assert!(
            r.suite.summary.contains(line),
            "no {line:?} in the suite's report"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("results.md");
    let svgs = dir.path().join("results");
    report::write(
        &r,
        &system,
        "ilmodel reproduce (test)",
        &doc,
        &svgs,
        "results",
    )
    .unwrap();
    let md = std::fs::read_to_string(&doc).unwrap();
    for section in [
        "## Headline",
        "## Fig. 6",
        "## Sec. 5.3 walk-through",
        "## Fig. 10 and Table 3",
        "## Table 4",
        "## Table 5 and Fig. 11",
        "## Table 6",
        "## IL fidelity and step times",
        "## Real time: on-time share",
        "## The scheduler suite: 1 generated board and rb5",
    ] {
        assert!(md.contains(section), "no {section} in the report");
    }
    for svg in ["fig10.svg", "fig11.svg", "table6.svg"] {
        let body = std::fs::read_to_string(svgs.join(svg)).unwrap();
        assert!(body.starts_with("<svg") && body.contains("<path"), "{svg}");
        assert!(md.contains(&format!("results/{svg}")), "{svg} not linked");
    }
}

#[test]
fn interval_traces_hold_each_scene_for_its_interval() {
    // 14 fps: 5000 ms = 70 frames per scene; 100 ms = 1 or 2 frames.
    let t = reproduce::interval_trace(1, 10, 5000.0, 14);
    assert_eq!(t.segments.len(), 10);
    assert!(t.segments.iter().all(|s| s.frames == 70));
    let t = reproduce::interval_trace(1, 50, 100.0, 14);
    assert_eq!(t.frames(), 70);
    assert!(t.segments.iter().all(|s| (1..=2).contains(&s.frames)));
}
