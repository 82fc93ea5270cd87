#!/usr/bin/env bash
# Build the colour deployment that shipped as checkpoints/emoji/ until 2026-11-28, from seed 0's
# mixed-objective case of the emoji study (ops/study/emoji.sh, which trains it): four k-means experts on
# 3x32x32 RGB emoji, both frameworks, both architectures, three objectives (table in emoji.sh), the
# learned router that reads RGB x_t, and the evaluation classifier over the 9 Unicode groups; guidance 3
# by default (unguided, a sample rarely shows its group: docs/RESULTS.md). Retired because its tiny pixel
# experts draw colour blobs; its evaluation records and samples are in docs/study/emoji-pixel/, and the
# classifier still ships (to checkpoints/emoji/classifier: every emoji evaluation scores with it). Copies
# inference weights only (no train state), evaluates the deployment per strategy unguided and at top-1
# guided, and writes a model card per checkpoint. Every number in the cards comes from these commands.
#
#   bash ops/study/ship_emoji.sh [runs/emoji] [out=runs/emoji/shipped] [n_eval=450] [jobs=2]
set -euo pipefail
runs=${1:-runs/emoji}
out=${2:-runs/emoji/shipped}
n_eval=${3:-450}
jobs=${4:-2}
src="$runs/seed0/mixed"
export OMP_NUM_THREADS=1 XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
source "$(dirname "$0")/ship_lib.sh"
ship_require_trained "$src" ops/study/emoji.sh
# the classifier ships on its own: every emoji evaluation scores with it
ship_copy checkpoints/emoji "$runs/classifier" classifier model.safetensors
mkdir -p "$out"
ship_copy "$out" "$src/expert0" expert0_torch_unet model.safetensors
ship_copy "$out" "$src/expert1" expert1_jax_dit model.msgpack
ship_copy "$out" "$src/expert2" expert2_torch_dit model.safetensors
ship_copy "$out" "$src/expert3" expert3_jax_unet model.msgpack
ship_copy "$out" "$runs/seed0/router" router model.msgpack
cp "$runs/partition.json" "$runs/partition.png" "$out/"
ln -sfn "$(realpath checkpoints/emoji/classifier)" "$out/classifier" # what ddm eval scores it by
ddm deployment write "$out/deployment.toml" --name emoji-kmeans4 --strategy top1 --guidance 3 \
  --expert expert0_torch_unet --expert expert1_jax_dit --expert expert2_torch_dit --expert expert3_jax_unet \
  --router learned:router \
  --comment "The colour deployment: 3x32x32 RGB emoji split by k-means (K=4), one expert per cluster,
trained alone with its own recipe: a PyTorch UNet predicting the flow velocity, a Flax DiT predicting DDPM
epsilon (linear schedule), a PyTorch DiT predicting DDPM v (cosine, t = 0 at the data) and a Flax UNet
predicting epsilon (cosine, t = 0 at the data). Each expert's worker converts its output to this
deployment's one velocity (docs/PROTOCOL.md, expert cards); the learned router reads RGB x_t. Guidance 3:
unguided, a sample rarely shows its group (docs/RESULTS.md)."

ship_evaluate "$runs" "$out" "$n_eval" "$jobs" ship_eval_ --guidance 1
ship_evaluate_one "$runs" "$out" "$n_eval" top1_g3
ship_cards "$out" expert0_torch_unet expert1_jax_dit expert2_torch_dit expert3_jax_unet router
python -m ddm.ops.study.model_card checkpoints/emoji/classifier
du -sh "$out"
