#!/usr/bin/env bash
# Regenerates the coverage table of docs/tflite.md: every TFLite file that
# scripts/fetch_tflite_models.sh fetched, run by camdnn (tract after the TFLite
# loading pass) and by LiteRT (the reference) on the same input.
# LiteRT (ai-edge-litert from PyPI) goes into its own venv, .venv-litert/, so
# the project's .venv keeps exactly what the tests need.
# Usage: scripts/tflite_coverage.sh [> table.md]
set -euo pipefail
cd "$(dirname "$0")/.."

LITERT_VERSION=2.3.0
VENV=.venv-litert
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import ai_edge_litert" 2>/dev/null; then
  echo "tflite_coverage: installing ai-edge-litert==$LITERT_VERSION into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "ai-edge-litert==$LITERT_VERSION" numpy
fi
if ! compgen -G "models/tflite/*.tflite" >/dev/null; then
  echo "tflite_coverage: no models in models/tflite/; run scripts/setup.sh" >&2
  exit 1
fi
if [ ! -s testdata/astronaut.ppm ]; then
  echo "tflite_coverage: testdata/astronaut.ppm is missing; run scripts/setup.sh" >&2
  exit 1
fi
cargo build -q -p camdnn-engine --example tflite_run >&2
"$VENV/bin/python" scripts/tflite_coverage.py target/debug/examples/tflite_run \
  testdata/astronaut.ppm models/tflite/*.tflite
