# Sourced by the ship_*.sh scripts: copy checkpoints into a release folder, evaluate a shipped deployment
# per strategy and write its model cards.
#
#   ship_evaluate RUNS OUT N JOBS PREFIX [ddm eval flags...]
#       `ddm eval` OUT/deployment.toml at top1, topk:2 and full (N images against the test split, JOBS at
#       once, each skipped when RUNS/<PREFIX><strategy>/metrics.json exists), then OUT/eval_<s>.json and
#       OUT/samples_top1.png; sets SHIP_METRICS to those files
#   ship_evaluate_one RUNS OUT N NAME [ddm eval flags...]
#       one more `ddm eval` of OUT/deployment.toml (top-1 unless the flags say otherwise; skipped when
#       RUNS/ship_eval_NAME/metrics.json exists) into OUT/eval_NAME.json and OUT/samples_NAME.png
#   ship_cards OUT NAME...      MODEL_CARD.md of OUT/NAME for each NAME, with SHIP_METRICS
#   ship_copy OUT SRC NAME WEIGHTS   SRC's meta.json, WEIGHTS file (and loss.csv, accuracy_by_t.png)
#                                    into OUT/NAME: inference files only, no train state
#   ship_require_trained RUN STUDY   exit 1 unless experts 0..3 of RUN are trained (RUN/expert<e>/.done),
#                                    naming the study script that trains them

ship_evaluate() {
  local runs=$1 out=$2 n=$3 jobs=$4 prefix=$5
  shift 5
  export SHIP_RUNS="$runs" SHIP_OUT="$out" SHIP_N="$n" SHIP_PREFIX="$prefix" SHIP_FLAGS="$*"
  _ship_eval_one() { # strategy
    local dir="$SHIP_RUNS/$SHIP_PREFIX${1/:/}"
    # shellcheck disable=SC2086 # SHIP_FLAGS is a list of flags
    [ -f "$dir/metrics.json" ] || ddm eval --deployment "$SHIP_OUT/deployment.toml" --total "$SHIP_N" \
      --strategy "$1" --real-split test $SHIP_FLAGS --out "$dir" > "$dir.log" 2>&1 ||
      { echo "FAILED: $dir (see $dir.log)"; return 1; }
    echo "done: eval $1: $(tail -1 "$dir.log")"
  }
  export -f _ship_eval_one
  printf 'top1\ntopk:2\nfull\n' | xargs -P "$jobs" -L 1 bash -c '_ship_eval_one "$@"' _
  SHIP_METRICS=()
  for s in top1 topk2 full; do
    cp "$runs/$prefix$s/metrics.json" "$out/eval_$s.json"
    SHIP_METRICS+=("$out/eval_$s.json")
  done
  cp "$runs/${prefix}top1/samples.png" "$out/samples_top1.png"
}

ship_evaluate_one() {
  local runs=$1 out=$2 n=$3 name=$4
  shift 4
  local dir="$runs/ship_eval_$name"
  [ -f "$dir/metrics.json" ] || ddm eval --deployment "$out/deployment.toml" --total "$n" --real-split test \
    "$@" --out "$dir" > "$dir.log" 2>&1 || { echo "FAILED: $dir (see $dir.log)"; return 1; }
  cp "$dir/metrics.json" "$out/eval_$name.json"
  cp "$dir/samples.png" "$out/samples_$name.png"
}

ship_cards() {
  local out=$1
  shift
  for name in "$@"; do python -m ddm.ops.study.model_card "$out/$name" --metrics "${SHIP_METRICS[@]}"; done
}

ship_copy() {
  local out=$1 src=$2 name=$3 weights=$4
  mkdir -p "$out/$name"
  cp "$src/meta.json" "$src/$weights" "$out/$name/"
  for extra in loss.csv accuracy_by_t.png; do [ -f "$src/$extra" ] && cp "$src/$extra" "$out/$name/"; done
  return 0
}

ship_require_trained() {
  local run=$1 study=$2 e
  for e in 0 1 2 3; do
    [ -f "$run/expert$e/.done" ] || { echo "expert $e of $run is not trained: run $study first" >&2; exit 1; }
  done
}
