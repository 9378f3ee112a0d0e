//! The ILP oracle against the exhaustive enumerator on every instance of a
//! small grid, plus the oracle's own contract (errors, conventions, policy).

use camdnn_ilmodel::brute::{brute_force, DEFAULT_LIMIT};
use camdnn_ilmodel::oracle::first_root;
use camdnn_ilmodel::{solve, IlpPolicy, OracleError, OracleOptions, SolveStatus};
use camdnn_policy::{Detector, GlobalPolicy, Plan, PlanInput, ProcId, System};

const TINY: &str = include_str!("fixtures/tiny.toml");
const PAIR: &str = include_str!("fixtures/pair.toml");

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

/// a_old masks over the classifier pairs (i*np + j order, classifiers only),
/// with the detector always resident on its processor.
fn residencies(system: &System, det: Detector) -> Vec<Vec<bool>> {
    let (nm, np) = (system.num_models(), system.num_processors());
    let root = first_root(system);
    let pairs: Vec<usize> = system
        .request_models()
        .flat_map(|i| system.supporting(i).map(move |j| i.0 * np + j.0))
        .collect();
    let masks: [fn(usize) -> bool; 4] = [|_| false, |_| true, |n| n % 2 == 0, |n| n % 2 == 1];
    masks
        .iter()
        .map(|keep| {
            let mut a = vec![false; nm * np];
            a[root.0 * np + det.proc.0] = true;
            for (n, &p) in pairs.iter().enumerate() {
                a[p] = keep(n);
            }
            a
        })
        .collect()
}

/// Checks one instance; returns whether it was feasible.
fn check(system: &System, input: &PlanInput, options: &OracleOptions, what: &str) -> bool {
    let det = Detector::fastest(system);
    let brute = brute_force(system, input, det, DEFAULT_LIMIT).expect("tiny instance");
    let ilp = solve(system, input, det, options);
    match (brute, ilp) {
        (None, Err(OracleError::Infeasible(_))) => false,
        (Some(b), Ok(s)) => {
            assert!(
                close(b.makespan_ms, s.makespan_ms),
                "{what}: brute T = {} but ILP T = {}",
                b.makespan_ms,
                s.makespan_ms
            );
            assert_eq!(s.status, SolveStatus::Optimal, "{what}");
            assert_eq!(
                s.plan.infeasibility(system, input),
                None,
                "{what}: ILP plan"
            );
            assert!(
                close(s.plan.makespan_ms(system, input, det), s.objective_ms),
                "{what}: makespan_ms {} != ILP objective {}",
                s.plan.makespan_ms(system, input, det),
                s.objective_ms
            );
            assert_eq!(
                b.plan.infeasibility(system, input),
                None,
                "{what}: brute plan"
            );
            assert!(close(b.plan.makespan_ms(system, input, det), b.makespan_ms));
            if options.tie_break {
                // Minimal residency: resident exactly where there is work.
                let root = first_root(system);
                for i in system.model_ids() {
                    for j in system.proc_ids() {
                        let want = if i == root {
                            j == det.proc
                        } else {
                            s.plan.served_on(i, j) > 0
                        };
                        assert_eq!(s.plan.resident(i, j), want, "{what}: a({i:?},{j:?})");
                    }
                }
            }
            true
        }
        (b, s) => panic!(
            "{what}: brute feasible = {}, ILP = {:?}",
            b.is_some(),
            s.map(|s| s.makespan_ms)
        ),
    }
}

fn grid(text: &str, limits: &[(usize, usize)], options: &OracleOptions) -> (usize, usize) {
    let base = System::from_toml(text).unwrap();
    let (mut feasible, mut infeasible) = (0, 0);
    // (rem_cpu, rem_gpu, F): idle, detector-side backlog, other-side backlog, no amortisation.
    let rems = [
        (0.0, 0.0, 70.0),
        (5.0, 0.0, 70.0),
        (0.0, 17.5, 1.0),
        (30.0, 2.0, 10.0),
    ];
    for &(n0, n1) in limits {
        let system = base
            .clone()
            .with_max_resident(ProcId(0), n0)
            .with_max_resident(ProcId(1), n1);
        let det = Detector::fastest(&system);
        for a_old in residencies(&system, det) {
            for &(r0, r1, f) in &rems {
                for ra in 0..=4u32 {
                    for rb in 0..=4u32 {
                        let scene = [0, ra, rb];
                        let rem = [r0, r1];
                        let input = PlanInput {
                            scene: &scene,
                            rem_ms: &rem,
                            residency: &a_old,
                            frames_per_epoch: f,
                        };
                        let what = format!(
                            "{} N=({n0},{n1}) a_old={a_old:?} rem={rem:?} F={f} scene={scene:?}",
                            system.name
                        );
                        if check(&system, &input, options, &what) {
                            feasible += 1;
                        } else {
                            infeasible += 1;
                        }
                    }
                }
            }
        }
    }
    (feasible, infeasible)
}

