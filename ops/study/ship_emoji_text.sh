#!/usr/bin/env bash
# Build the shipped text deployment, checkpoints/emoji-text/, from the latent run of
# ops/study/emoji_text.sh (sixth argument emoji~ae-b16d56a8f95f: experts on the 4x8x8 latents of the
# shipped autoencoder, checkpoints/emoji-latent/decoder): the four text experts (PyTorch and Flax
# UNets), a prompt-aware learned router trained here on the same partition and captions, the
# autoencoder as the [decoder], example prompts from the held-out names, and R-precision's image tower.
# Copies inference weights only, evaluates (ops/eval/text_eval.py: train and held-out prompts per
# strategy, and a guidance sweep) and writes a model card per checkpoint.
#
#   bash ops/study/ship_emoji_text.sh [runs=runs/emoji-text] [out=checkpoints/emoji-text] [count=128]
#
# Needs: the captions file the experts trained on ($runs/captions.npz), the retrieval tower
# ($runs/retrieval: `ddm train retrieval`), the emoji classifier (checkpoints/emoji/classifier).
set -euo pipefail
runs=${1:-runs/emoji-text}
out=${2:-checkpoints/emoji-text}
count=${3:-128}
export OMP_NUM_THREADS=1 XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
source "$(dirname "$0")/ship_lib.sh"
ship_require_trained "$runs" ops/study/emoji_text.sh
# 10% of the router's rows read the empty prompt (a job without one routes on x_t alone, as well as
# with half), and 15,000 steps: at the noise end it must name a training emoji's cluster from its name
# (0.984 at t ~ 0.05, against 0.703 after 1,500 steps at 50%: docs/RESULTS.md), or top-1 sends "blue
# heart" to the expert whose cluster holds the white heart
[ -f "$runs/router/meta.json" ] || ddm train router --partition "$runs/partition.json" --text pooled \
  --prompt-embeddings "$runs/captions.npz" --label-dropout 0.1 --steps 15000 --eval-split test \
  --out "$runs/router" --no-progress
[ -f "$runs/retrieval/meta.json" ] || ddm train retrieval --prompt-embeddings "$runs/captions.npz" \
  --out "$runs/retrieval" --no-progress
mkdir -p "$out"
ship_copy "$out" "$runs/expert0" expert0_torch_unet model.safetensors
ship_copy "$out" "$runs/expert1" expert1_jax_unet model.msgpack
ship_copy "$out" "$runs/expert2" expert2_torch_unet model.safetensors
ship_copy "$out" "$runs/expert3" expert3_jax_unet model.msgpack
ship_copy "$out" "$runs/router" router model.msgpack
ship_copy "$out" "$runs/retrieval" retrieval model.safetensors
ship_copy "$out" checkpoints/emoji-latent/decoder decoder autoencoder.safetensors
cp checkpoints/emoji-latent/decoder/MODEL_CARD.md "$out/decoder/"
# the partition (3 MB of k-means centroids) stays in the run: `ddm partition` remakes it (seed 0)
ddm deployment write "$out/deployment.toml" --name emoji-text --strategy top1 --guidance 3 \
  --expert expert0_torch_unet --expert expert1_jax_unet --expert expert2_torch_unet --expert expert3_jax_unet \
  --router learned:router --decoder decoder \
  --example-prompt "red heart" --example-prompt "grinning face" --example-prompt "flag: Japan" \
  --example-prompt "pizza" --example-prompt "dog face" --example-prompt "sun" \
  --comment "The shipped text deployment: a prompt becomes a pooled all-MiniLM-L6-v2 embedding once per job (the
text-encoder stage), and four experts trained alone on the CLDR captions of their k-means cluster of emoji
learn flows in the 4x8x8 latents of the shipped autoencoder (decoder/): two PyTorch and two Flax UNets. The
learned router reads latent x_t and the prompt; guidance is against the empty prompt (or a negative one)."

export SHIP_RUNS="$runs" SHIP_OUT="$out" SHIP_COUNT="$count"
evaluate() { # split strategy guidance
  local file="$SHIP_RUNS/eval/$1_${2/:/}_g$3.json"
  [ -f "$file" ] || python -m ddm.ops.eval.text_eval --deployment "$SHIP_OUT/deployment.toml" \
    --retrieval "$SHIP_OUT/retrieval" --classifier checkpoints/emoji/classifier \
    --prompt-embeddings "$SHIP_RUNS/captions.npz" --split "$1" --count "$SHIP_COUNT" --strategy "$2" \
    --guidance "$3" --out "$file" > "${file%.json}.log" 2>&1 || { echo "FAILED: $file"; return 1; }
  tail -1 "${file%.json}.log"
}
export -f evaluate
mkdir -p "$runs/eval"
# per split and strategy at the deployment's guidance, then a guidance sweep; two at once
{ for split in train test; do for strategy in top1 topk:2 full; do echo "$split $strategy 3"; done; done
  for g in 1 2 5; do echo "train top1 $g"; done; } | xargs -P 2 -L 1 bash -c 'evaluate "$@"' _
mkdir -p "$out/eval"
cp "$runs"/eval/*.json "$out/eval/"
cp "$runs/eval/train_top1_g3.png" "$out/samples_train_top1.png"
cp "$runs/eval/test_top1_g3.png" "$out/samples_heldout_top1.png"
for name in expert0_torch_unet expert1_jax_unet expert2_torch_unet expert3_jax_unet router retrieval; do
  python -m ddm.ops.study.model_card "$out/$name"
done
du -sh "$out"
