#!/bin/bash
# bench_estimate.sh: speed of the estimate pass (estimate/) on large graphs.
#
# Usage: bench/bench_estimate.sh [BUILD_DIR] [NODES...]
#   BUILD_DIR  a meson build of this tree (default: build-bench-estimate,
#              configured here with buildtype=release if missing)
#   NODES      graph sizes (default: 10000 100000 1000000)
#
# For each size, tools/graphgen writes a llama-like fwd+bwd graph of about
# NODES nodes (FSDP over 8, and FSDP 2 x TP 4); tests/estimate/bench_estimate
# loads it once and times sg_estimate_costs() 5 times (best and median),
# (wall time; "cpu ms" is the process CPU time of the best run, which
# machine load does not inflate), first with the analytical model only, then with a profile of 16 GEMM, 48
# collective and 4 op entries (so every matmul/collective/pointwise node
# goes through a profile lookup). Load time is not counted. Prints a
# markdown table. Target: 1,000,000 nodes <= 0.5 s.
. "$(dirname "$0")/common.sh"
bench_args build-bench-estimate "10000 100000 1000000" "$@"
bench_build -Dcuda=disabled -- tools/graphgen/graphgen tests/estimate/bench_estimate
gen=$build/tools/graphgen/graphgen
bench=$build/tests/estimate/bench_estimate

# A profile for world 8: GEMMs over a range of sizes, all_gather /
# reduce_scatter / all_reduce over groups of 2, 4 and 8, four pointwise ops.
python3 - "$tmp/profile.json" <<'PY'
import json, sys
gemm = [{"op": "mm", "dtype": "bfloat16", "m": s, "n": s, "k": s, "us": 4 + 2 * s**3 / 7e8}
        for s in (64, 128, 256, 512, 1024, 2048, 4096, 8192)]
gemm += [{"op": "mm", "dtype": "bfloat16", "m": s, "n": 2 * s, "k": s, "us": 4 + 4 * s**3 / 7e8}
         for s in (64, 128, 256, 512, 1024, 2048, 4096, 8192)]
coll = [{"kind": k, "bytes": 1 << b, "group_size": gs, "us": 20 + (1 << b) / 2.5e5}
        for k in ("all_gather", "reduce_scatter", "all_reduce") for gs in (2, 4, 8)
        for b in (12, 16, 20, 24, 28)][:48]
ops = [{"target": t, "bytes": 1 << 20, "us": 5.0}
       for t in ("aten.mul.Tensor", "aten.add.Tensor", "aten.silu.default", "aten.pow.Tensor_Scalar")]
json.dump({"format": "schedgraph.profile", "version": 1, "device": "synthetic (timing only)",
           "world_size": 8, "gemm": gemm, "collectives": coll, "ops": ops}, open(sys.argv[1], "w"))
PY

bench_machine
echo
echo "| layout | nodes | model best ms | model median ms | model cpu ms | ns/node | profile best ms | profile median ms | profile cpu ms | ns/node | from profile |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for n in "${sizes[@]}"; do
  for layout in "--dp 8" "--dp 2 --tp 4"; do
    g=$tmp/g.json
    # shellcheck disable=SC2086
    "$gen" $layout --target-nodes "$n" -o "$g"
    m=$("$bench" "$g" --cluster h200-sxm --repeat 5)
    p=$("$bench" "$g" --cluster h200-sxm --profile "$tmp/profile.json" --repeat 5)
    field() { echo "$1" | tr ' ' '\n' | grep -A1 -x "$2" | tail -1; }
    echo "| ${layout//--/} | $(field "$m" nodes) | $(field "$m" best_ms) | $(field "$m" median_ms) | $(field "$m" cpu_ms) | $(field "$m" ns_per_node) | $(field "$p" best_ms) | $(field "$p" median_ms) | $(field "$p" cpu_ms) | $(field "$p" ns_per_node) | $(field "$p" profile) |"
    rm -f "$g"
  done
done
