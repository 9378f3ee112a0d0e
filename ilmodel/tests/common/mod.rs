//! Shared by the ilmodel test binaries: small demonstration sets of rb5.

use camdnn_ilmodel::demos::{generate, DemoConfig};

/// rb5's system file.
pub const RB5: &str = include_str!("../../../config/profiles/rb5.toml");

/// Writes `samples` ILP demonstrations of rb5 (scenes of up to 4 objects per
/// class) to `dir`, drawn with `seed`.
pub fn small_demos(dir: &std::path::Path, seed: u64, samples: u64) {
    generate(&DemoConfig {
        system_toml: RB5.into(),
        out: dir.into(),
        seed,
        max_objects: 4,
        samples,
        rem_max_ms: 60.0,
        frames_per_epoch: 70.0,
        chunk_size: 40,
        jobs: 2,
        time_limit_s: 10.0,
        progress: false,
    })
    .unwrap();
}
