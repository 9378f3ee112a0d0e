#!/usr/bin/env bash
# Regenerates the raw outputs the guides quote, into target/outputs/ (git-ignored):
#
#   scripts/outputs.sh suite      # docs/suite.md: the suite and three held-out sets (~5 min on 2 cores),
#                                 # then its summary table (scripts/suite_table.py)
#   scripts/outputs.sh simulate   # docs/bench.md: every scheduler on the RB5-like profile (seconds)
#   scripts/outputs.sh adapt      # docs/adapt.md: recovery from throttles, deadline admission (~1 min)
#   scripts/outputs.sh bench      # docs/bench.md: the four real-pipeline benches (~40 min; quiet host)
#   scripts/outputs.sh capacity   # docs/bench.md: cameras per host on the street graph (~30 min; quiet host)
#   scripts/outputs.sh all
#
# Every file holds one command's whole output, its first line the command itself. The
# simulator's figures are deterministic (a debug build prints the same bytes, slower:
# BIN=target/debug/camdnnd); the bench's depend on the host and its load.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=target/outputs
case "${1:-}" in
    suite | simulate | adapt | bench | capacity | all) ;;
    *) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
if [ -z "${BIN:-}" ]; then
    BIN=target/release/camdnnd
    cargo build --release -q -p camdnn-daemon
fi

# run NAME COMMAND...: COMMAND's output (stdout and stderr) into $OUT/NAME.txt.
run() {
    local name=$1
    shift
    echo "$ $*" | tee "$OUT/$name.txt"
    "$@" >>"$OUT/$name.txt" 2>&1
}

suite() {
    local rb5=config/profiles/rb5.toml
    run suite-gen-1 $BIN suite --boards 30 --system $rb5 --cases
    for seed in 2000 3000 8000; do
        run "suite-gen-$seed" $BIN suite --boards 300 --first-seed $seed --system $rb5 --cases
    done
    python3 scripts/suite_table.py "$OUT"/suite-gen-{1,2000,3000,8000}.txt | tee "$OUT/suite-table.md"
}

simulate() {
    run simulate-rb5 $BIN simulate --system config/profiles/rb5.toml
}

adapt() {
    local rb5="--system config/profiles/rb5.toml"
    run recovery-gpu $BIN simulate $rb5 --throttle gpu:2:20:40 --recovery
    run recovery-gpu-no-reprobe $BIN simulate $rb5 --throttle gpu:2:20:40 --adapt-no-reprobe --recovery
    run recovery-gpu-no-scene $BIN simulate $rb5 --throttle gpu:2:20:40 --adapt-no-scene --recovery
    run recovery-dsp $BIN simulate $rb5 --throttle dsp:2:20:40 --recovery
    run recovery-all $BIN simulate $rb5 --throttle cpu:2:0 --throttle gpu:2:0 --throttle dsp:2:0 --recovery
    printf '10 0 0 0\n10 14 14 14\n%.0s' {1..10} >"$OUT/bursty-trace.txt"
    for z in none 0 2; do
        local adm=()
        [ "$z" = none ] || adm=(--deadline-admission "$z")
        run "admission-fig11-$z" $BIN simulate $rb5 --schedulers camdnn,camdnn-local "${adm[@]}"
        run "admission-fig11-80ms-$z" $BIN simulate $rb5 --schedulers camdnn,camdnn-local --deadline-ms 80 "${adm[@]}"
        run "admission-throttle-$z" $BIN simulate $rb5 --schedulers camdnn,camdnn-local \
            --throttle gpu:2:20:40 --adapt --deadline-ms 100 "${adm[@]}"
        run "admission-bursty-$z" $BIN simulate $rb5 --schedulers camdnn,camdnn-local \
            --trace "$OUT/bursty-trace.txt" --deadline-ms 80 "${adm[@]}"
    done
}

bench() {
    run bench-paper $BIN bench --config config/camdnnd-paper.toml --frames-per-scene 2 --profile-now \
        --profile-out "$OUT/profile-paper.toml"
    run bench-street $BIN bench --config config/camdnnd.toml --image testdata/person.ppm --frames 30 \
        --profile-now --profile-out "$OUT/profile-street.toml"
    run bench-ocr $BIN bench --config config/camdnnd-ocr.toml --image testdata/ocr_page.ppm --frames 40 \
        --profile-now --profile-out "$OUT/profile-ocr.toml"
    run bench-faces $BIN bench --config config/camdnnd-faces.toml --image testdata/astronaut.ppm \
        --frames 120 --profile-now --profile-out "$OUT/profile-faces.toml"
}

capacity() {
    run capacity $BIN bench --config config/camdnnd.toml --capacity 5,10 --video testdata/vtest.avi \
        --profile-now --profile-out "$OUT/profile-capacity.toml" --rounds 3
}

case "$1" in
    suite) suite ;;
    simulate) simulate ;;
    adapt) adapt ;;
    bench) bench ;;
    capacity) capacity ;;
    all) suite; simulate; adapt; bench; capacity ;;
esac
echo "outputs in $OUT/"
