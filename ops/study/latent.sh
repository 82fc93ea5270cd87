#!/usr/bin/env bash
# The latent study of docs/RESULTS.md ("A latent DDM, and clusters on learned features"), and the
# autoencoder the shipped latent deployment, checkpoints/emoji-latent/, decodes with (its experts are
# trained by ops/study/emoji_text.sh in class mode and shipped by ops/study/ship_emoji_latent.sh).
#
# One autoencoder (KL-regularised, `small`: 3x32x32 emoji -> 4x8x8 latents) trained on emoji `train`;
# the train and test splits encoded once (`ddm data encode`). Two partitions of the same latent rows,
# k-means K=4 (seed 0) on different features; everything else equal:
#
#   case     clusters by
#   learned  k-means on the autoencoder's latents (learned features)
#   pixels   k-means on pixel PCA of the same images (--features emoji)
#
# Each case: one expert per cluster with the emoji study's framework and architecture (cluster 0 PyTorch
# UNet, 1 Flax DiT, 2 PyTorch DiT, 3 Flax UNet), all flow-velocity, `tiny` presets, the same steps and
# batch as the emoji study's pixel experts (so `learned` against its `velocity` case is the latent DDM
# against the pixel DDM at equal optimizer steps and samples), a learned router scored on held-out test
# latents, `ddm eval` at top-1 and top-2 on the decoded images with the shipped emoji classifier. Per
# seed the records go to docs/study/latent/seed<S>/ (eval JSON, router accuracy by t); the tables:
#
#   python -m ddm.ops.study.objectives docs/study/latent --cases pixels learned
#   python -m ddm.ops.study.routing table docs/study/latent --cases pixels learned
#   python -m ddm.ops.study.objectives docs/study/latent docs/study/emoji --cases velocity learned
#
# Every step is skipped when its output exists.
#
#   bash ops/study/latent.sh [out=runs/latent] [seeds="0 1 2"] [steps=2000] [n_eval=450] [jobs=2]
set -euo pipefail
source "$(dirname "$0")/study_lib.sh"
study_args runs/latent 450 "$@"
classifier=checkpoints/emoji/classifier
records=docs/study/latent
export STUDY_OUT="$out" LATENT_STEPS="$steps" STUDY_N="$n_eval"
mkdir -p "$out"

[ -f "$out/ae/meta.json" ] || ddm train autoencoder --dataset emoji --preset small --steps 4000 \
  --classifier "$classifier" --out "$out/ae" --no-progress
latent="emoji~$(python -c "from ddm.workers.autoencoder.checkpoint import read_card; print(read_card('$out/ae').encoder_id)")"
python -c "from ddm.ops.data.dataset import load_dataset; load_dataset('$latent', 'train')" 2>/dev/null ||
  ddm data encode emoji --autoencoder "$out/ae"
# one thread per process from here: `jobs` of them share the cores
export OMP_NUM_THREADS=1 XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
mkdir -p "$out/learned" "$out/pixels"
[ -f "$out/learned/partition.json" ] || ddm partition --dataset "$latent" --by kmeans:4 --out "$out/learned/partition.json"
[ -f "$out/pixels/partition.json" ] || ddm partition --dataset "$latent" --by kmeans:4 --features emoji \
  --out "$out/pixels/partition.json"

CLUSTERS=("0 torch unet" "1 jax dit" "2 torch dit" "3 jax unet")
train_one() { # seed case cluster framework arch
  local dir="$STUDY_OUT/seed$1/$2/expert$3"
  [ -f "$dir/.done" ] && return 0
  mkdir -p "$(dirname "$dir")"
  ddm train expert --framework "$4" --arch "$5" --partition "$STUDY_OUT/$2/partition.json" --expert "$3" \
    --preset tiny --steps "$LATENT_STEPS" --batch 32 --seed "$1" --out "$dir" --no-progress > "$dir.log" 2>&1 ||
    { echo "FAILED: $dir (see $dir.log)"; return 1; }
  touch "$dir/.done"
  echo "done: seed $1 $2 expert $3 ($(tail -1 "$dir.log"))"
}
export -f train_one

for seed in $seeds; do
  echo "== seed $seed: experts (tiny, $steps steps, batch 32)"
  mkdir -p "$out/seed$seed/eval" "$records/seed$seed"
  for case in learned pixels; do
    for spec in "${CLUSTERS[@]}"; do echo "$seed $case $spec"; done
  done | xargs -P "$jobs" -L 1 bash -c 'train_one "$@"' _
  for case in learned pixels; do
    router="$out/seed$seed/$case/router"
    [ -f "$router/meta.json" ] || ddm train router --partition "$out/$case/partition.json" --steps 1500 \
      --seed "$seed" --eval-split test --out "$router" --no-progress > "$router.log" 2>&1
    python -m ddm.ops.study.routing record "$router" "$seed" "$records/seed$seed/router_$case.json"
    ddm deployment write "$out/seed$seed/$case/deployment.toml" --name "emoji-latent $case seed $seed" \
      --expert expert0 --expert expert1 --expert expert2 --expert expert3 --router learned:router \
      --decoder ../../ae >/dev/null
  done
  echo "== seed $seed: evaluations ($n_eval images each, 50 Euler steps, decoded)"
  for case in learned pixels; do
    for strategy in top1 topk:2; do echo "$seed $case $strategy $classifier"; done
  done | xargs -P "$jobs" -L 1 bash -c 'study_evaluate "$@"' _
  for f in "$out/seed$seed"/eval/*/metrics.json; do
    cp "$f" "$records/seed$seed/$(basename "$(dirname "$f")").json"
  done
done

echo "== tables"
python -m ddm.ops.study.objectives "$records" --cases pixels learned
python -m ddm.ops.study.routing table "$records" --cases pixels learned
python -m ddm.ops.study.objectives "$records" docs/study/emoji --cases velocity learned
