#!/bin/bash
# tools/device/faults.sh: run ON THE GPU MACHINE (device tool, kind
# nvidia-h200-x2: NCCL needs one GPU per rank), from the repo root, with
# .carry/ staged by tools/device/pack.sh. Runs schedrun's fault matrix on
# the CUDA backend (tests/runtime/e2e.sh faults-cuda, issue 18): a rank
# killed with SIGKILL mid-step, a hung rank, a failing rank, different
# plans, a truncated / edited plan, a plan for another world size, an
# output directory that cannot be written, ranks started with different
# options, and the arena out of device memory. Every case must end every
# rank within its bound with one line naming the rank and the cause, a
# non-zero exit and no output left. Results: $OUT/faults.log; exit status
# that of e2e.sh (0: every case passed).
set -u
# shellcheck source=tools/device/env.sh
. "$PWD/tools/device/env.sh"
# e2e.sh's mpirun takes the flags of env.sh's MPI array (not -np)
export SG_MPIRUN_ARGS="${MPI[*]:3}"
nvidia-smi --query-gpu=index,name,memory.total --format=csv | tee "$OUT/faults.log"
timeout 900 bash tests/runtime/e2e.sh faults-cuda "$BIN/schedrun" "$BIN/sgeval" "$BIN/mkplan" \
  "$BIN/schedgraph" "$BIN/graphgen" "$ROOT/tests/data" 2>&1 | tee -a "$OUT/faults.log"
exit "${PIPESTATUS[0]}"
