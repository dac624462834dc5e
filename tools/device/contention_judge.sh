#!/bin/bash
# tools/device/contention_judge.sh [full|dry]: run ON THE GPU MACHINE
# (device tool, kind nvidia-h200-x2), from the repo root, with .carry/ staged
# by tools/device/pack.sh (nothing is built there). Issue 20's final
# measurement: our schedule, planned with the model as committed (measured
# pairs, held collectives resident, slack for waits; cluster defaults),
# against the input order and PyTorch's order, per graph:
#   - `schedrun --profile --contention` measured in this call (the plans
#     use it);
#   - timing runs (schedrun --mode timing --report, launch graph) of the
#     input order, our schedule, and PyTorch's order where tests/data has
#     it; every plan --no-bucket (tools/sgfit re-simulates them);
#   - graphs, in this order (a graph is skipped, not started, when it would
#     not end inside LIMIT): w2_fsdp2_L2_h1024 and w2_tp2_L2_h1024 (with
#     PyTorch's order), two judge graphs not used before (graphgen FSDP L=6
#     H=3072 F=8192 S=4096 over 2, and its HSDP twin: dp 1 over 2 replicas,
#     all_reduce of every gradient), then the judge graphs of
#     tests/data/h200x2-contention (graphgen L=8 H=4096 F=14336 S=8192,
#     FSDP and TP over 2).
# Output ($OUT, 4 files): summary.md (predicted vs measured exposed and
# step per run, and issue 20's bar per graph), results.tar.gz (graphs,
# profiles, plans, reports, manifest.json for sgfit), log.txt,
# profiles.txt. LIMIT seconds in all (default 230); every command's timeout
# is what is left.
# dry: the same steps here, without a GPU: CPU backend, tiny graphs, the
# synthetic contention profile of tools/device/contention.sh's dry mode.
set -u
MODE=${1:-full}
# shellcheck source=tools/device/env.sh
. "$PWD/tools/device/env.sh"
BIN=${BIN_DIR:-$BIN}
G=${GRAPHS_DIR:-$G}
W=${WORK:-/tmp/sg-judge}
LIMIT=${LIMIT:-230}
T0=$(date +%s)
rm -rf "$W"
mkdir -p "$W"
exec > >(tee "$OUT/log.txt") 2>&1
elapsed () { echo $(( $(date +%s) - T0 )); }
section () { echo; echo "=== $* [$(date +%T), $(elapsed) s]"; }
fits () { [ $(( $(elapsed) + $1 )) -le "$LIMIT" ]; }
tleft () { local t=$(( LIMIT - $(elapsed) )); echo $(( t > 10 ? t : 10 )); }

# graph:graphgen-args (or "-" for tests/data):profile-iters:contention-budget:timing-iters:warmup:need-seconds
if [ "$MODE" = dry ]; then
  BACKEND=cpu
  PLAN_G="w2_tiny_fsdp2_L2_h256:-:2:0:2:1:5 gg_tiny_hsdp2:--dp,1,--world,2:2:0:2:1:5"
else
  BACKEND=cuda
  N="--layers,6,--hidden,3072,--ffn,8192,--heads,24,--seq,4096"
  J="--layers,8,--hidden,4096,--ffn,14336,--heads,32,--seq,8192"
  PLAN_G="w2_fsdp2_L2_h1024:-:10:12:20:3:25 w2_tp2_L2_h1024:-:10:12:20:3:25 \
gg_new_fsdp2_L6_h3072:$N,--dp,2:5:20:5:2:40 gg_new_hsdp2_L6_h3072:$N,--dp,1,--world,2:5:20:5:2:40 \
gg_judge_fsdp2_L8_h4096:$J,--dp,2:5:25:5:2:50 gg_judge_tp2_L8_h4096:$J,--dp,1,--tp,2:5:20:5:2:45"
fi

section environment
if [ "$MODE" != dry ]; then
  nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm --format=csv
  nvidia-smi topo -m | head -4
