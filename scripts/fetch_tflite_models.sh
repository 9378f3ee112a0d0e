#!/usr/bin/env bash
# Fetches the real TFLite models camdnn runs (and measures in docs/tflite.md) into
# models/tflite/ (git-ignored; third-party weights are never committed): every
# .tflite file of the mediapipe wheel from PyPI (face detection, face landmark,
# hand, palm, pose, iris, selfie segmentation). The wheel is downloaded, not
# installed (its runtime dependencies are heavy and unneeded).
# Idempotent: files already in models/tflite/ are kept; the wheel is cached in
# models/.downloads/. Fails loudly when the wheel or a file is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=.venv/bin/python
MEDIAPIPE_VERSION=0.10.14
OUT=models/tflite
DL=models/.downloads
# The models of the wheel (mediapipe/modules/<dir>/<file>); the face pair is
# what config/camdnnd-tflite-faces.toml runs.
MODELS=(
  face_detection/face_detection_short_range.tflite
  face_detection/face_detection_full_range_sparse.tflite
  face_landmark/face_landmark.tflite
  face_landmark/face_landmark_with_attention.tflite
  hand_landmark/hand_landmark_full.tflite
  hand_landmark/hand_landmark_lite.tflite
  holistic_landmark/hand_recrop.tflite
  iris_landmark/iris_landmark.tflite
  palm_detection/palm_detection_full.tflite
  palm_detection/palm_detection_lite.tflite
  pose_detection/pose_detection.tflite
  pose_landmark/pose_landmark_full.tflite
  selfie_segmentation/selfie_segmentation.tflite
  selfie_segmentation/selfie_segmentation_landscape.tflite
)

if [ ! -x "$PY" ]; then
  echo "fetch_tflite_models: $PY is missing; run scripts/setup.sh first" >&2
  exit 1
fi
mkdir -p "$OUT" "$DL"

# The cp311 manylinux wheel: the models are the same in every wheel of a version.
pattern="mediapipe-$MEDIAPIPE_VERSION-cp311-*.whl"
if ! compgen -G "$DL/$pattern" >/dev/null; then
  echo "fetch_tflite_models: downloading mediapipe==$MEDIAPIPE_VERSION" >&2
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary :all: \
    --python-version 3.11 --platform manylinux_2_17_x86_64 \
    -d "$DL" "mediapipe==$MEDIAPIPE_VERSION" || {
    echo "fetch_tflite_models: pip download of mediapipe==$MEDIAPIPE_VERSION failed" >&2
    exit 1
  }
fi
WHEEL=$(compgen -G "$DL/$pattern" | head -n1)

"$PY" - "$WHEEL" "$OUT" "${MODELS[@]}" <<'PY'
import os, sys, zipfile
wheel, out, members = sys.argv[1], sys.argv[2], sys.argv[3:]
fetched = kept = 0
with zipfile.ZipFile(wheel) as z:
    names = set(z.namelist())
    for m in members:
        member = f"mediapipe/modules/{m}"
        if member not in names:
            sys.exit(f"fetch_tflite_models: {member} is not in {wheel}")
        data = z.read(member)
        dest = os.path.join(out, os.path.basename(m))
        if os.path.exists(dest) and open(dest, "rb").read() == data:
            kept += 1
            continue
        with open(dest + ".tmp", "wb") as f:
            f.write(data)
        os.replace(dest + ".tmp", dest)
        print(f"fetch_tflite_models: fetched {dest} ({len(data)} bytes)")
        fetched += 1
print(f"fetch_tflite_models: done ({fetched} fetched, {kept} already present) in {out}/")
PY
