#!/bin/bash
# tools/device/run.sh [smoke|full]: run ON THE GPU MACHINE (device tool), from
# the repo root, with .carry/ staged by tools/device/pack.sh. One call does
# everything: environment check, the CUDA unit tests, exact runs (CPU backend
# vs CUDA backend on the w2_tiny graphs, input order and schedule+bucket),
# the profile (schedrun --profile, one file for every graph: the second
# graph reuses the first's keys through the cache), and timing runs of the
# input order, our schedule and schedule+bucketing, planned with and without
# the profile, for w2_fsdp2_L2_h1024, w2_tp2_L2_h1024 and a graphgen graph.
# Results: $OUT/summary.md (the table of bench/RESULTS.md), $OUT/log.txt,
# $OUT/results.tar.gz (every report, profile, plan and dump comparison).
# smoke: the same with fewer iterations and the graphgen graph left out.
# trace: profiles, then the profile plans timed with --trace, launch graph
# and eager (measured timelines for diagnosis).
set -u
MODE=${1:-full}
# shellcheck source=tools/device/env.sh
. "$PWD/tools/device/env.sh"
W=/tmp/sg-work
rm -rf "$W"
mkdir -p "$W"
exec > >(tee "$OUT/log.txt") 2>&1
section () { echo; echo "=== $* [$(date +%T)]"; }
ITERS=30; WARM=5; PITERS=20
GRAPHS="w2_fsdp2_L2_h1024 w2_tp2_L2_h1024 gg_fsdp2_L4_h2048"
if [ "$MODE" = smoke ]; then ITERS=10; WARM=3; PITERS=10; GRAPHS="w2_fsdp2_L2_h1024 w2_tp2_L2_h1024"; fi

section environment
nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm --format=csv
nvidia-smi topo -m | head -4
mpirun --version | head -1
nproc; grep -m1 'model name' /proc/cpuinfo
ldd "$BIN/schedrun" | grep 'not found' && echo "MISSING LIBRARIES"

section "unit tests (suite cuda)"
timeout 300 "$BIN/test_cuda_kernels"; echo "test_cuda_kernels rc=$?"

# plan NAME GRAPH VARIANT [PROFILE]: input | sched | schedb
plan () {
  local flags=""
  case $3 in input) flags="--no-reorder --no-bucket";; sched) flags="--no-bucket";; esac
  [ -n "${4:-}" ] && flags="$flags --profile $4"
  "$BIN/schedgraph" -q $flags "$2" -o "$1" --report "${1%.plan.json}.sgreport.json"
}

if [ "$MODE" = trace ]; then  # measured timelines of the profile plans, both launches
  section trace
  for g in $GRAPHS; do
    timeout 300 "${MPI[@]}" "$BIN/schedrun" --profile "$G/$g.json" -o "$W/profile.$g.json" \
      --iters $PITERS --timeout 120 | tail -1
    for v in input sched schedb; do
      p=$W/t.$g.profile.$v.plan.json
      plan "$p" "$G/$g.json" $v "$W/profile.$g.json" || continue
      for l in graph eager; do
        sfx=""; [ $l = eager ] && sfx=.eager
        timeout 240 "${MPI[@]}" "$BIN/schedrun" --backend cuda --mode timing --iters $ITERS \
          --warmup $WARM --timeout 200 --launch $l "$p" --trace "$W/t.$g.profile.$v.$l.trace.json" \
          --report "$W/t.$g.profile.$v$sfx.report.json" | tail -1
      done
    done
  done
  tar czf "$OUT/results.tar.gz" -C "$W" --exclude='*.bin' .
  python3 "$ROOT/tools/device/summarize.py" "$W" "$GRAPHS" | tee "$OUT/summary.md"
  exit 0
fi

if [ "$MODE" = quick ]; then  # kernels, one exact pair, one profile and timing run
  section quick
  p=$W/q.plan.json
  "$BIN/schedgraph" -q "$G/w2_tiny_tp2_L2_h256.json" -o "$p"
  timeout 60 "${MPI[@]}" "$BIN/schedrun" --backend cpu "$p" --dump-outputs "$W/q.cpu" >/dev/null
  timeout 60 "${MPI[@]}" "$BIN/schedrun" --backend cuda "$p" --dump-outputs "$W/q.cuda"
  python3 "$ROOT/tools/device/compare_dumps.py" "$W/q.cpu" "$W/q.cuda" --tol 5e-2 | tail -1
  timeout 120 "${MPI[@]}" "$BIN/schedrun" --profile "$G/w2_tp2_L2_h1024.json" -o "$W/qp.json"
  "$BIN/schedgraph" -q --profile "$W/qp.json" "$G/w2_tp2_L2_h1024.json" -o "$W/qt.plan.json"
  timeout 60 "${MPI[@]}" "$BIN/schedrun" --backend cuda --mode timing "$W/qt.plan.json" \
    --report "$W/qt.report.json"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['measured'], r['predicted'])" "$W/qt.report.json"
  cp "$W/qp.json" "$OUT/"
  exit 0
fi

