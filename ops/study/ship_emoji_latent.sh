#!/usr/bin/env bash
# Build the shipped latent deployment, checkpoints/emoji-latent/, from seed 0's `learned` case of the
# latent study (ops/study/latent.sh, which trains it): the autoencoder as the [decoder] (3x32x32 emoji <->
# 4x8x8 latents), four flow-velocity experts on its latents clustered by k-means on its learned features
# (PyTorch UNet, Flax DiT, PyTorch DiT, Flax UNet), the learned router that reads latent x_t. Copies
# inference weights only, evaluates the shipped deployment per strategy on decoded images (the shipped
# emoji classifier, checkpoints/emoji/classifier) and writes a model card per checkpoint.
#
#   bash ops/study/ship_emoji_latent.sh [runs/latent] [checkpoints/emoji-latent] [n_eval=450] [jobs=2]
set -euo pipefail
runs=${1:-runs/latent}
out=${2:-checkpoints/emoji-latent}
n_eval=${3:-450}
jobs=${4:-2}
src="$runs/seed0/learned"
export OMP_NUM_THREADS=1 XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
source "$(dirname "$0")/ship_lib.sh"
ship_require_trained "$src" ops/study/latent.sh
mkdir -p "$out"
ship_copy "$out" "$src/expert0" expert0_torch_unet model.safetensors
ship_copy "$out" "$src/expert1" expert1_jax_dit model.msgpack
ship_copy "$out" "$src/expert2" expert2_torch_dit model.safetensors
ship_copy "$out" "$src/expert3" expert3_jax_unet model.msgpack
ship_copy "$out" "$src/router" router model.msgpack
ship_copy "$out" "$runs/ae" decoder autoencoder.safetensors
cp "$runs/learned/partition.json" "$out/"
ddm deployment write "$out/deployment.toml" --name emoji-latent-kmeans4 --strategy top1 \
  --expert expert0_torch_unet --expert expert1_jax_dit --expert expert2_torch_dit --expert expert3_jax_unet \
  --router learned:router --decoder decoder \
  --comment "The shipped latent deployment: experts learn flows in the 4x8x8 latent space of our own autoencoder
(decoder/, trained on emoji train), one per cluster of k-means on its latents (learned features): a PyTorch
UNet, a Flax DiT, a PyTorch DiT and a Flax UNet, all flow-velocity. The router reads latent x_t; the
decoder worker (ddm.decoder) turns each finished job's latents into 3x32x32 RGB pixels."
ship_evaluate "$runs" "$out" "$n_eval" "$jobs" ship_eval_ --classifier checkpoints/emoji/classifier
ship_cards "$out" expert0_torch_unet expert1_jax_dit expert2_torch_dit expert3_jax_unet router
python -m ddm.ops.study.model_card "$out/decoder"
du -sh "$out"
