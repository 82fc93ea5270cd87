#!/usr/bin/env bash
# Build the second shipped deployment, checkpoints/fashion-mnist/: four experts from the k-means K=4
# partition of Fashion-MNIST train, clusters 0 and 1 in PyTorch and 2 and 3 in JAX/Flax, each trained
# alone, plus a learned router that reads x_t (so unconditional jobs route). Copies inference weights
# only (no train state), evaluates the deployment per strategy and writes a model card per checkpoint.
# Every number in the cards comes from these commands. Each step is skipped when its output exists.
#
#   bash ops/study/ship_fashion.sh [runs/fashion] [checkpoints/fashion-mnist] [steps=4000] [n_eval=500] [jobs=2]
#
# Fashion-MNIST offline: `apt-get install -y dataset-fashion-mnist` (ddm finds it by itself).
set -euo pipefail
runs=${1:-runs/fashion}
out=${2:-checkpoints/fashion-mnist}
steps=${3:-4000}
n_eval=${4:-500}
jobs=${5:-2}
preset=tiny # the 2-core CPU budget; docs/RESULTS.md has the measured times
# one thread per training: `jobs` of them share the cores (torch: OMP; JAX: XLA's CPU thread pool)
export OMP_NUM_THREADS=1 XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
export SHIP_RUNS="$runs" SHIP_STEPS="$steps" SHIP_PRESET="$preset"
mkdir -p "$runs" "$out"

[ -f "$runs/partition.json" ] || ddm partition --dataset fashion-mnist --split train --by kmeans:4 \
  --out "$runs/partition.json" --preview "$runs/partition.png"

train_one() { # expert framework
  local dir="$SHIP_RUNS/expert$1_$2"
  [ -f "$dir/.done" ] && return 0
  mkdir -p "$dir"
  local resume=()
  [ -f "$dir/train_state.safetensors" ] || [ -f "$dir/train_state.msgpack" ] && resume=(--resume)
  ddm train expert --framework "$2" --partition "$SHIP_RUNS/partition.json" --expert "$1" --preset "$SHIP_PRESET" \
    --steps "$SHIP_STEPS" --batch 64 --out "$dir" --no-progress "${resume[@]}" > "$dir.log" 2>&1 || { echo "FAILED: $dir (see $dir.log)"; return 1; }
  touch "$dir/.done"
  echo "done: expert $1 ($2): $(tail -1 "$dir.log")"
}
export -f train_one
printf '0 torch\n2 jax\n1 torch\n3 jax\n' | xargs -P "$jobs" -L 1 bash -c 'train_one "$@"' _
[ -f "$runs/router/meta.json" ] || ddm train router --partition "$runs/partition.json" --out "$runs/router" \
  --no-progress

source "$(dirname "$0")/ship_lib.sh"
for pair in expert0_torch:model.safetensors expert1_torch:model.safetensors expert2_jax:model.msgpack \
            expert3_jax:model.msgpack router:model.msgpack; do
  ship_copy "$out" "$runs/${pair%%:*}" "${pair%%:*}" "${pair##*:}"
done
cp "$runs/partition.json" "$out/partition.json"
cp "$runs/partition.png" "$out/partition.png"
ddm deployment write "$out/deployment.toml" --name fashion-mnist-kmeans4 --strategy top1 \
  --class-names "T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle boot" \
  --expert expert0_torch --expert expert1_torch --expert expert2_jax --expert expert3_jax \
  --router learned:router \
  --comment "The second shipped deployment: Fashion-MNIST split by k-means (K=4) on pixel features, so clusters mix
classes and the learned router must read x_t; clusters 0-1 served by PyTorch experts, 2-3 by JAX/Flax."

# evaluation against the test split with the shipped classifier, one strategy per run
ship_evaluate "$runs" "$out" "$n_eval" "$jobs" eval_
ship_cards "$out" expert0_torch expert1_torch expert2_jax expert3_jax router
python -m ddm.ops.study.model_card "$out/classifier"
du -sh "$out"
