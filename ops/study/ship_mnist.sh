#!/usr/bin/env bash
# Build the shipped demo, checkpoints/mnist/, from a finished run folder (default runs/mnist) made with
# the commands in docs/TRAINING.md. Copies inference weights only (no train state),
# trains the learned router and the evaluation classifier if missing, evaluates the deployment and
# writes a model card per checkpoint. Every number in the cards comes from these commands.
#
#   DDM_DATA_DIR=/path/to/data bash ops/study/ship_mnist.sh [runs/mnist] [checkpoints/mnist] [n_eval]
set -euo pipefail
runs=${1:-runs/mnist}
out=${2:-checkpoints/mnist}
n_eval=${3:-1000}

[ -f "$runs/router/meta.json" ] || ddm train router --partition "$runs/partition.json" --out "$runs/router"
[ -f "$runs/classifier/meta.json" ] || ddm train classifier --dataset mnist --out "$runs/classifier"

mkdir -p "$out"
source "$(dirname "$0")/ship_lib.sh"
for pair in "expert0_torch:model.safetensors" "expert1_jax:model.msgpack" "router:model.msgpack" \
            "classifier:model.safetensors"; do
  ship_copy "$out" "$runs/${pair%%:*}" "${pair%%:*}" "${pair##*:}"
done
cp "$runs/partition.json" "$out/partition.json"
ddm deployment write "$out/deployment.toml" --name mnist-label-split --guidance 1.5 \
  --expert expert0_torch --expert expert1_jax --router learned:router \
  --comment "The shipped demo: digits 0-4 from a PyTorch expert, 5-9 from a JAX/Flax expert, a learned router.
Classifier-free guidance by default (the experts saw 10% null labels): class accuracy rises from
0.95 to 0.99+ for twice the forward passes; docs/RESULTS.md has both. Jobs may still ask for 1."

metrics=()
for strategy in oracle top1; do  # at the deployment's guidance
  ddm eval --deployment "$out/deployment.toml" --total "$n_eval" --strategy "$strategy" --out "$runs/eval_$strategy"
  metrics+=("$runs/eval_$strategy/metrics.json")
  cp "$runs/eval_$strategy/metrics.json" "$out/eval_$strategy.json"
done
# and without guidance, for the comparison in docs/RESULTS.md
ddm eval --deployment "$out/deployment.toml" --total "$n_eval" --strategy oracle --guidance 1 \
  --out "$runs/eval_oracle_guidance1"
metrics+=("$runs/eval_oracle_guidance1/metrics.json")
cp "$runs/eval_oracle_guidance1/metrics.json" "$out/eval_oracle_guidance1.json"
cp "$runs/eval_oracle/samples.png" "$out/samples_oracle.png"
for name in expert0_torch expert1_jax router; do
  python -m ddm.ops.study.model_card "$out/$name" --metrics "${metrics[@]}"
done
python -m ddm.ops.study.model_card "$out/classifier"
du -sh "$out"
