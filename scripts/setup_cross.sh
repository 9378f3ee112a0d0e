#!/usr/bin/env bash
# Installs what the aarch64 build, its emulated run and the .deb packages need
# (scripts/cross_build.sh, scripts/smoke_aarch64.sh, scripts/build_deb.sh),
# all from package registries, into .cross/ (git-ignored):
#   - Debian: qemu-user (runs aarch64 binaries on this host), the aarch64 glibc
#     and libstdc++ (/usr/aarch64-linux-gnu, the emulated run's sysroot), and
#     aarch64 binutils (cargo-deb strips the arm64 binary with them)
#   - rustup: the aarch64-unknown-linux-gnu standard library
#   - PyPI: Zig and cargo-zigbuild (scripts/requirements-cross.txt) in
#     .cross/venv; ONNX Runtime's manylinux aarch64 wheel, the same version as
#     .venv's, whose libonnxruntime.so goes to .cross/onnxruntime-aarch64/
#   - crates.io: cargo-deb, pinned
# Run by scripts/setup.sh. Idempotent: re-running skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."

ORT_VERSION=1.31.1
# The platform tag PyPI has for this version's aarch64 wheel (its library
# needs glibc 2.28: fcntl64).
ORT_PLATFORM=manylinux_2_28_aarch64
CARGO_DEB_VERSION=3.8.0
CROSS=.cross

need_apt=()
for pkg in qemu-user libc6-arm64-cross libstdc++6-arm64-cross binutils-aarch64-linux-gnu; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup_cross: installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

if ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
  echo "setup_cross: adding the rustup target aarch64-unknown-linux-gnu"
  rustup target add aarch64-unknown-linux-gnu
fi

if [ ! -x "$CROSS/venv/bin/python" ]; then
  echo "setup_cross: creating $CROSS/venv"
  python3 -m venv "$CROSS/venv"
fi
"$CROSS/venv/bin/python" -m pip install -q --disable-pip-version-check -r scripts/requirements-cross.txt

lib="$CROSS/onnxruntime-aarch64/libonnxruntime.so.$ORT_VERSION"
if [ ! -s "$lib" ]; then
  echo "setup_cross: downloading onnxruntime $ORT_VERSION for aarch64 ($ORT_PLATFORM)"
  mkdir -p "$CROSS/downloads" "$(dirname "$lib")"
  "$CROSS/venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps \
    --only-binary=:all: --platform "$ORT_PLATFORM" -d "$CROSS/downloads" "onnxruntime==$ORT_VERSION"
  wheel=$(compgen -G "$CROSS/downloads/onnxruntime-$ORT_VERSION-*$ORT_PLATFORM.whl" | head -n1)
  "$CROSS/venv/bin/python" - "$wheel" "$(dirname "$lib")" "$ORT_VERSION" <<'PY'
import sys, zipfile
wheel, out, version = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z:
    for member, name in ((f"onnxruntime/capi/libonnxruntime.so.{version}", f"libonnxruntime.so.{version}"),
                         ("onnxruntime/LICENSE", "LICENSE"),
                         ("onnxruntime/ThirdPartyNotices.txt", "ThirdPartyNotices.txt")):
        data = z.read(member)
        with open(f"{out}/{name}.tmp", "wb") as f:
            f.write(data)
import os
for name in (f"libonnxruntime.so.{version}", "LICENSE", "ThirdPartyNotices.txt"):
    os.replace(f"{out}/{name}.tmp", f"{out}/{name}")
PY
fi

if ! cargo deb --version 2>/dev/null | grep -q "$CARGO_DEB_VERSION"; then
  echo "setup_cross: installing cargo-deb $CARGO_DEB_VERSION"
  cargo install --locked --quiet cargo-deb --version "$CARGO_DEB_VERSION"
fi
echo "setup_cross: done"
