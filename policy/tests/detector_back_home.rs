//! A choice that moved the detector off its fastest unit can take it back
//! without giving up where the classifiers went, and the move back does
//! not strand a classifier. On gen-3181's walk trace (seeds 3000-3299 of
//! the suite's generator) a step one second in took the static-DIST
//! mapping, which put the detector on the GPU (67 ms against 23 on the
//! CPU); no choice brought it back next to the classifier the CPU runs
//! best, and camdnn-greedy answered 0.880 of the frames on time against
//! camdnn-local's 0.978 (docs/decisions.md).

use camdnn_policy::dispatch::strands_a_classifier;
use camdnn_policy::scheduler::Scheduler;
use camdnn_policy::schedulers::{detector_home, LocalDispatcher};
use camdnn_policy::{Cluster, HostRule, ModelId, Plan, PlanInput, ProcId, System};

/// gen-3181's board: a CPU with two slots, a GPU with one, a detector the
/// CPU runs three times faster, `near` (the CPU three times faster) and
/// `far` (the CPU six times faster, and slow to load on the GPU).
fn cpu_two_slots_gpu_one() -> System {
    let mut toml = String::from(
        "name = \"cpu2-gpu1\"\nmax_batch = 1\n\n\
         [[processor]]\nname = \"cpu\"\nkind = \"cpu\"\nmax_resident = 2\n\n\
         [[processor]]\nname = \"gpu\"\nkind = \"gpu\"\nmax_resident = 1\n\n\
         [[model]]\nname = \"detector\"\n\n\
         [[model]]\nname = \"near\"\nparent = \"detector\"\nclasses = [\"a\"]\n\n\
         [[model]]\nname = \"far\"\nparent = \"detector\"\nclasses = [\"b\"]\n",
    );
    for (model, unit, exec, load) in [
        ("detector", "cpu", 22.7, 112.0),
        ("detector", "gpu", 67.1, 19.0),
        ("near", "cpu", 7.7, 17.0),
        ("near", "gpu", 24.7, 8.0),
        ("far", "cpu", 12.8, 55.0),
        ("far", "gpu", 79.6, 178.0),
    ] {
        toml += &format!("\n[profile.{model}.{unit}]\nexec_ms = [{exec}]\nload_ms = {load}\n");
    }
    System::from_toml(&toml).unwrap()
}

/// The residency matrix with each (model, unit) of `resident`.
fn residency_of(system: &System, resident: &[(&str, &str)]) -> Vec<bool> {
    let mut plan = Plan::empty(system);
    for (m, p) in resident {
        let (i, j) = (
            system.model_by_name(m).unwrap(),
            system.proc_by_name(p).unwrap(),
        );
        plan.set_resident(i, j, true);
    }
    plan.residency().to_vec()
}

#[test]
fn the_detector_goes_home_and_the_classifier_that_loses_least_makes_room() {
    let system = cpu_two_slots_gpu_one();
    let residency = residency_of(
        &system,
        &[("detector", "gpu"), ("near", "cpu"), ("far", "cpu")],
    );
    let scene = vec![1, 2, 2];
    let rem = vec![0.0; 2];
    let input = PlanInput {
        scene: &scene,
        rem_ms: &rem,
        residency: &residency,
        frames_per_epoch: 70.0,
    };
    let home = detector_home(&system, &input).expect("the detector is off its fastest unit");
    // The CPU takes the detector; of its two classifiers `near` loses less
    // on the GPU (3.2x against 6.2x), so it takes the slot the detector
    // left there.
    let want = residency_of(
        &system,
        &[("detector", "cpu"), ("far", "cpu"), ("near", "gpu")],
    );
    assert_eq!(home.residency(), want.as_slice());

    // Already home: nothing to offer.
    let input = PlanInput {
        residency: &want,
        ..input
    };
    assert!(detector_home(&system, &input).is_none());
}

#[test]
fn a_detector_copy_over_the_only_copy_of_a_classifier_strands_it() {
    // Just after the step above: the detector loading on the CPU (112 ms),
    // `near` alone on the GPU. A frame arrives. Algorithm 1's rule loads a
    // detector copy on the GPU (soonest: 19 + 67 ms), evicting `near`,
    // which then has no copy; the copy stays pinned, and `near` and `far`
    // take turns in the CPU's other slot, a load for every frame.
    let system = cpu_two_slots_gpu_one();
    let (det, near, far) = (
        system.model_by_name("detector").unwrap(),
        system.model_by_name("near").unwrap(),
        system.model_by_name("far").unwrap(),
    );
    let (cpu, gpu) = (
        system.proc_by_name("cpu").unwrap(),
        system.proc_by_name("gpu").unwrap(),
    );
    let cluster_with = |resident: &[(ModelId, ProcId)]| {
        let mut plan = Plan::empty(&system);
        for &(i, j) in resident {
            plan.set_resident(i, j, true);
        }
        let mut cluster = Cluster::new(&system);
        cluster.preload(&system, &plan);
        assert!(cluster.load(&system, 0.0, det, cpu));
        cluster
    };
    let cluster = cluster_with(&[(far, cpu), (near, gpu)]);
    let mut local = LocalDispatcher::new(HostRule::PerRequest, 5.0);
    assert_eq!(local.place(&system, &cluster, 0.0, det, 1), Some((gpu, 1)));
    assert!(strands_a_classifier(&system, &cluster, det, gpu));
    // Where the detector already is, nothing is loaded.
    assert!(!strands_a_classifier(&system, &cluster, det, cpu));
    // A free slot on the GPU: the copy evicts nothing.
    let cluster = cluster_with(&[(far, cpu)]);
    assert!(!strands_a_classifier(&system, &cluster, det, gpu));
    // `near` evicted from the GPU but still on the CPU: nothing stranded.
    let mut cluster = cluster_with(&[(near, gpu)]);
    assert!(cluster.load(&system, 0.0, near, cpu));
    assert!(!strands_a_classifier(&system, &cluster, det, gpu));
    // A classifier is never the detector copy this is about.
    let cluster = cluster_with(&[(far, cpu), (near, gpu)]);
    assert!(!strands_a_classifier(&system, &cluster, far, gpu));
}
