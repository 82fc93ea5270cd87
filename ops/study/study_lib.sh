# Sourced by the studies (study.sh, emoji.sh, latent.sh): their one command line and one evaluation.
#
#   study_args OUT N_EVAL "$@"   out, seeds, steps, n_eval and jobs from the studies' positional arguments
#                                [out=OUT] [seeds="0 1 2"] [steps=2000] [n_eval=N_EVAL] [jobs=2]
#   study_evaluate SEED CASE STRATEGY CLASSIFIER
#       `ddm eval` of $STUDY_OUT/seed<SEED>/<CASE>/deployment.toml: $STUDY_N images at STRATEGY, sampling
#       seed SEED, scored by CLASSIFIER against the test split, into $STUDY_OUT/seed<SEED>/eval/<CASE>_<s>;
#       skipped when its metrics.json exists. Exported, for xargs -P.

study_args() {
  out=${3:-$1}
  seeds=${4:-0 1 2}
  steps=${5:-2000}
  n_eval=${6:-$2}
  jobs=${7:-2}
}

study_evaluate() {
  local dir="$STUDY_OUT/seed$1/eval/$2_${3/:/}"
  [ -f "$dir/metrics.json" ] || ddm eval --deployment "$STUDY_OUT/seed$1/$2/deployment.toml" --total "$STUDY_N" \
    --strategy "$3" --seed "$1" --classifier "$4" --real-split test --out "$dir" > "$dir.log" 2>&1 ||
    { echo "FAILED: $dir (see $dir.log)"; return 1; }
  echo "done: seed $1 $2 $3 ($(tail -1 "$dir.log"))"
}
export -f study_evaluate
