//! A detector that runs several items per frame (one per pyramid scale):
//! the simulator runs every one of them before the frame's requests, and a
//! zero count is a config error, not an empty frame.

use camdnn_policy::schedulers;
use camdnn_policy::sim::{simulate, SimConfig, SimError, Trace};
use camdnn_policy::System;

const RB5: &str = include_str!("../../config/profiles/rb5.toml");

fn run(root_items: u32) -> Result<camdnn_policy::sim::SimReport, SimError> {
    let system = System::from_toml(RB5).unwrap();
    let mut s = schedulers::by_name(&system, "camdnn-greedy", 5.0).unwrap();
    let trace = Trace::parse("20 2 1 1\n", 3).unwrap();
    let cfg = SimConfig {
        fps: 2.0,
        root_items,
        ..SimConfig::default()
    };
    simulate(&system, s.as_mut(), &trace, &cfg)
}

#[test]
fn every_root_item_runs_and_delays_the_frame() {
    let system = System::from_toml(RB5).unwrap();
    let root = system.roots().next().unwrap();
    let one = run(1).unwrap();
    let eight = run(8).unwrap();
    assert_eq!(one.dropped() + eight.dropped(), 0);
    assert_eq!(one.served[root.0], 20);
    assert_eq!(eight.served[root.0], 160);
    for i in system.request_models() {
        assert_eq!(eight.served[i.0], one.served[i.0], "model {i:?}");
    }
    assert!(
        eight.delay().mean > one.delay().mean,
        "8 detector items per frame ({:.1} ms) should take longer than 1 ({:.1} ms)",
        eight.delay().mean,
        one.delay().mean
    );
}

#[test]
fn zero_root_items_is_a_config_error() {
    let e = run(0).unwrap_err();
    assert!(
        matches!(
            e,
            SimError::Config {
                field: "root_items",
                ..
            }
        ),
        "{e}"
    );
}
