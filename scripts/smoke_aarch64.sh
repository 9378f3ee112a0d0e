#!/usr/bin/env bash
# The aarch64 camdnnd under emulation (qemu-aarch64, user mode), run by
# scripts/test.sh: cross-builds it (scripts/cross_build.sh --quick: the same
# code and dependencies as the release build, unoptimised), then serves the shipped
# simulated-RB5 config with it and checks this host's feeder, the Python
# client, /metrics, /health and a SIGTERM drain against it
# (scripts/smoke_aarch64.py sim). The real-model comparison with the x86-64
# build is scripts/compare_aarch64.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/cross_build.sh --quick
# This host's camdnnd (the feeder) as `cargo test --workspace` builds it: a build of
# the daemon alone would resolve other features and rebuild the dependencies.
cargo test -q --workspace --no-run
python3 scripts/smoke_aarch64.py sim \
  --binary target/aarch64-unknown-linux-gnu/debug/camdnnd --host-binary target/debug/camdnnd
