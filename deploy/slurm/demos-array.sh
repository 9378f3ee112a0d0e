#!/usr/bin/env bash
# ILP demonstrations for one board profile as a Slurm job array
# (deploy/README.md): task i solves the chunks c with c mod N = i into one
# folder on the shared file system; a job that depends on the whole array
# then merges them into demos.jsonl, byte-identical to a single-machine run.
#
#   deploy/slurm/demos-array.sh submit        # submits the array and the merge
#
# Parameters (environment, defaults in brackets, the paper's dataset):
# SYSTEM [config/profiles/rb5.toml], SEED [1], SAMPLES [12000], MAX_OBJECTS
# [14], REM_MAX_MS [100], FRAMES_PER_EPOCH [70], CHUNK_SIZE [64], SHARDS [8],
# OUT [target/policy-train/NAME-seedSEED/demos], ILMODEL
# [target/release/ilmodel]. Every task and the merge must see the same values.
# Slurm runs this same file for each task (`shard`) and for the merge (`merge`).
#SBATCH --job-name=camdnn-demos
#SBATCH --cpus-per-task=1
#SBATCH --mem=1G
#SBATCH --time=02:00:00
set -euo pipefail
SYSTEM=${SYSTEM:-config/profiles/rb5.toml}
SEED=${SEED:-1}
SAMPLES=${SAMPLES:-12000}
MAX_OBJECTS=${MAX_OBJECTS:-14}
REM_MAX_MS=${REM_MAX_MS:-100}
FRAMES_PER_EPOCH=${FRAMES_PER_EPOCH:-70}
CHUNK_SIZE=${CHUNK_SIZE:-64}
SHARDS=${SHARDS:-8}
NAME=$(basename "$SYSTEM" .toml)
OUT=${OUT:-target/policy-train/$NAME-seed$SEED/demos}
ILMODEL=${ILMODEL:-target/release/ilmodel}

demos() {
  "$ILMODEL" demos --system "$SYSTEM" --out "$OUT" --seed "$SEED" --samples "$SAMPLES" \
    --max-objects "$MAX_OBJECTS" --rem-max-ms "$REM_MAX_MS" --frames-per-epoch "$FRAMES_PER_EPOCH" \
    --chunk-size "$CHUNK_SIZE" --jobs 1 --quiet "$@"
}

case "${1:-}" in
  submit)
    export SYSTEM SEED SAMPLES MAX_OBJECTS REM_MAX_MS FRAMES_PER_EPOCH CHUNK_SIZE SHARDS OUT ILMODEL
    array=$(sbatch --parsable --export=ALL --array="0-$((SHARDS - 1))" "$0" shard)
    sbatch --parsable --export=ALL --dependency="afterok:$array" --job-name=camdnn-demos-merge "$0" merge
    ;;
  shard)
    # SLURM_ARRAY_TASK_ID counts from SLURM_ARRAY_TASK_MIN: --array=1-8 works too.
    demos --shard "SLURM_ARRAY_TASK_ID/$SHARDS"
    ;;
  merge)
    demos --merge
    ;;
  *)
    echo "usage: $0 submit | shard | merge   (see the header)" >&2
    exit 2
    ;;
esac