#[test]
fn ilp_matches_brute_force_on_every_tiny_instance() {
    let options = OracleOptions::default();
    let (f, i) = grid(TINY, &[(2, 2), (1, 1), (2, 1)], &options);
    // N = (1,1): the detector fills the cpu and the gpu takes one classifier,
    // so scenes needing both are infeasible; the grid must exercise both.
    assert!(f > 0 && i > 0, "feasible {f}, infeasible {i}");
}

#[test]
fn ilp_matches_brute_force_with_memory_budgets() {
    let options = OracleOptions::default();
    let (f, i) = grid(PAIR, &[(3, 2), (1, 1), (1, 2)], &options);
    assert!(f > 0 && i > 0, "feasible {f}, infeasible {i}");
}

#[test]
fn ilp_without_tie_break_reaches_the_same_optimum() {
    let options = OracleOptions {
        tie_break: false,
        ..OracleOptions::default()
    };
    let (f, _) = grid(PAIR, &[(3, 2)], &options);
    assert!(f > 0);
}

fn tiny_input<'a>(scene: &'a [u32], rem: &'a [f64], a_old: &'a [bool]) -> PlanInput<'a> {
    PlanInput {
        scene,
        rem_ms: rem,
        residency: a_old,
        frames_per_epoch: 70.0,
    }
}

#[test]
fn hand_computed_optimum_pays_the_amortised_load() {
    // One request of "a", nothing resident but the detector (cpu, 10 ms):
    // cpu: 10 + 8 + 6/70; gpu: 10 + 4 + 12/70, the better one.
    let system = System::from_toml(TINY).unwrap();
    let det = Detector::fastest(&system);
    let a_old = [true, false, false, false, false, false];
    let input = tiny_input(&[0, 1, 0], &[0.0, 0.0], &a_old);
    let s = solve(&system, &input, det, &OracleOptions::default()).unwrap();
    assert!(
        close(s.makespan_ms, 10.0 + 4.0 + 12.0 / 70.0),
        "{}",
        s.makespan_ms
    );
    let a = system.model_by_name("a").unwrap();
    assert_eq!(s.plan.batches(a, ProcId(1), 1), 1);
    // Already resident on the cpu and the gpu busy for 20 ms: the cpu wins.
    let a_old = [true, false, true, false, false, false];
    let input = tiny_input(&[0, 1, 0], &[0.0, 20.0], &a_old);
    let s = solve(&system, &input, det, &OracleOptions::default()).unwrap();
    assert!(close(s.makespan_ms, 20.0), "{}", s.makespan_ms);
    assert_eq!(s.plan.batches(a, ProcId(0), 1), 1);
}

#[test]
fn infeasible_scene_is_a_typed_error() {
    let system = System::from_toml(TINY)
        .unwrap()
        .with_max_resident(ProcId(0), 1)
        .with_max_resident(ProcId(1), 1);
    let a_old = [true, false, false, false, false, false];
    let input = tiny_input(&[0, 1, 1], &[0.0, 0.0], &a_old);
    let err = solve(
        &system,
        &input,
        Detector::fastest(&system),
        &OracleOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, OracleError::Infeasible(_)), "{err}");
}

#[test]
fn bad_inputs_are_named() {
    let system = System::from_toml(TINY).unwrap();
    let det = Detector::fastest(&system);
    let a_old = [false; 6];
    let opts = OracleOptions::default();
    let err = solve(
        &system,
        &tiny_input(&[0, 1], &[0.0, 0.0], &a_old),
        det,
        &opts,
    )
    .unwrap_err();
    assert!(err.to_string().contains("scene"), "{err}");
    let err = solve(
        &system,
        &tiny_input(&[0, 1, 0], &[0.0, -1.0], &a_old),
        det,
        &opts,
    )
    .unwrap_err();
    assert!(err.to_string().contains("rem_ms[1]"), "{err}");
    let mut input = tiny_input(&[0, 1, 0], &[0.0, 0.0], &a_old);
    input.frames_per_epoch = f64::NAN;
    let err = solve(&system, &input, det, &opts).unwrap_err();
    assert!(err.to_string().contains("frames_per_epoch"), "{err}");
    let gpu_det = Detector {
        proc: ProcId(1),
        exec_ms: 1.0,
    };
    let input = tiny_input(&[0, 1, 0], &[0.0, 0.0], &a_old);
    let err = solve(&system, &input, gpu_det, &opts).unwrap_err();
    assert!(err.to_string().contains("detector.proc"), "{err}");
    let zero_limit = OracleOptions {
        time_limit_s: 0.0,
        ..OracleOptions::default()
    };
    let err = solve(&system, &input, det, &zero_limit).unwrap_err();
    assert!(err.to_string().contains("time_limit_s"), "{err}");
}

