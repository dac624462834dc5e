#!/bin/bash
# tools/device/bucket.sh: run ON THE GPU MACHINE (device tool, kind
# nvidia-h200-x2), from the repo root, with .carry/ staged by
# tools/device/pack.sh. Issue 14's checks on real GPUs:
#  1. exact: the zero-copy bucketed plans (auto and --bucket-mode per-layer)
#     of the tiny FSDP graphs, CUDA backend against the CPU backend, and
#     the CUDA outputs of each bucketed plan against the unbucketed plan's
#     (bitwise: bucketing moves no arithmetic);
#  2. timing: for w2_fsdp2_L2_h1024 and gg_fsdp2_L4_h2048, the plans
#     without bucketing, auto and per-layer (model costs), measured step
#     against the predicted step.
# Results: $OUT/bucket.md (the tables for bench/RESULTS.md),
# $OUT/bucket-log.txt.
# About 6 minutes (3 plans x 2 graphs x 30 iterations, 6 exact runs).
set -u
# shellcheck source=tools/device/env.sh
. "$PWD/tools/device/env.sh"
W=/tmp/sg-bucket
rm -rf "$W"
mkdir -p "$W"
exec > >(tee "$OUT/bucket-log.txt") 2>&1
ITERS=${ITERS:-30}; WARM=5

# plan FILE GRAPH VARIANT: none | auto | layer
plan () {
  local flags=""
  case $3 in none) flags="--no-bucket";; layer) flags="--bucket-mode per-layer";; esac
  # shellcheck disable=SC2086
  "$BIN/schedgraph" -q $flags "$2" -o "$1" --report "${1%.plan.json}.sgreport.json"
}

echo "=== exact [$(date +%T)]"
{
  echo "| graph | plan | CUDA vs CPU (rel. L2, tol 5e-2) | CUDA bucketed vs CUDA unbucketed |"
  echo "|---|---|---|---|"
} > "$W/exact.md"
for g in w2_tiny_fsdp2_L2_h256 gg_tiny_f32_fsdp2; do
  for v in none auto layer; do
    p=$W/e.$g.$v.plan.json
    plan "$p" "$G/$g.json" $v || { echo "schedgraph failed: $g $v"; continue; }
    timeout 120 "${MPI[@]}" "$BIN/schedrun" --backend cpu "$p" --dump-outputs "$W/e.$g.$v.cpu" \
      >/dev/null
    timeout 120 "${MPI[@]}" "$BIN/schedrun" --backend cuda --timeout 60 --iters 2 "$p" \
      --dump-outputs "$W/e.$g.$v.cuda" >/dev/null
    c=$(python3 "$ROOT/tools/device/compare_dumps.py" "$W/e.$g.$v.cpu" "$W/e.$g.$v.cuda" \
          --tol 5e-2 | tail -1)
    b="-"
    [ $v = none ] || b=$("$BIN/sgeval" --compare --bitwise "$W/e.$g.none.cuda" "$W/e.$g.$v.cuda")
    echo "| $g | $v | $c | $b |" >> "$W/exact.md"
  done
done
cat "$W/exact.md"

echo "=== timing [$(date +%T)]"
for g in w2_fsdp2_L2_h1024 gg_fsdp2_L4_h2048; do
  for v in none auto layer; do
    p=$W/t.$g.$v.plan.json
    plan "$p" "$G/$g.json" $v || { echo "schedgraph failed: $g $v"; continue; }
    timeout 240 "${MPI[@]}" "$BIN/schedrun" --backend cuda --mode timing --iters "$ITERS" \
      --warmup $WARM --timeout 200 "$p" --report "$W/t.$g.$v.report.json" | tail -1
  done
done
python3 - "$W" > "$W/timing.md" <<'EOF'
import json, os, sys
w = sys.argv[1]
print("| graph | plan | collectives | pred step us | meas step us | step err | pred exposed us | meas exposed us |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for g in ("w2_fsdp2_L2_h1024", "gg_fsdp2_L4_h2048"):
    for v in ("none", "auto", "layer"):
        f = os.path.join(w, f"t.{g}.{v}.report.json")
        if not os.path.exists(f):
            print(f"| {g} | {v} | run failed | | | | | |")
            continue
        r = json.load(open(f))
        m, p = r["measured"], r["predicted"]
        n = sum(1 for _ in r.get("collectives", []))
        e = 100.0 * (p["step_us"] - m["step_us"]) / m["step_us"] if m["step_us"] > 0 else 0.0
        print(f"| {g} | {v} | {n} | {p['step_us']:.1f} | {m['step_us']:.1f} | {e:+.1f}% | "
              f"{p['exposed_us']:.1f} | {m['exposed_us']:.1f} |")
EOF
cat "$W/timing.md"
cat "$W/exact.md" "$W/timing.md" > "$OUT/bucket.md"
echo "done [$(date +%T)]"
