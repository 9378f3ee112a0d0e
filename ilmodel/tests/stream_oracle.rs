//! The stream oracle against the exhaustive enumerator on every instance of
//! a small grid (one- and two-scene epochs, a camera faster and slower than
//! the units sustain), and the objective's two regimes on a hand-built board.

use camdnn_ilmodel::stream::brute::brute_force_stream;
use camdnn_ilmodel::stream::oracle::solve_fixed;
use camdnn_ilmodel::stream::{solve_stream, StreamOptions, StreamPolicy, StreamProblem};
use camdnn_ilmodel::{OracleError, SolveStatus};
use camdnn_policy::epoch::EpochScenes;
use camdnn_policy::{GlobalPolicy, ModelId, PlanInput, ProcId, System};

const PAIR: &str = include_str!("fixtures/pair.toml");
const TINY: &str = include_str!("fixtures/tiny.toml");

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

/// Checks one instance; returns whether it was feasible. When no plan
/// serves every scene of the epoch (together they need more models than
/// the units hold), the oracle plans the latest scene alone, and the
/// enumeration is run on that problem too.
fn check(system: &System, problem: &StreamProblem, what: &str) -> bool {
    let mut brute = brute_force_stream(system, problem, 5_000_000).expect("tiny instance");
    let latest = EpochScenes::latest(problem.input.scene, problem.epoch.period_ms);
    let mut solved = *problem;
    if brute.is_none() && problem.epoch.scenes.len() > 1 {
        solved.epoch = &latest;
        brute = brute_force_stream(system, &solved, 5_000_000).expect("tiny instance");
    }
    let ilp = solve_stream(system, problem, &StreamOptions::default());
    match (brute, ilp) {
        (None, Err(OracleError::Infeasible(_))) => false,
        (Some(b), Ok(s)) => {
            assert_eq!(s.status, SolveStatus::Optimal, "{what}");
            assert_eq!(s.scenes, solved.epoch.scenes.len(), "{what}");
            assert!(
                close(b.cost.objective_ms, s.cost.objective_ms),
                "{what}: brute J = {:?} but ILP J = {:?}",
                b.cost,
                s.cost
            );
            assert_eq!(s.plan.infeasibility(system, &problem.input), None, "{what}");
            assert_eq!(b.plan.infeasibility(system, &problem.input), None, "{what}");
            // The plan's residency, fixed, gives back its J.
            let again = solve_fixed(
                system,
                &solved,
                &StreamOptions::default(),
                Some((&s.plan, s.detector)),
            )
            .unwrap();
            assert!(
                close(again.cost.objective_ms, s.cost.objective_ms),
                "{what}"
            );
            true
        }
        (b, s) => panic!(
            "{what}: brute feasible = {}, ILP = {:?}",
            b.is_some(),
            s.map(|s| s.cost)
        ),
    }
}

/// Every a_old where each supported pair is resident or not by a mask
/// (all, none, alternate), the detector resident on the cpu.
fn residencies(system: &System) -> Vec<Vec<bool>> {
    let np = system.num_processors();
    let pairs: Vec<usize> = system
        .model_ids()
        .flat_map(|i| system.supporting(i).map(move |j| i.0 * np + j.0))
        .collect();
    let masks: [fn(usize) -> bool; 3] = [|_| false, |_| true, |n| n % 2 == 1];
    masks
        .iter()
        .map(|keep| {
            let mut a = vec![false; system.num_models() * np];
            for (n, &p) in pairs.iter().enumerate() {
                a[p] = keep(n);
            }
            a[0] = true;
            a
        })
        .collect()
}

