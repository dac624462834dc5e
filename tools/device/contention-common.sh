# shellcheck shell=bash
# tools/device/contention-common.sh: what contention.sh and
# contention_judge.sh share, sourced from the repo root: tools/device/env.sh
# (MPI, BIN, G, ROOT, OUT), BIN_DIR / GRAPHS_DIR overriding BIN / G (a dry
# run here), and the functions below, which read W (work folder), LIMIT
# (seconds in all), MODE (full or dry) and BACKEND.
# shellcheck source=tools/device/env.sh
. "$PWD/tools/device/env.sh"
BIN=${BIN_DIR:-$BIN}
G=${GRAPHS_DIR:-$G}

# start: the clock (T0), an empty work folder, the log (stdout and stderr
# also to $OUT/log.txt)
start () {
  T0=$(date +%s)
  rm -rf "$W"
  mkdir -p "$W"
  exec > >(tee "$OUT/log.txt") 2>&1
}

# environment: the machine, and the staged binaries the run needs
environment () {
  section environment
  if [ "$MODE" != dry ]; then
    nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm --format=csv
    nvidia-smi topo -m | head -4
  fi
  mpirun --version | head -1
  nproc; grep -m1 'model name' /proc/cpuinfo
  for b in schedrun schedgraph graphgen; do [ -x "$BIN/$b" ] || echo "MISSING $BIN/$b"; done
  ldd "$BIN/schedrun" | grep 'not found' && echo "MISSING LIBRARIES"
}

# elapsed: seconds since T0; section TITLE: a log heading; fits SEC: true
# when SEC more seconds fit in LIMIT; tleft: seconds left (>= 10)
elapsed () { echo $(( $(date +%s) - T0 )); }
section () { echo; echo "=== $* [$(date +%T), $(elapsed) s]"; }
fits () { [ $(( $(elapsed) + $1 )) -le "$LIMIT" ]; }
tleft () { local t=$(( LIMIT - $(elapsed) )); echo $(( t > 10 ? t : 10 )); }
# selected NAME: whether NAME is among the words of ONLY (every name when
# ONLY is empty or unset)
selected () { case " ${ONLY:-$1} " in *" $1 "*) return 0 ;; esac; return 1; }

# synthetic_profile OUT: dry mode's stand-in for a contention profile, a
# synthetic section on the measured reference profile (plumbing only)
synthetic_profile () {
  python3 - "$ROOT/tests/estimate/data/h200x2.profile.json" "$1" <<'PY'
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
PY
}

# profile GRAPH ITERS BUDGET: $W/p.GRAPH.json, schedrun --profile
# --contention of $W/GRAPH.json (dry: synthetic_profile); when that fails,
# a plain profile (the plans still need one) and CONT_OK=0: later graphs
# skip --contention
CONT_OK=1
profile () {
  local g=$1 it=$2 budget=$3
  if [ "$MODE" = dry ]; then
    synthetic_profile "$W/p.$g.json"
    return
  fi
  # --timeout: a hung key or pair ends the job after 30 s (the watchdog)
  if [ "$CONT_OK" = 1 ]; then
    timeout "$(tleft)" "${MPI[@]}" "$BIN/schedrun" --profile "$W/$g.json" -o "$W/p.$g.json" \
      --iters "$it" --warmup 2 --timeout 30 --contention --contention-budget "$budget" \
      --contention-iters 3
    echo "profile $g rc=$?"
  fi
  if [ ! -f "$W/p.$g.json" ]; then
    CONT_OK=0
    echo "profile $g: no contention profile; measuring a plain one"
    timeout "$(tleft)" "${MPI[@]}" "$BIN/schedrun" --profile "$W/$g.json" -o "$W/p.$g.json" \
      --iters "$it" --warmup 2 --timeout 30
    echo "plain profile $g rc=$?"
  fi
}

# graph_file GRAPH GEN: $W/GRAPH.json, the staged graph (GEN "-", else
# tests/data's) or graphgen's (GEN: its arguments, comma-separated)
graph_file () {
  if [ "$2" = - ]; then
    cp "$G/$1.json" "$W/" 2>/dev/null || cp "$ROOT/tests/data/$1.json" "$W/"
  else
    # shellcheck disable=SC2086
    "$BIN/graphgen" ${2//,/ } -o "$W/$1.json" --stats
  fi
}

# peer_graph GRAPH ORDER OUT: PyTorch's order as a graph whose input order
# it is (same names)
peer_graph () {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
g = json.load(open(sys.argv[1])); order = json.load(open(sys.argv[2]))
by = {n["name"]: n for n in g["nodes"]}
g["nodes"] = [by[n] for n in order]
json.dump(g, open(sys.argv[3], "w"))
PY
}

# timed GRAPH ORDER GRAPHFILE FLAGS PROFILE ITERS WARMUP: plans GRAPHFILE
# (--no-bucket FLAGS; BUCKET=1: with bucketing; PROFILE "-": none) into
# $W/t.GRAPH.ORDER.plan.json and times it (report
# $W/t.GRAPH.ORDER.report.json); the graph the plan runs (ring steps of a
# decomposition included), which the sgfit manifests name, goes to
# $W/t.GRAPH.ORDER.graph.json
timed () {
  local g=$1 v=$2 gf=$3 flags=$4 prof=$5 it=$6 wu=$7
  local p=$W/t.$g.$v.plan.json
  [ "${BUCKET:-0}" = 1 ] || flags="--no-bucket $flags"
  [ "$prof" = - ] || flags="$flags --profile $prof"
  # shellcheck disable=SC2086
  "$BIN/schedgraph" -q $flags "$gf" -o "$p" --emit-graph "$W/t.$g.$v.graph.json" \
    --report "$W/t.$g.$v.sgreport.json" || { echo "schedgraph failed: $g $v"; return; }
  timeout "$(tleft)" "${MPI[@]}" "$BIN/schedrun" --backend "$BACKEND" --mode timing --iters "$it" \
    --warmup "$wu" --timeout 120 "$p" --report "$W/t.$g.$v.report.json" | tail -1
  echo "timing $g $v rc=${PIPESTATUS[0]}"
}
