#!/bin/bash
# tools/device/probe_launch.sh: run ON THE GPU MACHINE (device tool) from the
# repo root, with .carry/ staged by tools/device/pack.sh. What delays stream
# 0's first kernel of the scheduled w2_fsdp2 step under --launch graph: the
# schedule and the input order (profile plans) are timed with schedrun's
# settings ("base": it sets NCCL_GRAPH_MIXING_SUPPORT=0 itself), with NCCL's
# default graph mixing (NCCL_GRAPH_MIXING_SUPPORT=1), and with
# CUDA_DEVICE_MAX_CONNECTIONS=32 or 1; for each, the first compute and comm
# times of the median step (--trace) and the step time. $OUT/probe.tar.gz:
# the traces and reports.
set -u
ROOT=$PWD
OUT=${OUT:-/tmp/sg-out}
W=/tmp/sg-work
mkdir -p "$W" "$OUT"
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LD_LIBRARY_PATH=$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BIN=$ROOT/.carry/bin
G=$ROOT/.carry/graphs
MPI=(mpirun -np 2 --bind-to none --oversubscribe -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH
     --mca btl_vader_single_copy_mechanism none)
g=w2_fsdp2_L2_h1024
timeout 200 "${MPI[@]}" "$BIN/schedrun" --profile "$G/$g.json" -o "$W/prof.json" --iters 20 | tail -1
"$BIN/schedgraph" -q --no-bucket --profile "$W/prof.json" "$G/$g.json" -o "$W/s.plan.json"
"$BIN/schedgraph" -q --no-bucket --no-reorder --profile "$W/prof.json" "$G/$g.json" \
  -o "$W/i.plan.json"

run () { # TAG [mpirun -x ...]
  local tag=$1
  shift
  for v in s i; do
    timeout 100 "${MPI[@]}" "$@" "$BIN/schedrun" --backend cuda --mode timing --iters 20 \
      --warmup 3 "$W/$v.plan.json" --trace "$W/$tag.$v.trace.json" \
      --report "$W/$tag.$v.report.json" | tail -1 | sed "s/^/$tag $v: /"
    python3 - "$W/$tag.$v.trace.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
ev = [e for e in t["traceEvents"] if e["ph"] == "X" and e["pid"] == 0]
c = min(e["ts"] for e in ev if e["tid"] == 0)
m = min(e["ts"] for e in ev if e["tid"] == 1)
print("   first compute %.1f us, first comm %.1f us, instrumented step %.1f us"
      % (c, m, t["metadata"]["step_us"]))
PY
  done
}
run base
run mix1 -x NCCL_GRAPH_MIXING_SUPPORT=1
run conn32 -x CUDA_DEVICE_MAX_CONNECTIONS=32
run conn1 -x CUDA_DEVICE_MAX_CONNECTIONS=1
tar czf "$OUT/probe.tar.gz" -C "$W" .
