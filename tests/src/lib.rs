//! Helpers shared by the workspace-level tests in `tests/tests/`.

pub mod docs;

use std::path::PathBuf;

/// The repository root, so tests can find `config/` and the built binaries.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits inside the repository root")
        .to_path_buf()
}
