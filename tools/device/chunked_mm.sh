#!/bin/bash
# tools/device/chunked_mm.sh: run ON THE GPU MACHINE (one GPU), from the repo
# root, with .carry/ staged by tools/device/pack.sh (it builds
# tests/cuda/bench_gemm). Issue 13: how efficient k chunks of an M x K x N
# bf16 mm are against one mm (k = 1, 2, 4, 8; chunked along M as
# all_gather -> mm decomposes, along N and K as other layouts need), and how
# much slower one mm gets on fewer SMs (cuBLASLt's SM-count target, the
# plan's sm_count), both as schedrun runs them (cuBLAS under a CUDA graph).
# Results: $OUT/chunked_mm.tsv (every case) and $OUT/chunked_mm.md (the
# table, also printed last). About 30 s on one H200.
set -u
# shellcheck source=tools/device/env.sh
. "$PWD/tools/device/env.sh"
BIN=$BIN/bench_gemm
[ -x "$BIN" ] || { echo "no $BIN: run tools/device/pack.sh first"; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
SMS=$("$BIN" --sm-count) || { echo "no GPU"; exit 1; }
# the targets: every SM, then fewer (what a collective beside the GEMM leaves free)
TARGETS="$SMS,$((SMS - 12)),$((SMS - 20)),$((SMS - 36)),$((SMS / 2))"
TSV=$OUT/chunked_mm.tsv
printf 'shape\tmode\tk\tsms\tus\tefficiency\n' >"$TSV"
for s in "16384 4096 4096" "8192 8192 8192" "4096 8192 8192" "32768 8192 1024" "1024 1024 1024"; do
  # shellcheck disable=SC2086
  timeout 120 "$BIN" $s --chunks 1,2,4,8 --sms "$TARGETS" --reps 10 --samples 15 >>"$TSV" ||
    echo "bench_gemm $s failed (rc $?)"
done
python3 - "$TSV" "$SMS" >"$OUT/chunked_mm.md" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
sms = int(sys.argv[2])
shapes = list(dict.fromkeys(r["shape"] for r in rows))
print("Efficiency of k chunks against one mm (one-mm time / chunked time), bf16:")
print()
print("| M x K x N | one mm us | " + " | ".join(f"{m} k={k}" for m in "mnk" for k in (2, 4, 8)) + " |")
print("|---|---:|" + "---:|" * 9)
for s in shapes:
    e = {(r["mode"], r["k"]): r for r in rows if r["shape"] == s}
    one = e.get(("m", "1"), {}).get("us", "?")
    cells = [e.get((m, str(k)), {}).get("efficiency", "-") for m in "mnk" for k in (2, 4, 8)]
    print(f"| {s} | {one} | " + " | ".join(cells) + " |")
print()
print(f"One mm on an SM-count target (cuBLASLt), slowdown against cublasGemmEx on all {sms} SMs,")
print("and the exponent x of (sms_all / sms)^x it implies (gemm_sm_exponent):")
print()
targets = sorted({int(r["sms"]) for r in rows if r["mode"] == "sms"}, reverse=True)
print("| M x K x N | " + " | ".join(f"{t} SMs" for t in targets) + " |")
print("|---|" + "---:|" * len(targets))
import math
for s in shapes:
    e = {int(r["sms"]): float(r["efficiency"]) for r in rows if r["shape"] == s and r["mode"] == "sms"}
    cells = []
    for t in targets:
        if t not in e or e[t] <= 0:
            cells.append("-")
            continue
        slow = 1.0 / e[t]
        x = math.log(slow) / math.log(sms / t) if t < sms and slow > 0 else float("nan")
        cells.append(f"{slow:.3f}x" + ("" if t >= sms else f" (x={x:.2f})"))
    print(f"| {s} | " + " | ".join(cells) + " |")
PY
cat "$OUT/chunked_mm.md"
