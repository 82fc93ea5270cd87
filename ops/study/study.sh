#!/usr/bin/env bash
# The DDM-vs-monolith study of docs/RESULTS.md, end to end, at equal training compute (the DDM paper's
# rule): every expert trains the same number of steps as its monolith, on the monolith's batch split
# evenly across the K experts. Each expert sees only its own cluster. Fashion-MNIST train (60,000):
#
#   fashion_mono      one model on all of train (the monolith)
#   fashion_kmeans2   k-means K=2 on pixel PCA features       fashion_kmeans4   the same, K=4
#   fashion_random2   random shards K=2 (the negative control: no structure to route on)
#
# For every training seed: the experts (--seed S), a learned router per partition (--seed S), one
# deployment per case, and `ddm eval` (sampling seed S) for every strategy the case allows (top2 = full
# when K=2). The partitions (k-means seed 0) and the evaluation classifier are shared by all seeds; the
# classifier is the shipped one (checkpoints/fashion-mnist/classifier), trained here if it is missing,
# so seeds run in different sessions are scored by the same features. Each seed's eval records are
# copied to docs/study/seed<S>/ (small JSON, committed), from which ops/study/tables.py builds the
# tables with intervals. Every step is skipped when its output exists, so an interrupted run continues
# where it stopped (experts resume their train state).
#
#   bash ops/study/study.sh [out=runs/study] [seeds="0 1 2"] [steps=2000] [n_eval=1000] [jobs=2] [scope=all]
#
# scope=headline is the study cut to its two questions, for a seed the session's compute cannot fit
# whole (about two thirds of a seed's work): the monolith, and k-means K=2 and K=4 at top-1 and top-2 (DDM against
# the monolith; the paper's top-1 against Paris's top-2); no random shards, no K=4 full. Its records
# are written with --allow-missing, and the tables count such a seed only in the rows it has.
#
# The preset is `tiny` (c=16, 0.48M parameters): one seed is about 1-1.5 hours of the 2-core VM
# (docs/RESULTS.md has the measured times); trainings and evals run single-threaded, `jobs` at a time.
set -euo pipefail
source "$(dirname "$0")/study_lib.sh"
study_args runs/study 1000 "$@"
scope=${6:-all}
case "$scope" in all | headline) ;; *) echo "scope: expected all or headline, got '$scope'" >&2; exit 2 ;; esac
batch=64
preset=tiny
classifier=checkpoints/fashion-mnist/classifier
records=docs/study
export OMP_NUM_THREADS=1 STUDY_OUT="$out" STUDY_STEPS="$steps" STUDY_PRESET="$preset" STUDY_N="$n_eval"
mkdir -p "$out"

echo "== partitions"
partition() { # name by
  [ -f "$out/$1.json" ] || ddm partition --dataset fashion-mnist --split train --by "$2" --out "$out/$1.json" \
    --preview "$out/$1.png"
}
partition fashion_mono all
partition fashion_kmeans2 kmeans:2
partition fashion_kmeans4 kmeans:4
partition fashion_random2 random:2

echo "== the evaluation classifier ($classifier)"
[ -f "$classifier/meta.json" ] || ddm train classifier --dataset fashion-mnist --split 'train[:20000]' \
  --eval-split test --epochs 5 --out "$classifier" --no-progress

train_one() { # seed case expert batch
  local dir="$STUDY_OUT/seed$1/$2/expert$3"
  [ -f "$dir/.done" ] && return 0
  mkdir -p "$(dirname "$dir")"
  local resume=()
  [ -f "$dir/train_state.safetensors" ] && resume=(--resume)
  ddm train expert --framework torch --partition "$STUDY_OUT/$2.json" --expert "$3" --preset "$STUDY_PRESET" \
    --steps "$STUDY_STEPS" --batch "$4" --seed "$1" --out "$dir" --no-progress "${resume[@]}" > "$dir.log" 2>&1 || { echo "FAILED: $dir (see $dir.log)"; return 1; }
  touch "$dir/.done"
  echo "done: seed $1 $2 expert $3 ($(tail -1 "$dir.log"))"
}
train_router() { # seed case
  local dir="$STUDY_OUT/seed$1/$2/router"
  [ -f "$dir/meta.json" ] || ddm train router --partition "$STUDY_OUT/$2.json" --steps 1000 --seed "$1" \
    --out "$dir" --no-progress > "$dir.log" 2>&1 || { echo "FAILED: $dir (see $dir.log)"; return 1; }
  echo "done: seed $1 $2 router"
}
export -f train_one train_router
deployment() { # seed case n_experts router_kind
  local experts=() router="$4"
  for ((e = 0; e < $3; e++)); do experts+=(--expert "expert$e:cpu"); done
  if [ "$4" = learned ]; then router="learned:router"; fi
  ddm deployment write "$out/seed$1/$2/deployment.toml" --name "$2 seed $1" "${experts[@]}" --router "$router" >/dev/null
}

for seed in $seeds; do
  echo "== seed $seed: experts ($preset, $steps steps; monolith batch $batch, split evenly across K)"
  mkdir -p "$out/seed$seed/eval"
  {
    echo "$seed fashion_mono 0 $batch" # the longest first, so the two queues end together
    for e in 0 1; do
      echo "$seed fashion_kmeans2 $e $((batch / 2))"
      [ "$scope" = headline ] || echo "$seed fashion_random2 $e $((batch / 2))"
    done
    for e in 0 1 2 3; do echo "$seed fashion_kmeans4 $e $((batch / 4))"; done
  } > "$out/seed$seed/trainings.txt"
  xargs -P "$jobs" -L 1 bash -c 'train_one "$@"' _ < "$out/seed$seed/trainings.txt"

  echo "== seed $seed: routers"
  {
    printf '%s fashion_kmeans2\n%s fashion_kmeans4\n' "$seed" "$seed"
    [ "$scope" = headline ] || echo "$seed fashion_random2"
  } | xargs -P "$jobs" -L 1 bash -c 'train_router "$@"' _

  deployment "$seed" fashion_mono 1 label-prior
  deployment "$seed" fashion_kmeans2 2 learned
  deployment "$seed" fashion_kmeans4 4 learned
  [ "$scope" = headline ] || deployment "$seed" fashion_random2 2 learned

  echo "== seed $seed: evaluations ($n_eval images each, 50 Euler steps)"
  {
    echo "$seed fashion_mono top1 $classifier"
    if [ "$scope" = headline ]; then
      for s in top1 full; do echo "$seed fashion_kmeans2 $s $classifier"; done # full = top2 at K=2
      for s in top1 topk:2; do echo "$seed fashion_kmeans4 $s $classifier"; done
    else
      for s in top1 full; do
        echo "$seed fashion_kmeans2 $s $classifier"
        echo "$seed fashion_random2 $s $classifier"
      done
      for s in top1 topk:2 full; do echo "$seed fashion_kmeans4 $s $classifier"; done
    fi
  } | xargs -P "$jobs" -L 1 bash -c 'study_evaluate "$@"' _

  echo "== seed $seed: records -> $records/seed$seed"
  partial=()
  [ "$scope" = headline ] && partial=(--allow-missing)
  python -m ddm.ops.study.records "$out/seed$seed" "$records/seed$seed" "${partial[@]}"
done

echo "== tables"
python -m ddm.ops.study.tables "$records" --steps "$steps" --preset "$preset" --batch "$batch"
