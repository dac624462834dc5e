#!/bin/bash
# bench_decompose_time.sh: the decomposition pass's own time against the
# schedule pass's, in two builds (issue 13 item 4 / issue 16).
#
#   bench/bench_decompose_time.sh BUILD_BASE BUILD [RUNS]
#
# Each graph is planned RUNS times (default 5) by each build's schedgraph
# with its defaults (-q --report); printed: the median of the report's
# `passes.decompose` and `passes.schedule` (ms) and their ratio. Graphs:
# issue 16's 6k graph (no site worth it), graphgen tp2_sp at H 256 (80
# layers) and tp2_sp / fsdp2_tp4_sp at issue 13's widths (8 and 80
# layers).
set -euo pipefail
base=${1:?usage: bench_decompose_time.sh BUILD_BASE BUILD [RUNS]}
ours=${2:?usage: bench_decompose_time.sh BUILD_BASE BUILD [RUNS]}
runs=${3:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
gen=$ours/tools/graphgen/graphgen
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "machine: nproc=$(nproc), CPU \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')\""
echo "ours: $ours at $(git -C "$root" rev-parse --short HEAD 2>/dev/null); base: $base; $runs runs each"
echo
echo "| graph | base decompose ms | ours decompose ms | base ratio | ours ratio |"
echo "| --- | ---: | ---: | ---: | ---: |"
wide=(--hidden 4096 --ffn 14336 --heads 32 --seq 8192)
"$gen" --layers 32 --hidden 4096 --dp 2 --tp 4 -o "$tmp/g32.json"
"$gen" --layers 80 --dp 1 --tp 2 -o "$tmp/t80s.json"
for L in 8 80; do
  "$gen" --layers $L --dp 1 --tp 2 "${wide[@]}" -o "$tmp/t$L.json"
  "$gen" --layers $L --dp 2 --tp 4 "${wide[@]}" -o "$tmp/f$L.json"
done
for g in g32 t80s t8 t80 f8 f80; do
  for b in "$base" "$ours"; do
    for _ in $(seq "$runs"); do
      "$b/tools/schedgraph/schedgraph" "$tmp/$g.json" -q --report "$tmp/r.json"
      python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))["passes"]; print(p["decompose"], p["schedule"])' "$tmp/r.json"
    done >"$tmp/$g.$(basename "$(dirname "$b")").$( [ "$b" = "$base" ] && echo b || echo o)"
  done
  python3 - "$g" "$tmp"/"$g".*.b "$tmp"/"$g".*.o <<'PY'
import statistics, sys
name = {"g32": "graphgen 32 layers H4096 dp2 tp4 (6,684 nodes)", "t80s": "tp2_sp H256 80 layers",
        "t8": "tp2_sp H4096 8 layers", "t80": "tp2_sp H4096 80 layers",
        "f8": "fsdp2_tp4_sp H4096 8 layers", "f80": "fsdp2_tp4_sp H4096 80 layers"}[sys.argv[1]]
def med(path):
    rows = [tuple(map(float, l.split())) for l in open(path)]
    d = statistics.median(r[0] for r in rows)
    s = statistics.median(r[1] for r in rows)
    return d, d / s
bd, br = med(sys.argv[2]); od, orr = med(sys.argv[3])
print("| %s | %.1f | %.1f | %.2f | %.2f |" % (name, bd, od, br, orr))
PY
done
