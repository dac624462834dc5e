#!/bin/bash
# tools/device/contention.sh [full|dry]: run ON THE GPU MACHINE (device tool,
# kind nvidia-h200-x2), from the repo root, with .carry/ staged by
# tools/device/pack.sh (nothing is built there). The data of issue 20's
# contention model (docs/cost-model.md "Fitting"):
#   - per graph, `schedrun --profile --contention` (profile version 2: every
#     collective beside each kernel class, docs/gpu.md "Contention") and the
#     same profile without its contention section (version 1);
#   - timing runs (schedrun --mode timing --report, launch graph) of the
#     input order, our schedule planned with the plain profile and with the
#     contention profile, and PyTorch's order where tests/data has it; every
#     plan --no-bucket, so that tools/sgfit can re-simulate the order;
#   - two sets: fit (w2_fsdp2_L2_h1024, gg_fsdp2_L4_h2048, w2_tp2_L2_h1024)
#     and judge (graphgen 8 layers, H=4096, F=14336, S=8192: FSDP over 2 and
#     its TP twin), with manifest.json (contention profiles) and
#     manifest-plain.json (version-1 profiles) for sgfit.
# Output ($OUT, 4 files): results.tar.gz (graphs, profiles, plans, reports,
# manifests), summary.md (the table printed last), log.txt, profiles.txt.
# If `--contention` fails on a graph, a plain profile is measured instead
# and later graphs skip it (their timing runs still come back; the log says
# so).
# A step is skipped, not started, when less time is left than it needs
# (LIMIT seconds in all, default 270; every command's timeout is what is
# left), so results always come back inside the lead's 300 s call.
# dry: the same steps here, without a GPU: CPU backend, tiny graphs, a
# synthetic contention profile instead of --profile (checks the plumbing).
set -u
MODE=${1:-full}
# shellcheck source=tools/device/env.sh
. "$PWD/tools/device/env.sh"
BIN=${BIN_DIR:-$BIN}
G=${GRAPHS_DIR:-$G}
W=${WORK:-/tmp/sg-cont}
LIMIT=${LIMIT:-270}
CONT_OK=1
T0=$(date +%s)
rm -rf "$W"
mkdir -p "$W"
exec > >(tee "$OUT/log.txt") 2>&1
elapsed () { echo $(( $(date +%s) - T0 )); }
section () { echo; echo "=== $* [$(date +%T), $(elapsed) s]"; }
# fits SEC: true when SEC more seconds fit in the limit; tleft: seconds left (>= 10)
fits () { [ $(( $(elapsed) + $1 )) -le "$LIMIT" ]; }
tleft () { local t=$(( LIMIT - $(elapsed) )); echo $(( t > 10 ? t : 10 )); }

# graph set profile-iters contention-budget timing-iters timing-warmup need-seconds
if [ "$MODE" = dry ]; then
  BACKEND=cpu
  PLAN_G="w2_tiny_fsdp2_L2_h256:fit:2:0:2:1:5 gg_tiny_tp2:judge:2:0:2:1:5 w2_tiny_tp2_L2_h256:fit:2:0:2:1:5"
else
  BACKEND=cuda
  PLAN_G="w2_fsdp2_L2_h1024:fit:10:12:20:3:45 gg_judge_fsdp2_L8_h4096:judge:5:40:5:2:100 \
gg_fsdp2_L4_h2048:fit:10:12:20:3:45 gg_judge_tp2_L8_h4096:judge:5:25:5:2:60 \
w2_tp2_L2_h1024:fit:10:12:20:3:40"
fi

section environment
if [ "$MODE" != dry ]; then
  nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm --format=csv
  nvidia-smi topo -m | head -4
fi
mpirun --version | head -1
nproc; grep -m1 'model name' /proc/cpuinfo
for b in schedrun schedgraph graphgen; do [ -x "$BIN/$b" ] || echo "MISSING $BIN/$b"; done
ldd "$BIN/schedrun" | grep 'not found' && echo "MISSING LIBRARIES"

