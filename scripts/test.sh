#!/usr/bin/env bash
# The test command (README): formatting, lints as errors, every test, then the
# aarch64 build under emulation and the Debian package installed and removed
# (docs/operations.md, "Install on a board").
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
bash scripts/smoke_aarch64.sh
bash scripts/deb_check.sh