fn grid(text: &str, limits: &[(usize, usize)]) -> (usize, usize) {
    let base = System::from_toml(text).unwrap();
    let (mut feasible, mut infeasible) = (0, 0);
    // (rem_cpu, rem_gpu, F, period): idle with a slow camera, a backlog with
    // a camera faster than any plan sustains, a short epoch.
    let settings = [
        (0.0, 0.0, 70.0, 100.0),
        (15.0, 0.0, 70.0, 6.0),
        (0.0, 20.0, 5.0, 20.0),
    ];
    let epochs: [&[([u32; 3], f64)]; 4] = [
        &[([0, 2, 1], 1.0)],
        &[([0, 1, 0], 0.5), ([0, 0, 2], 0.5)],
        &[([0, 2, 2], 0.25), ([0, 1, 0], 0.75)],
        &[([0, 0, 0], 0.6), ([0, 2, 1], 0.4)],
    ];
    for &(n0, n1) in limits {
        let system = base
            .clone()
            .with_max_resident(ProcId(0), n0)
            .with_max_resident(ProcId(1), n1);
        for a_old in residencies(&system) {
            for &(r0, r1, f, period) in &settings {
                for scenes in epochs {
                    let epoch = EpochScenes {
                        scenes: scenes.iter().map(|(s, w)| (s.to_vec(), *w)).collect(),
                        period_ms: period,
                    };
                    let rem = [r0, r1];
                    let problem = StreamProblem {
                        input: PlanInput {
                            scene: &epoch.scenes[0].0,
                            rem_ms: &rem,
                            residency: &a_old,
                            frames_per_epoch: f,
                        },
                        epoch: &epoch,
                    };
                    let what = format!(
                        "{} N=({n0},{n1}) a_old={a_old:?} rem={rem:?} F={f} P={period} scenes={scenes:?}",
                        system.name
                    );
                    if check(&system, &problem, &what) {
                        feasible += 1;
                    } else {
                        infeasible += 1;
                    }
                }
            }
        }
    }
    (feasible, infeasible)
}

#[test]
fn the_stream_ilp_matches_brute_force_on_every_tiny_instance() {
    // pair: the detector runs on both units, the gpu has a memory budget.
    let (feasible, infeasible) = grid(PAIR, &[(3, 2), (1, 2), (2, 1), (1, 1)]);
    assert!(feasible >= 100, "{feasible} feasible");
    assert!(infeasible > 0, "no instance was infeasible");
    // tiny: the detector runs on the cpu only.
    let (feasible, _) = grid(TINY, &[(2, 2), (1, 2)]);
    assert!(feasible >= 50, "{feasible} feasible");
}

/// A board whose NPU runs the detector and a heavy classifier fastest but
/// holds one model, beside a CPU that holds three.
fn one_slot_npu() -> System {
    let mut toml = String::from(
        "name = \"npu\"\nmax_batch = 1\n\n\
         [[processor]]\nname = \"cpu\"\nkind = \"cpu\"\nmax_resident = 3\n\n\
         [[processor]]\nname = \"npu\"\nkind = \"other\"\nmax_resident = 1\n\n\
         [[model]]\nname = \"detector\"\n\n\
         [[model]]\nname = \"person\"\nparent = \"detector\"\nclasses = [\"person\"]\n",
    );
    for (model, unit, exec, load) in [
        ("detector", "cpu", 20.0, 50.0),
        ("detector", "npu", 5.0, 50.0),
        ("person", "cpu", 10.0, 20.0),
        ("person", "npu", 4.0, 100.0),
    ] {
        toml += &format!("\n[profile.{model}.{unit}]\nexec_ms = [{exec}]\nload_ms = {load}\n");
    }
    System::from_toml(&toml).unwrap()
}

