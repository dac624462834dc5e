#!/bin/sh
# bench_cuda.sh: the GPU measurements of bench/RESULTS.md ("GPU measurements").
#
#   bench/bench_cuda.sh [BUILD_DIR]        here: build and stage .carry/
#   then, through the device tool (kind nvidia-h200-x2, carry [".carry"]):
#   bash tools/device/run.sh full          on the GPU machine
#
# run.sh runs the CUDA unit tests, exact CPU-vs-CUDA comparisons, fault
# runs, one profile per graph (schedrun --profile) and, for
# w2_fsdp2_L2_h1024, w2_tp2_L2_h1024 and a graphgen graph (4 layers, hidden
# 2048, FSDP over 2), timing runs (30 iterations after 5 of warm-up, CUDA
# events, medians, slowest rank) of the input order, the schedule and
# schedule+bucketing, each planned with the analytical model and with the
# profile; $OUT/summary.md is the table (tools/device/summarize.py).
set -eu
exec "$(dirname "$0")/../tools/device/pack.sh" "${1:-build-h}"
