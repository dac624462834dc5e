#!/bin/bash
# tools/device/cmm.sh: run ON THE GPU MACHINE (device tool, kind
# nvidia-h200-x2), from the repo root, with .carry/ staged by
# tools/device/pack.sh. Issue 19 items 1 and 2, through schedrun's plans:
#  1. collective matmul: C = all_gather(A) @ B, reduce_scatter(A @ B) and
#     all_reduce(A @ B) over 2 ranks at M x K x N = 16384x4096x4096,
#     8192^3, 4096x8192x8192, 32768x8192x1024, 1024^3 (bf16; graphs
#     written below). Per case: the plan of the graph as it is (NCCL, then
#     the GEMM: the reference), whose measured GEMM and collective give the
#     ideal max(GEMM, collective), and the graph decomposed by the pass
#     (schedgraph --decompose all, --emit-graph) with every ring step's
#     transport set to nccl and to ce (the all_reduce's row chunks are NCCL
#     collectives: one variant), planned again. Target (issue 19): the
#     decomposed step <= 1.05 x the ideal wherever the collective is >= 15%
#     of the GEMM;
#  2. the start wait: in the input order, a collective issued right before
#     a GEMM (cf) or right after it (kf), for GEMMs of 8192^3 and of the
#     judge graphs' FFN (M 8192, K 4096, N 14336) (an all_gather of 32 MiB
#     shards, and a 64 MiB collective_permute over nccl and over ce), the
#     GEMM on every SM and on all but 16 (sm_count, cuBLASLt's SM-count
#     target), each collective and each GEMM alone. A collective that waits
#     for the GEMM takes about the GEMM's time more beside it than alone:
#     (beside - alone) / GEMM is the wait it implies (cf: the pair's
#     wait_before; kf: wait_during; clamped to [0, 1]; contention adds to
#     it, so it is an upper bound);
#  3. ce_GBps and ce_latency_us: one ce step alone at 1, 16, 64 and 256 MiB
#     (and the same over nccl), least squares of time = latency + bytes /
#     bandwidth.
# Results: $OUT/cmm.md (the tables for bench/RESULTS.md, printed last),
# $OUT/cmm-log.txt, $OUT/cmm.tsv (every measured step). About 250 s.
# ITEMS="2" (any of 1 2 3) runs only those items.
# DRY=1: everything on the CPU backend with every dim / 64 (no GPU; a check
# of the script; BIN_DIR=build-dir/... selects the binaries, else .carry).
set -u
# shellcheck source=tools/device/env.sh
. "$PWD/tools/device/env.sh"
DRY=${DRY:-0}
W=/tmp/sg-cmm
rm -rf "$W"
mkdir -p "$W"
exec > >(tee "$OUT/cmm-log.txt") 2>&1
T0=$(date +%s)
if [ "$DRY" = 1 ]; then
  BACKEND=cpu SCALE=64 ITERS=${ITERS:-3} WARM=1 SMS=132 DT=float32
  if [ -n "${BIN_DIR:-}" ]; then
    SG=$BIN_DIR/tools/schedgraph/schedgraph RUN=$BIN_DIR/runtime/schedrun
  else
    SG=$BIN/schedgraph RUN=$BIN/schedrun
  fi
else
  BACKEND=cuda SCALE=1 ITERS=${ITERS:-10} WARM=3 DT=bfloat16
  SG=$BIN/schedgraph RUN=$BIN/schedrun
  nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv,noheader
  nvidia-smi topo -m | head -3
  SMS=$("$BIN/bench_gemm" --sm-count 2>/dev/null || echo 132)
fi
for b in "$SG" "$RUN"; do [ -x "$b" ] || { echo "no $b: run tools/device/pack.sh first"; exit 1; }; done
echo "backend $BACKEND, dims / $SCALE, $ITERS steps (+$WARM warm-up), $SMS SMs"
TSV=$OUT/cmm.tsv
printf 'case\tvariant\tstep_us\tcompute_us\tcollectives_us\n' >"$TSV"

# graphs: item 1's cases, item 2's pairs, item 3's steps
python3 - "$W" "$SCALE" "$DT" "$SMS" <<'PY'
import json, sys
d, scale, dt, sms = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
esz = 2 if dt == "bfloat16" else 4
def graph(nodes, outs):
    nodes.append({"name": "output", "op": "output", "target": "output",
                  "args": [[{"node": n} for n in outs]], "kwargs": {}})
    return {"format": "schedgraph.graph", "version": 1, "world_size": 2, "rank": 0,
            "groups": {"tp": {"ranks": [0, 1]}}, "nodes": nodes}
def ph(name, shape):
    return {"name": name, "op": "placeholder", "target": name, "args": [], "kwargs": {},
            "meta": {"shape": shape, "dtype": dt}}
