#!/bin/bash
# bench_codegen.sh: speed of codegen/ (lowering + memory planning) and plan/
# (canonical JSON, load with hash + validation), and the arena it plans.
#
# Usage: bench/bench_codegen.sh [BUILD_DIR] [NODES...]
#   BUILD_DIR  a meson build of this tree with tests enabled (default:
#              build-bench-codegen, configured here with buildtype=release)
#   NODES      graphgen sizes (default: 10000 100000)
#
# Graphs: the sample graphs in tests/data, then for each size an FSDP-8 and
# an FSDP-2 x TP-4 (sequence parallel) llama-like graph from tools/graphgen.
# Each graph is lowered in its input order (what --no-reorder --no-bucket
# plans) with the simulator's predictions; times are the best of 3 runs
# (tests/codegen/bench_codegen). arena/peak compares the planned arena with
# the largest sum of live buffers at any instruction (a lower bound for any
# placement); arena/sum with no reuse at all.
. "$(dirname "$0")/common.sh"
bench_args build-bench-codegen "10000 100000" "$@"
bench_build -Dcuda=disabled -- tests/codegen/bench_codegen tools/graphgen/graphgen
bench=$build/tests/codegen/bench_codegen
gen=$build/tools/graphgen/graphgen

bench_machine
echo
echo "| graph | nodes | ins | buffers | plan MB | codegen ms | of which memplan ms | to_json ms | load ms | arena MiB | arena/peak | arena/sum |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
row () {
  local name=$1 line
  line=$("$bench" "$2" 3)
  # key=value pairs -> shell variables
  local nodes ins buffers plan_MB codegen_ms memplan_ms to_json_ms load_ms arena_MiB ap as
  for kv in $line; do
    case $kv in
      nodes=*) nodes=${kv#*=} ;; ins=*) ins=${kv#*=} ;; buffers=*) buffers=${kv#*=} ;;
      plan_MB=*) plan_MB=${kv#*=} ;; codegen_ms=*) codegen_ms=${kv#*=} ;;
      memplan_ms=*) memplan_ms=${kv#*=} ;; to_json_ms=*) to_json_ms=${kv#*=} ;;
      load_ms=*) load_ms=${kv#*=} ;; arena_MiB=*) arena_MiB=${kv#*=} ;;
      arena/peak=*) ap=${kv#*=} ;; arena/sum=*) as=${kv#*=} ;;
    esac
  done
  echo "| $name | $nodes | $ins | $buffers | $plan_MB | $codegen_ms | $memplan_ms | $to_json_ms | $load_ms | $arena_MiB | $ap | $as |"
}
for f in "$root"/tests/data/*_L2_h*.json; do
  case $f in *peer_order*) continue ;; esac
  row "$(basename "$f" .json)" "$f"
done
for n in "${sizes[@]}"; do
  "$gen" --dp 8 --target-nodes "$n" -o "$tmp/fsdp8_$n.json"
  row "graphgen fsdp8 $n" "$tmp/fsdp8_$n.json"
  "$gen" --dp 2 --tp 4 --target-nodes "$n" -o "$tmp/fsdp2_tp4_$n.json"
  row "graphgen fsdp2_tp4 $n" "$tmp/fsdp2_tp4_$n.json"
  rm -f "$tmp"/*.json
done
