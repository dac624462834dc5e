#!/bin/sh
# e2e.sh: the runtime's semantics proof and reliability tests under mpirun.
#
#   e2e.sh MODE SCHEDRUN SGEVAL MKPLAN SCHEDGRAPH GRAPHGEN DATADIR [MKRING]
#   MODE: samples | graphgen | np8 | ring | ranks | ranks-cuda | faults | faults-cuda | dev8 (slow, not in meson)
#
# samples/graphgen/np8: for each graph, the plans of the input order
# (schedgraph --no-reorder --no-bucket), of the schedule (--no-bucket), of
# schedule+bucketing (default) and, where a peer order exists, of that
# order (mkplan) run under `mpirun -np WORLD schedrun --dump-outputs`; each
# rank-0 dump (and one last-rank dump) must agree with tools/sgeval's
# single-process evaluation: bitwise, else within 1e-5 relative (reported).
# Until schedgraph -o exists in a build, the input-order plan comes from
# mkplan (codegen directly) and the scheduled plans are reported as skipped.
# ring (issue 13): at 2, 4 and 8 ranks, collective_permute ring
# formulations (tests/runtime/mkring.c) against all_gather -> mm (bitwise)
# and mm -> reduce_scatter (within 1e-5), each also against sgeval.
# ranks: the report's per-rank times (by_rank) exist, are per rank and
# agree with the max over ranks (issue 20); ranks-cuda: the same on the
# CUDA backend (skips, exit 77, without a GPU).
# faults: the fault matrix (issue 18; each case bounded in time, one line
# naming the rank and the cause, non-zero exit, no output left): a rank
# killed with SIGKILL mid-step, a hung rank, a failing rank, different
# plans, a truncated or edited plan, a plan for another world size, an
# output directory that cannot be written, ranks started with different
# options, an arena larger than memory; then corrupt and missing plans, an
# op the backend cannot run, NaN outputs, bad options, timing mode, --trace.
# faults-cuda: the same matrix on the CUDA backend plus the arena out of
# device memory (skips, exit 77, without a GPU).
set -u
MODE=$1 SCHEDRUN=$2 SGEVAL=$3 MKPLAN=$4 SCHEDGRAPH=$5 GRAPHGEN=$6 DATA=$7 MKRING=${8:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# OpenMPI's own allocations at exit are unsymbolizable leaks for LSan in a
# sanitizer build; leak checking stays on for sgeval, mkplan and the unit
# tests (ASan and UBSan checks stay on everywhere).
MPI_ASAN="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
T=$(mktemp -d "${TMPDIR:-/tmp}/sg-rt-e2e.XXXXXX")
trap 'rm -rf "$T"' EXIT
FAILS=0
fail () { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
note () { echo "---- $*"; }

# SG_MPIRUN_ARGS: extra mpirun flags (tools/device/faults.sh: -x for CUDA).
mpirun_ () { # NP args... (bounded: a hang is a failure, not a stuck CI)
  np=$1; shift
  # shellcheck disable=SC2086
  ASAN_OPTIONS=${RUN_ASAN:-$MPI_ASAN} timeout 300 mpirun ${SG_MPIRUN_ARGS:-} -np "$np" \
    --oversubscribe "$SCHEDRUN" "$@"
}

# Agreement of a dump with the reference: bitwise, else rtol 1e-5.
agree () { # RUN_DIR REF_DIR LABEL
  if out=$("$SGEVAL" --compare --bitwise "$1" "$2"); then
    echo "ok   $3: $out"
  elif out2=$("$SGEVAL" --compare --rtol 1e-5 "$1" "$2"); then
    echo "ok   $3 (not bitwise, within 1e-5): $out2"
  else
    fail "$3: $out2"
  fi
}

have_schedgraph_o () {
  "$SCHEDGRAPH" "$1" --no-reorder --no-bucket -q -o "$T/probe.json" >/dev/null 2>"$T/probe.err"
  rc=$?
  if [ $rc -eq 2 ] && grep -q "not available" "$T/probe.err"; then return 1; fi
  return 0
}

# Runs every plan of one graph and compares with sgeval.
check_graph () { # GRAPH NP NAME [PEER_ORDER]
  g=$1 np=$2 name=$3 peer=${4:-}
  note "$name ($np ranks)"
  last=$((np - 1))
  "$SGEVAL" "$g" --dump-outputs "$T/$name.ref0" || { fail "$name: sgeval"; return; }
  "$SGEVAL" "$g" --rank $last --dump-outputs "$T/$name.ref$last" || { fail "$name: sgeval"; return; }
  plans=""
  if have_schedgraph_o "$g"; then
    for v in a:"--no-reorder --no-bucket" b:"--no-bucket" c:""; do
      tag=${v%%:*} opts=${v#*:}
      # shellcheck disable=SC2086
      if "$SCHEDGRAPH" "$g" $opts -q -o "$T/$name.$tag.json"; then
        plans="$plans $tag"
      else
        fail "$name: schedgraph $opts -o"
      fi
    done
  else
    echo "skip $name: schedgraph -o is not in this build; input order via mkplan only"
    "$MKPLAN" "$g" "$T/$name.a.json" && plans="a" || fail "$name: mkplan"
  fi
  if [ -n "$peer" ]; then
    "$MKPLAN" "$g" "$T/$name.p.json" "$peer" && plans="$plans p" || fail "$name: mkplan order"
  fi
  # a random legal order: memory plan and collective order change, outputs may not
  "$MKPLAN" "$g" "$T/$name.s.json" --shuffle 7 && plans="$plans s" || fail "$name: mkplan shuffle"
  for tag in $plans; do
    if mpirun_ "$np" "$T/$name.$tag.json" --dump-outputs "$T/$name.$tag.run" \
         --report "$T/$name.$tag.report.json" >"$T/out" 2>&1; then
      agree "$T/$name.$tag.run" "$T/$name.ref0" "$name plan $tag rank 0 vs sgeval"
      grep -q '"clock":	"cpu-wall"' "$T/$name.$tag.report.json" || fail "$name $tag: report clock"
    else
      cat "$T/out"; fail "$name plan $tag: schedrun exit"
    fi
  done
  # The last rank too, on schedgraph's full plan (else the shuffled one),
  # and every plan against the first.
  set -- $plans
  first=$1
  lastplan=s
  case " $plans " in *" c "*) lastplan=c ;; esac
  if mpirun_ "$np" "$T/$name.$lastplan.json" --dump-rank $last \
       --dump-outputs "$T/$name.$lastplan.run$last" >"$T/out" 2>&1; then
    agree "$T/$name.$lastplan.run$last" "$T/$name.ref$last" "$name plan $lastplan rank $last vs sgeval"
  else
    cat "$T/out"; fail "$name plan $lastplan rank $last: schedrun exit"
  fi
  for tag in $plans; do
    [ "$tag" = "$first" ] && continue
    [ -d "$T/$name.$tag.run" ] && agree "$T/$name.$first.run" "$T/$name.$tag.run" "$name plan $first vs plan $tag"
  done
}

gen () { # NAME ARGS...
  n=$1; shift
  "$GRAPHGEN" --layers 1 --hidden 64 --ffn 128 --heads 4 --seq 32 "$@" -o "$T/$n.json" ||
    fail "graphgen $*"
}

expect_fail () { # LABEL PATTERN NP ARGS... : exit != 0 and PATTERN in the output
  label=$1 pat=$2; shift 2
  mpirun_ "$@" >"$T/out" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    fail "$label: exit 0"
  elif [ $rc -eq 124 ]; then
    fail "$label: hung (timeout)"
  elif ! grep -q -- "$pat" "$T/out"; then
    cat "$T/out"; fail "$label: no message matching '$pat'"
  else
    echo "ok   $label: exit $rc: $(grep -m1 -- "$pat" "$T/out")"
  fi
}

# The fault matrix (issue 18). `outs NAME` names this case's outputs: $O
# and $OUTS (--report, --trace, --dump-outputs under $O, which must not
# exist afterwards). `fault LABEL PATTERN SECONDS CMD...` runs CMD (an
# mpirun) and requires: every rank ended within SECONDS (mpirun returns
# only when all have; no schedrun of this case is left), a non-zero exit,
# a line matching PATTERN (the rank and the cause), no output written.
outs () {
  O=$T/fault.$1
  mkdir -p "$O"
  OUTS="--report $O/report.json --trace $O/trace.json --dump-outputs $O/dump"
}
fault () {
  label=$1 pat=$2 bound=$3; shift 3
  t0=$(date +%s%N)
  "$@" >"$T/out" 2>&1
  rc=$?
  secs=$((($(date +%s%N) - t0) / 1000000000))
  left=$(pgrep -f -- "$O/report.json" | wc -l)
  if [ $rc -eq 0 ]; then
    fail "$label: exit 0"
  elif [ $rc -eq 124 ] || [ $secs -gt "$bound" ]; then
    cat "$T/out"; fail "$label: took ${secs} s (bound $bound s, exit $rc)"
  elif [ "$left" -ne 0 ]; then
    fail "$label: $left schedrun process(es) of this case still running"
  elif ! grep -q -- "$pat" "$T/out"; then
    cat "$T/out"; fail "$label: no line matching '$pat'"
  elif [ -e "$O/report.json" ] || [ -e "$O/trace.json" ] || [ -e "$O/dump" ]; then
    ls -lR "$O"; fail "$label: partial outputs left"
  else
    echo "ok   $label: exit $rc in ${secs} s: $(grep -m1 -- "$pat" "$T/out")"
  fi
}
# MPMD: rank 0 runs "schedrun A", rank 1 "schedrun B" (word lists).
mpmd () { # "ARGS OF RANK 0" "ARGS OF RANK 1"
  # shellcheck disable=SC2086
  ASAN_OPTIONS=$MPI_ASAN timeout 300 mpirun ${SG_MPIRUN_ARGS:-} -np 1 "$SCHEDRUN" $1 : \
    -np 1 "$SCHEDRUN" $2
}
# Every case under the watchdog: a case that hangs ends at its --timeout
# and fails on the message.
WD=20 BOUND=35

# fault_matrix BACKEND_ARGS HANG_PATTERN: the cases every backend must pass.
fault_matrix () {
  B=$1 hang_pat=$2
  outs kill
  # shellcheck disable=SC2086
  fault "$B: rank 1 killed with SIGKILL mid-step" "rank 1 with PID .* exited on signal 9" $BOUND \
    mpirun_ 2 "$T/a.json" $B --timeout $WD --fail-at-ins 40 --fail-kill $OUTS
  outs hang
  # shellcheck disable=SC2086
  fault "$B: rank 1 hangs mid-step" "$hang_pat" 20 \
    mpirun_ 2 "$T/a.json" $B --timeout 5 --fail-at-ins 40 --fail-hang $OUTS
  outs fail
  # shellcheck disable=SC2086
  fault "$B: rank 0 fails mid-step (rank 1 blocks in a collective)" \
    "rank 0: injected failure at instruction 60" $BOUND \
    mpirun_ 2 "$T/a.json" $B --timeout $WD --fail-at-ins 60 --fail-rank 0 $OUTS
  outs plans
  fault "$B: ranks given different plans" "rank 1 loaded plan hash .*, rank 0 loaded" $BOUND \
    mpmd "$T/a.json $B --timeout $WD $OUTS" "$T/p.json $B --timeout $WD $OUTS"
  [ "$(grep -c 'plan hash' "$T/out")" -eq 2 ] || fail "$B: different plans: not both ranks said so"
  outs trunc
  # shellcheck disable=SC2086
  fault "$B: a plan truncated after validation" "rank 0: plan .*trunc.json: truncated" $BOUND \
    mpirun_ 2 "$T/trunc.json" $B --timeout $WD $OUTS
  outs edit
  # shellcheck disable=SC2086
  fault "$B: a plan edited after validation" "rank 0: .*content hash mismatch" $BOUND \
    mpirun_ 2 "$T/tampered.json" $B --timeout $WD $OUTS
  outs world
  # shellcheck disable=SC2086
  fault "$B: a plan for another world size" \
    "rank 2: the plan is for world size 2 but mpirun started 3 ranks" $BOUND \
    mpirun_ 3 "$T/a.json" $B --timeout $WD $OUTS
  outs unwritable
  # shellcheck disable=SC2086
  fault "$B: an output directory that cannot be written" \
    "rank 0: --report $T/a.json/report.json: cannot write in $T/a.json: Not a directory" \
    $BOUND mpirun_ 2 "$T/a.json" $B --timeout $WD --report "$T/a.json/report.json" \
    --dump-outputs "$O/dump"
  outs opts
  fault "$B: ranks started with different --mode" \
    "rank 1 was started with --mode timing, rank 0 with --mode exact" $BOUND \
    mpmd "$T/a.json $B --timeout $WD $OUTS" "$T/a.json $B --timeout $WD $OUTS --mode timing"
  outs optsi
  fault "$B: ranks started with different --iters" \
    "rank 1 was started with --iters 3, rank 0 with --iters 1" $BOUND \
    mpmd "$T/a.json $B --timeout $WD $OUTS" "$T/a.json $B --timeout $WD $OUTS --iters 3"
  outs optss
  fault "$B: ranks started with different --seed" \
    "rank 1 was started with --seed 7, rank 0 with --seed 0" $BOUND \
    mpmd "$T/a.json $B --timeout $WD $OUTS" "$T/a.json $B --timeout $WD $OUTS --seed 7"
  outs optst
  fault "$B: only rank 0 asked for a trace" \
    "rank 1 was started without --trace, rank 0 with --trace" $BOUND \
    mpmd "$T/a.json $B --timeout $WD $OUTS" \
    "$T/a.json $B --timeout $WD --report $O/report.json --dump-outputs $O/dump"
  outs optsw
  fault "$B: ranks started with different --timeout" \
    "rank 1 was started with --timeout 30, rank 0 with --timeout 20" $BOUND \
    mpmd "$T/a.json $B --timeout $WD $OUTS" "$T/a.json $B --timeout 30 $OUTS"
}

fault_plans () { # the plans of the fault matrix
  G=$DATA/w2_tiny_tp2_L2_h256.json
  "$MKPLAN" "$G" "$T/a.json" || fail mkplan
  "$MKPLAN" "$G" "$T/p.json" "$DATA/w2_tiny_tp2_L2_h256.peer_order_plain.json" || fail mkplan
  head -c 20000 "$T/a.json" >"$T/trunc.json"
  sed '0,/"arena_bytes": *[0-9]*/s//"arena_bytes": 999/' "$T/a.json" >"$T/tampered.json"
  cmp -s "$T/a.json" "$T/tampered.json" && fail "tamper: sed changed nothing"
  "$MKPLAN" "$DATA/../runtime/data/huge_arena.json" "$T/huge.json" || fail "mkplan huge arena"
}

ranks_check () { # BACKEND_ARGS
  B=$1
  # The report's by_rank (docs/runtime.md "Report"): every rank's times in
  # the median step, per rank, and consistent with the max over ranks.
  G=$DATA/w2_tiny_tp2_L2_h256.json
  "$MKPLAN" "$G" "$T/a.json" || fail mkplan
  for run in "3 1" "1 0"; do
    # shellcheck disable=SC2086
    set -- $run
    # shellcheck disable=SC2086
    if mpirun_ 2 "$T/a.json" $B --mode timing --iters "$1" --warmup "$2" --report "$T/r$1.json" \
         >"$T/out" 2>&1 && python3 - "$T/r$1.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
w, m, b = r["world_size"], r["measured"], r["by_rank"]
near = lambda a, x, tol=0.0025: abs(a - x) <= tol
assert 0 <= b["iteration"] < r["iters"], b
for k in ("step_us", "compute_us"):
    assert len(b[k]) == w and min(b[k]) > 0, (k, b[k])
# the median step is the one whose slowest rank is the median (odd iters);
# cuda timing mode: the step with the events, as by_rank times it
step = m.get("instrumented_step_us", m["step_us"])
assert near(max(b["step_us"]), step), (b["step_us"], step)
rows = r["collectives"]
assert len(rows) == m["collectives"] > 1
for row in rows:
    x = row["by_rank"]
    assert sorted(x) == ["compute_before_us", "end_us", "exposed_us", "launch_us"], x
    for k in x:
        assert len(x[k]) == w, (row["name"], k)
    for q in range(w):
        assert 0 <= x["launch_us"][q] <= x["end_us"][q] <= b["step_us"][q] + 0.002, (row, q)
        assert 0 <= x["compute_before_us"][q] <= min(x["launch_us"][q], b["compute_us"][q]) + 0.002
        assert x["exposed_us"][q] >= 0
for q in range(w):  # busy time before a launch grows with the launch
    by_launch = sorted(rows, key=lambda row: row["by_rank"]["launch_us"][q])
    busy = [row["by_rank"]["compute_before_us"][q] for row in by_launch]
    assert all(busy[i] <= busy[i + 1] + 0.002 for i in range(len(busy) - 1)), (q, busy)
if r["iters"] == 1:  # one step: the max over ranks is the report's number
    assert near(max(b["compute_us"]), m["compute_us"])
    total = [sum(row["by_rank"]["exposed_us"][q] for row in rows) for q in range(w)]
    assert near(max(total), m["exposed_us"], 0.001 * len(rows) + 0.002), (total, m)
    for row in rows:
        x = row["by_rank"]
        assert near(max(e - l for e, l in zip(x["end_us"], x["launch_us"])), row["measured_us"],
                    0.004), row
        assert near(max(x["exposed_us"]), row["exposed_us"]), row
print("%d ranks x %d collectives, median step %d of %d" % (w, len(rows), b["iteration"],
                                                            r["iters"]))
PY
    then
      echo "ok   $B: by_rank, --iters $1: consistent with the max over ranks"
    else
      cat "$T/out"; fail "$B: by_rank, --iters $1"
    fi
  done
  # exact mode keeps them too
  # shellcheck disable=SC2086
  if mpirun_ 2 "$T/a.json" $B --report "$T/rx.json" >"$T/out" 2>&1 &&
     python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert len(r["by_rank"]["step_us"]) == 2 and all(len(c["by_rank"]["launch_us"]) == 2 for c in r["collectives"])' "$T/rx.json"; then
    echo "ok   $B: by_rank in exact mode"
  else
    cat "$T/out"; fail "$B: by_rank in exact mode"
  fi
}

case $MODE in
samples)
  for n in w2_tiny_fsdp2_L2_h256 w2_tiny_tp2_L2_h256; do
    check_graph "$DATA/$n.json" 2 "$n" "$DATA/$n.peer_order_plain.json"
  done
  ;;
graphgen)
  gen fsdp --dp 2 && check_graph "$T/fsdp.json" 2 fsdp
  gen tpsp --dp 1 --tp 2 && check_graph "$T/tpsp.json" 2 tp-sp
  gen tpar --dp 1 --tp 2 --tp-mode allreduce && check_graph "$T/tpar.json" 2 tp-allreduce
  gen hsdp --dp 2 --world 4 && check_graph "$T/hsdp.json" 4 hsdp-replicas
  gen f32 --dp 2 --dtype float32 && check_graph "$T/f32.json" 2 fsdp-float32
  # all_to_all, all_reduce max/avg, broadcast from rank 1, reduce_scatter of
  # a transposed input; then what each collective promises across ranks
  check_graph "$DATA/../runtime/data/collectives.json" 2 collectives
  mpirun_ 2 "$T/collectives.a.json" --dump-rank 1 --dump-outputs "$T/col1" >/dev/null 2>&1 ||
    fail "collectives: rank 1 dump"
  for i in 0 1 2; do
    cmp -s "$T/collectives.a.run/$i.bin" "$T/col1/$i.bin" ||
      fail "collectives: output $i (all_reduce/broadcast) differs between ranks"
  done
  cmp -s "$T/collectives.a.run/3.bin" "$T/col1/3.bin" &&
    fail "collectives: reduce_scatter gave both ranks the same shard"
  echo "ok   collectives: all_reduce and broadcast outputs equal on both ranks, shards differ"
  ;;
