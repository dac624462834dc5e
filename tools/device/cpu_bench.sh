#!/bin/bash
# tools/device/cpu_bench.sh: bench/bench_pipeline.sh on the GPU machine's
# CPUs (16 cores of a server part, against the build machine's 2), for two
# schedgraph builds in the same call, size by size (the earlier build first
# at each size, then the later one), so their numbers share one machine and
# minutes (bench/RESULTS.md "Pipeline speed").
#
#   HERE:   bash tools/device/cpu_bench.sh stage OLD_BUILD NEW_BUILD
#           (release builds of this tree, e.g. two worktrees' build-bench;
#           they go to .carry/cpu/{old,new}/ with GLib, cJSON and GNU time)
#   THERE:  device `run`, carry [".carry"]:
#           bash tools/device/cpu_bench.sh run [SIZES...]   (6k 36k 1m)
# The tables land in $OUT/cpu_bench.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-}
case $mode in
  stage)
    [ $# -eq 3 ] || { echo "usage: $0 stage OLD_BUILD NEW_BUILD" >&2; exit 2; }
    mkdir -p .carry/lib .carry/cpu
    for side in old new; do
      b=$2
      [ $side = new ] && b=$3
      for t in tools/schedgraph/schedgraph tools/graphgen/graphgen; do
        [ -x "$b/$t" ] || { echo "cpu_bench: no $b/$t (build it first)" >&2; exit 1; }
        mkdir -p ".carry/cpu/$side/$(dirname "$t")"
        cp "$b/$t" ".carry/cpu/$side/$t"
        strip --strip-debug ".carry/cpu/$side/$t"
      done
      git -C "$b" rev-parse --short HEAD >".carry/cpu/$side/commit" 2>/dev/null \
        || git rev-parse --short HEAD >".carry/cpu/$side/commit"
    done
    bash tools/device/stage-libs.sh .carry/lib libglib-2.0.so.0 libcjson.so.1 libpcre2-8.so.0
    cp /usr/bin/time .carry/cpu/time
    du -sh .carry
    ;;
  run)
    shift
    sizes=("$@")
    [ ${#sizes[@]} -gt 0 ] || sizes=(6k 36k 1m)
    OUT=${OUT:-/tmp/sg-out}
    mkdir -p "$OUT"
    export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export SG_TIME=$PWD/.carry/cpu/time
    {
      for s in "${sizes[@]}"; do
        for side in old new; do
          echo "### $s, $side build ($(cat .carry/cpu/$side/commit))"
          bash bench/bench_pipeline.sh "$PWD/.carry/cpu/$side" "$s"
          echo
        done
      done
    } 2>&1 | tee "$OUT/cpu_bench.md"
    ;;
  *)
    echo "usage: $0 stage OLD_BUILD NEW_BUILD | run [SIZES...]" >&2
    exit 2
    ;;
esac
