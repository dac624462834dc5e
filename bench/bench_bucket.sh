#!/usr/bin/env bash
# bench_bucket.sh: bucketing quality and speed (bucket/, issue 5).
#
#   bench/bench_bucket.sh BUILD_DIR [samples|scale|all]
#
# samples: every sample graph in tests/data through load -> estimate ->
#   schedule -> bucket (built-in cost model), compared with PyTorch 2.11's
#   bucketer (tests/data/peer_results_dev.json, bucketed.collectives_after).
# scale: graphgen graphs (FSDP over 8, ~10k, ~100k and ~1M nodes; FSDP 2 x
#   TP 4, ~100k nodes): the same pipeline; bucket pass CPU and wall time.
#   SCALE_1M=0 leaves out the 1M graph (220 MB of JSON, ~1 min to load,
#   estimate and schedule).
# Needs: BUILD_DIR with tests/bucket/bucket_bench and tools/graphgen/graphgen
# built (ninja -C BUILD_DIR tests/bucket/bucket_bench tools/graphgen/graphgen).
set -euo pipefail
build=${1:?usage: bench_bucket.sh BUILD_DIR [samples|scale|all]}
what=${2:-all}
root=$(cd "$(dirname "$0")/.." && pwd)
bench=$build/tests/bucket/bucket_bench
gen=$build/tools/graphgen/graphgen
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "machine: nproc=$(nproc), CPU \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')\""
echo

if [ "$what" = samples ] || [ "$what" = all ]; then
  samples=()
  for f in "$root"/tests/data/*.json; do
    case $f in *peer_order*|*peer_results*|*limits*) continue ;; esac
    samples+=("$f")
  done
  echo "samples: $bench --peer tests/data/peer_results_dev.json tests/data/<graph>.json"
  "$bench" --peer "$root/tests/data/peer_results_dev.json" "${samples[@]}"
  echo
fi

if [ "$what" = scale ] || [ "$what" = all ]; then
  "$gen" --target-nodes 10000 --dp 8 --world 8 -o "$tmp/gg_fsdp8_10k.json"
  "$gen" --target-nodes 100000 --dp 8 --world 8 -o "$tmp/gg_fsdp8_100k.json"
  "$gen" --target-nodes 100000 --dp 2 --tp 4 -o "$tmp/gg_fsdp2_tp4_100k.json"
  graphs=("$tmp/gg_fsdp8_10k.json" "$tmp/gg_fsdp8_100k.json" "$tmp/gg_fsdp2_tp4_100k.json")
  if [ "${SCALE_1M:-1}" != 0 ]; then
    "$gen" --target-nodes 1000000 --dp 8 --world 8 -o "$tmp/gg_fsdp8_1m.json"
    graphs+=("$tmp/gg_fsdp8_1m.json")
  fi
  echo "scale: graphgen --target-nodes N --dp 8 --world 8 | --dp 2 --tp 4; $bench <graph>"
  "$bench" "${graphs[@]}"
fi
