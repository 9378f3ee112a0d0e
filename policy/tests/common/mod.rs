//! Boards shared by the simulator's hand-checked tests.

use camdnn_policy::System;

/// One CPU, a detector of `detector_ms` and one classifier (5 ms) that the
/// tests' empty scenes never feed.
pub fn one_unit(detector_ms: f64) -> System {
    System::from_toml(&format!(
        r#"
name = "one-unit"
max_batch = 1

[[processor]]
name = "cpu"
kind = "cpu"
max_resident = 2

[[model]]
name = "detector"

[[model]]
name = "cls"
parent = "detector"
classes = ["thing"]

[profile.detector.cpu]
exec_ms = [{detector_ms:?}]
load_ms = 10.0

[profile.cls.cpu]
exec_ms = [5.0]
load_ms = 10.0
"#
    ))
    .unwrap()
}
