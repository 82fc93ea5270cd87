#!/usr/bin/env bash
# Which clusters for a text deployment (docs/RESULTS.md, "Which clusters for text"): k-means K=4 on the
# pixels of emoji train (the shipped emoji-text's choice) against k-means K=4 on the pooled
# all-MiniLM-L6-v2 embedding of each emoji's CLDR name (`ddm partition --features captions`: clusters a
# prompt can name). Everything else equal: the emoji-text recipe (ops/study/emoji_text.sh: small UNets,
# PyTorch for clusters 0 and 2, Flax for 1 and 3, on the latents of checkpoints/emoji-latent's
# autoencoder), the same total expert steps per case, shared out by cluster size, a prompt-aware router
# trained the same way, and the same evaluation (ops/eval/text_eval.py: R-precision, group accuracy and
# FD for train and held-out prompts at top-1, guidance 3). The two cases train side by side, one
# process each.
#
#   bash ops/study/text_clusters.sh [out=runs/text-clusters] [total_steps=4000] [router_steps=6000] [count=128]
#
# Then: python -m ddm.ops.study.text_tables $out/pixels/eval $out/captions/eval
set -euo pipefail
out=${1:-runs/text-clusters}
total=${2:-4000}
router_steps=${3:-6000}
count=${4:-128}
dataset=emoji~ae-b16d56a8f95f # the latents the shipped experts learn (`ddm data encode emoji --autoencoder ...`)
export OMP_NUM_THREADS=1 XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
mkdir -p "$out"
[ -f "$out/captions.npz" ] || ddm data embed-captions emoji --split train test --out "$out/captions.npz"

run_case() { # case: pixels | captions
  local dir="$STUDY_OUT/$1" features=(--features emoji)
  [ "$1" = captions ] && features=(--features captions --prompt-embeddings "$STUDY_OUT/captions.npz")
  mkdir -p "$dir"
  cp -n "$STUDY_OUT/captions.npz" "$dir/captions.npz"
  [ -f "$dir/partition.json" ] || ddm partition --dataset "$STUDY_DATASET" --split train --by kmeans:4 \
    "${features[@]}" --out "$dir/partition.json" > "$dir/partition.log"
  local steps # the case's total, shared out by cluster size
  steps=$(python -c "import json,sys; c=json.load(open(sys.argv[1]))['clusters']; n=sum(x['count'] for x in c)
print(','.join(str(max(1, round($STUDY_TOTAL * x['count'] / n))) for x in c))" "$dir/partition.json")
  echo "$1: expert steps $steps"
  bash "$STUDY_SCRIPTS/emoji_text.sh" "$dir" "$steps" 128 cpu 1 "$STUDY_DATASET"
  [ -f "$dir/router/meta.json" ] || ddm train router --partition "$dir/partition.json" --text pooled \
    --prompt-embeddings "$dir/captions.npz" --label-dropout 0.1 --steps "$STUDY_ROUTER_STEPS" \
    --eval-split test --out "$dir/router" --no-progress > "$dir/router.log" || { echo "FAILED: $dir/router.log"; return 1; }
  ln -sfn "$(realpath checkpoints/emoji-latent/decoder)" "$dir/decoder"
  ddm deployment write "$dir/deployment.toml" --name "text-clusters-$1" --strategy top1 --guidance 3 \
    --expert expert0 --expert expert1 --expert expert2 --expert expert3 --router learned:router \
    --decoder decoder > /dev/null
  mkdir -p "$dir/eval"
  for split in train test; do
    [ -f "$dir/eval/${split}_top1_g3.json" ] || python -m ddm.ops.eval.text_eval \
      --deployment "$dir/deployment.toml" --retrieval checkpoints/emoji-text/retrieval \
      --classifier checkpoints/emoji/classifier --prompt-embeddings "$dir/captions.npz" --split "$split" \
      --count "$STUDY_COUNT" --strategy top1 --guidance 3 --out "$dir/eval/${split}_top1_g3.json" \
      > "$dir/eval/${split}_top1_g3.log" 2>&1 || { echo "FAILED: $dir/eval/${split}_top1_g3.log"; return 1; }
  done
  echo "$1: done"
}
export -f run_case
export STUDY_OUT="$out" STUDY_TOTAL="$total" STUDY_ROUTER_STEPS="$router_steps" STUDY_COUNT="$count"
export STUDY_DATASET="$dataset" STUDY_SCRIPTS="$(dirname "$0")"
printf 'pixels\ncaptions\n' | xargs -P 2 -L 1 bash -c 'run_case "$@"' _
python -m ddm.ops.study.text_tables "$out/pixels/eval" "$out/captions/eval"
