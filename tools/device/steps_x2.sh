#!/bin/bash
# tools/device/steps_x2.sh [full|dry]: run ON THE GPU MACHINE (device tool,
# kind nvidia-h200-x2), from the repo root, with .carry/ staged by
# tools/device/pack.sh (nothing is built there). Issue 19 items 3 and 4:
# whole steps on 2 ranks, and predictions out of sample.
#
#   1. Calibration: one profile (schedrun --profile, --contention on the
#      first graph, the second added through the profile cache) measured on
#      two SMALL graphs only: graphgen L=2 at the judge widths (H=3072,
#      F=8192, 24 heads, S=4096), FSDP over 2 and TP over 2.
#   2. Test graphs, never profiled: graphgen L=6 FSDP and TP at the same
#      widths, and the FSDP and TP steps exported in this call by
#      ../shared/bench/peer_inductor.py (W=2, L=6, same widths) with
#      PyTorch's own order. Per graph, timed (schedrun --mode timing, launch
#      graph): the input order (--no-reorder --no-decompose), our schedule
#      (--no-decompose --no-bucket), our schedule with decomposition
#      (ours_d: --no-bucket), the default pipeline (ours_b: schedule,
#      decomposition, bucketing), PyTorch's order where there is one
#      (--no-reorder --no-decompose), each planned with the calibration
#      profile; and the input order and our schedule planned without a
#      profile (the model alone). ONLY="g1 g2" runs just those test graphs
#      (and exports just those peer_ graphs).
#   3. PyTorch running the exported graphs itself (torch_step.py under
#      torchrun, 2 ranks: eager, the aten graph as traced, in its own
#      pass's order, with its bucketing).
# Output ($OUT): summary.md (predicted vs measured step and exposed per
# run, the error with and without the profile, PyTorch's steps),
# results.tar.gz, log.txt. LIMIT seconds in all (default 420); a graph that
# would not fit is skipped, the summary is always written.
# dry: the same steps here on the CPU backend with tiny graphgen graphs and
# the synthetic profile (no PyTorch part).
set -u
MODE=${1:-full}
# shellcheck source=tools/device/contention-common.sh
. "$PWD/tools/device/contention-common.sh"
W=${WORK:-/tmp/sg-steps}
LIMIT=${LIMIT:-420}
start

if [ "$MODE" = dry ]; then
  BACKEND=cpu
  N="--hidden,256,--ffn,512,--heads,4,--seq,128"
  CAL="cal_fsdp:--layers,1,$N,--dp,2 cal_tp:--layers,1,$N,--dp,1,--tp,2"
  TEST="gg_fsdp:--layers,2,$N,--dp,2:2:1:5 gg_tp:--layers,2,$N,--dp,1,--tp,2:2:1:5"
  PEER=""
else
  BACKEND=cuda
  N="--hidden,3072,--ffn,8192,--heads,24,--seq,4096"
  CAL="cal_fsdp2_L2_h3072:--layers,2,$N,--dp,2 cal_tp2_L2_h3072:--layers,2,$N,--dp,1,--tp,2"
  TEST="gg_fsdp2_L6_h3072:--layers,6,$N,--dp,2:8:2:45 gg_tp2_L6_h3072:--layers,6,$N,--dp,1,--tp,2:8:2:45"
  PEER="peer_fsdp2_L6_h3072:6:3072:8192:24:4096:2:1 peer_tp2_L6_h3072:6:3072:8192:24:4096:1:2"
fi
PY=$ROOT/.carry/bench

environment

