#!/usr/bin/env bash
# Real models through the aarch64 camdnnd under emulation against the x86-64
# build: the street graph (CenterNet, MoveNet, faceres) on the tract engine,
# then on ONNX Runtime (the aarch64 wheel's library from scripts/setup_cross.sh
# for the emulated binary, .venv's for the native one), on darknet's photos;
# every box, score and output must agree within 1e-3 of its scale
# (scripts/smoke_aarch64.py real). Prints one JSON line per engine: objects,
# numbers compared, the largest difference, and each build's time to ready and
# to answer. Slow (minutes: emulation), so not part of scripts/test.sh.
#
#   scripts/compare_aarch64.sh           # release builds (the binaries that ship)
#   scripts/compare_aarch64.sh --dev     # the dev builds scripts/test.sh made
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release; dir=release
if [ "${1:-}" = "--dev" ]; then profile=dev; dir=debug; fi
scripts/cross_build.sh "--$profile"
if [ "$profile" = dev ]; then
  cargo test -q --workspace --no-run   # the test build's camdnnd, as scripts/test.sh makes it
else
  cargo build -q --release -p camdnn-daemon
fi
python3 scripts/smoke_aarch64.py real \
  --binary "target/aarch64-unknown-linux-gnu/$dir/camdnnd" --host-binary "target/$dir/camdnnd" \
  --ort-aarch64 .cross/onnxruntime-aarch64/libonnxruntime.so.1.31.1
