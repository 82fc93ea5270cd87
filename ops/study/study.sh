#!/usr/bin/env bash
# The DDM-vs-monolith study of docs/RESULTS.md, end to end, at equal training compute (the DDM paper's
# rule): every expert trains the same number of steps as its monolith, on the monolith's batch split
# evenly across the K experts. Each expert sees only its own cluster.
#
#   (a) MNIST test[:8000], label split K=2 (0-4 | 5-9)    vs a monolith on all of test[:8000]
#   (b) Fashion-MNIST train, k-means K=2 and K=4, random shards K=2 (the negative control)
#                                                         vs a monolith on all of train
#
# Then a learned router per partition, a Fashion-MNIST evaluation classifier, one deployment per
# case, and `ddm eval` for every strategy the case allows (oracle needs a label partition; top2 = full
# when K=2). Finally ops/study/tables.py writes the tables. Every step is skipped when its output
# exists, so an interrupted run continues where it stopped (experts resume their train state).
#
#   DDM_DATA_DIR=../shared/data bash ops/study/study.sh [out=runs/study] [steps=2000] [n_eval=500] [jobs=2]
#
# The preset is `tiny` (c=16, 0.48M parameters) so the whole study fits in about 1.5 hours on two
# CPU cores; the trainings run single-threaded, `jobs` at a time.
set -euo pipefail
out=${1:-runs/study}
steps=${2:-2000}
n_eval=${3:-500}
jobs=${4:-2}
batch=64
preset=tiny
export OMP_NUM_THREADS=1 STUDY_OUT="$out" STUDY_STEPS="$steps" STUDY_PRESET="$preset"
mkdir -p "$out"

echo "== partitions"
partition() { # name dataset split by
  [ -f "$out/$1.json" ] || ddm partition --dataset "$2" --split "$3" --by "$4" --out "$out/$1.json" \
    --preview "$out/$1.png"
}
partition mnist_mono mnist 'test[:8000]' all
partition mnist_labels mnist 'test[:8000]' labels:0-4,5-9
partition fashion_mono fashion-mnist train all
partition fashion_kmeans2 fashion-mnist train kmeans:2
partition fashion_kmeans4 fashion-mnist train kmeans:4
partition fashion_random2 fashion-mnist train random:2

echo "== experts ($preset, $steps steps; monolith batch $batch, split evenly across K)"
{
  echo "mnist_mono 0 $batch"
  echo "fashion_mono 0 $batch"
  for e in 0 1; do
    echo "mnist_labels $e $((batch / 2))"
    echo "fashion_kmeans2 $e $((batch / 2))"
    echo "fashion_random2 $e $((batch / 2))"
  done
  for e in 0 1 2 3; do echo "fashion_kmeans4 $e $((batch / 4))"; done
} > "$out/trainings.txt"
train_one() { # case expert batch
  local dir="$STUDY_OUT/$1/expert$2"
  [ -f "$dir/.done" ] && return 0
  local resume=()
  [ -f "$dir/train_state.safetensors" ] && resume=(--resume)
  ddm train expert --framework torch --partition "$STUDY_OUT/$1.json" --expert "$2" --preset "$STUDY_PRESET" \
    --steps "$STUDY_STEPS" --batch "$3" --out "$dir" --no-progress "${resume[@]}" > "$dir.log" 2>&1
  touch "$dir/.done"
  echo "done: $1 expert $2 ($(tail -1 "$dir.log"))"
}
export -f train_one
mkdir -p "$out"/{mnist_mono,mnist_labels,fashion_mono,fashion_kmeans2,fashion_kmeans4,fashion_random2}
xargs -P "$jobs" -L 1 bash -c 'train_one "$@"' _ < "$out/trainings.txt"

echo "== routers and the Fashion-MNIST classifier"
[ -f "$out/fashion_classifier/meta.json" ] || ddm train classifier --dataset fashion-mnist \
  --split 'train[:20000]' --eval-split test --epochs 5 --out "$out/fashion_classifier" --no-progress
for case in mnist_labels fashion_kmeans2 fashion_kmeans4 fashion_random2; do
  [ -f "$out/$case/router/meta.json" ] || ddm train router --partition "$out/$case.json" --steps 1000 \
    --out "$out/$case/router" --no-progress
done

echo "== deployments"
deployment() { # case n_experts router_kind
  local toml="$out/$1/deployment.toml"
  {
    echo "name = \"$1\""
    for ((e = 0; e < $2; e++)); do
      printf '\n[[experts]]\nid = %d\ncheckpoint = "expert%d"\ndevice = "cpu"\n' "$e" "$e"
    done
    printf '\n[router]\nkind = "%s"\n' "$3"
    if [ "$3" = learned ]; then echo 'checkpoint = "router"'; fi
  } > "$toml"
}
deployment mnist_mono 1 label-prior
deployment fashion_mono 1 label-prior
deployment mnist_labels 2 learned
deployment fashion_kmeans2 2 learned
deployment fashion_kmeans4 4 learned
deployment fashion_random2 2 learned

echo "== evaluations ($n_eval images each, 50 Euler steps)"
evaluate() { # case strategy classifier real_split
  local dir="$out/eval/$1_${2/:/}"
  [ -f "$dir/metrics.json" ] || ddm eval --deployment "$out/$1/deployment.toml" --total "$n_eval" \
    --strategy "$2" --classifier "$3" --real-split "$4" --out "$dir"
}
mnist_cls=checkpoints/mnist/classifier
fashion_cls="$out/fashion_classifier"
evaluate mnist_mono top1 "$mnist_cls" 'test[8000:]'
for s in oracle top1 full; do evaluate mnist_labels "$s" "$mnist_cls" 'test[8000:]'; done
evaluate fashion_mono top1 "$fashion_cls" test
for s in top1 full; do
  evaluate fashion_kmeans2 "$s" "$fashion_cls" test
  evaluate fashion_random2 "$s" "$fashion_cls" test
done
for s in top1 topk:2 full; do evaluate fashion_kmeans4 "$s" "$fashion_cls" test; done

echo "== tables"
python -m ddm.ops.study.tables "$out" --steps "$steps" --preset "$preset" --batch "$batch"
