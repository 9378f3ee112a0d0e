#!/usr/bin/env bash
# Measures the maintained Rust trackers camdnn could use (similari's SORT, norfair-rs)
# on box sequences with known identities: cost per frame at 5-60 objects and identity
# switches, on walking boxes and on a slow pan and zoom across the objects camdnn's
# CenterNet finds in darknet's kite.jpg. The figures are in docs/decisions.md.
# Needs scripts/setup.sh (the venv, models/centernet.onnx, testdata/kite.png).
# Builds scripts/tracker-choice/ in target/tracker-choice (its own workspace).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
for f in "$PY" models/centernet.onnx testdata/kite.png; do
  if [ ! -e "$f" ]; then
    echo "tracker_choice: $f is missing; run scripts/setup.sh first" >&2
    exit 1
  fi
done
mkdir -p target/tracker-choice
BOXES=target/tracker-choice/kite-boxes.json
# CenterNet on kite.jpg as config/camdnnd.toml runs it: 512x512 stretched RGB 0-255,
# scores >= 0.2, class-agnostic suppression at IoU 0.4; boxes in kite.jpg pixels.
"$PY" - models/centernet.onnx testdata/kite.png "$BOXES" <<'PYEOF'
import json, sys
import numpy as np, onnxruntime as ort
from PIL import Image
model, image, out = sys.argv[1:4]
img = Image.open(image).convert("RGB")
w, h = img.size
x = np.asarray(img.resize((512, 512), Image.BILINEAR), dtype=np.float32)[None]
s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
(det,) = [o for o in s.run(None, {s.get_inputs()[0].name: x}) if o.shape[-1] == 6]
rows = sorted((r for r in det.reshape(-1, 6) if r[4] >= 0.2), key=lambda r: -r[4])
def iou(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0])); ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - iw * ih
    return iw * ih / u if u > 0 else 0.0
kept = []
for r in rows:
    if all(iou(r, k) <= 0.4 for k in kept):
        kept.append(r)
boxes = [[float(r[0]) * w / 512, float(r[1]) * h / 512, float(r[2]) * w / 512, float(r[3]) * h / 512] for r in kept]
json.dump(boxes, open(out, "w"))
print(f"tracker_choice: {len(boxes)} objects in {image}", file=sys.stderr)
PYEOF
CARGO_TARGET_DIR=target/tracker-choice nice cargo run --release --quiet \
  --manifest-path scripts/tracker-choice/Cargo.toml -- "$BOXES"
