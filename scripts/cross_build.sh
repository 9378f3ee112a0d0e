#!/usr/bin/env bash
# Builds camdnnd for an Arm64 board from this x86-64 host, linked against
# glibc 2.27's symbols (Ubuntu 18.04; newer glibc runs it too):
#
#   scripts/cross_build.sh            # release: target/aarch64-unknown-linux-gnu/release/camdnnd
#   scripts/cross_build.sh --dev      # dev profile (dependencies still optimised): .../debug/camdnnd
#   scripts/cross_build.sh --quick    # dev profile, nothing optimised, no debug info (the smoke
#                                     # test's build: it serves the sim engine, and builds fastest)
#   scripts/cross_build.sh --target x86_64   # the same glibc floor for amd64 boxes
#
# cargo-zigbuild runs cargo with Zig as C compiler and linker (tract's Arm
# kernels are assembly; HiGHS is only in ilmodel, not in camdnnd). The toolchain
# comes from scripts/setup_cross.sh (run by scripts/setup.sh). Prints the
# binary's path, size and glibc floor, and fails when the floor is above 2.27.
set -euo pipefail
cd "$(dirname "$0")/.."

GLIBC=2.27
ARCH=aarch64
PROFILE=release
EXTRA=()
while [ $# -gt 0 ]; do
  case $1 in
    --dev) PROFILE=dev ;;
    --quick)
      PROFILE=dev
      EXTRA=(--config 'profile.dev.package."*".opt-level=0' --config 'profile.dev.debug=false')
      ;;
    --release) PROFILE=release ;;
    --target) ARCH=${2:?--target needs aarch64 or x86_64}; shift ;;
    *) echo "cross_build: unknown option $1 (--dev, --quick, --release, --target aarch64|x86_64)" >&2; exit 2 ;;
  esac
  shift
done
case $ARCH in
  aarch64 | x86_64) ;;
  *) echo "cross_build: --target must be aarch64 or x86_64, not $ARCH" >&2; exit 2 ;;
esac
TRIPLE=$ARCH-unknown-linux-gnu
if [ ! -x .cross/venv/bin/cargo-zigbuild ]; then
  echo "cross_build: .cross/venv/bin/cargo-zigbuild is missing; run scripts/setup_cross.sh (or scripts/setup.sh)" >&2
  exit 1
fi
if ! rustup target list --installed | grep -qx "$TRIPLE"; then
  echo "cross_build: the Rust target $TRIPLE is missing; run scripts/setup_cross.sh" >&2
  exit 1
fi
# cargo-zigbuild finds Zig as `python3 -m ziglang` in the venv.
export PATH="$PWD/.cross/venv/bin:$PATH"
cargo zigbuild "${EXTRA[@]}" --profile "$PROFILE" -p camdnn-daemon --bin camdnnd --target "$TRIPLE.$GLIBC"
dir=release; [ "$PROFILE" = dev ] && dir=debug
bin=target/$TRIPLE/$dir/camdnnd
floor=$(scripts/glibc_floor.sh "$bin")
machine=$(readelf -h "$bin" | sed -n 's/^ *Machine: *//p')
echo "cross_build: $bin: $(stat -c %s "$bin") bytes, $machine, glibc floor $floor"
if [ "$(printf '%s\n%s\n' "$floor" "$GLIBC" | sort -V | tail -n1)" != "$GLIBC" ]; then
  echo "cross_build: $bin needs glibc $floor, above the $GLIBC it was built for" >&2
  exit 1
fi