/// One person a frame with a slow camera: the frame's makespan decides, and
/// the detector keeps the NPU (5 + 10 ms, against 20 + 4 ms and the loads'
/// wait). Eight persons a frame at 14 fps: on the CPU they take 80 ms a
/// frame, more than the 71.4 ms period, and the oracle gives the NPU to the
/// classifier, the detector going to the CPU: every unit within the period.
#[test]
fn the_oracle_moves_the_detector_off_its_fastest_unit_when_the_stream_needs_it() {
    let system = one_slot_npu();
    let (det, person) = (ModelId(0), ModelId(1));
    let (cpu, npu) = (ProcId(0), ProcId(1));
    let mut a_old = vec![false; 4];
    a_old[det.0 * 2 + npu.0] = true;
    a_old[person.0 * 2 + cpu.0] = true;
    let solve = |persons: u32, period: f64| {
        let scene = vec![0, persons];
        let epoch = EpochScenes::latest(&scene, period);
        let problem = StreamProblem {
            input: PlanInput {
                scene: &scene,
                rem_ms: &[0.0, 0.0],
                residency: &a_old,
                frames_per_epoch: 70.0,
            },
            epoch: &epoch,
        };
        solve_stream(&system, &problem, &StreamOptions::default()).unwrap()
    };
    let slow = solve(1, 500.0);
    assert_eq!(slow.detector, npu);
    assert!(slow.plan.resident(person, cpu) && !slow.plan.resident(person, npu));
    assert!(close(slow.cost.objective_ms, 15.0), "{:?}", slow.cost);
    let heavy = solve(8, 1000.0 / 14.0);
    assert_eq!(heavy.detector, cpu);
    assert!(heavy.plan.resident(person, npu) && heavy.plan.resident(det, cpu));
    assert_eq!(heavy.cost.excess_ms, 0.0, "{:?}", heavy.cost);
    // Keeping the detector on the NPU instead: the CPU's 80 ms a frame
    // falls 8.6 ms behind the 71.4 ms period every frame.
    let kept = {
        let scene = vec![0, 8];
        let epoch = EpochScenes::latest(&scene, 1000.0 / 14.0);
        let problem = StreamProblem {
            input: PlanInput {
                scene: &scene,
                rem_ms: &[0.0, 0.0],
                residency: &a_old,
                frames_per_epoch: 70.0,
            },
            epoch: &epoch,
        };
        let mut stay = camdnn_policy::Plan::empty(&system);
        stay.set_resident(det, npu, true);
        stay.set_resident(person, cpu, true);
        solve_fixed(
            &system,
            &problem,
            &StreamOptions::default(),
            Some((&stay, npu)),
        )
        .unwrap()
    };
    assert!(
        close(kept.cost.excess_ms, 80.0 - 1000.0 / 14.0),
        "{:?}",
        kept.cost
    );
    // J = 85 + 34.5 * 8.57 against about 45.
    assert!(kept.cost.objective_ms > 5.0 * heavy.cost.objective_ms);
}

#[test]
fn the_stream_policy_plans_and_records_its_problems() {
    let system = System::from_toml(PAIR).unwrap();
    let scene = [0, 2, 1];
    let a_old = [true, false, false, false, false, false];
    let input = PlanInput {
        scene: &scene,
        rem_ms: &[0.0, 0.0],
        residency: &a_old,
        frames_per_epoch: 70.0,
    };
    let epoch = EpochScenes {
        scenes: vec![(scene.to_vec(), 0.5), (vec![0, 0, 3], 0.5)],
        period_ms: 50.0,
    };
    let mut p = StreamPolicy::new(StreamOptions::default()).recording();
    let plan = p.plan_epoch(&system, &input, &epoch);
    assert_eq!(plan.infeasibility(&system, &input), None);
    // Both scenes' models have a host: y too, which the latest needs less.
    assert!(system.proc_ids().any(|j| plan.resident(ModelId(2), j)));
    assert_eq!(p.recorded().len(), 1);
    assert_eq!(p.recorded()[0].plan.as_ref(), Some(&plan));
    assert!(matches!(p.last_outcome(), Some(Ok(_))));
}

#[test]
fn bad_stream_inputs_are_named() {
    let system = System::from_toml(PAIR).unwrap();
    let scene = [0, 1, 1];
    let a_old = [true, false, false, false, false, false];
    let solve = |epoch: &EpochScenes| {
        let problem = StreamProblem {
            input: PlanInput {
                scene: &scene,
                rem_ms: &[0.0, 0.0],
                residency: &a_old,
                frames_per_epoch: 70.0,
            },
            epoch,
        };
        solve_stream(&system, &problem, &StreamOptions::default()).unwrap_err()
    };
    let err = solve(&EpochScenes::latest(&scene, 0.0)).to_string();
    assert!(err.contains("period_ms"), "{err}");
    let err = solve(&EpochScenes::latest(&[0, 2, 2], 50.0)).to_string();
    assert!(err.contains("latest scene"), "{err}");
    let halves = EpochScenes {
        scenes: vec![(scene.to_vec(), 0.5), (scene.to_vec(), 0.2)],
        period_ms: 50.0,
    };
    let err = solve(&halves).to_string();
    assert!(err.contains("sum to 1"), "{err}");
}
