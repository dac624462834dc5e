#!/bin/bash
# compare_plans.sh: whether two schedgraph binaries write the same plans,
# reports and traces (issue 16: a speed change must not change a plan
# unless it says so).
#
# Usage: bench/compare_plans.sh OLD_SCHEDGRAPH NEW_SCHEDGRAPH [GRAPHGEN] [quick]
#   OLD_SCHEDGRAPH, NEW_SCHEDGRAPH  the two binaries
#   GRAPHGEN                        the graph generator (default: NEW's tree's,
#                                   build/tools/graphgen/graphgen beside it)
#   quick                           skip the 36K-node graph
# With KEEP=DIR in the environment, both sides' outputs stay in DIR/old and
# DIR/new (bench/compare_bounds.py reads them).
# Runs both on the samples of tests/data with the default options, --order
# (their peer orders), --no-reorder --order, --no-bucket, --bucket-mode
# per-layer, --bucket-lowering flat|grouped and --decompose all, and on
# graphgen graphs (the 6k and 36k of bench_pipeline.sh and four smaller
# layouts) with the default options, --no-bucket and --decompose all;
# compares -o, --report (without its pass timings) and --trace byte for
# byte. Prints one line per difference and "N outputs, M differ"; exit 1
# when any differs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
old=$1 new=$2
gen=${3:-$(dirname "$new")/../graphgen/graphgen}
quick=${4:-}
if [ -n "${KEEP:-}" ]; then
  tmp=$KEEP
  mkdir -p "$tmp"
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
fi

n=0 bad=0
# run NAME GRAPH ARGS...: both binaries, outputs compared.
run () {
  local name=$1 graph=$2
  shift 2
  local which
  for which in old new; do
    local bin=$old
    [ "$which" = new ] && bin=$new
    mkdir -p "$tmp/$which"
    "$bin" -q "$graph" "$@" -o "$tmp/$which/$name.plan" --report "$tmp/$which/$name.report" \
      --trace "$tmp/$which/$name.trace" >"$tmp/$which/$name.out" 2>&1 || echo "exit $?" >>"$tmp/$which/$name.out"
    # the report's pass timings are wall times
    if [ -f "$tmp/$which/$name.report" ]; then
      python3 - "$tmp/$which/$name.report" <<'EOF'
import json, sys
p = sys.argv[1]
r = json.load(open(p))
def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k not in ("passes", "pass_ms", "timings")}
    if isinstance(o, list):
        return [strip(v) for v in o]
    return o
json.dump(strip(r), open(p, "w"), indent=1, sort_keys=True)
EOF
    fi
  done
  local f
  for f in plan report trace out; do
    n=$((n + 1))
    if ! cmp -s "$tmp/old/$name.$f" "$tmp/new/$name.$f" 2>/dev/null; then
      if [ -f "$tmp/old/$name.$f" ] || [ -f "$tmp/new/$name.$f" ]; then
        echo "differs: $name.$f ($*)"
        bad=$((bad + 1))
      fi
    fi
  done
}

for g in "$root"/tests/data/*_h1024.json "$root"/tests/data/w2_tiny_*.json; do
  case $g in *peer_order*) continue ;; esac
  b=$(basename "$g" .json)
  order=$root/tests/data/$b.peer_order_plain.json
  run "$b" "$g"
  run "$b.no-bucket" "$g" --no-bucket
  run "$b.per-layer" "$g" --bucket-mode per-layer
  run "$b.flat" "$g" --bucket-lowering flat
  run "$b.grouped" "$g" --bucket-lowering grouped
  run "$b.decompose-all" "$g" --decompose all
  if [ -f "$order" ]; then
    run "$b.order" "$g" --order "$order"
    run "$b.no-reorder" "$g" --no-reorder --order "$order"
  fi
done

big=(--hidden 8192 --ffn 28672 --heads 64 --dp 2 --tp 4)
gens=("6k:--layers 32 --hidden 4096 --dp 2 --tp 4"
      "fsdp8-20k:--target-nodes 20000 --dp 8"
      "tp2-L4:--layers 4 --hidden 1024 --dp 2 --tp 2"
      "ar-L8:--layers 8 --hidden 2048 --dp 2 --tp 4 --tp-mode allreduce --world 16"
      "spnorm-L6:--layers 6 --hidden 1024 --dp 4 --tp 2 --sp-norm-allreduce")
[ "$quick" = quick ] || gens+=("36k:--target-nodes 36000 ${big[*]}")
for spec in "${gens[@]}"; do
  name=${spec%%:*}
  read -r -a args <<<"${spec#*:}"
  "$gen" "${args[@]}" -o "$tmp/$name.json"
  run "gg-$name" "$tmp/$name.json"
  run "gg-$name.no-bucket" "$tmp/$name.json" --no-bucket
  run "gg-$name.decompose-all" "$tmp/$name.json" --decompose all
done
echo "$n outputs, $bad differ"
[ "$bad" -eq 0 ]
