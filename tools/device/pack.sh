#!/bin/bash
# tools/device/pack.sh [BUILD_DIR]: run HERE (the build machine). Builds the
# binaries the GPU run needs and stages them in .carry/ (git-ignored), with
# the shared libraries the GPU machine lacks (GLib, cJSON, subunit) and the
# graphs, and the shared PyTorch bench scripts. Then: device tool `run` with
# carry [".carry"] and command `bash tools/device/run.sh MODE` or
# `bash tools/device/bench_torch_step.sh` (docs/gpu.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build-h}
[ -f "$B/build.ninja" ] || meson setup "$B" . -Dwerror=true
rm -rf .carry
mkdir -p .carry/bin .carry/lib .carry/graphs
for t in runtime/schedrun tests/cuda/test_cuda_kernels tests/cuda/test_cuda_attn \
         tools/schedgraph/schedgraph tools/graphgen/graphgen tools/sgeval/sgeval tools/sgfit/sgfit \
         tests/runtime/mkplan tests/runtime/mkring tests/cuda/bench_gemm; do
  if ninja -C "$B" "$t" >/dev/null 2>&1; then
    cp "$B/$t" .carry/bin/
    strip --strip-debug ".carry/bin/$(basename "$t")" # the 64 MiB carry limit
  else
    echo "pack: $t does not build now; left out" >&2
  fi
done
# Libraries present here but not on the GPU machine (TOOLCHAIN.md).
bash tools/device/stage-libs.sh .carry/lib libglib-2.0.so.0 libcjson.so.1 libsubunit.so.0 libpcre2-8.so.0
cp tests/data/w2_*.json tests/data/limits-h200x2.json .carry/graphs/
# PyTorch's side of tools/device/bench_torch_step.sh: the shared scripts, copied
# at staging time (not kept in the repo).
mkdir -p .carry/bench
for f in peer_inductor.py torch_step.py; do
  if [ -f ../shared/bench/$f ]; then cp ../shared/bench/$f .carry/bench/
  else echo "pack: no shared/bench/$f; bench_torch_step.sh will lack it" >&2; fi
done
rm -f .carry/graphs/*peer_order*
# The larger 2-rank graph of the measurements (bench/RESULTS.md).
if [ -x .carry/bin/graphgen ]; then
  .carry/bin/graphgen --layers 4 --hidden 2048 --ffn 5632 --heads 16 --seq 2048 --dp 2 \
    -o .carry/graphs/gg_fsdp2_L4_h2048.json
  # fp32 twins of the tiny graphs: the exact check at fp32 accuracy
  .carry/bin/graphgen --dtype float32 --dp 2 -o .carry/graphs/gg_tiny_f32_fsdp2.json
  .carry/bin/graphgen --dtype float32 --dp 1 --tp 2 -o .carry/graphs/gg_tiny_f32_tp2.json
fi
du -sh .carry
