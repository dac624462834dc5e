#!/bin/bash
# bench_chunked_mm.sh: the cost model's chunked and SM-limited GEMMs against
# the measurement on one H200 (issue 13 item 2).
#
#   bench/bench_chunked_mm.sh [BUILD_DIR] [TSV]
#
# TSV: tools/device/chunked_mm.sh's chunked_mm.tsv (default
# bench/data/chunked_mm_h200.tsv: nvidia-h200, one H200, cuBLAS under a
# CUDA graph, commit e44c6ba). For every shape M x K x N and k = 2, 4, 8:
# the efficiency of k chunks (one mm's time / the k chunks' time) along M,
# N and K, measured and as schedgraph's model prices the same GEMMs
# (`schedgraph --costs` of a graph holding them, h200-sxm preset); then
# the slowdown of one GEMM on an SM-count target (cuBLASLt) against
# cublasGemmEx on every SM, measured and modelled (gemm_sm_overhead x
# (S / s)^gemm_sm_exponent), with the fit of those two on three shapes
# (16384x4096x4096, 8192x8192x8192, 32768x8192x1024) and its error on the
# other two.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
tsv=${2:-$root/bench/data/chunked_mm_h200.tsv}
sg=$build/tools/schedgraph/schedgraph
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$tsv" "$sg" "$tmp" <<'PY'
import csv, json, math, subprocess, sys
tsv, sg, tmp = sys.argv[1:4]
rows = list(csv.DictReader(open(tsv), delimiter="\t"))
shapes = list(dict.fromkeys(r["shape"] for r in rows))
meas = {(r["shape"], r["mode"], int(r["k"]), int(r["sms"])): float(r["us"]) for r in rows}

# every GEMM the table needs, in one graph, priced by the model
gemms = {}
def gemm(m, k, n, sms=0):
    key = (m, k, n, sms)
    gemms.setdefault(key, "g%d" % len(gemms))
    return gemms[key]
for s in shapes:
    M, K, N = map(int, s.split("x"))
    gemm(M, K, N)
    for k in (2, 4, 8):
        gemm(M // k, K, N), gemm(M, K, N // k), gemm(M, K // k, N)
    for sms in sorted({int(r["sms"]) for r in rows if r["mode"] == "sms"}):
        gemm(M, K, N, sms)
nodes, inputs = [], {}
def inp(r, c):
    name = "in_%d_%d" % (r, c)
    if name not in inputs:
        inputs[name] = {"name": name, "op": "placeholder", "target": name, "args": [], "kwargs": {},
                        "meta": {"shape": [r, c], "dtype": "bfloat16"}}
    return name
for (m, k, n, sms), name in gemms.items():
    node = {"name": name, "op": "call_function", "target": "aten.mm.default",
            "args": [{"node": inp(m, k)}, {"node": inp(k, n)}], "kwargs": {},
            "meta": {"shape": [m, n], "dtype": "bfloat16"}}
    if sms:
        node["sm_count"] = sms
    nodes.append(node)
graph = {"format": "schedgraph.graph", "version": 1, "world_size": 1, "rank": 0, "groups": {},
         "nodes": list(inputs.values()) + nodes + [{"name": "output", "op": "output", "target": "output",
                  "args": [[{"node": n["name"]} for n in nodes]], "kwargs": {}}]}
json.dump(graph, open(tmp + "/g.json", "w"))
out = subprocess.run([sg, "--costs", "--cluster", "h200-sxm", tmp + "/g.json"], capture_output=True,
                     text=True, check=True).stdout
cost = {}
for line in out.splitlines():
    f = line.split()
    if len(f) >= 5 and f[0] in gemms.values():
        cost[f[0]] = float(f[-2])
def model(m, k, n, sms=0):
    return cost[gemms[(m, k, n, sms)]]

print("Efficiency of k chunks (one mm / k chunks), measured / model (h200-sxm):")
print()
print("| M x K x N | one mm us meas / model | " + " | ".join("%s k=%d" % (d, k) for d in "MNK" for k in (2, 4, 8)) + " |")
print("|---|---:|" + "---:|" * 9)
for s in shapes:
    M, K, N = map(int, s.split("x"))
    one = meas[(s, "m", 1, 0)]
    cells = []
    for d in "mnk":
        for k in (2, 4, 8):
            e = one / meas[(s, d, k, 0)]
            shp = {"m": (M // k, K, N), "n": (M, K, N // k), "k": (M, K // k, N)}[d]
            em = model(M, K, N) / (k * model(*shp))
            cells.append("%.2f / %.2f" % (e, em))
    print("| %s | %.1f / %.1f | %s |" % (s, one, model(M, K, N), " | ".join(cells)))
print()

S = 132
targets = sorted({int(r["sms"]) for r in rows if r["mode"] == "sms"}, reverse=True)
fit, held = shapes[:2] + shapes[3:4], [shapes[2], shapes[4]]
pts = []
for s in fit:
    for t in targets:
        pts.append((math.log(S / t), math.log(meas[(s, "sms", 1, t)] / meas[(s, "m", 1, 0)])))
n = len(pts); sx = sum(p[0] for p in pts); sy = sum(p[1] for p in pts)
sxx = sum(p[0] ** 2 for p in pts); sxy = sum(p[0] * p[1] for p in pts)
x = (n * sxy - sx * sy) / (n * sxx - sx * sx)
a = math.exp((sy - x * sx) / n)
print("SM-count targets: slowdown against cublasGemmEx on all %d SMs, measured / model" % S)
print("(least squares in log time on %s: overhead %.3f, exponent %.3f; the model's values are" % (", ".join(fit), a, x))
print("the cluster's gemm_sm_overhead and gemm_sm_exponent):")
print()
print("| M x K x N | set | " + " | ".join("%d SMs" % t for t in targets) + " | mean abs err |")
print("|---|---|" + "---:|" * len(targets) + "---:|")
for s in shapes:
    M, K, N = map(int, s.split("x"))
    cells, errs = [], []
    for t in targets:
        m = meas[(s, "sms", 1, t)] / meas[(s, "m", 1, 0)]
        p = model(M, K, N, t) / model(M, K, N)
        errs.append(abs(p / m - 1))
        cells.append("%.2f / %.2f" % (m, p))
    print("| %s | %s | %s | %.1f%% |" % (s, "fit" if s in fit else "held out", " | ".join(cells),
                                        100 * sum(errs) / len(errs)))
PY
