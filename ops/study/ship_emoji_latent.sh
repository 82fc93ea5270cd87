#!/usr/bin/env bash
# Build the shipped latent deployment, checkpoints/emoji-latent/, from a class run of ops/study/emoji_text.sh
# on the 4x8x8 latents of the shipped autoencoder (decoder/): four flow-velocity UNets (two PyTorch, two Flax,
# the `small` preset, EMA weights), one per cluster of k-means on the latents (learned features), each trained
# alone on its cluster's images and Unicode groups (10% dropped for guidance); a learned router that reads
# latent x_t (trained here if the run has none); guidance 3 by default. Copies inference weights only,
# evaluates the shipped deployment per strategy on decoded images (the emoji classifier,
# checkpoints/emoji/classifier; top-1 also unguided) and writes a model card per checkpoint. The run:
#
#   ddm data encode emoji --autoencoder checkpoints/emoji-latent/decoder      # -> emoji~ae-b16d56a8f95f
#   ddm partition --dataset emoji~ae-b16d56a8f95f --split train --by kmeans:4 --out runs/emoji-latent/partition.json
#   bash ops/study/emoji_text.sh runs/emoji-latent 3500,2000,1500,800 128 cpu 2 emoji~ae-b16d56a8f95f class
#   bash ops/study/ship_emoji_latent.sh runs/emoji-latent
#
#   bash ops/study/ship_emoji_latent.sh [runs=runs/emoji-latent] [out=checkpoints/emoji-latent] [n_eval=450] [jobs=2]
set -euo pipefail
runs=${1:-runs/emoji-latent}
out=${2:-checkpoints/emoji-latent}
n_eval=${3:-450}
jobs=${4:-2}
decoder=checkpoints/emoji-latent/decoder
export OMP_NUM_THREADS=1 XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
source "$(dirname "$0")/ship_lib.sh"
ship_require_trained "$runs" ops/study/emoji_text.sh
[ -f "$runs/router/meta.json" ] || ddm train router --partition "$runs/partition.json" --label-dropout 0.5 \
  --eval-split test --out "$runs/router" --no-progress
mkdir -p "$out"
ship_copy "$out" "$runs/expert0" expert0_torch_unet model.safetensors
ship_copy "$out" "$runs/expert1" expert1_jax_unet model.msgpack
ship_copy "$out" "$runs/expert2" expert2_torch_unet model.safetensors
ship_copy "$out" "$runs/expert3" expert3_jax_unet model.msgpack
ship_copy "$out" "$runs/router" router model.msgpack
[ "$(realpath "$out/decoder" 2>/dev/null)" = "$(realpath "$decoder")" ] || ship_copy "$out" "$decoder" decoder autoencoder.safetensors
cp "$runs/partition.json" "$out/"
ddm deployment write "$out/deployment.toml" --name emoji-latent-kmeans4 --strategy top1 --guidance 3 \
  --expert expert0_torch_unet --expert expert1_jax_unet --expert expert2_torch_unet --expert expert3_jax_unet \
  --router learned:router --decoder decoder \
  --comment "The shipped latent deployment: experts learn flows in the 4x8x8 latent space of our own autoencoder
(decoder/, trained on emoji train), one per cluster of k-means on its latents (learned features): two PyTorch
and two Flax UNets, all flow-velocity, trained alone on their cluster's Unicode groups. The router reads latent
x_t; the decoder worker (ddm.decoder) turns each finished job's latents into 3x32x32 RGB pixels. Guidance 3:
unguided, a sample rarely shows its group (docs/RESULTS.md)."
ship_evaluate "$runs" "$out" "$n_eval" "$jobs" ship_eval_ --classifier checkpoints/emoji/classifier
ship_evaluate_one "$runs" "$out" "$n_eval" top1_g1 --guidance 1 --classifier checkpoints/emoji/classifier
ship_cards "$out" expert0_torch_unet expert1_jax_unet expert2_torch_unet expert3_jax_unet router
python -m ddm.ops.study.model_card "$out/decoder"
du -sh "$out"
