#!/bin/bash
# tools/device/cpu_ab.sh: two staged schedgraph builds run alternately on
# the GPU machine's CPUs, run by run (A, B, A, B, ...), so that the
# machine's drift falls on both alike: for telling a small change from the
# noise, where cpu_bench.sh's best of 3, build after build, cannot
# (bench/RESULTS.md "Pipeline speed", seventh run).
#
#   HERE:   bash tools/device/cpu_bench.sh stage A_BUILD B_BUILD
#           (or any two folders under .carry/cpu/ holding tools/{schedgraph,graphgen})
#   THERE:  device `run`, carry [".carry"]:
#           bash tools/device/cpu_ab.sh [PAIRS] [PAIRS_1M] [SIDE_A] [SIDE_B]
# PAIRS (default 6) pairs at 6k and 36k, PAIRS_1M (default 3) at 1M
# (bench/common.sh's sizes), the sides' folders under .carry/cpu (default
# old, new); 0 pairs skips a size. Prints one line per run: graph, side,
# wall s, the bucket and polish passes.
cd "$(dirname "$0")/../.." || exit 1
export SG_TIME=${SG_TIME:-$PWD/.carry/cpu/time}
. bench/common.sh
pairs=${1:-6} pairs_1m=${2:-3} a=${3:-old} b=${4:-new}
for side in "$a" "$b"; do
  [ -x ".carry/cpu/$side/tools/schedgraph/schedgraph" ] \
    || { echo "cpu_ab: no .carry/cpu/$side/tools/schedgraph/schedgraph (stage it first)" >&2; exit 1; }
done
bench_need_time
export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
one () {
  "$gtime" -f "%e" -o "$tmp/wall" ".carry/cpu/$1/tools/schedgraph/schedgraph" \
    -o "$tmp/plan.json" "$tmp/g$2.json" >"$tmp/out"
  echo "$2 $1 $(cat "$tmp/wall") $(grep -o 'bucket [0-9.]* ms, polish [0-9.]* ms' "$tmp/out")"
}
bench_machine
for s in 6k 36k 1m; do
  n=$pairs
  [ $s = 1m ] && n=$pairs_1m
  [ "$n" -gt 0 ] || continue
  bench_size_args $s
  ".carry/cpu/$b/tools/graphgen/graphgen" "${size_args[@]}" -o "$tmp/g$s.json"
  for ((r = 0; r < n; r++)); do
    if [ $s = 1m ]; then one "$b" $s; one "$a" $s; else one "$a" $s; one "$b" $s; fi
  done
done
