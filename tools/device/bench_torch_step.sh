#!/bin/bash
# tools/device/bench_torch_step.sh [CASES]: run ON THE GPU MACHINE (device
# tool, one GPU, kind nvidia-h200), from the repo root, with .carry/ staged
# by tools/device/pack.sh (binaries, libraries, and bench/peer_inductor.py +
# bench/torch_step.py copied from ../shared at staging time).
# schedrun against PyTorch on the same aten graph, one GPU, per case:
#  1. export the llama-like step with peer_inductor.py at W=1 (graph JSON);
#  2. PyTorch: torch_step.py (eager, the aten graph as traced = fx_input,
#     torch.compile of it) and tools/device/torch_op_classes.py (the aten
#     graph under torch.profiler: GPU time per op class);
#  3. schedrun: profile (schedrun --profile), plans with the model and with
#     the profile (schedgraph --costs of both), a timing run of the profile
#     plan (launch graph), per-kernel times (SG_CUDA_KERNEL_TIMES);
#  4. tools/device/bench_summary.py: per case schedrun's step, PyTorch's
#     aten-graph step, torch.compile's step, the ratios, time per op class
#     (attention, GEMM, maps, reductions, copies) on both sides, and the
#     model's predictions (without / with the profile) against the step.
# Before the cases (BENCH_TESTS=1, the default): the CUDA unit tests with
# cuDNN required, and exact CPU-vs-CUDA comparisons of W=1 graphgen graphs
# (bf16 with exact mode's fp32 attention, bf16 on cuDNN, the fp32 twin).
# CASES: name:L:H:F:heads:S[:COMPILE] (default: the issue's two shapes, the
# large one first; COMPILE 0/1 overrides $COMPILE for that case). Every step
# runs under `timeout`, and the whole under BENCH_BUDGET seconds (default
# 230): a step that would start with too little time left is skipped with a
# line saying so. COMPILE=0 leaves torch.compile out; TORCH_OPS=0 the
# profiler run of torch_op_classes.py. About 250 s without torch.compile,
# 350-450 s with it (both shapes, H200): give BENCH_BUDGET=560 and a 600 s
# device call for the whole.
# Results: $OUT/bench.md (the summary), $OUT/log.txt, $OUT/bench.tar.gz.
set -u
ROOT=$PWD
OUT=${OUT:-/tmp/sg-bench-out}
W=/tmp/sg-bench
T0=$(date +%s)
BUDGET=${BENCH_BUDGET:-230}
rm -rf "$W"
mkdir -p "$OUT" "$W"
exec > >(tee "$OUT/log.txt") 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BIN=$ROOT/.carry/bin
PY=$ROOT/.carry/bench
CASES=${1:-${CASES:-llama_L4_h4096:4:4096:14336:32:8192,llama_L2_h2048:2:2048:5632:16:4096}}
section () { echo; echo "=== $* [$(( $(date +%s) - T0 )) s]"; }
left () { echo $(( BUDGET - ($(date +%s) - T0) )); }
# run LIMIT NEED CMD...: CMD under timeout min(LIMIT, time left); skipped when
# less than NEED seconds are left.
run () {
  local limit=$1 need=$2 l
  shift 2
  l=$(left)
  if [ "$l" -lt "$need" ]; then echo "SKIPPED (${l}s left, needs ${need}s): $*"; return 124; fi
  [ "$l" -lt "$limit" ] && limit=$l
  timeout "$limit" "$@"
}

section environment
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
# cuDNN: PyTorch's wheel ships it (nvidia/cudnn/lib in python3's site-packages);
# schedrun opens libcudnn.so.9 at run time through LD_LIBRARY_PATH.
CUDNN_LIB=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))" 2>/dev/null)
echo "cuDNN lib dir: ${CUDNN_LIB:-none found}"
export LD_LIBRARY_PATH=$ROOT/.carry/lib${CUDNN_LIB:+:$CUDNN_LIB}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
MPI=(mpirun -np 1 --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x SG_CUDA_ATTENTION
     -x SG_CUDA_KERNEL_TIMES --mca btl_vader_single_copy_mechanism none)
export SG_CUDA_ATTENTION=${SG_CUDA_ATTENTION:-auto} SG_CUDA_KERNEL_TIMES=
"$BIN/schedrun" --version
ldd "$BIN/schedrun" | grep 'not found' && echo "MISSING LIBRARIES"