def call(name, target, args, shape, kwargs=None, **extra):
    n = {"name": name, "op": "call_function", "target": target, "args": args,
         "kwargs": kwargs or {}, "meta": {"shape": shape, "dtype": dt}}
    n.update(extra)
    return n
def ref(x):
    return {"node": x}
WAIT = "_c10d_functional.wait_tensor.default"
def write(name, g):
    json.dump(g, open(f"{d}/{name}.json", "w"))
cases = []
for (m, k, n) in ((16384, 4096, 4096), (8192, 8192, 8192), (4096, 8192, 8192),
                  (32768, 8192, 1024), (1024, 1024, 1024)):
    M, K, N = (max(16, v // scale) for v in (m, k, n))
    tag = f"{m}x{k}x{n}"
    write(f"ag_{tag}", graph([ph("a", [M // 2, K]), ph("b", [K, N]),
        call("ag", "_c10d_functional.all_gather_into_tensor.default", [ref("a"), 2, "tp"], [M, K]),
        call("ag_w", WAIT, [ref("ag")], [M, K]),
        call("c", "aten.mm.default", [ref("ag_w"), ref("b")], [M, N])], ["c"]))
    write(f"rs_{tag}", graph([ph("a", [M, K]), ph("b", [K, N]),
        call("c", "aten.mm.default", [ref("a"), ref("b")], [M, N]),
        call("rs", "_c10d_functional.reduce_scatter_tensor.default", [ref("c"), "sum", 2, "tp"],
             [M // 2, N]),
        call("rs_w", WAIT, [ref("rs")], [M // 2, N])], ["rs_w"]))
    write(f"ar_{tag}", graph([ph("a", [M, K]), ph("b", [K, N]),
        call("c", "aten.mm.default", [ref("a"), ref("b")], [M, N]),
        call("ar", "_c10d_functional.all_reduce.default", [ref("c"), "sum", "tp"], [M, N]),
        call("ar_w", WAIT, [ref("ar")], [M, N])], ["ar_w"]))
    cases.append(tag)
open(f"{d}/cases.txt", "w").write("\n".join(cases) + "\n")
# item 2: a collective and a GEMM in the input order, the collective issued
# right before the GEMM (cf) or right after it (kf), or either alone; two
# GEMMs: 8192^3 and the judge graphs' FFN GEMM (M 8192, K 4096, N 14336)
SHAPES = {"sq": (8192, 8192, 8192), "ffn": (8192, 4096, 14336)}
rows = max(16, (32 << 20) // (4096 * esz) // scale)  # a 32 MiB shard (64 MiB for a permute)
def coll(kind, x, R):
    if kind == "ag":
        return call("coll", "_c10d_functional.all_gather_into_tensor.default", [ref(x), 2, "tp"],
                    [2 * R, 4096 // scale]), [2 * R, 4096 // scale]
    return call("coll", "schedgraph.collective_permute", [ref(x), [[0, 1], [1, 0]], "tp"],
                [R, 4096 // scale], {"transport": kind}), [R, 4096 // scale]
def gemm_nodes(shape, gemm):
    M, K, N = (max(16, v // scale) for v in SHAPES[shape])
    extra = {"sm_count": sms - 16} if gemm == "sm" else {}
    return [ph("p", [M, K]), ph("q", [K, N]),
            call("mm", "aten.mm.default", [ref("p"), ref("q")], [M, N], **extra)]
for kind in ("ag", "nccl", "ce"):
    R = rows if kind == "ag" else 2 * rows
    c, shape = coll(kind, "x", R)
    wait = call("coll_w", WAIT, [ref("coll")], shape)
    write(f"sw_{kind}_none", graph([ph("x", [R, 4096 // scale]), c, wait], ["coll_w"]))
    for gemm in ("full", "sm"):
        for sh in SHAPES:
            g = gemm_nodes(sh, gemm)
            write(f"sw_{kind}_{gemm}_{sh}_cf",
                  graph([ph("x", [R, 4096 // scale]), c] + g + [wait], ["mm", "coll_w"]))
            write(f"sw_{kind}_{gemm}_{sh}_kf",
                  graph(g + [ph("x", [R, 4096 // scale]), c, wait], ["mm", "coll_w"]))
for gemm in ("full", "sm"):
    for sh in SHAPES:
        write(f"sw_gemm_{gemm}_{sh}", graph(gemm_nodes(sh, gemm), ["mm"]))
# item 3: one step alone per transport and size, each waited at once
nodes, outs = [], []
for mib in (1, 16, 64, 256):
    r = max(16, mib * (1 << 20) // (4096 * esz) // scale)
    x = f"x{mib}"
    nodes.append(ph(x, [r, 4096 // scale]))
    for tr in ("nccl", "ce"):
        p = f"step_{tr}_{mib}"
        nodes.append(call(p, "schedgraph.collective_permute", [ref(x), [[0, 1], [1, 0]], "tp"],
                          [r, 4096 // scale], {"transport": tr}))
        nodes.append(call(p + "_w", WAIT, [ref(p)], [r, 4096 // scale]))
        outs.append(p + "_w")
write("steps", graph(nodes, outs))
PY

# time NAME PLAN: schedrun timing of PLAN into $W/NAME.report.json and a
# line of $TSV
time_plan () {
  local name=$1 plan=$2
  if timeout 120 "${MPI[@]}" "$RUN" --backend $BACKEND --mode timing --iters "$ITERS" \
       --warmup $WARM --timeout 100 "$plan" --report "$W/$name.report.json" \
       >"$W/$name.log" 2>&1 </dev/null; then
    python3 - "$W/$name.report.json" "$name" >>"$TSV" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
m = r["measured"]
colls = ",".join("%s=%.1f" % (c["name"], c["measured_us"]) for c in r["collectives"])
case, _, variant = sys.argv[2].partition(".")
print("%s\t%s\t%.1f\t%.1f\t%s" % (case, variant, m["step_us"], m["compute_us"], colls))
PY
  else
    echo "$name: schedrun failed: $(grep -m1 -i 'error\|schedrun:' "$W/$name.log")"
  fi
}

# want N: whether item N is in ITEMS (default all three)
want () { case " ${ITEMS:-1 2 3} " in *" $1 "*) return 0 ;; esac; return 1; }

# 1. collective matmul
want 1 && echo "=== 1. collective matmul [$(date +%T)]"
want 1 && while read -r -u 3 tag; do
  for p in ag rs ar; do
    g=$W/${p}_$tag.json c=${p}_$tag
    "$SG" "$g" -q --no-decompose --no-bucket -o "$W/$c.ref.plan" && time_plan "$c.ref" "$W/$c.ref.plan"
    "$SG" "$g" -q --decompose all --no-bucket --emit-graph "$W/$c.dec.json" -o "$W/$c.dec.plan" \
      --report "$W/$c.dec.sgreport.json" || { echo "$c: decompose failed"; continue; }
    for tr in nccl ce; do
      [ $p = ar ] && [ $tr = ce ] && continue # row chunks: NCCL all_reduces
      python3 - "$W/$c.dec.json" "$W/$c.$tr.json" "$tr" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for n in g["nodes"]:
    if n.get("target") == "schedgraph.collective_permute":
        n["kwargs"]["transport"] = sys.argv[3]
json.dump(g, open(sys.argv[2], "w"))
PY
      v=$tr; [ $p = ar ] && v=chunks
      "$SG" "$W/$c.$tr.json" -q --no-decompose --no-bucket -o "$W/$c.$v.plan" &&
        time_plan "$c.$v" "$W/$c.$v.plan"
    done
  done
done 3<"$W/cases.txt"

# 2. the start wait, in the input order
want 2 && echo "=== 2. start wait [$(date +%T)]"
want 2 && for g in "$W"/sw_*.json; do
  c=$(basename "$g" .json)
  "$SG" "$g" -q --no-reorder --no-bucket --no-decompose -o "$W/$c.plan" &&
    time_plan "$c.plan" "$W/$c.plan"
done

# 3. ring steps alone
want 3 && echo "=== 3. steps alone [$(date +%T)]"
want 3 && "$SG" "$W/steps.json" -q --no-reorder --no-bucket --no-decompose -o "$W/steps.plan" &&
  time_plan "steps.plan" "$W/steps.plan"

python3 - "$TSV" "$W" "$DRY" >"$OUT/cmm.md" <<'PY'
import collections, json, os, sys
tsv, w, dry = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
rows = [l.rstrip("\n").split("\t") for l in open(tsv)][1:]
runs = collections.defaultdict(dict)
for case, variant, step, comp, colls in rows:
    cs = dict(x.split("=") for x in colls.split(",") if x)
    runs[case][variant] = (float(step), float(comp), {k: float(v) for k, v in cs.items()})
if dry:
    print("DRY RUN on the CPU backend (dims / 64): plumbing only, the times mean nothing.\n")
print("1. Collective matmul over 2 ranks (bf16), schedrun step medians (us); ideal = max(GEMM, "
      "collective) as measured in the reference; target <= 1.05 x ideal where coll >= 15% GEMM.\n")
print("| pattern | M x K x N | GEMM | coll | NCCL then GEMM | ideal | decomposed nccl (x ideal) "
      "| decomposed ce (x ideal) | target |")
print("|---|---|---:|---:|---:|---:|---:|---:|---|")
for case in [c for c in runs if c[:3] in ("ag_", "rs_", "ar_")]:
    r = runs[case]
    if "ref" not in r:
        continue
    step, gemm, colls = r["ref"]
    coll = sum(colls.values())
    ideal = max(gemm, coll)
    def cell(v):
        return "%.1f (%.2f)" % (r[v][0], r[v][0] / ideal) if v in r else "-"
    nccl = "chunks" if case.startswith("ar_") else "nccl"
    best = min((r[v][0] for v in (nccl, "ce") if v in r), default=None)
    need = coll >= 0.15 * gemm
    met = "-" if best is None else ("met" if best <= 1.05 * ideal else "missed") if need else "n/a"
    print("| %s | %s | %.1f | %.1f | %.1f | %.1f | %s | %s | %s |" % (
        {"ag": "all_gather->mm", "rs": "mm->reduce_scatter", "ar": "mm->all_reduce"}[case[:2]],
        case[3:], gemm, coll, step, ideal, cell(nccl), "-" if case.startswith("ar_") else cell("ce"),
        met))
print("\n2. Start wait: a collective and a GEMM in the input order, the collective issued "
      "right before the GEMM (cf) or right after it (kf) (us; implied wait = (beside - alone) / "
      "GEMM, clamped to [0, 1]; contention adds to it, so it is an upper bound; GEMM slowdown = "
      "(step - GEMM alone) / collective alone).\n")
print("| collective | GEMM (M x K x N) | SMs | order | GEMM alone | collective alone | "
      "collective beside | step | implied wait | GEMM slowdown |")
print("|---|---|---|---|---:|---:|---:|---:|---:|---:|")
implied = collections.defaultdict(list)
labels = (("ag", "all_gather 32 MiB shards (nccl)"), ("nccl", "permute 64 MiB nccl"),
          ("ce", "permute 64 MiB ce"))
for sh, dims in (("sq", "8192x8192x8192"), ("ffn", "8192x4096x14336")):
    for kind, label in labels:
        alone = runs.get(f"sw_{kind}_none", {}).get("plan")
        for gemm in ("full", "sm"):
            gm = runs.get(f"sw_gemm_{gemm}_{sh}", {}).get("plan")
            for order in ("cf", "kf"):
                beside = runs.get(f"sw_{kind}_{gemm}_{sh}_{order}", {}).get("plan")
                if not (alone and beside and gm):
                    continue
                ca, cb, g_us = sum(alone[2].values()), sum(beside[2].values()), gm[1]
                x = min(1.0, max(0.0, (cb - ca) / g_us)) if g_us > 0 else float("nan")
                slow = (beside[0] - gm[0]) / ca if ca > 0 else float("nan")
                implied[("ce" if kind == "ce" else "nccl", gemm, order)].append(x)
                print("| %s | %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |" % (
                    label, dims, "all" if gemm == "full" else "all but 16", order, g_us, ca, cb,
                    beside[0], x, slow))
print()
for (tr, gemm, order), xs in sorted(implied.items()):
    print("implied wait, %s, %s, GEMM on %s: %s (mean %.2f)" % (
        tr, {"cf": "issued right before the GEMM", "kf": "issued right after it"}[order],
        "every SM" if gemm == "full" else "fewer SMs", " ".join("%.2f" % x for x in xs),
        sum(xs) / len(xs)))
print("\n3. One ring step alone ({0->1, 1->0}), us; time = latency + bytes / bandwidth:\n")
st = runs.get("steps", {}).get("plan")
if st:
    print("| transport | " + " | ".join(f"{m} MiB" for m in (1, 16, 64, 256)) + " | latency us | GB/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for tr in ("nccl", "ce"):
        pts = [(m, st[2].get(f"step_{tr}_{m}")) for m in (1, 16, 64, 256)]
        pts = [(m, t) for m, t in pts if t is not None]
        if len(pts) < 2:
            continue
        xs = [m * (1 << 20) / (64 if dry else 1) for m, _ in pts]
        ys = [t for _, t in pts]
        n = len(xs); mx = sum(xs) / n; my = sum(ys) / n
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        lat = my - slope * mx
        gbps = 1e-3 / slope if slope > 0 else float("inf")
        print("| %s | %s | %.1f | %.0f |" % (tr, " | ".join("%.1f" % t for t in ys), lat, gbps))
        if tr == "ce":
            print("\nimplied ce_latency_us = %.1f, ce_GBps = %.0f (cluster fields, "
                  "docs/cluster-format.md)" % (lat, gbps))
PY
echo "=== done in $(( $(date +%s) - T0 )) s"
cat "$OUT/cmm.md"
