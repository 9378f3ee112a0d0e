//! Boards shared by the simulator's hand-checked tests.

use camdnn_policy::System;

/// One CPU, a detector of `detector_ms` and one classifier (5 ms) that the
/// tests' empty scenes never feed.
pub fn one_unit(detector_ms: f64) -> System {
    detector_and_classifier(&[("cpu", "cpu", 2)], ("cpu", detector_ms), ("cpu", 5.0))
}

/// A detector and one classifier (class "thing"), each on one unit, one
/// request per batch, loads of 10 ms: `processors` as (name, kind,
/// max_resident), then each model's unit and time.
pub fn detector_and_classifier(
    processors: &[(&str, &str, usize)],
    detector: (&str, f64),
    classifier: (&str, f64),
) -> System {
    let mut toml = String::from("name = \"test-board\"\nmax_batch = 1\n");
    for (name, kind, slots) in processors {
        toml += &format!(
            "\n[[processor]]\nname = \"{name}\"\nkind = \"{kind}\"\nmax_resident = {slots}\n"
        );
    }
    toml += "\n[[model]]\nname = \"detector\"\n\n[[model]]\nname = \"cls\"\nparent = \"detector\"\nclasses = [\"thing\"]\n";
    for (model, (unit, ms)) in [("detector", detector), ("cls", classifier)] {
        toml += &format!("\n[profile.{model}.{unit}]\nexec_ms = [{ms:?}]\nload_ms = 10.0\n");
    }
    System::from_toml(&toml).unwrap()
}
