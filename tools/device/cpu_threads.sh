#!/bin/bash
# tools/device/cpu_threads.sh: one staged schedgraph build at several
# --threads counts on the GPU machine's CPUs: wall time and peak RSS of
# each run, the bucket and polish passes (bench/RESULTS.md "Pipeline
# speed", seventh run: what the thread count buys and costs).
#
#   HERE:   bash tools/device/cpu_bench.sh stage OLD_BUILD NEW_BUILD
#   THERE:  device `run`, carry [".carry"]:
#           bash tools/device/cpu_threads.sh [SIDE] [RUNS] [THREADS...]
# SIDE: a folder under .carry/cpu (default new); RUNS per count (default
# 3); THREADS default 1 2 4 8 16. Graphs: bench/common.sh's 6k and 36k.
# Prints one line per run: graph, t<threads>, wall s, peak RSS KB, passes.
cd "$(dirname "$0")/../.." || exit 1
export SG_TIME=${SG_TIME:-$PWD/.carry/cpu/time}
. bench/common.sh
side=${1:-new} runs=${2:-3}
shift $(($# < 2 ? $# : 2))
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(1 2 4 8 16)
sg=.carry/cpu/$side/tools/schedgraph/schedgraph
[ -x "$sg" ] || { echo "cpu_threads: no $sg (stage it first)" >&2; exit 1; }
bench_need_time
export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bench_machine
for s in 6k 36k; do
  bench_size_args $s
  ".carry/cpu/$side/tools/graphgen/graphgen" "${size_args[@]}" -o "$tmp/g$s.json"
  for t in "${counts[@]}"; do
    for ((r = 0; r < runs; r++)); do
      "$gtime" -f "%e %M" -o "$tmp/tm" "$sg" --threads "$t" -o "$tmp/plan.json" "$tmp/g$s.json" >"$tmp/out"
      echo "$s t$t $(cat "$tmp/tm") $(grep -o 'bucket [0-9.]* ms, polish [0-9.]* ms' "$tmp/out")"
    done
  done
done