section "calibration profile (small graphs only)"
CALP=$W/cal.profile.json
first=1
for spec in $CAL; do
  IFS=: read -r g gen <<< "$spec"
  # shellcheck disable=SC2086
  "$BIN/graphgen" ${gen//,/ } -o "$W/$g.json" --stats | tail -1
  if [ "$MODE" = dry ]; then
    [ "$first" = 1 ] && synthetic_profile "$CALP"
  elif [ "$first" = 1 ]; then
    timeout "$(tleft)" "${MPI[@]}" "$BIN/schedrun" --profile "$W/$g.json" -o "$CALP" \
      --iters 8 --warmup 2 --timeout 30 --contention --contention-budget 15 --contention-iters 3
    echo "profile $g (contention) rc=$?"
  else
    cp "$CALP" "$W/cal.before-$g.json" 2>/dev/null
    timeout "$(tleft)" "${MPI[@]}" "$BIN/schedrun" --profile "$W/$g.json" -o "$CALP" \
      --iters 8 --warmup 2 --timeout 30
    rc=$?
    echo "profile $g (added through the cache) rc=$rc"
    [ $rc -eq 0 ] || cp "$W/cal.before-$g.json" "$CALP" 2>/dev/null
  fi
  first=0
done
if [ ! -s "$CALP" ]; then
  echo "no calibration profile: plain profile of the first graph"
  g=${CAL%%:*}
  timeout "$(tleft)" "${MPI[@]}" "$BIN/schedrun" --profile "$W/$g.json" -o "$CALP" \
    --iters 8 --warmup 2 --timeout 30
fi

# PyTorch's graphs of the same step, exported in this call
if [ -n "$PEER" ] && fits 120; then
  section "export (peer_inductor.py, W=2) and PyTorch's order"
  sel=""
  for c in $PEER; do
    selected "${c%%:*}" && sel="$sel $c"
  done
  PEER=${sel# }
  cases=$(echo "$PEER" | tr ' ' ',')
  # W=2 is peer_inductor.py's world size, for that command only ("$W/peer"
  # expands with this script's work folder)
  W=2 CASES=$cases MODES=plain,bucketed WARM=0 timeout 150 python3 "$PY/peer_inductor.py" "$W/peer" 2>&1 |
    grep -v Warning | tail -4
  for c in $PEER; do
    name=${c%%:*}
    if [ -f "$W/peer/$name.json" ]; then
      cp "$W/peer/$name.json" "$W/$name.json"
      peer_graph "$W/$name.json" "$W/peer/$name.peer_order_plain.json" "$W/$name.peer.json"
      TEST="$TEST $name:-:8:2:50"
    fi
  done
fi

for spec in $TEST; do
  IFS=: read -r g gen tit twu need <<< "$spec"
  selected "$g" || continue
  if ! fits "$need"; then
    section "$g: skipped ($(elapsed) s of $LIMIT used, needs about $need)"
    continue
  fi
  section "$g: timing (planned with the calibration profile, and without one)"
  # shellcheck disable=SC2086
  [ "$gen" = - ] || "$BIN/graphgen" ${gen//,/ } -o "$W/$g.json" --stats | tail -1
  timed "$g" input "$W/$g.json" "--no-reorder --no-decompose" "$CALP" "$tit" "$twu"
  timed "$g" ours "$W/$g.json" --no-decompose "$CALP" "$tit" "$twu"
  timed "$g" ours_d "$W/$g.json" "" "$CALP" "$tit" "$twu"
  BUCKET=1 timed "$g" ours_b "$W/$g.json" "" "$CALP" "$tit" "$twu"
  [ -f "$W/$g.peer.json" ] && timed "$g" peer "$W/$g.peer.json" "--no-reorder --no-decompose" \
    "$CALP" "$tit" "$twu"
  timed "$g" input_np "$W/$g.json" "--no-reorder --no-decompose" - "$tit" "$twu"
  timed "$g" ours_np "$W/$g.json" --no-decompose - "$tit" "$twu"
  echo "$g" >> "$W/graphs.txt"
done

if [ -n "$PEER" ]; then
  for c in $PEER; do
    name=${c%%:*}
    selected "$name" || continue
    if ! fits 60; then section "PyTorch $name: skipped"; continue; fi
    section "PyTorch runs the same aten graph: $name (torch_step.py, 2 ranks)"
    CASE=$c ITERS=10 WARM=3 COMPILE=0 timeout "$(tleft)" torchrun --standalone --nproc_per_node 2 \
      "$PY/torch_step.py" "$W/torch" 2>&1 | grep -v Warning | tail -3
  done
fi

section summary
python3 - "$W" "$CAL" <<'EOF' | tee "$OUT/summary.md"
import glob, json, os, sys
w = sys.argv[1]
gf = os.path.join(w, "graphs.txt")
graphs = [l.strip() for l in open(gf)] if os.path.exists(gf) else []
print("Calibration profile: measured on the L=2 graphs only (" +
      ", ".join(l.split(":")[0] for l in sys.argv[2].split()) +
      "); every graph below is out of sample for it.\n")
print("| graph | order | profile | pred step us | meas step us | step err | pred exposed us | meas exposed us |")
print("|---|---|---|---:|---:|---:|---:|---:|")
errs = {"cal": [], "none": []}
for g in graphs:
    for v in ("input", "ours", "ours_d", "ours_b", "peer", "input_np", "ours_np"):
        f = os.path.join(w, f"t.{g}.{v}.report.json")
        if not os.path.exists(f):
            continue
        r = json.load(open(f))
        m, p = r["measured"], r["predicted"]
        e = 100 * (p["step_us"] / m["step_us"] - 1)
        prof = "none" if v.endswith("_np") else "cal"
        errs[prof].append(abs(e))
        print(f"| {g} | {v.replace('_np', '')} | {prof} | {p['step_us']:.0f} | {m['step_us']:.0f} | {e:+.1f}% | "
              f"{p['exposed_us']:.0f} | {m['exposed_us']:.0f} |")
print()
for k, target in (("cal", 10), ("none", 25)):
    if errs[k]:
        within = sum(1 for e in errs[k] if e <= target)
        print(f"- step error {'with the calibration profile' if k == 'cal' else 'without a profile'}: "
              f"max {max(errs[k]):.1f}%, {within} of {len(errs[k])} within +-{target}%")
print()
rows = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(w, "torch", "torch_step.*.json")))]
if rows:
    print("PyTorch running the same aten graph (torch_step.py, 2 ranks, median step us):\n")
    keys = ("eager", "fx_input", "fx_peer", "fx_peer_b")
    print("| case | " + " | ".join(keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for t in rows:
        print(f"| {t.get('name', t.get('case', '?'))} | " + " | ".join(
            f"{t[k + '_us']:.0f}" if isinstance(t.get(k + "_us"), (int, float)) else "-" for k in keys) + " |")
EOF
cat "$W"/torch/*.json > "$OUT/torch_step.txt" 2>/dev/null
tar czf "$OUT/results.tar.gz" -C "$W" --exclude='peer/*.json.gz' .
ls -la "$OUT"
echo "done [$(date +%T), $(elapsed) s]"
