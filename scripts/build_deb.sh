#!/usr/bin/env bash
# Builds the Debian packages an operator installs (docs/operations.md, "Install
# on a board"), into target/debian/:
#   camdnn_VERSION_ARCH.deb              camdnnd, its systemd units, /etc/camdnn
#                                        (config, profiles, the rb5 policy), the
#                                        camdnn user (cargo-deb, daemon/Cargo.toml)
#   camdnn-onnxruntime_1.31.1-1_ARCH.deb ONNX Runtime's library for the ort engine,
#                                        from the same PyPI wheel as .venv's
#
#   scripts/build_deb.sh                  # arm64 and amd64, release binaries
#   scripts/build_deb.sh --arch arm64     # one architecture
#   scripts/build_deb.sh --dev            # dev-profile binaries (dependencies optimised
#       # alike): amd64 around target/debug/camdnnd, the test build (scripts/deb_check.sh
#       # checks the packaging without a release build; its glibc floor is this host's),
#       # arm64 around scripts/cross_build.sh --dev's. Not for distribution.
#
# Release binaries come from scripts/cross_build.sh (glibc 2.27 floor on both
# architectures). Prints each package's path, size and file list.
set -euo pipefail
cd "$(dirname "$0")/.."

ORT_VERSION=1.31.1
ARCHES=()
DEV=0
while [ $# -gt 0 ]; do
  case $1 in
    --arch) ARCHES+=("${2:?--arch needs arm64 or amd64}"); shift ;;
    --dev) DEV=1 ;;
    *) echo "build_deb: unknown option $1 (--arch arm64|amd64, --dev)" >&2; exit 2 ;;
  esac
  shift
done
[ ${#ARCHES[@]} -eq 0 ] && ARCHES=(arm64 amd64)
if ! cargo deb --version >/dev/null 2>&1; then
  echo "build_deb: cargo-deb is missing; run scripts/setup_cross.sh (or scripts/setup.sh)" >&2
  exit 1
fi
OUT=target/debian
mkdir -p "$OUT"

# ort_library ARCH: the libonnxruntime.so of that architecture's wheel.
ort_library() {
  case $1 in
    arm64) echo ".cross/onnxruntime-aarch64/libonnxruntime.so.$ORT_VERSION" ;;
    amd64) compgen -G ".venv/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so.$ORT_VERSION" | head -n1 ;;
  esac
}

# ort_package ARCH: camdnn-onnxruntime for ARCH, with dpkg-deb (a library and
# its licence; no maintainer scripts).
ort_package() {
  local arch=$1 lib licence stage floor deb
  lib=$(ort_library "$arch")
  if [ -z "$lib" ] || [ ! -s "$lib" ]; then
    echo "build_deb: ONNX Runtime $ORT_VERSION for $arch is missing; run scripts/setup.sh" >&2
    exit 1
  fi
  licence=$(dirname "$lib")/LICENSE
  [ -s "$licence" ] || licence=$(dirname "$lib")/../LICENSE
  floor=$(scripts/glibc_floor.sh "$lib")
  stage=$(mktemp -d)
  chmod 0755 "$stage"
  install -D -m 0644 "$lib" "$stage/usr/lib/camdnn/$(basename "$lib")"
  install -d "$stage/usr/share/doc/camdnn-onnxruntime"
  {
    echo "ONNX Runtime $ORT_VERSION, libonnxruntime.so from the onnxruntime wheel on PyPI."
    echo "Licence (MIT):"
    echo
    cat "$licence"
  } >"$stage/usr/share/doc/camdnn-onnxruntime/copyright"
  install -d "$stage/DEBIAN"
  cat >"$stage/DEBIAN/control" <<EOF
Package: camdnn-onnxruntime
Version: $ORT_VERSION-1
Architecture: $arch
Maintainer: camdnn maintainers <camdnn@localhost>
Installed-Size: $(du -k -s "$stage/usr" | cut -f1)
Depends: libc6 (>= $floor), libstdc++6 (>= 6), libgcc-s1 | libgcc1
Section: libs
Priority: optional
Homepage: https://onnxruntime.ai
Description: ONNX Runtime $ORT_VERSION for camdnnd's ort engine
 The libonnxruntime.so of ONNX Runtime's PyPI wheel, installed in
 /usr/lib/camdnn, where /usr/bin/camdnnd looks for it.
EOF
  (cd "$stage" && find usr -type f -exec md5sum {} + >DEBIAN/md5sums)
  deb=$OUT/camdnn-onnxruntime_${ORT_VERSION}-1_$arch.deb
  dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
  rm -rf "$stage"
  echo "$deb"
}

# camdnn_package ARCH: camdnn for ARCH with cargo-deb around the built binary.
camdnn_package() {
  local arch=$1 triple bin
  case $arch in
    arm64) triple=aarch64-unknown-linux-gnu ;;
    amd64) triple=x86_64-unknown-linux-gnu ;;
    *) echo "build_deb: --arch must be arm64 or amd64, not $arch" >&2; exit 2 ;;
  esac
  if [ "$DEV" = 1 ] && [ "$arch" = amd64 ]; then
    # as `cargo test --workspace` builds it (the daemon alone resolves other features)
    cargo test -q --workspace --no-run
    cargo deb -q -p camdnn-daemon --no-build --profile dev --fast --output "$OUT/camdnn_dev_amd64.deb" >&2
    echo "$OUT/camdnn_dev_amd64.deb"
    return
  fi
  if [ "$DEV" = 1 ]; then
    scripts/cross_build.sh --dev --target "${triple%%-*}" >&2
    cargo deb -q -p camdnn-daemon --no-build --profile dev --fast --target "$triple" \
      --output "$OUT/camdnn_dev_$arch.deb" >&2
    echo "$OUT/camdnn_dev_$arch.deb"
    return
  fi
  scripts/cross_build.sh --target "${triple%%-*}" >&2
  cargo deb -q -p camdnn-daemon --no-build --target "$triple" --output "$OUT/" >&2
  ls -t "$OUT"/camdnn_*_"$arch".deb | head -n1
}

for arch in "${ARCHES[@]}"; do
  for deb in $(camdnn_package "$arch") $(ort_package "$arch"); do
    echo "build_deb: $deb ($(stat -c %s "$deb") bytes)"
    dpkg-deb --info "$deb" | sed -n 's/^ \(Package\|Version\|Architecture\|Depends\|Recommends\|Installed-Size\):/  \1:/p'
    dpkg-deb --contents "$deb" | awk '{print "  " $1, $6, $7, $8}'
  done
done
