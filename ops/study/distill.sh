#!/usr/bin/env bash
# Student, ensemble and monolith at one training budget: distil a study seed's k-means K=4 ensemble
# (routed top1, the study's best K=4 strategy) into one `tiny` PyTorch student trained as many steps at
# the same batch as that seed's monolith (2,000 x 64), then evaluate it exactly as the study evaluates
# its rows (1,000 images, sampling seed = training seed, the shipped classifier, Fashion-MNIST test)
# and print the three side by side. Needs the seed's models from ops/study/study.sh (runs/study/seed<S>).
# The student's metrics.json is copied to docs/distill/; each step is skipped when its output exists.
#
#   bash ops/study/distill.sh [out=runs/study] [seed=1] [steps=2000]
set -euo pipefail
out=${1:-runs/study}
seed=${2:-1}
steps=${3:-2000}
classifier=checkpoints/fashion-mnist/classifier
teachers="$out/seed$seed/fashion_kmeans4"
student="$out/seed$seed/student_kmeans4"
export OMP_NUM_THREADS=1

[ -f "$student/.done" ] || {
  resume=() # an interrupted distillation continues from its last checkpoint
  [ -f "$student/train_state.safetensors" ] && resume=(--resume)
  ddm distill --deployment "$teachers/deployment.toml" --framework torch --preset tiny --strategy top1 \
    --steps "$steps" --batch 64 --seed "$seed" --out "$student" --no-progress "${resume[@]}"
  touch "$student/.done"
}
[ -f "$student/eval/metrics.json" ] || ddm eval --deployment "$student/deployment.toml" --total 1000 \
  --strategy top1 --seed "$seed" --classifier "$classifier" --real-split test --out "$student/eval"
mkdir -p docs/distill
cp "$student/eval/metrics.json" "docs/distill/study_seed${seed}_student_kmeans4_top1.json"
ddm eval --compare \
  "monolith=docs/study/seed$seed/eval/fashion_mono_top1.json" \
  "ensemble (k-means K4, top1)=docs/study/seed$seed/eval/fashion_kmeans4_top1.json" \
  "student=docs/distill/study_seed${seed}_student_kmeans4_top1.json"
