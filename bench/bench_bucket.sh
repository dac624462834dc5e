#!/usr/bin/env bash
# bench_bucket.sh: bucketing quality and speed (bucket/, issue 5).
#
#   bench/bench_bucket.sh BUILD_DIR [samples|matrix|scale|all]
#
# samples: every sample graph in tests/data through load -> estimate ->
#   schedule -> bucket (built-in cost model), compared with PyTorch 2.11's
#   bucketer (tests/data/peer_results_dev.json, bucketed.collectives_after).
# matrix: issue 14's bar on graphgen steps: FSDP (2 and 8 ranks), FSDP 2 x
#   TP 4, HSDP 2 x 4 replicas (8 ranks), 8, 32 and 80 layers, H = 1024 and
#   4096 (F = 11H/4, H/128 heads, S = 2H); the bar column says whether the
#   bucketed step is <= the unbucketed and the per-layer mode's and, for
#   FSDP-only steps, whether <= 2 collectives per layer + 4 remain.
# scale: graphgen graphs (FSDP over 8, ~10k, ~100k and ~1M nodes; FSDP 2 x
#   TP 4, ~100k nodes): the same pipeline; bucket pass CPU and wall time.
#   SCALE_1M=0 leaves out the 1M graph (220 MB of JSON, ~1 min to load,
#   estimate and schedule).
# Needs: BUILD_DIR with tests/bucket/bucket_bench and tools/graphgen/graphgen
# built (ninja -C BUILD_DIR tests/bucket/bucket_bench tools/graphgen/graphgen).
set -euo pipefail
build=${1:?usage: bench_bucket.sh BUILD_DIR [samples|matrix|scale|all]}
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

if [ "$what" = matrix ] || [ "$what" = all ]; then
  graphs=()
  for H in 1024 4096; do
    for L in 8 32 80; do
      common="--layers $L --hidden $H --ffn $((H * 11 / 4)) --heads $((H / 128)) --seq $((2 * H))"
      for m in "fsdp2:--dp 2" "fsdp8:--dp 8 --world 8" "fsdp2tp4:--dp 2 --tp 4" \
               "hsdp2x4:--dp 2 --world 8"; do
        # shellcheck disable=SC2086
        "$gen" $common ${m#*:} -o "$tmp/${m%%:*}_L${L}_h$H.json"
        graphs+=("$tmp/${m%%:*}_L${L}_h$H.json")
      done
    done
  done
  echo "matrix: graphgen --layers L --hidden H --ffn 11H/4 --heads H/128 --seq 2H <mesh>; $bench <graph>"
  "$bench" "${graphs[@]}"
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