np8)
  # issue 8: 8 ranks, two process groups (dp 2 x tp 4), oversubscribed
  gen d2t4 --dp 2 --tp 4 && check_graph "$T/d2t4.json" 8 dp2xtp4
  gen d2t4ar --dp 2 --tp 4 --tp-mode allreduce && check_graph "$T/d2t4ar.json" 8 dp2xtp4-allreduce
  gen fsdp8 --dp 8 && check_graph "$T/fsdp8.json" 8 fsdp8
  ;;
ring)
  # world:tp:dtype; 8 ranks: two instances of a tp group of 4. The
  # references (all_gather, reduce_scatter) are sgeval's evaluations.
  for v in 2:2:float32 4:4:bfloat16 8:4:float32; do
    np=${v%%:*} rest=${v#*:} tp=${rest%%:*} dt=${rest#*:}
    d="$T/ring$np" last=$((np - 1))
    mkdir -p "$d" && "$MKRING" "$d" "$np" "$tp" "$dt" || { fail "mkring $v"; continue; }
    for gname in ag_ring rs_ring rs_direct part; do
      check_graph "$d/$gname.json" "$np" "ring$np-$gname"
    done
    for r in ag rs rs_direct; do
      ref=${r%_direct}
      for rank in 0 $last; do
        [ "$r" = "$ref" ] || break
        "$SGEVAL" "$d/${r}_ref.json" --rank $rank --dump-outputs "$d/${r}_ref.$rank" ||
          fail "sgeval ${r}_ref"
      done
      for tag in a b c s; do
        run="$T/ring$np-${r}_ring.$tag.run"
        [ "$r" = "$ref" ] || run="$T/ring$np-$r.$tag.run"
        [ -d "$run" ] || continue
        if [ $r = ag ]; then
          if out=$("$SGEVAL" --compare --bitwise "$run" "$d/ag_ref.0"); then
            echo "ok   ring$np ($dt): all_gather->mm as $((tp - 1)) permutes, plan $tag, bitwise: $out"
          else
            fail "ring$np ($dt) plan $tag: all_gather->mm ring not bitwise equal: $out"
          fi
        else
          agree "$run" "$d/rs_ref.0" "ring$np: mm->reduce_scatter as $((tp - 1)) permutes ($r), plan $tag"
        fi
      done
    done
    if out=$("$SGEVAL" --compare --bitwise "$T/ring$np-ag_ring.c.run$last" "$d/ag_ref.$last"); then
      echo "ok   ring$np: rank $last's all_gather->mm ring bitwise: $out"
    else
      fail "ring$np: rank $last's all_gather->mm ring: $out"
    fi
  done
  ;;
dev8)
  # Not registered with meson (about 5 minutes on 2 cores): the PyTorch-
  # exported 2-D graph (FSDP 2 x TP 4, hidden 1024) at 8 ranks, input order
  # and schedule+bucketing against sgeval.
  G=$DATA/dev_fsdp2_tp4_L2_h1024.json
  "$SGEVAL" "$G" --dump-outputs "$T/ref" || fail "sgeval"
  for v in "a:--no-reorder --no-bucket" "c:"; do
    tag=${v%%:*} opts=${v#*:}
    # shellcheck disable=SC2086
    "$SCHEDGRAPH" "$G" $opts -q -o "$T/$tag.json" || { fail "schedgraph $opts"; continue; }
    if mpirun_ 8 "$T/$tag.json" --dump-outputs "$T/$tag.run" >"$T/out" 2>&1; then
      agree "$T/$tag.run" "$T/ref" "dev_fsdp2_tp4_L2_h1024 plan $tag (8 ranks) vs sgeval"
    else
      cat "$T/out"; fail "plan $tag: schedrun exit"
    fi
  done
  ;;
ranks)
  ranks_check "--backend cpu"
  ;;