section graphs
cp "$G"/*.json "$W/" 2>/dev/null
if [ "$MODE" = dry ]; then
  "$BIN/graphgen" --dp 1 --tp 2 -o "$W/gg_tiny_tp2.json"
else
  J="--layers 8 --hidden 4096 --ffn 14336 --heads 32 --seq 8192"
  "$BIN/graphgen" $J --dp 2 -o "$W/gg_judge_fsdp2_L8_h4096.json" --stats
  "$BIN/graphgen" $J --dp 1 --tp 2 -o "$W/gg_judge_tp2_L8_h4096.json" --stats
  [ -f "$W/gg_fsdp2_L4_h2048.json" ] || "$BIN/graphgen" --layers 4 --hidden 2048 --ffn 5632 \
    --heads 16 --seq 2048 --dp 2 -o "$W/gg_fsdp2_L4_h2048.json"
fi
# PyTorch's order as a graph whose input order it is (same names)
for po in "$ROOT"/tests/data/*.peer_order_plain.json; do
  g=$(basename "$po" .peer_order_plain.json)
  [ -f "$W/$g.json" ] && python3 - "$W/$g.json" "$po" "$W/$g.peer.json" <<'EOF'
import json, sys
g = json.load(open(sys.argv[1])); order = json.load(open(sys.argv[2]))
by = {n["name"]: n for n in g["nodes"]}
g["nodes"] = [by[n] for n in order]
json.dump(g, open(sys.argv[3], "w"))
EOF
done

# profile GRAPH ITERS BUDGET: $W/p.GRAPH.json (version 2) and p1.GRAPH.json (version 1)
profile () {
  local g=$1 it=$2 budget=$3
  if [ "$MODE" = dry ]; then  # a synthetic contention section on the measured reference profile
    python3 - "$ROOT/tests/estimate/data/h200x2.profile.json" "$W/p.$g.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1])); p["version"] = 2; p["contention"] = []
for kind in ("all_gather", "reduce_scatter"):
    for kernel, rep, reps in (("gemm", 100, [150, 200, 175, 100, 100]), ("map", 10, [10] * 10)):
        for order, lag in (("comm_first", 0), ("kernel_first", rep / 2)):
            p["contention"].append({"kind": kind, "bytes": 1 << 20, "group_size": 2,
                "transport": "nccl", "kernel": kernel, "kernel_key": kernel, "order": order,
                "runs_per_rep": 1, "comm_solo_us": 300 if kernel == "gemm" else 30,
                "rep_solo_us": rep, "lag_us": lag, "comm_us": 500 if kernel == "gemm" else 60,
                "reps_us": reps})
json.dump(p, open(sys.argv[2], "w"), indent=1)
EOF
  else
    # --timeout: a hung key or pair ends the job after 30 s (the watchdog)
    if [ "$CONT_OK" = 1 ]; then
      timeout "$(tleft)" "${MPI[@]}" "$BIN/schedrun" --profile "$W/$g.json" -o "$W/p.$g.json" \
        --iters "$it" --warmup 2 --timeout 30 --contention --contention-budget "$budget" \
        --contention-iters 3
      echo "profile $g rc=$?"
    fi
    if [ ! -f "$W/p.$g.json" ]; then  # the timing runs still need a profile
      CONT_OK=0                       # and later graphs skip --contention
      echo "profile $g: no contention profile; measuring a plain one"
      timeout "$(tleft)" "${MPI[@]}" "$BIN/schedrun" --profile "$W/$g.json" -o "$W/p.$g.json" \
        --iters "$it" --warmup 2 --timeout 30
      echo "plain profile $g rc=$?"
    fi
  fi
  python3 - "$W/p.$g.json" "$W/p1.$g.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1])); p.pop("contention", None); p["version"] = 1
json.dump(p, open(sys.argv[2], "w"), indent=1)
EOF
}

# timed GRAPH VARIANT GRAPHFILE FLAGS PROFILE ITERS WARMUP
timed () {
  local g=$1 v=$2 gf=$3 flags=$4 prof=$5 it=$6 wu=$7
  local p=$W/t.$g.$v.plan.json
  "$BIN/schedgraph" -q --no-bucket $flags --profile "$prof" "$gf" -o "$p" \
    --report "$W/t.$g.$v.sgreport.json" || { echo "schedgraph failed: $g $v"; return; }
  timeout "$(tleft)" "${MPI[@]}" "$BIN/schedrun" --backend "$BACKEND" --mode timing --iters "$it" \
    --warmup "$wu" --timeout 120 "$p" --report "$W/t.$g.$v.report.json" | tail -1
  echo "timing $g $v rc=${PIPESTATUS[0]}"
}

for spec in $PLAN_G; do
  IFS=: read -r g set pit budget tit twu need <<< "$spec"
  if ! fits "$need"; then
    section "$g: skipped ($(elapsed) s of $LIMIT used, needs about $need)"
    continue
  fi
  section "$g ($set set): profile with contention"
  profile "$g" "$pit" "$budget"
  [ -f "$W/p.$g.json" ] || { echo "no profile for $g"; continue; }
  section "$g: timing (input, sched with the plain profile, sched with contention, peer)"
  timed "$g" input "$W/$g.json" --no-reorder "$W/p.$g.json" "$tit" "$twu"
  timed "$g" sched_plain "$W/$g.json" "" "$W/p1.$g.json" "$tit" "$twu"
  timed "$g" sched_cont "$W/$g.json" "" "$W/p.$g.json" "$tit" "$twu"
  [ -f "$W/$g.peer.json" ] && timed "$g" peer "$W/$g.peer.json" --no-reorder "$W/p.$g.json" \
    "$tit" "$twu"
  echo "$g $set" >> "$W/sets.txt"
done

section "manifests and summary"
python3 - "$W" <<'EOF' | tee "$OUT/summary.md"
import json, os, sys
w = sys.argv[1]
sets = [l.split() for l in open(os.path.join(w, "sets.txt"))] if os.path.exists(os.path.join(w, "sets.txt")) else []
for name, prof in (("manifest.json", "p"), ("manifest-plain.json", "p1")):
    runs = []
    for g, s in sets:
        for v in ("input", "sched_plain", "sched_cont", "peer"):
            if not os.path.exists(os.path.join(w, f"t.{g}.{v}.report.json")):
                continue
            runs.append({"name": f"{g} {v}", "graph": f"{g}.peer.json" if v == "peer" else f"{g}.json",
                         "profile": f"{prof}.{g}.json", "plan": f"t.{g}.{v}.plan.json",
                         "report": f"t.{g}.{v}.report.json", "set": s})
    json.dump({"runs": runs}, open(os.path.join(w, name), "w"), indent=1)
print("| graph | set | pairs | order | pred step us | meas step us | pred exposed us | meas exposed us |")
print("|---|---|---:|---|---:|---:|---:|---:|")
for g, s in sets:
    try:
        pairs = len(json.load(open(os.path.join(w, f"p.{g}.json"))).get("contention", [])) // 2
    except Exception:
        pairs = "?"
    for v in ("input", "sched_plain", "sched_cont", "peer"):
        f = os.path.join(w, f"t.{g}.{v}.report.json")
        if not os.path.exists(f):
            continue
        r = json.load(open(f)); m, p = r["measured"], r["predicted"]
        print(f"| {g} | {s} | {pairs} | {v} | {p['step_us']:.0f} | {m['step_us']:.0f} | "
              f"{p['exposed_us']:.0f} | {m['exposed_us']:.0f} |")
EOF
cat "$W"/p.*.json > "$OUT/profiles.txt" 2>/dev/null
tar czf "$OUT/results.tar.gz" -C "$W" .
ls -la "$OUT"
echo "done [$(date +%T), $(elapsed) s]"
