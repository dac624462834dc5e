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
# PAIRS (default 6) pairs at 6k and 36k, PAIRS_1M (default 3) at 1M, the
# sides' folders under .carry/cpu (default old, new); 0 pairs skips a size.
# Prints one line per run: graph, side, wall s, the bucket and polish passes.
set -euo pipefail
cd "$(dirname "$0")/../.."
pairs=${1:-6} pairs_1m=${2:-3} a=${3:-old} b=${4:-new}
for side in "$a" "$b"; do
  [ -x ".carry/cpu/$side/tools/schedgraph/schedgraph" ] \
    || { echo "cpu_ab: no .carry/cpu/$side/tools/schedgraph/schedgraph (stage it first)" >&2; exit 1; }
done
export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
gtime=.carry/cpu/time
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gen=.carry/cpu/$b/tools/graphgen/graphgen
big=(--hidden 8192 --ffn 28672 --heads 64 --dp 2 --tp 4)
"$gen" --layers 32 --hidden 4096 --dp 2 --tp 4 -o "$tmp/g6k.json"
"$gen" --target-nodes 36000 "${big[@]}" -o "$tmp/g36k.json"
[ "$pairs_1m" -gt 0 ] && "$gen" --target-nodes 1000000 "${big[@]}" -o "$tmp/g1m.json"
one() {
  "$gtime" -f "%e" -o "$tmp/wall" ".carry/cpu/$1/tools/schedgraph/schedgraph" \
    -o "$tmp/plan.json" "$tmp/g$2.json" >"$tmp/out"
  echo "$2 $1 $(cat "$tmp/wall") $(grep -o 'bucket [0-9.]* ms, polish [0-9.]* ms' "$tmp/out")"
}
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
for s in 6k 36k; do
  for ((r = 0; r < pairs; r++)); do one "$a" $s; one "$b" $s; done
done
for ((r = 0; r < pairs_1m; r++)); do one "$b" 1m; one "$a" 1m; done