ranks-cuda)
  # the same on the CUDA backend (tools/device/skew.sh); 77 without a GPU
  if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "skip: no GPU here"; exit 77
  fi
  ranks_check "--backend cuda"
  ;;
faults)
  fault_plans
  fault_matrix "--backend cpu" "rank 1: --timeout 5 s expired .*at instruction 40"
  outs arena
  # the allocation of 2 PiB fails: ASan must return NULL as libc does
  RUN_ASAN=$MPI_ASAN:allocator_may_return_null=1
  # shellcheck disable=SC2086
  fault "cpu: an arena larger than memory" "rank 1: cannot allocate the arena" $BOUND \
    mpirun_ 2 "$T/huge.json" --timeout $WD $OUTS
  RUN_ASAN=
  # outputs compared with the plan and each other as files, not path texts
  cp "$T/a.json" "$T/a.copy.json"
  expect_fail "--report is the plan under another spelling" \
    "--report would overwrite the plan" 2 "$T/a.json" --report "$T/./a.json"
  echo old >"$T/r2.json" && ln -sf r2.json "$T/r2-link.json"
  expect_fail "--trace is the report through a symbolic link" \
    "--trace would overwrite --report" 2 "$T/a.json" --report "$T/r2.json" --trace "$T/r2-link.json"
  mkdir -p "$T/dumpdir" && cp "$T/a.json" "$T/dumpdir/outputs.json"
  expect_fail "--dump-outputs would overwrite the plan" \
    "--dump-outputs .* would overwrite the plan" 2 "$T/dumpdir/outputs.json" \
    --dump-outputs "$T/dumpdir"
  cmp -s "$T/a.json" "$T/a.copy.json" && cmp -s "$T/a.json" "$T/dumpdir/outputs.json" ||
    fail "a refused run changed the plan"
  cp "$G" "$T/g.json"
  if mpirun_ 1 --profile "$T/g.json" -o "$T/./g.json" >"$T/out" 2>&1; then
    fail "--profile -o the graph: exit 0"
  elif grep -q "no CUDA backend" "$T/out"; then
    echo "skip --profile -o the graph: no CUDA in this build"
  elif grep -q -- "-o would overwrite the graph" "$T/out" && cmp -s "$G" "$T/g.json"; then
    echo "ok   --profile -o the graph: $(grep -m1 -- '-o would overwrite' "$T/out")"
  else
    cat "$T/out"; fail "--profile -o the graph"
  fi
  printf 'not a plan\n' >"$T/junk.json"
  expect_fail "corrupt plan" "rank 0:" 2 "$T/junk.json"
  expect_fail "missing plan file" "rank 0:" 2 "$T/none.json"
  expect_fail "injected failure at instruction 40" "injected failure" 2 "$T/a.json" \
    --fail-at-ins 40
  "$MKPLAN" "$DATA/../runtime/data/unsupported_op.json" "$T/u.json" 2>"$T/mk.err" ||
    { cat "$T/mk.err"; fail "mkplan unsupported"; }
  expect_fail "an op the CPU backend cannot run" "cumsum_1" 2 "$T/u.json"
  "$MKPLAN" "$DATA/../runtime/data/uneven_all_to_all.json" "$T/uneven.json" ||
    fail "mkplan uneven all_to_all"
  expect_fail "all_to_all with uneven splits" "node 'a2a'.*equal splits" 2 "$T/uneven.json"
  if "$SGEVAL" "$DATA/../runtime/data/uneven_all_to_all.json" >"$T/out" 2>&1; then
    fail "sgeval ran an uneven all_to_all"
  else
    echo "ok   sgeval refuses it too: $(head -1 "$T/out")"
  fi
  "$MKPLAN" "$DATA/../runtime/data/nan_output.json" "$T/nan.json" || fail "mkplan nan"
  if mpirun_ 2 "$T/nan.json" --report "$T/nan.report.json" >"$T/out" 2>&1 &&
     grep -q "output 0 (r) holds [1-9][0-9]* NaN values" "$T/out" &&
     ! grep -q '"nan_count":	0' "$T/nan.report.json"; then
    echo "ok   NaN outputs counted and warned about: $(grep -m1 'NaN' "$T/out")"
  else
    cat "$T/out"; fail "NaN outputs not reported"
  fi
  expect_fail "bad --mode" "mode" 2 "$T/a.json" --mode fast
  expect_fail "bad --launch" "launch must be graph or eager, not 'later'" 2 "$T/a.json" \
    --launch later
  expect_fail "--launch graph on the CPU backend" "launch graph needs --backend cuda" 2 \
    "$T/a.json" --launch graph
  if mpirun_ 2 "$T/a.json" --backend cuda >"$T/out" 2>&1; then
    echo "skip --backend cuda ran (a CUDA build on a GPU machine)"
  elif grep -q "not built in" "$T/out"; then
    echo "ok   --backend cuda without CUDA: $(grep -m1 'not built in' "$T/out")"
  else
    echo "ok   --backend cuda failed with its own message: $(head -1 "$T/out")"
  fi
  # the comparison can fail: another seed gives other outputs
  "$SGEVAL" "$G" --dump-outputs "$T/ref" || fail "sgeval"
  mpirun_ 2 "$T/a.json" --seed 1 --dump-outputs "$T/seed1" >/dev/null 2>&1 || fail "seed 1 run"
  if "$SGEVAL" --compare --rtol 1e-5 "$T/seed1" "$T/ref" >"$T/out"; then
    fail "outputs of seed 1 compared equal to seed 0"
  else
    echo "ok   a different seed is detected: $(head -1 "$T/out")"
  fi
  # timing mode: several iterations, a report with per-collective rows;
  # stdout: measured hidden/partial/exposed beside the plan's prediction
  # (schedgraph's plan has one, mkplan's none)
  "$SCHEDGRAPH" "$G" -q -o "$T/s.json" || fail "schedgraph -o"
  if mpirun_ 2 "$T/s.json" --mode timing --iters 3 --warmup 1 --report "$T/r.json" >"$T/out" 2>&1 &&
     grep -q '"mode":	"timing"' "$T/r.json" && grep -q '"measured_us"' "$T/r.json" &&
     grep -q '"iters":	3' "$T/r.json" && grep -q '"launch":	"eager"' "$T/r.json" &&
     grep -q '^  measured:  [0-9]* hidden, [0-9]* partial, [0-9]* exposed$' "$T/out" &&
     grep -q '^  predicted: [0-9]* hidden, [0-9]* partial, [0-9]* exposed; step' "$T/out"; then
    echo "ok   timing mode report, measured and predicted counts on stdout"
  else
    cat "$T/out"; fail "timing mode report"
  fi
  # --version and --help (issue 18: both were missing or incomplete)
  # (OpenMPI's singleton allocations: no leak check, as under mpirun_)
  if ASAN_OPTIONS=$MPI_ASAN "$SCHEDRUN" --version >"$T/out" 2>&1 &&
     grep -q '^schedrun [0-9]' "$T/out" &&
     ASAN_OPTIONS=$MPI_ASAN "$SCHEDRUN" --help >"$T/out" 2>&1 &&
     grep -q -- '--profile GRAPH.json' "$T/out" &&
     grep -q -- '-o PROFILE.json' "$T/out" && grep -q '^Exit status: 0 success' "$T/out"; then
    echo "ok   --version, and --help lists --profile, -o and the exit status"
  else
    cat "$T/out"; fail "--version / --help"
  fi
  # plans of copies of one graph under other names: the same hash, so the
  # ranks run them together (the hash leaves the file name out)
  cp "$G" "$T/copy-of-graph.json"
  "$MKPLAN" "$T/copy-of-graph.json" "$T/a-copy.json" || fail "mkplan copy"
  if cmp -s "$T/a.json" "$T/a-copy.json"; then
    fail "the plan of a copy under another name is byte-identical (no graph line?)"
  elif mpmd "$T/a.json --timeout $WD" "$T/a-copy.json --timeout $WD" >"$T/out" 2>&1; then
    echo "ok   ranks given plans of copies under other names run together"
  else
    cat "$T/out"; fail "plans of copies under other names"
  fi
  # --trace: the median step's timeline, both ranks, every collective on each
  if mpirun_ 2 "$T/a.json" --mode timing --iters 3 --warmup 1 --trace "$T/t.json" >"$T/out" 2>&1 &&
     python3 - "$T/t.json" "$T/a.json" <<'PY'
