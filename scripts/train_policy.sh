#!/usr/bin/env bash
# Regenerates the committed learned global policy of a profile:
#   ILP demonstrations -> MLP training (candle) -> ONNX + sidecar export -> fidelity check.
#
#   scripts/train_policy.sh                        # rb5, seed 1
#   SEED=2 scripts/train_policy.sh config/profiles/rb5.toml
#   SAMPLES=3000 scripts/train_policy.sh config/profiles/host-street.toml
#
# Writes config/policies/NAME.onnx, NAME.policy.json and the loss curves
# NAME.loss.csv / NAME.loss.svg; intermediate files (demos, model.json) go to
# target/policy-train/NAME-seedSEED (resumable: demos skip finished chunks).
# Deterministic for a seed on a given machine: the demos are byte-identical
# (unless a solve hits the time limit) and training runs single-threaded
# (RAYON_NUM_THREADS=1) with SplitMix64 initialisation and batch order.
set -euo pipefail
cd "$(dirname "$0")/.."
SYSTEM=${1:-config/profiles/rb5.toml}
SEED=${SEED:-1}
# Demonstrations (the paper's 12000; fewer train faster on a small host).
SAMPLES=${SAMPLES:-12000}
NAME=$(basename "$SYSTEM" .toml)
WORK=target/policy-train/$NAME-seed$SEED
OUT=config/policies
export RAYON_NUM_THREADS=1

cargo build --release -p camdnn-ilmodel
IL=target/release/ilmodel
mkdir -p "$WORK" "$OUT"
# The paper's dataset: the 15^3 scene grid (0..=14 objects per class), SAMPLES demonstrations.
"$IL" demos --system "$SYSTEM" --out "$WORK/demos" --seed "$SEED" \
    --samples "$SAMPLES" --max-objects 14 --rem-max-ms 100 --frames-per-epoch 70 --quiet
"$IL" train --system "$SYSTEM" --demos "$WORK/demos" --out "$WORK/model" --seed "$SEED" --quiet
"$IL" export --model "$WORK/model/model.json" --system "$SYSTEM" \
    --onnx "$OUT/$NAME.onnx" --sidecar "$OUT/$NAME.policy.json"
cp "$WORK/model/loss.csv" "$OUT/$NAME.loss.csv"
cp "$WORK/model/loss.svg" "$OUT/$NAME.loss.svg"
"$IL" eval --system "$SYSTEM" --demos "$WORK/demos" \
    --onnx "$OUT/$NAME.onnx" --sidecar "$OUT/$NAME.policy.json"
