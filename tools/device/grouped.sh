#!/bin/bash
# tools/device/grouped.sh: run ON THE GPU MACHINE (device tool, kind
# nvidia-h200-x2), from the repo root, with .carry/ staged by
# tools/device/pack.sh. Grouped buckets (one coalesced collective: one NCCL
# group of the members' own calls, docs/bucketing.md "Grouped buckets") on
# real GPUs, and the data to calibrate their cost (issue 19's run):
#  1. exact: plans with --bucket-lowering grouped and flat of the tiny FSDP
#     graphs, CUDA backend against the CPU backend (rel. L2), and the CUDA
#     outputs against the unbucketed plan's (bitwise: a group moves the
#     same bytes); --iters 3, so the dumped step replays the CUDA graph that
#     captured the ncclGroupStart / ncclGroupEnd of step 1;
#  2. timing: gg_fsdp2_L4_h2048 planned --no-bucket, flat, grouped and auto
#     (model costs), measured step against the predicted step;
#  3. calibration: tools/device/grouped_collectives.py under torchrun (when
#     PyTorch is there): n separate calls, one NCCL group of them and one
#     call over their concatenation, and the cluster's coalesced_member_us
#     fitted from them (docs/cost-model.md "Coalesced collectives").
# Results: $OUT/grouped.md (tables for bench/RESULTS.md),
# $OUT/grouped_collectives.json, $OUT/grouped-log.txt. About 8 minutes.
# DRY=1 runs part 1 on the CPU backend only (no GPU: a check of the script).
set -u
# shellcheck source=tools/device/env.sh
. "$PWD/tools/device/env.sh"
W=/tmp/sg-grouped
rm -rf "$W"
mkdir -p "$W"
exec > >(tee "$OUT/grouped-log.txt") 2>&1
ITERS=${ITERS:-30}; WARM=5

# plan FILE GRAPH VARIANT: none | flat | grouped | auto
plan () {
  local flags=""
  case $3 in none) flags="--no-bucket";; flat|grouped) flags="--bucket-lowering $3";; esac
  # shellcheck disable=SC2086
  "$BIN/schedgraph" -q $flags "$2" -o "$1" --report "${1%.plan.json}.sgreport.json"
}

echo "=== exact [$(date +%T)]"
{
  echo "| graph | plan | coalesced calls | CUDA vs CPU (rel. L2, tol 5e-2) | CUDA vs CUDA unbucketed |"
  echo "|---|---|---:|---|---|"
} > "$W/exact.md"
for g in w2_tiny_fsdp2_L2_h256 gg_tiny_f32_fsdp2; do
  for v in none flat grouped; do
    p=$W/e.$g.$v.plan.json
    plan "$p" "$G/$g.json" $v || { echo "schedgraph failed: $g $v"; continue; }
    n=$(grep -c '"op":"[a-z_]*_coalesced"' "$p")
    timeout 120 "${MPI[@]}" "$BIN/schedrun" --backend cpu "$p" --dump-outputs "$W/e.$g.$v.cpu" \
      >/dev/null
    if [ "${DRY:-0}" = 1 ]; then
      b="-"
      [ $v = none ] || b=$("$BIN/sgeval" --compare --bitwise "$W/e.$g.none.cpu" "$W/e.$g.$v.cpu")
      echo "| $g | $v | $n | (dry: CPU only) | $b |" >> "$W/exact.md"
      continue
    fi
    timeout 120 "${MPI[@]}" "$BIN/schedrun" --backend cuda --timeout 60 --iters 3 "$p" \
      --dump-outputs "$W/e.$g.$v.cuda" >/dev/null
    c=$(python3 "$ROOT/tools/device/compare_dumps.py" "$W/e.$g.$v.cpu" "$W/e.$g.$v.cuda" \
          --tol 5e-2 | tail -1)
    b="-"
    [ $v = none ] || b=$("$BIN/sgeval" --compare --bitwise "$W/e.$g.none.cuda" "$W/e.$g.$v.cuda")
    echo "| $g | $v | $n | $c | $b |" >> "$W/exact.md"
  done
done
cat "$W/exact.md"
cp "$W/exact.md" "$OUT/grouped.md"
[ "${DRY:-0}" = 1 ] && { echo "dry run: done [$(date +%T)]"; exit 0; }

echo "=== timing [$(date +%T)]"
g=gg_fsdp2_L4_h2048
for v in none flat grouped auto; do
  p=$W/t.$g.$v.plan.json
  plan "$p" "$G/$g.json" $v || { echo "schedgraph failed: $g $v"; continue; }
  timeout 240 "${MPI[@]}" "$BIN/schedrun" --backend cuda --mode timing --iters "$ITERS" \
    --warmup $WARM --timeout 200 "$p" --report "$W/t.$g.$v.report.json" | tail -1
done
python3 - "$W" "$g" > "$W/timing.md" <<'EOF'
import json, os, sys
w, g = sys.argv[1], sys.argv[2]
print("| graph | plan | collectives | grouped | pred step us | meas step us | step err | pred exposed us | meas exposed us |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for v in ("none", "flat", "grouped", "auto"):
    f = os.path.join(w, f"t.{g}.{v}.report.json")
    if not os.path.exists(f):
        print(f"| {g} | {v} | run failed | | | | | | |")
        continue
    r = json.load(open(f))
    m, p = r["measured"], r["predicted"]
    rows = r.get("collectives", [])
    ng = sum(1 for c in rows if c.get("kind", "").endswith("_coalesced"))
    e = 100.0 * (p["step_us"] - m["step_us"]) / m["step_us"] if m["step_us"] > 0 else 0.0
    print(f"| {g} | {v} | {len(rows)} | {ng} | {p['step_us']:.1f} | {m['step_us']:.1f} | "
          f"{e:+.1f}% | {p['exposed_us']:.1f} | {m['exposed_us']:.1f} |")
EOF
cat "$W/timing.md"
cat "$W/timing.md" >> "$OUT/grouped.md"

echo "=== calibration [$(date +%T)]"
if python3 -c "import torch" 2>/dev/null; then
  timeout 600 torchrun --standalone --nproc_per_node=2 "$ROOT/tools/device/grouped_collectives.py" \
    "$OUT" | tail -40 | tee "$W/calib.md"
  cat "$W/calib.md" >> "$OUT/grouped.md"
else
  echo "no PyTorch here: the calibration (grouped_collectives.py) needs it" | tee -a "$OUT/grouped.md"
fi
echo "done [$(date +%T)]"
