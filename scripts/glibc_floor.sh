#!/usr/bin/env bash
# Prints the newest glibc symbol version an ELF file needs (its glibc floor,
# e.g. 2.27), read with readelf, which reads any architecture's ELF.
#   scripts/glibc_floor.sh target/aarch64-unknown-linux-gnu/release/camdnnd
set -euo pipefail
file=${1:?usage: glibc_floor.sh ELF_FILE}
if [ ! -f "$file" ]; then
  echo "glibc_floor: $file does not exist" >&2
  exit 1
fi
floor=$(readelf -W -V "$file" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -u -V | tail -n1)
if [ -z "$floor" ]; then
  echo "glibc_floor: $file needs no versioned glibc symbol (not a dynamic glibc ELF?)" >&2
  exit 1
fi
echo "$floor"
