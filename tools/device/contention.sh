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
# shellcheck source=tools/device/contention-common.sh
. "$PWD/tools/device/contention-common.sh"
W=${WORK:-/tmp/sg-cont}
LIMIT=${LIMIT:-270}
start

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

environment

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
  [ -f "$W/$g.json" ] && peer_graph "$W/$g.json" "$po" "$W/$g.peer.json"
done

# profile_both GRAPH ITERS BUDGET: $W/p.GRAPH.json (version 2) and p1.GRAPH.json (version 1)
profile_both () {
  profile "$@"
  local g=$1
  python3 - "$W/p.$g.json" "$W/p1.$g.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1])); p.pop("contention", None); p["version"] = 1
json.dump(p, open(sys.argv[2], "w"), indent=1)
EOF
}

for spec in $PLAN_G; do
  IFS=: read -r g set pit budget tit twu need <<< "$spec"
  if ! fits "$need"; then
    section "$g: skipped ($(elapsed) s of $LIMIT used, needs about $need)"
    continue
  fi
  section "$g ($set set): profile with contention"
  profile_both "$g" "$pit" "$budget"
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
            runs.append({"name": f"{g} {v}", "graph": f"t.{g}.{v}.graph.json",
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