#[test]
fn ilp_policy_plans_and_reports() {
    let system = System::from_toml(TINY).unwrap();
    let a_old = [true, false, false, false, false, false];
    let input = tiny_input(&[0, 4, 3], &[2.0, 0.0], &a_old);
    let mut policy = IlpPolicy::new(OracleOptions::default());
    assert_eq!(policy.name(), "ilp");
    let plan: Plan = policy.plan(&system, &input);
    assert_eq!(plan.infeasibility(&system, &input), None);
    let (t, _, status) = policy.last_outcome().unwrap().clone().unwrap();
    assert_eq!(status, SolveStatus::Optimal);
    let det = Detector::fastest(&system);
    assert!(close(plan.makespan_ms(&system, &input, det), t));

    // Infeasible: the policy still returns a plan and records why.
    let tight = system
        .with_max_resident(ProcId(0), 1)
        .with_max_resident(ProcId(1), 1);
    let _ = policy.plan(&tight, &input);
    assert!(matches!(
        policy.last_outcome(),
        Some(Err(OracleError::Infeasible(_)))
    ));
}

#[test]
fn three_by_three_instance_is_solved_optimally() {
    let system = System::from_toml(include_str!("fixtures/trio.toml")).unwrap();
    let det = Detector::fastest(&system);
    let mut a_old = vec![false; 4 * 3];
    a_old[0] = true; // detector on the cpu
    let input = PlanInput {
        scene: &[0, 6, 3, 5],
        rem_ms: &[0.0, 12.0, 4.0],
        residency: &a_old,
        frames_per_epoch: 70.0,
    };
    let s = solve(&system, &input, det, &OracleOptions::default()).unwrap();
    assert_eq!(s.status, SolveStatus::Optimal);
    assert_eq!(s.plan.infeasibility(&system, &input), None);
    let b = brute_force(&system, &input, det, 50_000_000)
        .unwrap()
        .unwrap();
    assert!(
        close(s.makespan_ms, b.makespan_ms),
        "{} vs {}",
        s.makespan_ms,
        b.makespan_ms
    );
}

#[test]
fn ilp_without_warm_start_reaches_the_same_optimum() {
    let options = OracleOptions {
        warm_start: false,
        ..OracleOptions::default()
    };
    let (f, _) = grid(PAIR, &[(3, 2), (1, 2)], &options);
    assert!(f > 0);
}

#[test]
fn plan_batches_a_count_at_its_cheapest_batching() {
    // Batches of three are cheap: six requests cost 21 + 21 = 42 ms as 3 + 3,
    // against 50 + 10 = 60 ms as 5 + 1 (largest batch first) and 40 + 20 =
    // 60 ms as 4 + 2; on one unit T = 10 (detector) + 42 ms.
    let system = System::from_toml(
        r#"
name = "three"
max_batch = 5

[[processor]]
name = "cpu"
kind = "cpu"
max_resident = 2

[[model]]
name = "detector"

[[model]]
name = "a"
parent = "detector"
classes = ["person"]

[profile.detector.cpu]
exec_ms = [10.0]
load_ms = 5.0

[profile.a.cpu]
exec_ms = [10.0, 20.0, 21.0, 40.0, 50.0]
load_ms = 6.0
"#,
    )
    .unwrap();
    let det = Detector::fastest(&system);
    let a = system.model_by_name("a").unwrap();
    let a_old = [true, true];
    let input = tiny_input(&[0, 6], &[0.0], &a_old);
    for warm_start in [true, false] {
        let options = OracleOptions {
            warm_start,
            ..OracleOptions::default()
        };
        let s = solve(&system, &input, det, &options).unwrap();
        assert!(close(s.makespan_ms, 52.0), "{}", s.makespan_ms);
        let batches: Vec<u32> = (1..=5).map(|k| s.plan.batches(a, ProcId(0), k)).collect();
        assert_eq!(batches, [0, 0, 2, 0, 0], "warm start {warm_start}");
    }
}
