#!/bin/bash
# tools/device/torch-roundtrip.sh: run ON THE GPU MACHINE (one GPU; phase
# w2tp, the decomposed TP step over NCCL, needs two and is skipped on one), from the
# repo root, with .carry/ staged here by tools/device/pack.sh (the schedgraph
# binary and the GLib/cJSON libraries the GPU machine lacks). Runs
# tools/device/torch_roundtrip.py (its docstring says what it measures) with
# the package from python/ and prints its table last. Environment: as that
# script (CASE, ITERS, WARM, PHASES, COMPILE, BUDGET_S), OUT (default
# /tmp/sg-out), TIMEOUT (default 570 s, the whole run).
set -u
ROOT=$PWD
export OUT=${OUT:-/tmp/sg-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The carried libraries only for schedgraph: torch keeps the system's.
WRAP=$(mktemp -d)
cat >"$WRAP/schedgraph" <<SH
#!/bin/sh
LD_LIBRARY_PATH=$ROOT/.carry/lib exec $ROOT/.carry/bin/schedgraph "\$@"
SH
chmod +x "$WRAP/schedgraph"
export SCHEDGRAPH=$WRAP/schedgraph
if ! "$SCHEDGRAPH" --version; then
  echo "schedgraph does not run: stage .carry with tools/device/pack.sh"
  LD_LIBRARY_PATH=$ROOT/.carry/lib ldd "$ROOT/.carry/bin/schedgraph" | grep 'not found'
  exit 1
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout "${TIMEOUT:-570}" python3 tools/device/torch_roundtrip.py 2>&1 |
  grep -v -e 'UserWarning' -e '_get_pg_default_device' | tee "$OUT/torch_roundtrip.log"
rc=${PIPESTATUS[0]}
rm -rf "$WRAP"
exit "$rc"
