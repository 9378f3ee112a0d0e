//! Property tests over random systems: the dispatcher serves every request
//! exactly once, never on an unsupported processor, never beyond N_j; repair
//! turns any plan into a feasible one; the simulator accounts for every frame.

use camdnn_policy::schedulers::{self, BASELINES};
use camdnn_policy::sim::{simulate, SimConfig, Trace};
use camdnn_policy::spec::{ModelSpec, PairSpec, ProcessorSpec, ProfileSpec};
use camdnn_policy::{
    choose_host, repair, Cluster, HostRule, ModelId, Plan, PlanInput, ProcId, ProcessorKind,
    System, SystemSpec,
};
use proptest::prelude::*;

/// A random valid system: 1-4 processors, 1-4 classifiers under one
/// detector, random support, timings and N_j.
fn system() -> impl Strategy<Value = System> {
    (1usize..=4, 1usize..=4, 1usize..=5)
        .prop_flat_map(|(np, nc, nb)| {
            let pairs = prop::collection::vec(
                (
                    any::<bool>(),
                    1.0f64..50.0,
                    0.5f64..1.0,
                    0.0f64..200.0,
                    1usize..=nb,
                ),
                (nc + 1) * np,
            );
            let caps = prop::collection::vec(1usize..=3, np);
            (Just((np, nc, nb)), pairs, caps)
        })
        .prop_map(|((np, nc, nb), pairs, caps)| {
            let processors: Vec<ProcessorSpec> = (0..np)
                .map(|j| ProcessorSpec {
                    utilisation_cap: None,
                    name: format!("p{j}"),
                    kind: [
                        ProcessorKind::Cpu,
                        ProcessorKind::Gpu,
                        ProcessorKind::Dsp,
                        ProcessorKind::Other,
                    ][j],
                    // The detector is pinned on p0, so p0 needs room for one more.
                    max_resident: if j == 0 { caps[j] + 1 } else { caps[j] },
                    memory_budget_mb: None,
                })
                .collect();
            let mut models = vec![ModelSpec {
                name: "det".into(),
                parent: None,
                classes: vec![],
            }];
            for c in 0..nc {
                models.push(ModelSpec {
                    name: format!("m{c}"),
                    parent: Some("det".into()),
                    classes: vec![format!("c{c}")],
                });
            }
            let mut profile = ProfileSpec::new();
            for (i, m) in models.iter().enumerate() {
                let mut row = std::collections::BTreeMap::new();
                for j in 0..np {
                    let (on, t1, scale, load, kmax) = pairs[i * np + j];
                    // The detector runs on p0 only; every classifier on p0 at least.
                    let supported = if i == 0 { j == 0 } else { j == 0 || on };
                    if supported {
                        let exec: Vec<f64> = (1..=if i == 0 { 1 } else { kmax })
                            .map(|k| t1 * (1.0 + (k as f64 - 1.0) * scale))
                            .collect();
                        row.insert(
                            format!("p{j}"),
                            PairSpec {
                                exec_ms: exec,
                                load_ms: load,
                                size_mb: None,
                            },
                        );
                    }
                }
                profile.insert(m.name.clone(), row);
            }
            let spec = SystemSpec {
                name: "random".into(),
                max_batch: nb,
                processors,
                models,
                profile,
            };
            System::from_spec(&spec).expect("generated systems are valid")
        })
}

