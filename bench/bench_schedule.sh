#!/usr/bin/env bash
# bench_schedule.sh: quality and speed of the scheduler (schedule/, issue 4).
#
#   bench/bench_schedule.sh BUILD_DIR [quality|speed|all] [SIZES...]
#
# quality: every sample graph in tests/data (input order, PyTorch Inductor's
#   order NAME.peer_order_plain.json, ours; one cost model for all three) and
#   graphgen graphs of 8 to 80 layers (input vs ours: no peer order exists for
#   them without PyTorch), with our step over the lower bound (all its terms,
#   docs/scheduler.md "Lower bound"). Prints markdown tables.
# speed: graphgen graphs of SIZES nodes (default 10000 100000 1000000):
#   load + estimate + simulate(input) + schedule + simulate + report through
#   tests/schedule/sched_eval: the run with the best wall total of 3, and
#   the process CPU time (best of 3; the machine is shared, wall is noisy);
#   plus the augmented graph: build time and the mean time of a reachability
#   query between each collective and the next four of its group (what
#   bucket/ asks), both directions, in the scheduled order.
# Needs: BUILD_DIR with tests/schedule/sched_eval and tools/graphgen/graphgen
# built (ninja -C BUILD_DIR tests/schedule/sched_eval tools/graphgen/graphgen).
set -euo pipefail
build=${1:?usage: bench_schedule.sh BUILD_DIR [quality|speed|all] [SIZES...]}
what=${2:-all}
shift $(( $# >= 2 ? 2 : $# ))
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10000 100000 1000000)
root=$(cd "$(dirname "$0")/.." && pwd)
eval_bin=$build/tests/schedule/sched_eval
gen=$build/tools/graphgen/graphgen
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "machine: nproc=$(nproc), CPU \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')\""
echo

quality_samples() {
  echo "### Sample graphs (tests/data): input vs Inductor (peer) vs ours"
  echo
  echo "| graph | nodes | colls | input exposed us | peer exposed us | ours exposed us | peer fully exp. | ours fully exp. | peer peak MB | ours peak MB | peer step us | ours step us | lower bound us | ours / bound | bar |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
  for f in "$root"/tests/data/*.json; do
    case $f in *peer_order* | *limits* | *peer_results*) continue ;; esac
    b=${f%.json}
    [ -f "$b.peer_order_plain.json" ] || continue
    "$eval_bin" --order "$b.peer_order_plain.json" "$f" > "$tmp/q.json"
    python3 - "$tmp/q.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
i, g, s = d['input'], d['given'], d['scheduled']
ok = (s['exposed_us'] <= g['exposed_us'] and s['exposed_us'] <= i['exposed_us']
      and s['exposed'] <= g['exposed'] and s['peak_bytes'] <= 1.05 * g['peak_bytes'])
name = d['graph'].rsplit('/', 1)[-1][:-5]
print('| %s | %d | %d | %.1f | %.1f | **%.1f** | %d | %d | %.2f | %.2f | %.1f | %.1f | %.1f (%s) | %.3f | %s |' % (
    name, d['nodes'], s['collectives'], i['exposed_us'], g['exposed_us'], s['exposed_us'],
    g['exposed'], s['exposed'], g['peak_bytes'] / 2**20, s['peak_bytes'] / 2**20,
    g['step_us'], s['step_us'], s['lower_bound_us'], s['lower_bound']['binding'], s['gap'],
    'met' if ok else 'MISSED'))
EOF
  done
  echo
}

quality_graphgen() {
  echo "### graphgen graphs: input order vs ours"
  echo
  echo "| layout | layers | nodes | colls | input exposed us | ours exposed us | input fully exp. | ours fully exp. | input peak MB | ours peak MB | ours step us | lower bound us | ours / bound | variant |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
  local layouts=(
    "fsdp8:--dp 8"
    "fsdp2_tp4_sp:--dp 2 --tp 4"
    "fsdp2_tp4_ar:--dp 2 --tp 4 --tp-mode allreduce"
    "tp2_sp:--dp 1 --tp 2"
    "hsdp_2x2x2:--dp 2 --tp 2 --tp-mode allreduce --world 8"
    "fsdp4_h1024_s2048:--dp 4 --hidden 1024 --ffn 2816 --seq 2048"
  )
  for entry in "${layouts[@]}"; do
    name=${entry%%:*}
    args=${entry#*:}
    for L in 8 16 32 80; do
      # shellcheck disable=SC2086
      "$gen" --layers "$L" $args -o "$tmp/g.json"
      "$eval_bin" "$tmp/g.json" > "$tmp/q.json"
      python3 - "$tmp/q.json" "$name" "$L" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
i, s = d['input'], d['scheduled']
print('| %s | %s | %d | %d | %.1f | **%.1f** | %d | %d | %.2f | %.2f | %.1f | %.1f (%s) | %.3f | %s%s |' % (
    sys.argv[2], sys.argv[3], d['nodes'], s['collectives'], i['exposed_us'], s['exposed_us'],
    i['exposed'], s['exposed'], i['peak_bytes'] / 2**20, s['peak_bytes'] / 2**20,
    s['step_us'], s['lower_bound_us'], s['lower_bound']['binding'], s['gap'], d['variant'],
    ' + polish' if d.get('polished') else ''))
EOF
    done
  done
  echo
}

speed() {
  echo "### Speed: load + estimate + simulate input + schedule + simulate + report (sched_eval)"
  echo
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "| nodes | colls | load ms | estimate ms | sim input ms | schedule ms | simulate ms | total wall ms | total CPU ms | schedule CPU ms | schedule CPU us/node | aug build ms | reach query us |"
  echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  for n in "${sizes[@]}"; do
    "$gen" --target-nodes "$n" --dp 2 --tp 4 -o "$tmp/s.json"
    for r in 1 2 3; do
      "$eval_bin" --aug-bench "$tmp/s.json" > "$tmp/s.$r.json"
    done
    python3 - "$tmp" <<'EOF'
import json, sys
t = sys.argv[1]
runs = [json.load(open('%s/s.%d.json' % (t, r))) for r in (1, 2, 3)]
d = min(runs, key=lambda x: x['ms']['total'])
c = min(runs, key=lambda x: x['cpu_ms']['total'])['cpu_ms']
m = d['ms']
print('| %d | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f | %.3f |' % (
    d['nodes'], d['scheduled']['collectives'], m['load'], m['estimate'], m['simulate_input'],
    m['schedule'], m['simulate'], m['total'], c['total'], c['schedule'],
    1000.0 * c['schedule'] / d['nodes'], d['aug']['build_ms'], d['aug']['query_us']))
EOF
  done
  echo
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
}

case $what in
  quality) quality_samples; quality_graphgen ;;
  speed) speed ;;
  all) quality_samples; quality_graphgen; speed ;;
  *) echo "unknown mode $what" >&2; exit 2 ;;
esac
