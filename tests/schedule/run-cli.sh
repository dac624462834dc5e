#!/bin/bash
# run-cli.sh SCHEDGRAPH DATA_DIR SCHEDULE_DATA_DIR: the schedule options of
# the CLI end to end: --exact (a small graph, a graph beyond its limits,
# with --no-reorder), --order with --no-reorder planning exactly that order,
# orders that are not topological or miss a node (the node named, nothing
# written), and the lower bound by term in the report.
set -u
sg=$1
data=$2
sdata=$3
g=$data/w2_tiny_fsdp2_L2_h256.json
order=$data/w2_tiny_fsdp2_L2_h256.peer_order_plain.json
small=$sdata/raise-small.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../cli-check.sh
. "$(dirname "$0")/../cli-check.sh"

# --exact on a small graph: the optimal order (the all_gather raised ahead
# of the independent matmul), the option recorded in the plan
"$sg" "$small" --exact --no-bucket -o "$tmp/e.plan.json" --report "$tmp/e.report.json" \
  >"$tmp/e.out" 2>"$tmp/e.err"
check "--exact exits 0" test $? -eq 0
check "--exact is recorded in the plan" has "$tmp/e.plan.json" 'exact=1'
check "--exact reaches the optimum (130 us, the lower bound)" \
  python3 -c "
import json, sys
s = json.load(open('$tmp/e.report.json'))['scheduled']
sys.exit(0 if abs(s['step_us'] - 130) < 1e-6 and abs(s['lower_bound_us'] - 130) < 1e-6 else 1)"

# --exact beyond its limits: exit 1, the counts and limits named, nothing written
"$sg" "$g" --exact -o "$tmp/x.plan.json" >"$tmp/x.out" 2>"$tmp/x.err"
check "--exact on a large graph exits 1" test $? -eq 1
check "... naming the counts and the limits" \
  grep -q "^schedgraph: .*: .*exact scheduler: the graph has [0-9]* compute nodes with a cost and 36 collectives; the limits are 16 and 6" "$tmp/x.err"
check "... writing nothing" test ! -e "$tmp/x.plan.json"

"$sg" "$small" --exact --no-reorder >"$tmp/u.out" 2>"$tmp/u.err"
check "--exact --no-reorder is a usage error" test $? -eq 2
check "... saying why" has "$tmp/u.err" "contradict"

# --order FILE --no-reorder: the plan follows the file
"$sg" "$g" --order "$order" --no-reorder --no-bucket -o "$tmp/o.plan.json" \
  --report "$tmp/o.report.json" >"$tmp/o.out" 2>"$tmp/o.err"
check "--order --no-reorder exits 0" test $? -eq 0
check "... the summary names it" has "$tmp/o.out" "final order (--order, --no-reorder)"
check "... the plan's kernels and collectives follow the order file" \
  python3 -c "
import json, sys
order = json.load(open('$order'))
pos = {n: i for i, n in enumerate(order)}
ins = json.load(open('$tmp/o.plan.json'))['ins']
names = [i['name'] for i in ins if i['kind'] in ('kernel', 'collective')]
seen = [pos[n] for n in names]
sys.exit(0 if len(names) > 100 and seen == sorted(seen) else 1)"
check "... and predict the given order's step" \
  python3 -c "
import json, sys
r = json.load(open('$tmp/o.report.json'))
sys.exit(0 if abs(r['given']['step_us'] - r['scheduled']['step_us']) < 1e-6 else 1)"

# orders that are not valid: the node named, nothing written
python3 -c "
import json
o = json.load(open('$order'))
i = o.index('wait_tensor')
o.insert(0, o.pop(i))
json.dump(o, open('$tmp/bad-before.json', 'w'))
o = json.load(open('$order'))
o.remove('wait_tensor')
json.dump(o, open('$tmp/bad-missing.json', 'w'))"
"$sg" "$g" --order "$tmp/bad-before.json" --no-reorder -o "$tmp/b.plan.json" 2>"$tmp/b.err" >/dev/null
check "an order with a node before its input exits 1" test $? -eq 1
check "... naming the node and its input" \
  grep -q "node 'wait_tensor' comes before its input 'all_gather_into_tensor'" "$tmp/b.err"
check "... writing nothing" test ! -e "$tmp/b.plan.json"
"$sg" "$g" --order "$tmp/bad-missing.json" --no-reorder -o "$tmp/m.plan.json" 2>"$tmp/m.err" >/dev/null
check "an order missing a node exits 1" test $? -eq 1
check "... naming the node" grep -q "node 'wait_tensor' is missing" "$tmp/m.err"
check "... writing nothing" test ! -e "$tmp/m.plan.json"

# the lower bound by term
check "the report gives the bound by term and the gap" \
  python3 -c "
import json, sys
s = json.load(open('$tmp/o.report.json'))['scheduled']
b = s['lower_bound']
keys = ['compute_us', 'comm_stream_us', 'critical_path_us', 'overlap_us', 'window_us']
ok = all(isinstance(b[k], (int, float)) for k in keys) and b['binding'] in [k[:-3] for k in keys]
ok = ok and abs(max(b[k] for k in keys) - s['lower_bound_us']) < 1e-3
ok = ok and abs(s['gap'] - s['step_us'] / s['lower_bound_us']) < 1e-3 and s['step_us'] >= s['lower_bound_us']
sys.exit(0 if ok else 1)"

echo "schedule cli: $((total - fails)) of $total passed"
[ $fails -eq 0 ]
