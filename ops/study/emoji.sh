#!/usr/bin/env bash
# The emoji objectives study of docs/RESULTS.md ("Does mixing objectives cost quality?"), and the
# runs the colour deployment that shipped as checkpoints/emoji/ until 2026-11-28 is copied from
# (ops/study/ship_emoji.sh; retired: its tiny pixel experts drew colour blobs).
#
# One partition: k-means K=4 on the emoji train split (pixel PCA features, k-means seed 0). Each
# cluster's expert has a fixed framework and architecture; two cases differ only in the objectives:
#
#   cluster  framework  architecture  case velocity   case mixed
#   0        torch      unet          flow-velocity  flow-velocity
#   1        jax        dit           flow-velocity  ddpm-eps, linear schedule, t0-noise
#   2        torch      dit           flow-velocity  ddpm-v, cosine schedule, t0-data
#   3        jax        unet          flow-velocity  ddpm-eps, cosine schedule, t0-data
#
# Equal training compute: every expert in both cases trains the same steps at the same batch (tiny
# presets), with the same seed; cluster 0, velocity in both cases, is one model (velocity/expert0 links it). Per seed: 8 experts, one learned router (it reads x_t and the
# partition, not the experts, so both cases share it), two deployments, `ddm eval` at top-1 and top-2
# against the test split with the shared emoji classifier. Each seed's eval records go to
# docs/study/emoji/seed<S>/ (small JSON, committed); ops/study/objectives.py builds the table with
# intervals. Every step is skipped when its output exists; experts resume their train state.
#
#   bash ops/study/emoji.sh [out=runs/emoji] [seeds="0 1 2"] [steps=2000] [n_eval=450] [jobs=2]
#
# Needs the emoji dataset (`ddm data fetch emoji`; apt-get install -y fonts-noto-color-emoji unicode-data).
set -euo pipefail
source "$(dirname "$0")/study_lib.sh"
study_args runs/emoji 450 "$@"
batch=32
preset=tiny
records=docs/study/emoji
# one thread per process: `jobs` of them share the cores (torch: OMP; JAX: XLA's CPU thread pool)
export OMP_NUM_THREADS=1 XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
export STUDY_OUT="$out" EMOJI_STEPS="$steps" EMOJI_BATCH="$batch" EMOJI_PRESET="$preset" STUDY_N="$n_eval"
mkdir -p "$out"

[ -f "$out/partition.json" ] || ddm partition --dataset emoji --split train --by kmeans:4 \
  --out "$out/partition.json" --preview "$out/partition.png"
[ -f "$out/classifier/meta.json" ] || ddm train classifier --dataset emoji --split train --eval-split test \
  --epochs 30 --out "$out/classifier" --no-progress

# cluster framework arch, then the mixed case's objective flags (the velocity case: flow-velocity)
CLUSTERS=(
  "0 torch unet --objective flow-velocity"
  "1 jax dit --objective ddpm-eps --schedule linear --time-convention t0-noise"
  "2 torch dit --objective ddpm-v --schedule cosine --time-convention t0-data"
  "3 jax unet --objective ddpm-eps --schedule cosine --time-convention t0-data"
)

train_one() { # seed case cluster framework arch objective-flags...
  local seed=$1 case=$2 e=$3 framework=$4 arch=$5
  shift 5
  local dir="$STUDY_OUT/seed$seed/$case/expert$e"
  [ -f "$dir/.done" ] && return 0
  mkdir -p "$(dirname "$dir")"
  local resume=()
  [ -f "$dir/train_state.safetensors" ] || [ -f "$dir/train_state.msgpack" ] && resume=(--resume)
  ddm train expert --framework "$framework" --arch "$arch" "$@" --partition "$STUDY_OUT/partition.json" \
    --expert "$e" --preset "$EMOJI_PRESET" --steps "$EMOJI_STEPS" --batch "$EMOJI_BATCH" --seed "$seed" \
    --out "$dir" --no-progress "${resume[@]}" > "$dir.log" 2>&1 || { echo "FAILED: $dir (see $dir.log)"; return 1; }
  touch "$dir/.done"
  echo "done: seed $seed $case expert $e ($(tail -1 "$dir.log"))"
}
export -f train_one

for seed in $seeds; do
  echo "== seed $seed: experts ($preset, $steps steps, batch $batch)"
  mkdir -p "$out/seed$seed/eval"
  for spec in "${CLUSTERS[@]}"; do
    read -r e framework arch flags <<< "$spec"
    echo "$seed mixed $e $framework $arch $flags"
    # a cluster whose mixed objective is the velocity trains once: the same model in both cases
    [ "$flags" = "--objective flow-velocity" ] || echo "$seed velocity $e $framework $arch --objective flow-velocity"
  done | xargs -P "$jobs" -L 1 bash -c 'train_one "$@"' _
  for spec in "${CLUSTERS[@]}"; do
    read -r e framework arch flags <<< "$spec"
    shared="$out/seed$seed/velocity/expert$e"
    if [ "$flags" = "--objective flow-velocity" ] && [ ! -e "$shared" ]; then ln -s "../mixed/expert$e" "$shared"; fi
  done

  echo "== seed $seed: router"
  router="$out/seed$seed/router"
  [ -f "$router/meta.json" ] || ddm train router --partition "$out/partition.json" --steps 1500 --seed "$seed" \
    --out "$router" --no-progress > "$router.log" 2>&1
  for case in mixed velocity; do
    ln -sfn ../router "$out/seed$seed/$case/router"
    ddm deployment write "$out/seed$seed/$case/deployment.toml" --name "emoji $case seed $seed" \
      --expert expert0 --expert expert1 --expert expert2 --expert expert3 --router learned:router >/dev/null
  done

  echo "== seed $seed: evaluations ($n_eval images each, 50 Euler steps)"
  for case in mixed velocity; do
    for strategy in top1 topk:2; do echo "$seed $case $strategy $out/classifier"; done
  done | xargs -P "$jobs" -L 1 bash -c 'study_evaluate "$@"' _

  echo "== seed $seed: records -> $records/seed$seed"
  mkdir -p "$records/seed$seed"
  for f in "$out/seed$seed"/eval/*/metrics.json; do
    row=$(basename "$(dirname "$f")")
    cp "$f" "$records/seed$seed/$row.json"
  done
done

echo "== table"
python -m ddm.ops.study.objectives "$records"
