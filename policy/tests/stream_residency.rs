//! The residency a global step offers for the stream of the scene on
//! camera (`schedulers::stream_residency`): under load the unit with the
//! most work per frame decides, not one frame's makespan on idle units.

use camdnn_policy::schedulers::stream_residency;
use camdnn_policy::{Plan, PlanInput, System};

/// A board of `units` (name, slots) and `profile` rows (model, unit,
/// exec_ms at batch 1, load_ms); every classifier a child of `detector`.
fn board(units: &[(&str, usize)], classifiers: &[&str], profile: &[(&str, &str, f64)]) -> System {
    let mut toml = String::from("name = \"hand\"\nmax_batch = 1\n");
    for (name, slots) in units {
        toml += &format!(
            "\n[[processor]]\nname = \"{name}\"\nkind = \"cpu\"\nmax_resident = {slots}\n"
        );
    }
    toml += "\n[[model]]\nname = \"detector\"\n";
    for c in classifiers {
        toml +=
            &format!("\n[[model]]\nname = \"{c}\"\nparent = \"detector\"\nclasses = [\"{c}\"]\n");
    }
    for (model, unit, exec) in profile {
        toml += &format!("\n[profile.{model}.{unit}]\nexec_ms = [{exec}]\nload_ms = 50.0\n");
    }
    System::from_toml(&toml).unwrap()
}

/// The (model, unit) pairs resident in `plan`.
fn resident(system: &System, plan: &Plan) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for i in system.model_ids() {
        for j in system.proc_ids() {
            if plan.resident(i, j) {
                out.push((
                    system.models[i.0].name.clone(),
                    system.processors[j.0].name.clone(),
                ));
            }
        }
    }
    out
}

/// The stream residency of `scene` from `now`'s residency, idle units.
fn stream_of(system: &System, scene: &[u32], now: &Plan) -> Plan {
    let rem = vec![0.0; system.num_processors()];
    let input = PlanInput {
        scene,
        rem_ms: &rem,
        residency: now.residency(),
        frames_per_epoch: 70.0,
    };
    stream_residency(system, &input)
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// gen-29's shape: an NPU with one slot runs every model fastest. For one
/// frame on idle units the detector belongs there; for a stream of frames
/// with 20 objects of `heavy` it does not: 20 x 2 ms on the NPU against
/// 20 x 14 ms on the CPU, while the detector costs the CPU 21 ms.
#[test]
fn the_heavy_classifier_takes_the_one_slot_unit_and_the_detector_moves() {
    let system = board(
        &[("cpu", 4), ("npu", 1)],
        &["heavy", "light"],
        &[
            ("detector", "cpu", 21.0),
            ("detector", "npu", 5.0),
            ("heavy", "cpu", 14.0),
            ("heavy", "npu", 2.0),
            ("light", "cpu", 7.0),
            ("light", "npu", 1.0),
        ],
    );
    // The detector alone on the NPU, as Algorithm 1's start-up puts it.
    let mut now = Plan::empty(&system);
    now.set_resident(
        system.model_by_name("detector").unwrap(),
        system.proc_by_name("npu").unwrap(),
        true,
    );
    let plan = stream_of(&system, &[1, 20, 2], &now);
    // heavy (40 ms a frame at best) goes first, to the NPU; the detector
    // and light go to the CPU (21 + 14 ms); a replica of heavy on the CPU
    // takes the few requests that bring the NPU's 40 ms a frame down to
    // the CPU's level.
    assert_eq!(
        resident(&system, &plan),
        pairs(&[
            ("detector", "cpu"),
            ("heavy", "cpu"),
            ("heavy", "npu"),
            ("light", "cpu")
        ])
    );

    // A scene without objects: the detector is all the work, and the NPU
    // takes it; a replica on the CPU takes a fifth of the frames (the most
    // loaded unit's 5 ms a frame falls to 4), and is resident only where
    // no model the scene needs wants the slot.
    let plan = stream_of(&system, &[1, 0, 0], &now);
    assert_eq!(
        resident(&system, &plan),
        pairs(&[("detector", "cpu"), ("detector", "npu")])
    );
}

/// Two equal units with room: a classifier with more work than the
/// detector gets a replica on the other unit, which evens out their work
/// per frame (30 + 5 ms on one unit alone; 15 + 5 against 15 with a
/// share moved).
#[test]
fn a_replica_takes_a_share_off_the_most_loaded_unit() {
    let system = board(
        &[("a", 2), ("b", 2)],
        &["cls"],
        &[
            ("detector", "a", 5.0),
            ("detector", "b", 5.0),
            ("cls", "a", 3.0),
            ("cls", "b", 3.0),
        ],
    );
    let plan = stream_of(&system, &[1, 10], &Plan::empty(&system));
    assert_eq!(
        resident(&system, &plan),
        pairs(&[("detector", "b"), ("cls", "a"), ("cls", "b")])
    );
}

/// Fewer slots than the models the scene needs: the models with the most
/// work take the slots, and the lightest is resident nowhere (Algorithm 1
/// loads it on demand). gen-3020's shape: the detector alone on the GPU's
/// one slot, the CPU's three slots for three of four classifiers.
#[test]
fn the_lightest_model_goes_without_a_slot_when_there_are_too_few() {
    let system = board(
        &[("cpu", 3), ("gpu", 1)],
        &["a", "b", "c", "d"],
        &[
            ("detector", "cpu", 24.0),
            ("detector", "gpu", 9.0),
            ("a", "cpu", 13.0),
            ("b", "cpu", 5.0),
            ("c", "cpu", 6.0),
            ("d", "cpu", 12.0),
        ],
    );
    let plan = stream_of(&system, &[1, 5, 1, 1, 1], &Plan::empty(&system));
    assert_eq!(
        resident(&system, &plan),
        pairs(&[
            ("detector", "gpu"),
            ("a", "cpu"),
            ("c", "cpu"),
            ("d", "cpu")
        ])
    );
}
