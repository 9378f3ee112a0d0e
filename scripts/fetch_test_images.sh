#!/usr/bin/env bash
# Makes the images the real-model pipeline tests (daemon/tests/pipeline_real*.rs)
# feed to camdnnd, in testdata/ (git-ignored; third-party images are never
# committed):
#   - ocr_line.png: one line of black text rendered on white with Pillow and
#     DejaVu Sans (Debian package fonts-dejavu-core), for the PP-OCR pipeline
#   - ocr_page.png: a 640x480 camera-sized frame with three such lines, the
#     frame `camdnnd bench` runs the OCR graph on
#   - astronaut.png: scikit-image's sample photo (Eileen Collins, NASA, public
#     domain), taken out of the scikit-image wheel from PyPI, for MTCNN
#   - dog.png, person.png, kite.png: darknet's sample photos (Debian package
#     darknet), for the street graph (CenterNet, MoveNet, faceres)
# and a binary PPM (P6) copy of each (*.ppm), which the Rust tests read
# without an image crate.
# Idempotent: existing files are kept. Fails loudly when something is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=.venv/bin/python
SKIMAGE_VERSION=0.25.2
OUT=testdata
DL=$OUT/.downloads
FONT=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf

if [ ! -x "$PY" ]; then
  echo "fetch_test_images: $PY is missing; run scripts/setup.sh first" >&2
  exit 1
fi
mkdir -p "$OUT" "$DL"

if [ ! -s "$FONT" ]; then
  echo "fetch_test_images: installing fonts-dejavu-core" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq fonts-dejavu-core
fi

# The text line: must match TEXT in daemon/tests/pipeline_real_ocr.rs.
if [ ! -s "$OUT/ocr_line.png" ]; then
  "$PY" - "$FONT" "$OUT/ocr_line.png.tmp" <<'PYEOF'
import sys
from PIL import Image, ImageDraw, ImageFont
font_path, out = sys.argv[1:3]
text = "camdnn reads this line"
font = ImageFont.truetype(font_path, 40)
img = Image.new("RGB", (640, 120), "white")
draw = ImageDraw.Draw(img)
draw.text((30, 35), text, fill="black", font=font)
img.save(out, format="PNG")
PYEOF
  mv "$OUT/ocr_line.png.tmp" "$OUT/ocr_line.png"
  echo "fetch_test_images: rendered $OUT/ocr_line.png"
fi

# Three lines on a camera-sized frame (the OCR benchmark's image).
if [ ! -s "$OUT/ocr_page.png" ]; then
  "$PY" - "$FONT" "$OUT/ocr_page.png.tmp" <<'PYEOF'
import sys
from PIL import Image, ImageDraw, ImageFont
font_path, out = sys.argv[1:3]
lines = ["camdnn reads this line", "edge boards run many models", "frames in and results out"]
font = ImageFont.truetype(font_path, 36)
img = Image.new("RGB", (640, 480), "white")
draw = ImageDraw.Draw(img)
for n, text in enumerate(lines):
    draw.text((30, 60 + n * 140), text, fill="black", font=font)
img.save(out, format="PNG")
PYEOF
  mv "$OUT/ocr_page.png.tmp" "$OUT/ocr_page.png"
  echo "fetch_test_images: rendered $OUT/ocr_page.png"
fi

if [ ! -s "$OUT/astronaut.png" ]; then
  if ! compgen -G "$DL/scikit_image-$SKIMAGE_VERSION-*.whl" >/dev/null; then
    echo "fetch_test_images: downloading scikit-image==$SKIMAGE_VERSION (wheel, no deps)" >&2
    "$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary :all: \
      -d "$DL" "scikit-image==$SKIMAGE_VERSION" || {
      echo "fetch_test_images: pip download of scikit-image failed" >&2
      exit 1
    }
  fi
  WHEEL=$(compgen -G "$DL/scikit_image-$SKIMAGE_VERSION-*.whl" | head -n1)
  "$PY" - "$WHEEL" "$OUT/astronaut.png.tmp" <<'PYEOF'
import sys, zipfile, shutil
wheel, out = sys.argv[1:3]
with zipfile.ZipFile(wheel) as z, z.open("skimage/data/astronaut.png") as f, open(out, "wb") as g:
    shutil.copyfileobj(f, g)
PYEOF
  mv "$OUT/astronaut.png.tmp" "$OUT/astronaut.png"
  echo "fetch_test_images: extracted $OUT/astronaut.png"
fi
# Photos of the street graph (config/camdnnd.toml): the darknet Debian package's
# samples (installed by setup.sh). dog.jpg: a bicycle, a dog and a pickup;
# person.jpg: a person, a dog and a horse; kite.jpg: people on a beach.
DARKNET=/usr/share/darknet/data
for img in dog person kite; do
  if [ ! -s "$OUT/$img.png" ]; then
    if [ ! -s "$DARKNET/$img.jpg" ]; then
      echo "fetch_test_images: $DARKNET/$img.jpg is missing; run scripts/setup.sh (Debian package darknet)" >&2
      exit 1
    fi
    "$PY" -c 'import sys; from PIL import Image; Image.open(sys.argv[1]).convert("RGB").save(sys.argv[2], format="PNG")' \
      "$DARKNET/$img.jpg" "$OUT/$img.png.tmp"
    mv "$OUT/$img.png.tmp" "$OUT/$img.png"
    echo "fetch_test_images: copied $OUT/$img.png from $DARKNET"
  fi
done
for img in ocr_line ocr_page astronaut dog person kite; do
  if [ ! -s "$OUT/$img.ppm" ]; then
    "$PY" -c 'import sys; from PIL import Image; Image.open(sys.argv[1]).convert("RGB").save(sys.argv[2], format="PPM")' \
      "$OUT/$img.png" "$OUT/$img.ppm.tmp"
    mv "$OUT/$img.ppm.tmp" "$OUT/$img.ppm"
  fi
done
echo "fetch_test_images: done in $OUT/"