fi
mpirun --version | head -1
for b in schedrun schedgraph graphgen; do [ -x "$BIN/$b" ] || echo "MISSING $BIN/$b"; done
ldd "$BIN/schedrun" | grep 'not found' && echo "MISSING LIBRARIES"

# profile GRAPH ITERS BUDGET -> $W/p.GRAPH.json (version 2)
profile () {
  local g=$1 it=$2 budget=$3
  if [ "$MODE" = dry ]; then  # contention.sh's synthetic section on the reference profile
    python3 - "$ROOT/tests/estimate/data/h200x2.profile.json" "$W/p.$g.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1])); p["version"] = 2; p["contention"] = []
for kind in ("all_gather", "reduce_scatter", "all_reduce"):
    for kernel, rep, reps in (("gemm", 100, [150, 200, 175, 100, 100]), ("map", 10, [15] * 4 + [10] * 6)):
        for order, lag in (("comm_first", 0), ("kernel_first", rep / 2)):
            p["contention"].append({"kind": kind, "bytes": 1 << 20, "group_size": 2,
                "transport": "nccl", "kernel": kernel, "kernel_key": kernel, "order": order,
                "runs_per_rep": 1, "comm_solo_us": 300 if kernel == "gemm" else 30,
                "rep_solo_us": rep, "lag_us": lag, "comm_us": 500 if kernel == "gemm" else 60,
                "reps_us": reps})
json.dump(p, open(sys.argv[2], "w"), indent=1)
EOF
  else
    timeout "$(tleft)" "${MPI[@]}" "$BIN/schedrun" --profile "$W/$g.json" -o "$W/p.$g.json" \
      --iters "$it" --warmup 2 --timeout 30 --contention --contention-budget "$budget" \
      --contention-iters 3
    echo "profile $g rc=$?"
    if [ ! -f "$W/p.$g.json" ]; then  # the plans still need a profile
      timeout "$(tleft)" "${MPI[@]}" "$BIN/schedrun" --profile "$W/$g.json" -o "$W/p.$g.json" \
        --iters "$it" --warmup 2 --timeout 30
      echo "plain profile $g rc=$?"
    fi
  fi
}

# timed GRAPH ORDER GRAPHFILE FLAGS ITERS WARMUP
timed () {
  local g=$1 v=$2 gf=$3 flags=$4 it=$5 wu=$6
  local p=$W/t.$g.$v.plan.json
  "$BIN/schedgraph" -q --no-bucket $flags --profile "$W/p.$g.json" "$gf" -o "$p" \
    --report "$W/t.$g.$v.sgreport.json" || { echo "schedgraph failed: $g $v"; return; }
  timeout "$(tleft)" "${MPI[@]}" "$BIN/schedrun" --backend "$BACKEND" --mode timing --iters "$it" \
    --warmup "$wu" --timeout 120 "$p" --report "$W/t.$g.$v.report.json" | tail -1
  echo "timing $g $v rc=${PIPESTATUS[0]}"
}

