#!/bin/sh
# bench_runtime.sh: CPU backend numbers (CPU wall-clock, not GPU time).
#
#   bench/bench_runtime.sh [BUILD_DIR] [ITERS]
#
# For the two CPU-runnable sample graphs and an 8-rank graphgen graph
# (dp 2 x tp 4): the plans of the input order, the schedule and
# schedule+bucketing (schedgraph -o), each run by `mpirun schedrun --mode
# timing` (warm-up 1, ITERS measured, medians, slowest rank per iteration);
# also the reference evaluator's time and an exact-mode run's wall time.
# Prints a markdown table to paste into bench/RESULTS.md. Timings on a
# shared, oversubscribed CPU box are noisy: read them as orders of magnitude.
set -eu
B=${1:-build-g}
K=${2:-5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=$(mktemp -d "${TMPDIR:-/tmp}/sg-bench-rt.XXXXXX")
trap 'rm -rf "$T"' EXIT
SG=$B/tools/schedgraph/schedgraph
RUN=$B/runtime/schedrun
EV=$B/tools/sgeval/sgeval

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
"$B/tools/graphgen/graphgen" --layers 1 --hidden 64 --ffn 128 --heads 4 --seq 32 --dp 2 --tp 4 \
  -o "$T/dp2xtp4.json"

field () { # FILE KEY: a number from the report's measured metrics
  sed -n "/\"measured\"/,/}/s/.*\"$2\":[[:space:]]*\([-0-9.e+]*\).*/\1/p" "$1" | head -1
}
pred () {
  sed -n "/\"predicted\"/,/}/s/.*\"$2\":[[:space:]]*\([-0-9.e+]*\).*/\1/p" "$1" | head -1
}
now_ms () { date +%s%3N; }

echo "| graph | ranks | plan | collectives | step us (cpu-wall) | compute us | exposed us | hidden/partial/exposed | predicted step us (model) | exact run ms |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for spec in tests/data/w2_tiny_fsdp2_L2_h256.json:2 tests/data/w2_tiny_tp2_L2_h256.json:2 \
            "$T/dp2xtp4.json":8; do
  g=${spec%:*} np=${spec##*:}
  name=$(basename "$g" .json)
  for v in "input:--no-reorder --no-bucket" "schedule:--no-bucket" "schedule+bucket:"; do
    tag=${v%%:*} opts=${v#*:}
    # shellcheck disable=SC2086
    "$SG" "$g" $opts -q -o "$T/p.json" 2>/dev/null
    t0=$(now_ms)
    mpirun -np "$np" --oversubscribe "$RUN" "$T/p.json" >/dev/null
    t1=$(now_ms)
    mpirun -np "$np" --oversubscribe "$RUN" "$T/p.json" --mode timing --warmup 1 --iters "$K" \
      --report "$T/r.json" >/dev/null
    echo "| $name | $np | $tag | $(field "$T/r.json" collectives) | $(field "$T/r.json" step_us) |" \
      "$(field "$T/r.json" compute_us) | $(field "$T/r.json" exposed_us) |" \
      "$(field "$T/r.json" hidden)/$(field "$T/r.json" partial)/$(field "$T/r.json" exposed) |" \
      "$(pred "$T/r.json" step_us) | $((t1 - t0)) |"
  done
  t0=$(now_ms)
  "$EV" "$g" --dump-outputs "$T/ev" >/dev/null
  t1=$(now_ms)
  echo "| $name | $np | sgeval (all ranks, one process) | | | | | | | $((t1 - t0)) |"
done