section "exact: CPU backend vs CUDA backend (relative L2 error per output)"
# bf16 graphs: 5e-2 (each op rounds to bf16, 2^-8, at a different point of
# its accumulation on each backend; a forward+backward compounds it);
# fp32 graphs: 1e-3 (no TF32: every GEMM accumulates in fp32).
for gt in w2_tiny_fsdp2_L2_h256:5e-2 w2_tiny_tp2_L2_h256:5e-2 gg_tiny_f32_fsdp2:1e-3 \
          gg_tiny_f32_tp2:1e-3; do
  g=${gt%%:*}; tol=${gt##*:}
  for v in input schedb; do
    p=$W/exact.$g.$v.plan.json
    plan "$p" "$G/$g.json" $v || { echo "schedgraph failed on $g"; continue; }
    timeout 120 "${MPI[@]}" "$BIN/schedrun" --backend cpu "$p" --dump-outputs "$W/exact.$g.$v.cpu" >/dev/null
    # 2 steps: the outputs are step 2's, a replay of the captured CUDA graph
    timeout 120 "${MPI[@]}" "$BIN/schedrun" --backend cuda --timeout 60 --iters 2 "$p" \
      --dump-outputs "$W/exact.$g.$v.cuda" --report "$W/exact.$g.$v.cuda.report.json"
    echo "-- $g $v (launch graph)"
    python3 "$ROOT/tools/device/compare_dumps.py" "$W/exact.$g.$v.cpu" "$W/exact.$g.$v.cuda" \
      --tol "$tol" > "$W/exact.$g.$v.compare.txt"; echo "compare rc=$?"
    tail -1 "$W/exact.$g.$v.compare.txt"
    [ $v = input ] || continue
    timeout 120 "${MPI[@]}" "$BIN/schedrun" --backend cuda --timeout 60 --launch eager "$p" \
      --dump-outputs "$W/exact.$g.$v.eager.cuda" >/dev/null
    echo "-- $g $v (launch eager)"
    python3 "$ROOT/tools/device/compare_dumps.py" "$W/exact.$g.$v.cpu" "$W/exact.$g.$v.eager.cuda" \
      --tol "$tol" | tail -1
  done
done

section "faults: an injected error, then a hung rank under --timeout"
p=$W/exact.w2_tiny_tp2_L2_h256.input.plan.json
timeout 60 "${MPI[@]}" "$BIN/schedrun" --backend cuda --fail-at-ins 40 --fail-rank 1 "$p" 2>&1 \
  | grep -v '^---\|^ \|^$\|Primary job\|mpirun\|Exit code\|Process name\|the job to be'
echo "injected failure rc=${PIPESTATUS[0]} (nonzero expected)"
t0=$(date +%s)
timeout 60 "${MPI[@]}" "$BIN/schedrun" --backend cuda --fail-hang --fail-at-ins 40 --fail-rank 1 \
  --timeout 10 "$p" 2>&1 \
  | grep -v '^---\|^ \|^$\|Primary job\|mpirun\|Exit code\|Process name\|the job to be'
echo "hung rank rc=${PIPESTATUS[0]} after $(( $(date +%s) - t0 )) s (nonzero, about 10 s expected)"

section "profile (one file per graph; a second run measures only new keys)"
# One file per graph: the profile format keys "ops" entries by target and
# output bytes only, so another graph's entry of the same size but another
# shape/dtype/broadcast would stand in for this graph's node.
for g in $GRAPHS; do
  timeout 300 "${MPI[@]}" "$BIN/schedrun" --profile "$G/$g.json" -o "$W/profile.$g.json" \
    --iters $PITERS --timeout 120; echo "profile $g rc=$?"
done
g1=${GRAPHS%% *}
timeout 120 "${MPI[@]}" "$BIN/schedrun" --profile "$G/$g1.json" -o "$W/profile.$g1.json" \
  --iters $PITERS
echo "profile again (cache) rc=$?"

section "timing: input order, schedule, schedule+bucketing; model vs profile"
for g in $GRAPHS; do
  for pf in model profile; do
    for v in input sched schedb; do
      p=$W/t.$g.$pf.$v.plan.json
      if [ $pf = profile ]; then plan "$p" "$G/$g.json" $v "$W/profile.$g.json"
      else plan "$p" "$G/$g.json" $v; fi \
        || { echo "schedgraph failed: $g $pf $v"; continue; }
      timeout 240 "${MPI[@]}" "$BIN/schedrun" --backend cuda --mode timing --iters $ITERS \
        --warmup $WARM --timeout 200 "$p" --report "$W/t.$g.$pf.$v.report.json" \
        --trace "$W/t.$g.$pf.$v.trace.json" | tail -1
      [ $pf = profile ] || continue  # the host's launch rate: the same plans issued eagerly
      timeout 240 "${MPI[@]}" "$BIN/schedrun" --backend cuda --mode timing --iters $ITERS \
        --warmup $WARM --timeout 200 --launch eager "$p" \
        --report "$W/t.$g.$pf.$v.eager.report.json" | tail -1
    done
  done
done

section "diagnostics: per-kernel GPU times vs the profile's estimates (input order, schedule)"
for g in $GRAPHS; do
  for v in input sched; do
    timeout 120 "${MPI[@]}" -x SG_CUDA_KERNEL_TIMES="$W/ktimes.$g.$v.tsv" "$BIN/schedrun" \
      --backend cuda --mode timing --iters 10 --warmup 3 "$W/t.$g.profile.$v.plan.json" | tail -1
  done
  "$BIN/schedgraph" --costs --profile "$W/profile.$g.json" "$G/$g.json" > "$W/costs.$g.txt" 2>&1
done

section summary
{ python3 "$ROOT/tools/device/summarize.py" "$W" "$GRAPHS"
  python3 "$ROOT/tools/device/kernel_report.py" "$W" "$GRAPHS"; } | tee "$OUT/summary.md"
cat "$W"/profile.*.json > "$OUT/profiles.txt" 2>/dev/null
tar czf "$OUT/results.tar.gz" -C "$W" --exclude='*.bin' .
echo "done [$(date +%T)]"
