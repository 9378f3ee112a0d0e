#!/usr/bin/env bash
# Runs the Human library's own JavaScript pipeline (npm @vladmandic/human 3.3.6, the package our
# centernet/movenet/faceres models come from: BlazeFace -> face mesh -> faceres for faces,
# MoveNet for bodies) under node on the pure-JS TensorFlow.js CPU backend, on the given images,
# and prints what it finds per image as JSON (faces: box, age, gender; bodies: head keypoints).
# Then runs our faceres.onnx on the very face crops the library cut (compare.py), which shows
# whether a difference comes from the model or from the crop.
#
# Usage: scripts/human_reference/run.sh IMAGE [IMAGE ...]
# Needs: node and npm (scripts/setup.sh installs them), the package tarball in models/.downloads
# (scripts/fetch_models.sh), .venv (pillow, onnxruntime). The TF.js packages are installed from
# the npm registry into models/.downloads/human-reference/ on first use.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/scripts/human_reference
TGZ=$ROOT/models/.downloads/vladmandic-human-3.3.6.tgz
WORK=$ROOT/models/.downloads/human-reference
PY=$ROOT/.venv/bin/python
[ -s "$TGZ" ] || { echo "$TGZ is missing: run scripts/setup.sh" >&2; exit 1; }
[ "$#" -ge 1 ] || { echo "usage: $0 IMAGE [IMAGE ...]" >&2; exit 2; }
mkdir -p "$WORK"
if [ ! -d "$WORK/package" ]; then
  tar xzf "$TGZ" -C "$WORK"
fi
if [ ! -d "$WORK/node_modules/@tensorflow/tfjs-backend-cpu" ]; then
  (cd "$WORK" && npm install --silent --no-audit --no-fund --no-save \
    @tensorflow/tfjs-core@4.22.0 @tensorflow/tfjs-converter@4.22.0 \
    @tensorflow/tfjs-backend-cpu@4.22.0 @tensorflow/tfjs-backend-wasm@4.22.0)
fi
ln -sfn "$WORK/node_modules" "$WORK/package/node_modules"
cp "$HERE/run.cjs" "$WORK/run.cjs"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
args=()
for img in "$@"; do
  raw=$TMP/$(basename "$img").rgb
  size=$("$PY" -c 'import sys; from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB"); open(sys.argv[2], "wb").write(im.tobytes()); print(*im.size)' "$img" "$raw")
  args+=($size "$raw")
done
(cd "$WORK" && DUMP=1 node run.cjs "${args[@]}")
shopt -s nullglob
crops=("$TMP"/*.f32)
if [ "${#crops[@]}" -gt 0 ]; then
  "$PY" "$HERE/compare.py" "$ROOT/models/faceres.onnx" "${crops[@]}"
fi
