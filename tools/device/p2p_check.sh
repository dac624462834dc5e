#!/bin/bash
# tools/device/p2p_check.sh: run ON THE GPU MACHINE (2 GPUs, kind
# nvidia-h200-x2), from the repo root, with .carry/ staged by
# tools/device/pack.sh. Issue 13: collective_permute on the CUDA backend.
#  1. exact mode, CUDA against the CPU backend, on tests/runtime/mkring's
#     graphs at 2 ranks (float32): the all_gather->mm ring (ce steps), the
#     mm->reduce_scatter ring (nccl steps) and its direct form (ce steps
#     of shift 1; the ring's chunks at rank-dependent blocks: plan values'
#     roll, in ag_ring and rs_direct), a partial permutation and a
#     reverse ring (one nccl, one ce: pure data movement, so bitwise), and
#     a matmul with an sm_count (cuBLASLt), each with --launch eager and
#     --launch graph (is the copy-engine protocol capturable?);
#  2. timing: one ring step of 1, 16 and 64 MiB per transport, measured by
#     schedrun (median over 20 steps), eager and graph.
# Results: $OUT/p2p_check.md (the table, also printed last), $OUT/p2p_log.txt.
# About 90 s.
set -u
# shellcheck source=tools/device/env.sh
. "$PWD/tools/device/env.sh"
W=/tmp/sg-p2p
rm -rf "$W"
mkdir -p "$W"
exec > >(tee "$OUT/p2p_log.txt") 2>&1
TABLE=$W/table.md
printf '| check | launch | result |\n|---|---|---|\n' >"$TABLE"
row () { printf '| %s | %s | %s |\n' "$1" "$2" "$3" >>"$TABLE"; echo "$1 [$2]: $3"; }

nvidia-smi --query-gpu=index,name --format=csv,noheader
nvidia-smi topo -m | head -3
for b in schedrun sgeval mkplan mkring; do
  [ -x "$BIN/$b" ] || { echo "no $BIN/$b: run tools/device/pack.sh first"; exit 1; }
done

"$BIN/mkring" "$W" 2 2 float32 || exit 1
python3 - "$W" <<'PY'
import json, sys
d = sys.argv[1]
def graph(nodes, outs):
    nodes.append({"name": "output", "op": "output", "target": "output",
                  "args": [[{"node": n} for n in outs]], "kwargs": {}})
    return {"format": "schedgraph.graph", "version": 1, "world_size": 2, "rank": 0,
            "groups": {"tp": {"ranks": [0, 1]}}, "nodes": nodes}
def ph(name, shape, dt):
    return {"name": name, "op": "placeholder", "target": name, "args": [], "kwargs": {},
            "meta": {"shape": shape, "dtype": dt}}
def call(name, target, args, shape, dt, **extra):
    n = {"name": name, "op": "call_function", "target": target, "args": args, "kwargs": {},
         "meta": {"shape": shape, "dtype": dt}}
    n.update(extra)
    return n
# a matmul on 66 SMs beside a full one
nodes = [ph("a", [512, 256], "float32"), ph("b", [256, 384], "float32"),
         call("full", "aten.mm.default", [{"node": "a"}, {"node": "b"}], [512, 384], "float32"),
         call("part", "aten.mm.default", [{"node": "a"}, {"node": "b"}], [512, 384], "float32",
              sm_count=66)]
json.dump(graph(nodes, ["full", "part"]), open(f"{d}/sm.json", "w"))
# one ring step per transport and size, each waited at once (they run alone)
nodes, outs = [], []
for mib in (1, 16, 64):
    rows = mib * (1 << 20) // (4096 * 2)
    x = f"x{mib}"
    nodes.append(ph(x, [rows, 4096], "bfloat16"))
    for tr in ("nccl", "ce"):
        p = f"step_{tr}_{mib}MiB"
        nodes.append(call(p, "schedgraph.collective_permute",
                          [{"node": x}, [[0, 1], [1, 0]], "tp"], [rows, 4096], "bfloat16"))
        nodes[-1]["kwargs"] = {"transport": tr}
        nodes.append(call(p + "_w", "_c10d_functional.wait_tensor.default", [{"node": p}],
                          [rows, 4096], "bfloat16"))
        outs.append(p + "_w")
json.dump(graph(nodes, outs), open(f"{d}/steps.json", "w"))
PY

for g in ag_ring rs_ring rs_direct part sm; do
  "$BIN/mkplan" "$W/$g.json" "$W/$g.plan.json" || { row "$g" - "mkplan failed"; continue; }
  timeout 60 "${MPI[@]}" "$BIN/schedrun" --backend cpu "$W/$g.plan.json" \
    --dump-outputs "$W/$g.cpu" >"$W/$g.cpu.log" 2>&1 || { row "$g" cpu "schedrun failed"; continue; }
  for l in eager graph; do
    if timeout 90 "${MPI[@]}" "$BIN/schedrun" --backend cuda --launch $l --timeout 60 \
         "$W/$g.plan.json" --dump-outputs "$W/$g.$l" >"$W/$g.$l.log" 2>&1; then
      if [ "$g" = part ]; then
        r=$("$BIN/sgeval" --compare --bitwise "$W/$g.$l" "$W/$g.cpu" 2>&1)
      else
        r=$("$BIN/sgeval" --compare --rtol 1e-4 "$W/$g.$l" "$W/$g.cpu" 2>&1)
      fi
      row "$g (CUDA vs CPU)" $l "$r"
    else
      row "$g (CUDA vs CPU)" $l "schedrun failed: $(grep -m1 -i 'error\|fail\|schedrun:' "$W/$g.$l.log")"
    fi
  done
done

"$BIN/mkplan" "$W/steps.json" "$W/steps.plan.json" || exit 1
for l in eager graph; do
  timeout 120 "${MPI[@]}" "$BIN/schedrun" --backend cuda --launch $l --mode timing --iters 20 \
    --warmup 3 --timeout 100 "$W/steps.plan.json" --report "$W/steps.$l.json" \
    >"$W/steps.$l.log" 2>&1 || row "timing" $l "schedrun failed: $(grep -m1 -i 'error\|schedrun:' "$W/steps.$l.log")"
done
python3 - "$W" >>"$TABLE" <<'PY'
import json, os, sys
d = sys.argv[1]
print()
print("One ring step ({0->1, 1->0}, bf16) as schedrun measures it (median of 20 steps, us; GB/s one way):")
print()
print("| step | eager us | graph us | graph GB/s |")
print("|---|---:|---:|---:|")
rep = {}
for l in ("eager", "graph"):
    p = f"{d}/steps.{l}.json"
    if os.path.exists(p):
        rep[l] = {c["name"]: c for c in json.load(open(p))["collectives"]}
names = list(rep.get("graph", rep.get("eager", {})).keys())
for n in names:
    us = {l: rep[l][n]["measured_us"] for l in rep if n in rep[l]}
    mib = int(n.split("_")[-1][:-3])
    g = us.get("graph")
    bw = f"{mib * (1 << 20) / (g * 1e3):.0f}" if g else "-"
    f = lambda v: f"{v:.1f}" if isinstance(v, (int, float)) else "-"
    print(f"| {n} | {f(us.get('eager'))} | {f(g)} | {bw} |")
PY
cp "$TABLE" "$OUT/p2p_check.md"
echo; echo "=== p2p_check"; cat "$TABLE"