for spec in $PLAN_G; do
  IFS=: read -r g gen pit budget tit twu need <<< "$spec"
  if ! fits "$need"; then
    section "$g: skipped ($(elapsed) s of $LIMIT used, needs about $need)"
    continue
  fi
  section "$g: graph and profile"
  if [ "$gen" = - ]; then
    cp "$G/$g.json" "$W/" 2>/dev/null || cp "$ROOT/tests/data/$g.json" "$W/"
  else
    # shellcheck disable=SC2086
    "$BIN/graphgen" ${gen//,/ } -o "$W/$g.json" --stats
  fi
  po=$ROOT/tests/data/$g.peer_order_plain.json
  if [ -f "$po" ]; then  # PyTorch's order as a graph whose input order it is
    python3 - "$W/$g.json" "$po" "$W/$g.peer.json" <<'EOF'
import json, sys
g = json.load(open(sys.argv[1])); order = json.load(open(sys.argv[2]))
by = {n["name"]: n for n in g["nodes"]}
g["nodes"] = [by[n] for n in order]
json.dump(g, open(sys.argv[3], "w"))
EOF
  fi
  profile "$g" "$pit" "$budget"
  [ -f "$W/p.$g.json" ] || { echo "no profile for $g"; continue; }
  section "$g: timing (input, ours, peer)"
  timed "$g" input "$W/$g.json" --no-reorder "$tit" "$twu"
  timed "$g" ours "$W/$g.json" "" "$tit" "$twu"
  [ -f "$W/$g.peer.json" ] && timed "$g" peer "$W/$g.peer.json" --no-reorder "$tit" "$twu"
  echo "$g" >> "$W/graphs.txt"
done

section summary
python3 - "$W" <<'EOF' | tee "$OUT/summary.md"
import json, os, sys
w = sys.argv[1]
graphs = [l.strip() for l in open(os.path.join(w, "graphs.txt"))] if os.path.exists(os.path.join(w, "graphs.txt")) else []
runs, rows = [], {}
for g in graphs:
    for v in ("input", "ours", "peer"):
        f = os.path.join(w, f"t.{g}.{v}.report.json")
        if not os.path.exists(f):
            continue
        r = json.load(open(f))
        rows[(g, v)] = r
        runs.append({"name": f"{g} {v}", "graph": f"{g}.peer.json" if v == "peer" else f"{g}.json",
                     "profile": f"p.{g}.json", "plan": f"t.{g}.{v}.plan.json",
                     "report": f"t.{g}.{v}.report.json", "set": "judge"})
json.dump({"runs": runs}, open(os.path.join(w, "manifest.json"), "w"), indent=1)
def bar(p, m):  # issue 20: within 25% or 200 us
    return abs(p - m) <= max(0.25 * m, 200.0)
print("| graph | order | pred step us | meas step us | step err | pred exposed us | meas exposed us | exposed in bar |")
print("|---|---|---:|---:|---:|---:|---:|---|")
for (g, v), r in rows.items():
    m, p = r["measured"], r["predicted"]
    print(f"| {g} | {v} | {p['step_us']:.0f} | {m['step_us']:.0f} | {100 * (p['step_us'] / m['step_us'] - 1):+.1f}% | "
          f"{p['exposed_us']:.0f} | {m['exposed_us']:.0f} | {'yes' if bar(p['exposed_us'], m['exposed_us']) else 'no'} |")
print()
print("Issue 20's bar per graph (measured):")
for g in graphs:
    o, i, pe = rows.get((g, "ours")), rows.get((g, "input")), rows.get((g, "peer"))
    if not o:
        continue
    ex = o["measured"]["exposed_us"]
    line = f"- {g}: ours {ex:.0f} us exposed"
    if i:
        line += f"; <= input ({i['measured']['exposed_us']:.0f}): {'yes' if ex <= i['measured']['exposed_us'] else 'NO'}"
    if pe:
        line += f"; <= PyTorch's ({pe['measured']['exposed_us']:.0f}): {'yes' if ex <= pe['measured']['exposed_us'] else 'NO'}"
    line += f"; predicted {o['predicted']['exposed_us']:.0f}: {'within' if bar(o['predicted']['exposed_us'], ex) else 'OUTSIDE'} 25% / 200 us"
    print(line)
print()
print("Largest measured exposures of our schedule (measured / predicted exposed, measured / estimated us):")
for g in graphs:
    o = rows.get((g, "ours"))
    if not o:
        continue
    top = sorted(o["collectives"], key=lambda c: -c["exposed_us"])[:4]
    print(f"- {g}: " + "; ".join(f"{c['name']} {c['bytes']} B {c['exposed_us']:.0f}/{c['predicted_exposed_us'] or 0:.0f}, "
                                  f"{c['measured_us']:.0f}/{c['estimated_us'] or 0:.0f}" for c in top))
EOF
cat "$W"/p.*.json > "$OUT/profiles.txt" 2>/dev/null
tar czf "$OUT/results.tar.gz" -C "$W" .
ls -la "$OUT"
echo "done [$(date +%T), $(elapsed) s]"
