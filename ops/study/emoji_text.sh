#!/usr/bin/env bash
# The experts of the shipped text deployment, checkpoints/emoji-text/ (ops/study/ship_emoji_text.sh
# ships them): four text-conditioned UNets on 3x32x32 RGB emoji, one per k-means cluster (pixel PCA
# features, K=4, seed 0: the emoji study's partition), two in PyTorch and two in Flax, each trained alone
# on its cluster's CLDR captions (pooled all-MiniLM-L6-v2 embeddings, 10% dropped to the empty prompt
# for classifier-free guidance), flow velocity, EMA weights.
#
#   bash ops/study/emoji_text.sh [out=runs/emoji-text] [steps=12000] [batch=128] [device=cpu] [jobs=2] \
#       [dataset=emoji] [conditioning=text]
#
# conditioning: text (the captions, as above), or class (the emoji's Unicode group, 10% dropped): the same
# recipe for a class deployment; checkpoints/emoji-latent/ is trained so, on its own partition placed in
# $out/partition.json beforehand (ops/study/ship_emoji_latent.sh says how).
#
# dataset: emoji (3x32x32 pixels), or a latent dataset of it (`ddm data encode emoji --autoencoder A`,
# e.g. emoji~ae-b16d56a8f95f: 4x8x8 latents, about 8x cheaper to train), clustered by the same pixel
# features (--features emoji), so both spaces share one partition of the images.
#
# steps: one count for every expert, or one per expert, comma-separated in cluster order (the shipped
# run: 6000,3000,3000,1500; the Flax experts train at half the PyTorch ones' speed on a CPU).
#
# The captions are encoded once (`ddm data embed-captions`, into $out/captions.npz) unless that file is
# there already: a machine without the encoder's wheel (a GPU box) trains from the file alone. jobs:
# experts trained at once (4 on one GPU: the models are small). Every step is skipped when its output
# exists; an expert interrupted mid-run resumes its train state.
set -euo pipefail
out=${1:-runs/emoji-text}
steps=${2:-12000}
batch=${3:-128}
device=${4:-cpu}
jobs=${5:-2}
dataset=${6:-emoji}
conditioning=${7:-text}
mkdir -p "$out"
if [ "$device" = cpu ]; then # one thread per process: `jobs` of them share the cores
  export OMP_NUM_THREADS=1 XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
else # JAX takes 75% of the GPU's memory by default; the experts share one GPU
  export XLA_PYTHON_CLIENT_MEM_FRACTION=0.15
fi
export TEXT_OUT="$out" TEXT_STEPS="$steps" TEXT_BATCH="$batch" TEXT_DEVICE="$device" TEXT_FLAGS=""
[ "$conditioning" = text ] && TEXT_FLAGS="--text pooled --prompt-embeddings $out/captions.npz"

features=()
[ "$dataset" = emoji ] || features=(--features emoji) # a latent dataset: clustered by its images' pixels
[ -f "$out/partition.json" ] || ddm partition --dataset "$dataset" --split train --by kmeans:4 "${features[@]}" \
  --out "$out/partition.json"
[ "$conditioning" = class ] || [ -f "$out/captions.npz" ] || ddm data embed-captions emoji --split train test --out "$out/captions.npz"

train_one() { # cluster framework
  local e=$1 framework=$2 dir="$TEXT_OUT/expert$1" steps
  IFS=, read -ra steps <<< "$TEXT_STEPS"
  steps=${steps[$e]:-${steps[0]}}
  [ -f "$dir/.done" ] && return 0
  local resume=()
  [ -f "$dir/train_state.safetensors" ] || [ -f "$dir/train_state.msgpack" ] && resume=(--resume)
  # shellcheck disable=SC2086 # TEXT_FLAGS is a list of flags
  ddm train expert --framework "$framework" --arch unet --preset small $TEXT_FLAGS \
    --partition "$TEXT_OUT/partition.json" --expert "$e" \
    --steps "$steps" --batch "$TEXT_BATCH" --save-every 1000 --device "$TEXT_DEVICE" \
    --out "$dir" --no-progress "${resume[@]}" > "$dir.log" 2>&1 || { echo "FAILED: $dir (see $dir.log)"; return 1; }
  touch "$dir/.done"
  echo "done: expert $e $framework ($(tail -1 "$dir.log"))"
}
export -f train_one
printf '0 torch\n1 jax\n2 torch\n3 jax\n' | xargs -P "$jobs" -L 1 bash -c 'train_one "$@"' _
