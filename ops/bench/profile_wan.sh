#!/usr/bin/env bash
# Profile the WAN bench (issue 26, part 4: where does a step's time go when expert 1 is far away?):
# `ddm bench --rtt-ms RTT --concurrency JOBS` runs; once its first measured level has begun (warm-up,
# imports and compiles done), py-spy samples the router, both experts and the bench process (whose
# threads include the link proxies) at once for SECONDS; then a summary by process and function
# (ops/bench/profile_summary.py). py-spy is a profiler, not a dependency: `pip install py-spy`. Run it
# on a quiet machine (docs/BENCHMARKS.md has what it found).
#
#   bash ops/bench/profile_wan.sh [out=runs/profile] [rtt_ms=50] [jobs=16] [seconds=15] [ddm bench flags...]
set -euo pipefail
out=${1:-runs/profile}
rtt=${2:-50}
jobs=${3:-16}
seconds=${4:-15}
shift $(($# < 4 ? $# : 4))
rate=100
mkdir -p "$out"
command -v py-spy >/dev/null || { echo "py-spy not found: pip install py-spy" >&2; exit 1; }
ddm bench --rtt-ms "$rtt" --concurrency "$jobs" --repeat 20 --out "$out/bench.json" "$@" > "$out/run.log" 2>&1 &
bench=$!
until grep -q '^\[1/' "$out/run.log"; do  # the first measured run has ended: the next is under way
  kill -0 "$bench" 2>/dev/null || { cat "$out/run.log"; exit 1; }
  sleep 0.5
done
pid_of() { pgrep -f "$1" | head -1; }
declare -A pids=(
  [router]=$(pid_of "worker-id bench-router$")
  [expert0]=$(pid_of "worker-id bench-expert0$")
  [expert1]=$(pid_of "worker-id bench-expert1$")
  [bench]=$bench
)
specs=()
for name in "${!pids[@]}"; do
  py-spy record --pid "${pids[$name]}" --format raw --rate "$rate" --duration "$seconds" --nonblocking \
    --output "$out/pyspy-$name.txt" > "$out/pyspy-$name.log" 2>&1 &
  specs+=("$name=$out/pyspy-$name.txt")
done
wait $(jobs -p | grep -v "^$bench$")
kill -INT "$bench" 2>/dev/null || true  # SIGINT: the bench removes its network namespaces
wait "$bench" 2>/dev/null || true
python -m ddm.ops.bench.profile_summary "${specs[@]}" --rate "$rate" --wall-s "$seconds" | tee "$out/summary.txt"
