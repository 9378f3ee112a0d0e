//! A board with fewer model slots than models (no feasible plan hosts every
//! model, so start-up may leave the detector resident nowhere) still
//! answers its frames: real-time dropping never drops every frame for a
//! detector load that only a frame would start. On seeds 2000-2299 and
//! 3000-3299 of the suite's generator, seven such boards answered no frame
//! at all, their units idle (docs/decisions.md).

use camdnn_policy::admission::detector_behind;
use camdnn_policy::schedulers;
use camdnn_policy::sim::{simulate, SimConfig, Trace};
use camdnn_policy::{Cluster, System};

/// A CPU and a GPU with one slot each, a detector (5 ms on the CPU, 8 on
/// the GPU, loads of 500 ms: longer than a frame period) and three
/// classifiers both units run.
fn two_slots_four_models() -> System {
    let mut toml = String::from(
        "name = \"two-slots\"\nmax_batch = 1\n\n\
         [[processor]]\nname = \"cpu\"\nkind = \"cpu\"\nmax_resident = 1\n\n\
         [[processor]]\nname = \"gpu\"\nkind = \"gpu\"\nmax_resident = 1\n\n\
         [[model]]\nname = \"detector\"\n",
    );
    for c in ["a", "b", "c"] {
        toml += &format!(
            "\n[[model]]\nname = \"cls_{c}\"\nparent = \"detector\"\nclasses = [\"{c}\"]\n"
        );
    }
    toml += "\n[profile.detector.cpu]\nexec_ms = [5.0]\nload_ms = 500.0\n";
    toml += "\n[profile.detector.gpu]\nexec_ms = [8.0]\nload_ms = 500.0\n";
    for c in ["a", "b", "c"] {
        for unit in ["cpu", "gpu"] {
            toml += &format!("\n[profile.cls_{c}.{unit}]\nexec_ms = [3.0]\nload_ms = 20.0\n");
        }
    }
    System::from_toml(&toml).unwrap()
}

#[test]
fn a_detector_load_counts_against_a_frame_only_while_a_unit_holds_the_detector() {
    let system = two_slots_four_models();
    let det = system.model_by_name("detector").unwrap();
    let cpu = system.proc_by_name("cpu").unwrap();
    // No placed requests wait: no held work counts.
    let held_ms = 0.0;
    let period = 1000.0 / 14.0;

    // Nothing resident, both units idle: the 500 ms load is the only way
    // to answer a frame, so the frame is not behind.
    let mut cluster = Cluster::new(&system);
    assert!(!detector_behind(&system, &cluster, held_ms, 0.0, period));

    // The detector on the CPU behind 100 ms of work, the GPU idle: the GPU
    // would need the load, the CPU its queue; both are over a period.
    assert!(cluster.load(&system, 0.0, det, cpu));
    cluster.run(&system, 0.0, det, cpu, 1);
    let now = 500.0 + 5.0 - 100.0;
    assert!((cluster.rem_ms(cpu, now) - 100.0).abs() < 1e-9);
    assert!(detector_behind(&system, &cluster, held_ms, now, period));
    // Within a period of the CPU's queue it is not.
    assert!(!detector_behind(
        &system,
        &cluster,
        held_ms,
        now + 40.0,
        period
    ));
}

#[test]
fn the_first_frame_loads_the_detector_and_the_frames_after_the_load_are_answered() {
    // Start-up fills the two slots with classifiers (no plan hosting all
    // four models fits, so none hosts the detector). f0 (0 ms) finds both
    // units idle and loads the detector where it is answered soonest: the
    // CPU, 500 + 5 ms. f1-f6 (71-429 ms) find the CPU more than a period
    // behind and the GPU needing the load: dropped. f7 (500 ms) finds 5 ms
    // queued: 505-510. Every frame after runs at once, 5 ms.
    let system = two_slots_four_models();
    let trace = Trace::parse("20 0 0 0\n", 3).unwrap();
    let mut s = schedulers::by_name(&system, "camdnn-local", 5.0).unwrap();
    let r = simulate(&system, s.as_mut(), &trace, &SimConfig::default()).unwrap();
    let delays: Vec<Option<f64>> = r
        .frames
        .iter()
        .map(|f| f.delay_ms.map(|d| (d * 100.0).round() / 100.0))
        .collect();
    let mut want = vec![Some(505.0)];
    want.extend([None; 6]);
    want.push(Some(10.0));
    want.extend([Some(5.0); 12]);
    assert_eq!(delays, want);
}
