#!/usr/bin/env bash
# Fetches the real clip `camdnnd track-eval --video` replays: OpenCV's sample
# vtest.avi (768x576, 10 fps, 795 frames: people walking across a campus
# square, parked cars and a van), from the Debian package opencv-doc (its
# copyright file puts the samples under Apache-2.0 AND BSD-3-Clause). Writes
# testdata/vtest.avi (git-ignored; third-party media is never committed).
# Idempotent: an existing file is kept. Fails loudly when it cannot be had.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=testdata
DL=$OUT/.downloads
DEST=$OUT/vtest.avi
mkdir -p "$OUT" "$DL"
if [ -s "$DEST" ]; then
  echo "fetch_test_video: $DEST is there"
  exit 0
fi
if ! compgen -G "$DL/opencv-doc_*.deb" >/dev/null; then
  echo "fetch_test_video: downloading the Debian package opencv-doc (about 96 MB)" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  if ! (cd "$DL" && apt-get download opencv-doc 2>/dev/null); then
    $SUDO apt-get update -qq
    (cd "$DL" && apt-get download opencv-doc) || {
      echo "fetch_test_video: apt-get download opencv-doc failed" >&2
      exit 1
    }
  fi
fi
DEB=$(compgen -G "$DL/opencv-doc_*.deb" | head -n1)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
dpkg-deb --fsys-tarfile "$DEB" | tar -x -C "$TMP" ./usr/share/doc/opencv-doc/examples/data/vtest.avi
mv "$TMP/usr/share/doc/opencv-doc/examples/data/vtest.avi" "$DEST.tmp"
mv "$DEST.tmp" "$DEST"
echo "fetch_test_video: extracted $DEST from $(basename "$DEB")"