fn scene_for(system: &System, counts: &[u32]) -> Vec<u32> {
    let mut scene = vec![0; system.num_models()];
    for (n, i) in system.request_models().enumerate() {
        scene[i.0] = counts[n % counts.len()];
    }
    scene
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn dispatcher_serves_each_request_once_within_limits(
        system in system(),
        groups in prop::collection::vec((0usize..4, 1usize..20, 0.0f64..30.0), 1..40),
        eft in any::<bool>(),
    ) {
        let rule = if eft { HostRule::FinishTime } else { HostRule::PerRequest };
        let mut cluster = Cluster::new(&system);
        cluster.preload(&system, &camdnn_policy::plan::fastest_hosts(&system));
        let mut now = 0.0;
        let classifiers: Vec<ModelId> = system.request_models().collect();
        for (m, requests, dt) in groups {
            now += dt;
            let i = classifiers[m % classifiers.len()];
            let mut waiting = requests;
            let mut served = 0;
            while waiting > 0 {
                let d = choose_host(&system, &cluster, rule, now, i, waiting).expect("p0 always hosts");
                prop_assert!(system.supports(i, d.proc));
                prop_assert!(d.batch >= 1 && d.batch <= waiting);
                prop_assert!(d.batch <= system.max_batch_on(i, d.proc));
                let p = cluster.run(&system, now, i, d.proc, d.batch);
                prop_assert!(p.finish_ms >= now);
                waiting -= d.batch;
                served += d.batch;
                for j in system.proc_ids() {
                    prop_assert!(cluster.resident_count(j) <= system.processors[j.0].max_resident);
                }
            }
            prop_assert_eq!(served, requests);
        }
    }

    #[test]
    fn repair_makes_any_plan_feasible(
        system in system(),
        counts in prop::collection::vec(0u32..15, 1..5),
        rem in prop::collection::vec(0.0f64..100.0, 4),
        bits in prop::collection::vec(any::<bool>(), 5 * 4),
        batches in prop::collection::vec(0u32..4, 5 * 4 * 5),
    ) {
        let (np, nb) = (system.num_processors(), system.max_batch);
        let scene = scene_for(&system, &counts);
        let residency: Vec<bool> = (0..system.num_models() * np).map(|n| bits[n]).collect();
        let rem = &rem[..np];
        let input = PlanInput { scene: &scene, rem_ms: rem, residency: &residency, frames_per_epoch: 70.0 };
        // An arbitrary plan: random residency, random batches anywhere,
        // unsupported pairs and wrong totals included.
        let mut plan = Plan::empty(&system);
        for i in system.model_ids() {
            for j in system.proc_ids() {
                plan.set_resident(i, j, bits[(i.0 * np + j.0 + 7) % bits.len()]);
                for k in 1..=nb {
                    plan.set_batches(i, j, k, batches[((i.0 * np + j.0) * nb + k - 1) % batches.len()]);
                }
            }
        }
        match repair(&system, &input, &plan) {
            Ok(fixed) => {
                prop_assert_eq!(fixed.infeasibility(&system, &input), None);
                // Repairing a feasible plan keeps it feasible.
                let again = repair(&system, &input, &fixed).expect("feasible stays feasible");
                prop_assert_eq!(again.infeasibility(&system, &input), None);
            }
            Err(e) => prop_assert!(!residency_feasible(&system, &scene), "repair gave up on a feasible scene: {}", e),
        }
    }

    #[test]
    fn simulator_accounts_for_every_frame_and_request(
        system in system(),
        seed in 0u64..1000,
        fps in 5.0f64..40.0,
    ) {
        let n_req = system.request_models().count();
        let trace = Trace::random(seed, n_req, 6, 10, 8);
        let cfg = SimConfig { fps, ..SimConfig::default() };
        for name in BASELINES {
            let mut s = schedulers::by_name(&system, name, 5.0).unwrap();
            let r = simulate(&system, s.as_mut(), &trace, &cfg).unwrap();
            prop_assert_eq!(r.frames.len(), trace.frames());
            // Requests executed = requests of the frames answered, and the
            // detectors of the frames dropped after their detector ran
            // (real-time dropping's second stage; a frame dropped at its
            // arrival ran nothing).
            let mut want = vec![0u64; system.num_models()];
            let mut f = 0;
            for seg in &trace.segments {
                for _ in 0..seg.frames {
                    let ran = r.frames[f].busy_ms.iter().any(|&b| b > 0.0);
                    if r.frames[f].delay_ms.is_some() || ran {
                        for i in system.roots() { want[i.0] += 1; }
                    }
                    if r.frames[f].delay_ms.is_some() {
                        for (i, &c) in system.request_models().zip(&seg.scene) { want[i.0] += c as u64; }
                    }
                    f += 1;
                }
            }
            prop_assert_eq!(&r.served, &want, "{}", name);
            prop_assert!(r.frames.iter().all(|fr| fr.delay_ms.is_none_or(|d| d > 0.0)));
            // Per-frame busy time and loads add up to the totals.
            for j in system.proc_ids() {
                let per_frame: f64 = r.frames.iter().map(|fr| fr.busy_ms[j.0]).sum();
                prop_assert!((per_frame - r.busy_ms[j.0]).abs() < 1e-6 * r.busy_ms[j.0].max(1.0));
            }
            prop_assert_eq!(r.frames.iter().map(|fr| fr.loads).sum::<u32>() + r.epoch_loads, r.loads);
            prop_assert!(r.frames.iter().all(|fr| fr.delay_ms.is_some() || fr.loads == 0 || fr.busy_ms.iter().any(|&b| b > 0.0)));
        }
    }

    #[test]
    fn simulation_is_deterministic(system in system(), seed in 0u64..100) {
        let trace = Trace::random(seed, system.request_models().count(), 4, 10, 10);
        let run = || {
            let mut s = schedulers::by_name(&system, "camdnn-local", 5.0).unwrap();
            simulate(&system, s.as_mut(), &trace, &SimConfig::default()).unwrap()
        };
        prop_assert_eq!(run(), run());
    }
}

/// Whether the models the scene needs (and the pinned detector) can all be
/// given a slot within N_j: bipartite matching with capacities.
fn residency_feasible(system: &System, scene: &[u32]) -> bool {
    let needed: Vec<ModelId> = system
        .model_ids()
        .filter(|&i| system.models[i.0].parent.is_none() || scene[i.0] > 0)
        .collect();
    let mut slots: Vec<ProcId> = Vec::new();
    for j in system.proc_ids() {
        slots.extend(std::iter::repeat_n(j, system.processors[j.0].max_resident));
    }
    let mut owner: Vec<Option<usize>> = vec![None; slots.len()];
    fn augment(
        system: &System,
        m: usize,
        needed: &[ModelId],
        slots: &[ProcId],
        owner: &mut [Option<usize>],
        seen: &mut [bool],
    ) -> bool {
        for s in 0..slots.len() {
            if seen[s] || !system.supports(needed[m], slots[s]) {
                continue;
            }
            seen[s] = true;
            if owner[s].is_none_or(|o| augment(system, o, needed, slots, owner, seen)) {
                owner[s] = Some(m);
                return true;
            }
        }
        false
    }
    (0..needed.len()).all(|m| {
        let mut seen = vec![false; slots.len()];
        augment(system, m, &needed, &slots, &mut owner, &mut seen)
    })
}
