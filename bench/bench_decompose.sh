#!/bin/bash
# bench_decompose.sh: the decomposition pass (issue 13 items 2 and 5):
# simulated exposure, fully exposed collectives and predicted step without
# and with it, and the pass's own time.
#
#   bench/bench_decompose.sh BUILD_BASE BUILD [LAYERS...]
#
# BUILD_BASE: a build of the tree to compare with (main), BUILD: this one;
# both need tools/schedgraph/schedgraph and tools/graphgen/graphgen. Every
# graph is planned by each build's schedgraph with its defaults (the whole
# pipeline: decompose in auto mode in BUILD, schedule, bucket, polish;
# --report) on the graph's own cluster (h200-sxm); the base with
# $BASE_ARGS (default --no-decompose: the bar is against the undecomposed
# step; set BASE_ARGS= to compare with the base's own defaults).
# WIDTHS=wide (or default) runs one set of widths only. Graphs: the shared TP
# samples of tests/data, and graphgen's tp2_sp (--dp 1 --tp 2) and
# fsdp2_tp4_sp (--dp 2 --tp 4) at LAYERS (default 8 16 32 80), at
# bench/bench_schedule.sh's widths (H 256, S 256) and at issue 13's
# (H 4096, F 14336, 32 heads, S 8192). Columns: the scheduled step and
# exposed us (report `scheduled`), fully exposed collectives (status
# `exposed`) in all and in the TP group, sites decomposed, and the
# decompose pass's wall ms (report `passes`, one run). The bar (issue 13):
# TP fully exposed <= 10% of the base count, exposed <= 0.3x, step not
# longer.
set -euo pipefail
base=${1:?usage: bench_decompose.sh BUILD_BASE BUILD [LAYERS...]}
ours=${2:?usage: bench_decompose.sh BUILD_BASE BUILD [LAYERS...]}
shift 2
layers=("$@")
[ ${#layers[@]} -gt 0 ] || layers=(8 16 32 80)
root=$(cd "$(dirname "$0")/.." && pwd)
gen=$ours/tools/graphgen/graphgen
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "machine: nproc=$(nproc), CPU \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')\""
echo "ours: $ours at $(git -C "$root" rev-parse --short HEAD 2>/dev/null); base: the build in $base, run with '${BASE_ARGS---no-decompose}'"
echo
echo "| graph | widths | layers | nodes | base step us | ours step us | base exposed us | ours exposed us | ratio | base fully exp. (TP) | ours fully exp. (TP) | sites decomposed | decompose ms | bar |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"

base_args=${BASE_ARGS---no-decompose}
row () { # NAME WIDTHS LAYERS GRAPH TPGROUP
  # shellcheck disable=SC2086
  "$base/tools/schedgraph/schedgraph" "$4" -q $base_args --report "$tmp/b.json"
  "$ours/tools/schedgraph/schedgraph" "$4" -q --report "$tmp/o.json"
  python3 - "$tmp/b.json" "$tmp/o.json" "$1" "$2" "$3" "$5" <<'PY'
import json, sys
b, o = (json.load(open(p)) for p in sys.argv[1:3])
name, widths, layers, tp = sys.argv[3:7]
def full(r, grp=None):
    return sum(1 for x in r["collectives"] if x["status"] == "exposed" and (grp is None or x["group"] == grp))
bs, os_ = b["scheduled"], o["scheduled"]
d = o.get("decompose", {})
ratio = os_["exposed_us"] / bs["exposed_us"] if bs["exposed_us"] > 0 else 0.0
bt, ot = full(b, tp), full(o, tp)
ok = ot <= 0.1 * bt and os_["exposed_us"] <= 0.3 * bs["exposed_us"] and os_["step_us"] <= bs["step_us"] + 1e-3
print("| %s | %s | %s | %d | %.1f | %.1f | %.1f | %.1f | %.3f | %d (%d) | %d (%d) | %d / %d | %.1f | %s |" % (
    name, widths, layers, b["nodes"], bs["step_us"], os_["step_us"], bs["exposed_us"], os_["exposed_us"],
    ratio, full(b), bt, full(o), ot, d.get("decomposed", 0), d.get("sites", 0),
    o["passes"].get("decompose", 0.0), "met" if ok else "missed"))
PY
}

for f in "$root"/tests/data/w2_tp2_L2_h1024.json "$root"/tests/data/w2_tiny_tp2_L2_h256.json \
         "$root"/tests/data/dev_fsdp2_tp4_L2_h1024.json; do
  n=$(basename "$f" .json)
  tp=0
  case $n in dev_fsdp2_tp4*) tp=1 ;; esac
  row "$n" sample 2 "$f" $tp
done
wide=(--hidden 4096 --ffn 14336 --heads 32 --seq 8192)
for layout in "tp2_sp:--dp 1 --tp 2:0" "fsdp2_tp4_sp:--dp 2 --tp 4:1"; do
  name=${layout%%:*} rest=${layout#*:} args=${rest%%:*} tp=${rest#*:}
  for w in ${WIDTHS:-default wide}; do
    for L in "${layers[@]}"; do
      extra=()
      [ $w = wide ] && extra=("${wide[@]}")
      # shellcheck disable=SC2086
      "$gen" --layers "$L" $args "${extra[@]}" -o "$tmp/g.json"
      row "$name" "$([ $w = wide ] && echo 'H4096 S8192' || echo 'H256 S256')" "$L" "$tmp/g.json" "$tp"
    done
  done
done