if [ "${BENCH_TESTS:-1}" = 1 ]; then
  section "unit tests (cuDNN required)"
  SG_REQUIRE_CUDNN=1 run 60 20 "$BIN/test_cuda_attn"; echo "test_cuda_attn rc=$?"
  run 60 20 "$BIN/test_cuda_kernels"; echo "test_cuda_kernels rc=$?"

  section "exact: CPU backend vs CUDA backend, W=1 graphs (relative L2 error, worst output)"
  G1=$W/exact
  mkdir -p "$G1"
  "$BIN/graphgen" --dp 1 --heads 4 --seq 256 -o "$G1/tiny_bf16.json"
  "$BIN/graphgen" --dp 1 --heads 4 --seq 256 --dtype float32 -o "$G1/tiny_f32.json"
  # exact mode computes attention in fp32 (auto); cudnn: cuDNN's bf16 kernels,
  # reported against a looser bound (docs/gpu.md, Numerics)
  for c in tiny_bf16:auto:5e-2 tiny_bf16:cudnn:2e-1 tiny_f32:auto:1e-3; do
    IFS=: read -r g att tol <<< "$c"
    p=$G1/$g.plan.json
    "$BIN/schedgraph" -q "$G1/$g.json" -o "$p" || continue
    [ -d "$G1/$g.cpu" ] || run 60 10 "${MPI[@]}" "$BIN/schedrun" --backend cpu "$p" \
      --dump-outputs "$G1/$g.cpu" > /dev/null
    SG_CUDA_ATTENTION=$att run 60 10 "${MPI[@]}" "$BIN/schedrun" --backend cuda --iters 2 \
      --timeout 50 "$p" --dump-outputs "$G1/$g.$att.cuda" --report "$G1/$g.$att.report.json" \
      2>&1 | grep -v '^$'
    echo "-- $g, attention $att: $(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('kernels'))" "$G1/$g.$att.report.json" 2>&1)"
    python3 "$ROOT/tools/device/compare_dumps.py" "$G1/$g.cpu" "$G1/$g.$att.cuda" --tol "$tol" \
      | tail -1
  done
fi

COMPILE=${COMPILE:-1}
NAMES=""
IFS=, read -ra CASE_LIST <<< "$CASES"
for spec in "${CASE_LIST[@]}"; do
  IFS=: read -r name L H F NH S CASE_COMPILE <<< "$spec"
  NAMES="$NAMES $name"
  C=$W/$name
  mkdir -p "$C"
  section "$name: export (peer_inductor.py, W=1)"
  CASES="$name:$L:$H:$F:$NH:$S:1:1" W=1 MODES=plain WARM=0 GPU=H200 \
    run 120 30 python3 "$PY/peer_inductor.py" "$C" 2>&1 | grep -v Warning | tail -3
  [ -f "$C/$name.json" ] || { echo "no graph for $name"; continue; }

  section "$name: schedrun profile, plans, timing"
  run 150 20 "${MPI[@]}" "$BIN/schedrun" --profile "$C/$name.json" -o "$C/profile.json" \
    --iters 10 --timeout 140 2>&1 | tr '\r' '\n' | grep -v '^\[\|^$' | tail -4
  for pf in model profile; do
    flags=""
    [ $pf = profile ] && flags="--profile $C/profile.json"
    # shellcheck disable=SC2086
    "$BIN/schedgraph" -q $flags "$C/$name.json" -o "$C/$pf.plan.json" --report "$C/$pf.sgreport.json" \
      || { echo "schedgraph failed ($pf)"; continue; }
    # shellcheck disable=SC2086
    "$BIN/schedgraph" --costs $flags "$C/$name.json" > "$C/costs.$pf.txt" 2>&1
  done
  # One GPU, no collective to overlap: both plans run the same kernels in
  # about the same order; the profile plan's run is the measured step both
  # predictions are judged against.
  # Per-kernel events (SG_CUDA_KERNEL_TIMES) ride in the instrumented run of
  # each iteration; the step time comes from the bare run beside it.
  SG_CUDA_KERNEL_TIMES=$C/ktimes.tsv run 120 20 "${MPI[@]}" "$BIN/schedrun" --backend cuda \
    --mode timing --iters 10 --warmup 3 --timeout 110 "$C/profile.plan.json" \
    --report "$C/profile.report.json" | tail -1

  section "$name: PyTorch (torch_step.py: eager, aten graph, torch.compile; op classes)"
  [ "${TORCH_OPS:-1}" = 1 ] && CASE="$name:$L:$H:$F:$NH:$S:1:1" PEER_DIR=$PY ITERS=10 WARM=3 \
    run 60 30 torchrun --standalone --nproc_per_node 1 "$ROOT/tools/device/torch_op_classes.py" "$C" \
    2>&1 | grep -v Warning | tail -2
  CASE="$name:$L:$H:$F:$NH:$S:1:1" ITERS=10 WARM=3 COMPILE=${CASE_COMPILE:-$COMPILE} \
    run 200 40 torchrun --standalone --nproc_per_node 1 "$PY/torch_step.py" "$C" \
    2>&1 | grep -E '^(eager|fx_|compiled)' | tail -6
done

section summary
python3 "$ROOT/tools/device/bench_summary.py" "$W" "$NAMES" | tee "$OUT/bench.md"
tar czf "$OUT/bench.tar.gz" -C "$W" --exclude='*.bin' --exclude='*.cpu' --exclude='*.cuda' . 2>/dev/null
echo "done after $(( $(date +%s) - T0 )) s"
