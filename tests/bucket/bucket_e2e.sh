#!/bin/sh
# bucket_e2e.sh: bucketed and unbucketed plans compute identical outputs.
#
#   bucket_e2e.sh SCHEDGRAPH SCHEDRUN SGEVAL GRAPHGEN BUCKET_BENCH DATADIR
#
# For w2_tiny_fsdp2_L2_h256 (all_gather and reduce_scatter buckets, 2 ranks)
# and a graphgen HSDP graph (FSDP 2 x 2 replicas: all_gather, reduce_scatter
# and all_reduce buckets, 4 ranks): the plan of the schedule without
# bucketing (--no-bucket), with it (default), with --bucket-mode per-layer
# and with --bucket-lowering grouped run on the CPU backend under mpirun;
# the bucket report (bucket_bench --json, the same pipeline and defaults as
# schedgraph) must show at least one bucket, the plans must hold zero-copy
# buckets (copies lowered to no kernel: parameter shards seeded into the
# gather's input, reduce_scatter and all_reduce results as views, the
# all_reduce of a reduce_scatter bucket's results as a view of them) next
# to the copies that stay (kernels naming why), the grouped plans coalesced
# collectives and no copy at all, and every output of every checked rank
# must be bitwise identical between the plans. A wider HSDP graph (H =
# 1024), where the default plan lowers some buckets grouped and others
# flat, is checked on its last rank.
set -u
SCHEDGRAPH=$1 SCHEDRUN=$2 SGEVAL=$3 GRAPHGEN=$4 BENCH=$5 DATA=$6
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
MPI_ASAN="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
T=$(mktemp -d "${TMPDIR:-/tmp}/sg-bucket-e2e.XXXXXX")
trap 'rm -rf "$T"' EXIT
FAILS=0
fail () { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }

run () { # NP PLAN OUTDIR RANK
  ASAN_OPTIONS=$MPI_ASAN timeout 300 mpirun -np "$1" --oversubscribe "$SCHEDRUN" "$2" \
    --dump-rank "$4" --dump-outputs "$3" >"$T/out" 2>&1 || { cat "$T/out"; return 1; }
}

check () { # GRAPH NP NAME KINDS...
  g=$1 np=$2 name=$3; shift 3
  "$SCHEDGRAPH" "$g" --no-bucket -q -o "$T/$name.a.json" || { fail "$name: schedgraph --no-bucket"; return; }
  "$SCHEDGRAPH" "$g" -q -o "$T/$name.c.json" || { fail "$name: schedgraph"; return; }
  "$SCHEDGRAPH" "$g" -q --bucket-mode per-layer -o "$T/$name.l.json" \
    || { fail "$name: schedgraph --bucket-mode per-layer"; return; }
  "$SCHEDGRAPH" "$g" -q --bucket-lowering grouped -o "$T/$name.g.json" \
    || { fail "$name: schedgraph --bucket-lowering grouped"; return; }
  "$BENCH" --json "$g" >"$T/$name.r.json" || { fail "$name: bucket_bench"; return; }
  "$BENCH" --json --mode per-layer "$g" >"$T/$name.rl.json" || { fail "$name: bucket_bench"; return; }
  grep -q '"schedgraph.bucket_pack"' "$T/$name.a.json" && fail "$name: --no-bucket plan has buckets"
  for v in c l; do
    grep -q '"members":\["' "$T/$name.$v.json" || fail "$name.$v: no bucket in the plan"
    grep -q '"schedgraph_copy":"rank_major' "$T/$name.$v.json" \
      || fail "$name.$v: no all_gather unpack kept as a copy"
  done
  # grouped: coalesced collectives over the members' own tensors, no copy
  grep -q '"op":"all_gather_coalesced"' "$T/$name.g.json" || fail "$name.g: no coalesced all_gather"
  grep -q '"schedgraph.bucket_' "$T/$name.g.json" && fail "$name.g: a bucket copy in the grouped plan"
  # zero-copy: an elided pack and elided unpacks in the per-layer plan
  grep -q '"pack":[[:space:]]*"elided"' "$T/$name.rl.json" || fail "$name: no elided pack"
  grep -qE '"unpacks_elided":[[:space:]]*[1-9]' "$T/$name.rl.json" || fail "$name: no elided unpack"
  # The kinds that formed depend on the schedule; at least one must have.
  kinds=""
  for kind in "$@"; do
    grep -q "\"kind\":[[:space:]]*\"$kind\"" "$T/$name.r.json" && kinds="$kinds $kind"
  done
  [ -n "$kinds" ] || fail "$name: no bucket formed"
  echo "---- $name: buckets of:$kinds"
  for rank in 0 $((np - 1)); do
    run "$np" "$T/$name.a.json" "$T/$name.a.$rank" "$rank" || { fail "$name: schedrun (unbucketed)"; continue; }
    for v in c l g; do
      run "$np" "$T/$name.$v.json" "$T/$name.$v.$rank" "$rank" \
        || { fail "$name: schedrun ($v)"; continue; }
      if out=$("$SGEVAL" --compare --bitwise "$T/$name.a.$rank" "$T/$name.$v.$rank"); then
        echo "ok   $name rank $rank bucketed ($v) vs unbucketed: $out"
      else
        fail "$name rank $rank ($v): $out"
      fi
    done
  done
}

check "$DATA/w2_tiny_fsdp2_L2_h256.json" 2 w2_tiny_fsdp2 all_gather reduce_scatter
"$GRAPHGEN" --layers 1 --hidden 64 --ffn 128 --heads 4 --seq 32 --dp 2 --world 4 \
  -o "$T/hsdp.json" || fail "graphgen"
[ -f "$T/hsdp.json" ] && check "$T/hsdp.json" 4 hsdp_dp2x2 all_gather reduce_scatter all_reduce

# Mixed lowerings in one plan: the default plan of a wider HSDP step groups
# an all_gather bucket and keeps the all_reduce buckets flat.
"$GRAPHGEN" --layers 1 --hidden 1024 --ffn 2048 --heads 4 --seq 32 --dp 2 --world 4 \
  -o "$T/hsdp_wide.json" || fail "graphgen (wide)"
if [ -f "$T/hsdp_wide.json" ]; then
  "$SCHEDGRAPH" "$T/hsdp_wide.json" --no-bucket -q -o "$T/w.a.json" || fail "wide: --no-bucket"
  "$SCHEDGRAPH" "$T/hsdp_wide.json" -q -o "$T/w.c.json" || fail "wide: schedgraph"
  grep -q '_coalesced"' "$T/w.c.json" || fail "wide: no grouped bucket in the default plan"
  grep -q '"schedgraph.bucket_pack"' "$T/w.c.json" || fail "wide: no flat bucket in the default plan"
  if run 4 "$T/w.a.json" "$T/w.a.3" 3 && run 4 "$T/w.c.json" "$T/w.c.3" 3; then
    if out=$("$SGEVAL" --compare --bitwise "$T/w.a.3" "$T/w.c.3"); then
      echo "ok   hsdp_wide rank 3 mixed flat and grouped vs unbucketed: $out"
    else
      fail "hsdp_wide rank 3: $out"
    fi
  else
    fail "wide: schedrun"
  fi
fi

echo "bucket e2e: $FAILS failure(s)"
[ "$FAILS" -eq 0 ]