import json, sys
t, plan = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ev = [e for e in t["traceEvents"] if e["ph"] == "X"]
n_coll = sum(1 for i in plan["ins"] if i["kind"] == "collective")
n_kern = sum(1 for i in plan["ins"] if i["kind"] == "kernel")
for r in (0, 1):
    mine = [e for e in ev if e["pid"] == r]
    assert sum(e["cat"] == "comm" for e in mine) == n_coll, "collectives of rank %d" % r
    assert sum(e["cat"] == "compute" for e in mine) == n_kern, "kernels of rank %d" % r
    assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in mine)
    assert max(e["ts"] + e["dur"] for e in mine) <= t["metadata"]["step_us"] * 1.001 + 1
PY
  then
    echo "ok   --trace: every kernel and collective of both ranks"
  else
    cat "$T/out"; fail "--trace"
  fi
  ;;
faults-cuda)
  # The fault matrix on the CUDA backend, plus the arena out of device
  # memory: runs where a GPU and a CUDA build exist (tools/device/faults.sh),
  # skips (77) elsewhere.
  if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "skip: no GPU here"; exit 77
  fi
  fault_plans
  if ! mpirun_ 2 "$T/a.json" --backend cuda >"$T/out" 2>&1 && grep -q "not built in" "$T/out"; then
    echo "skip: this schedrun has no CUDA backend"; exit 77
  fi
  # the hung rank's peers: NCCL waits end at the step budget (watchdog)
  fault_matrix "--backend cuda" "rank [01]: .*\(--timeout\|watchdog\)"
  outs oom
  # shellcheck disable=SC2086
  fault "cuda: out of device memory for the arena" \
    "rank [01]: cuda backend setup (rank [01], device [0-9]*): out of device memory" $BOUND \
    mpirun_ 2 "$T/huge.json" --backend cuda --timeout $WD $OUTS
  ;;
*)
  echo "unknown mode $MODE"; exit 2 ;;
esac
echo "e2e $MODE: $FAILS failure(s)"
[ $FAILS -eq 0 ]
