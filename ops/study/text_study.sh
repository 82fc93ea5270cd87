#!/usr/bin/env bash
# Text deployments that differ in one choice, trained and judged alike (docs/RESULTS.md, "Which clusters
# for text" and "Pixels or latents for text"). Every case is the emoji-text recipe (ops/study/emoji_text.sh:
# small UNets, PyTorch for clusters 0 and 2, Flax for 1 and 3, on the clusters' CLDR captions, 10% empty),
# its total expert steps shared out by cluster size, a prompt-aware router trained the same way, and the
# same evaluation (ops/eval/text_eval.py: R-precision, group accuracy and FD for train and held-out
# prompts at top-1, guidance 3). The cases:
#
#   pixels       k-means K=4 on emoji pixels (the shipped choice); experts on the 4x8x8 latents of
#                checkpoints/emoji-latent's autoencoder, whose decoder stage renders them
#   captions     k-means K=4 on the pooled all-MiniLM-L6-v2 embedding of each emoji's CLDR name
#                (`ddm partition --features captions`: clusters a prompt can name); latents as above
#   pixel-space  the pixels case's clusters; experts on the 3x32x32 pixels themselves, no decoder
#
# The cases train side by side, one process each (one thread each: two cores).
#
#   bash ops/study/text_study.sh OUT ROUTER_STEPS COUNT CASE=TOTAL_EXPERT_STEPS...
#   bash ops/study/text_study.sh runs/text-clusters 6000 128 pixels=4000 captions=4000
#   bash ops/study/text_study.sh runs/text-space 6000 128 pixels=4000 pixel-space=300
#
# Then: python -m ddm.ops.study.text_tables OUT/CASE/eval ...
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: bash $0 OUT ROUTER_STEPS COUNT CASE=TOTAL_EXPERT_STEPS... (CASE: pixels, captions, pixel-space)" >&2; exit 2; }
out=$1
router_steps=$2
count=$3
shift 3
latents=emoji~ae-b16d56a8f95f # the latents the shipped experts learn (`ddm data encode emoji --autoencoder ...`)
export OMP_NUM_THREADS=1 XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
mkdir -p "$out"
[ -f "$out/captions.npz" ] || ddm data embed-captions emoji --split train test --out "$out/captions.npz"

run_case() { # CASE=TOTAL_EXPERT_STEPS
  local name=${1%%=*} total=${1#*=} dataset=$STUDY_LATENTS decoder=(--decoder decoder) features=(--features emoji)
  local dir="$STUDY_OUT/$name"
  case $name in
    pixels) ;;
    captions) features=(--features captions --prompt-embeddings "$STUDY_OUT/captions.npz") ;;
    pixel-space) dataset=emoji decoder=() features=() ;;
    *) echo "unknown case $name: expected pixels, captions or pixel-space" >&2; return 1 ;;
  esac
  mkdir -p "$dir"
  cp -n "$STUDY_OUT/captions.npz" "$dir/captions.npz"
  [ -f "$dir/partition.json" ] || ddm partition --dataset "$dataset" --split train --by kmeans:4 \
    "${features[@]}" --out "$dir/partition.json" > "$dir/partition.log"
  local steps
  steps=$(python -c "import json,sys; c=json.load(open(sys.argv[1]))['clusters']; n=sum(x['count'] for x in c)
print(','.join(str(max(1, round($total * x['count'] / n))) for x in c))" "$dir/partition.json")
  echo "$name: expert steps $steps"
  bash "$STUDY_SCRIPTS/emoji_text.sh" "$dir" "$steps" 128 cpu 1 "$dataset"
  [ -f "$dir/router/meta.json" ] || ddm train router --partition "$dir/partition.json" --text pooled \
    --prompt-embeddings "$dir/captions.npz" --label-dropout 0.1 --steps "$STUDY_ROUTER_STEPS" \
    --eval-split test --out "$dir/router" --no-progress > "$dir/router.log" || { echo "FAILED: $dir/router.log"; return 1; }
  [ ${#decoder[@]} -eq 0 ] || ln -sfn "$(realpath checkpoints/emoji-latent/decoder)" "$dir/decoder"
  ddm deployment write "$dir/deployment.toml" --name "text-study-$name" --strategy top1 --guidance 3 \
    --expert expert0 --expert expert1 --expert expert2 --expert expert3 --router learned:router \
    "${decoder[@]}" > /dev/null
  mkdir -p "$dir/eval"
  for split in train test; do
    [ -f "$dir/eval/${split}_top1_g3.json" ] || python -m ddm.ops.eval.text_eval \
      --deployment "$dir/deployment.toml" --retrieval checkpoints/emoji-text/retrieval \
      --classifier checkpoints/emoji/classifier --prompt-embeddings "$dir/captions.npz" --split "$split" \
      --count "$STUDY_COUNT" --strategy top1 --guidance 3 --out "$dir/eval/${split}_top1_g3.json" \
      > "$dir/eval/${split}_top1_g3.log" 2>&1 || { echo "FAILED: $dir/eval/${split}_top1_g3.log"; return 1; }
  done
  echo "$name: done"
}
export -f run_case
export STUDY_OUT="$out" STUDY_ROUTER_STEPS="$router_steps" STUDY_COUNT="$count"
export STUDY_LATENTS="$latents" STUDY_SCRIPTS="$(dirname "$0")"
printf '%s\n' "$@" | xargs -P 2 -L 1 bash -c 'run_case "$@"' _
evals=()
for spec in "$@"; do evals+=("$out/${spec%%=*}/eval"); done
python -m ddm.ops.study.text_tables "${evals[@]}"
