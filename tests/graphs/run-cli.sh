#!/bin/bash
# run-cli.sh SCHEDGRAPH DATA_DIR: end-to-end tests of the schedgraph CLI on a
# sample graph: every output written and well-formed (--emit-graph loads
# back), byte-identical plans from identical runs, --order/--costs/--stop-after/--dump/--validate, and
# failures (bad order, bad cluster, unwritable output) that leave no file.
set -u
sg=$1
data=$2
g=$data/w2_tiny_fsdp2_L2_h256.json
order=$data/w2_tiny_fsdp2_L2_h256.peer_order_plain.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../cli-check.sh
. "$(dirname "$0")/../cli-check.sh"

"$sg" "$g" -o "$tmp/a.plan.json" --report "$tmp/a.report.json" --trace "$tmp/a.trace.json" \
  --order "$order" >"$tmp/a.out" 2>"$tmp/a.err"
rc=$?
check "full run exits 0" test $rc -eq 0
check "full run is silent on stderr" test ! -s "$tmp/a.err"
check "plan written" has "$tmp/a.plan.json" '"format":"schedgraph.plan"'
check "report has input, given, scheduled" \
  bash -c "grep -q '\"input\":' '$tmp/a.report.json' && grep -q '\"given\":' '$tmp/a.report.json' && grep -q '\"scheduled\":' '$tmp/a.report.json'"
check "report has rows, bucket, passes" \
  bash -c "grep -q '\"collectives\":' '$tmp/a.report.json' && grep -q '\"bucket\":' '$tmp/a.report.json' && grep -q '\"codegen\":' '$tmp/a.report.json'"
check "trace written" has "$tmp/a.trace.json" '"traceEvents"'
check "summary names the orders" \
  bash -c "grep -q '^input order:' '$tmp/a.out' && grep -q '^given order' '$tmp/a.out' && grep -q '^scheduled order:' '$tmp/a.out'"
check "summary times every pass" \
  grep -qE '^passes: load [0-9.]+ ms, validate [0-9.]+ ms, estimate .* schedule .* bucket .* codegen [0-9.]+ ms$' "$tmp/a.out"

# Compute grows after bucketing by the pack/unpack copies, and says so.
check "the bucketing line accounts for the growth of compute" bash -c "
  in=\$(awk '/^input order:/ { getline; print \$10 }' '$tmp/a.out')
  out=\$(awk '/^scheduled order:/ { getline; print \$10 }' '$tmp/a.out')
  add=\$(sed -n 's/^bucketing: .*; compute +\\([0-9.]*\\) us: [0-9]* pack\\/unpack copies .*/\\1/p' '$tmp/a.out')
  [ -n \"\$add\" ] && awk -v a=\"\$in\" -v b=\"\$out\" -v c=\"\$add\" 'BEGIN { d = b - a - c; exit !(d < 0.01 && d > -0.01) }'"

"$sg" "$g" -q -o "$tmp/b.plan.json" --trace "$tmp/b.trace.json" --order "$order"
check "identical runs give byte-identical plans" cmp -s "$tmp/a.plan.json" "$tmp/b.plan.json"
check "identical runs give byte-identical traces" cmp -s "$tmp/a.trace.json" "$tmp/b.trace.json"

"$sg" "$g" -q --no-reorder --no-bucket -o "$tmp/c.plan.json"
check "--no-reorder --no-bucket writes a plan" grep -q '"options":"cluster=- profile=- reorder=0 .* bucket=0 ' "$tmp/c.plan.json"
check "... which differs from the scheduled one" bash -c "! cmp -s '$tmp/a.plan.json' '$tmp/c.plan.json'"

"$sg" "$g" -q --emit-graph "$tmp/final.json"
check "--emit-graph writes the bucketed graph" has "$tmp/final.json" '"target":"schedgraph.bucket_pack"'
"$sg" "$tmp/final.json" -q --no-reorder --no-bucket --emit-graph "$tmp/final2.json"
check "... which loads back and is written again unchanged" cmp -s "$tmp/final.json" "$tmp/final2.json"
"$sg" "$g" -q --emit-graph "$g" 2>/dev/null
check "--emit-graph over the input is a usage error" test $? -eq 2

"$sg" "$g" --validate -q -o "$tmp/d.plan.json"
check "--validate between passes accepts the pipeline" test $? -eq 0
check "--validate does not change the plan" cmp -s "$tmp/a.plan.json" "$tmp/d.plan.json"

"$sg" "$g" --costs >"$tmp/costs.out"
check "--costs prints the cost table" has "$tmp/costs.out" "# costs: cluster"
"$sg" "$g" --dump=schedule -q 2>"$tmp/dump.err"
check "--dump=schedule dumps after the schedule pass" has "$tmp/dump.err" "# after schedule"
"$sg" "$g" --stop-after=estimate >"$tmp/stop.out"
check "--stop-after=estimate stops there" \
  bash -c "grep -q 'passes: load .* estimate [0-9.]* ms$' '$tmp/stop.out' && ! grep -q schedule '$tmp/stop.out'"
"$sg" "$g" --stop-after=estimate -o "$tmp/e.plan.json" 2>/dev/null
check "--stop-after with -o is a usage error" test $? -eq 2

"$sg" "$g" -q --bucket-mode per-layer -o "$tmp/l.plan.json" --report "$tmp/l.report.json"
check "--bucket-mode per-layer writes a plan" has "$tmp/l.plan.json" 'bucket_mode=per-layer'
check "... and reports the mode" grep -qE '"mode":[[:space:]]*"per-layer"' "$tmp/l.report.json"
"$sg" "$g" --bucket-mode greedy -o "$tmp/m.plan.json" 2>"$tmp/m.err"
check "unknown --bucket-mode is a usage error" test $? -eq 2
check "... naming the value" has "$tmp/m.err" "--bucket-mode: 'greedy' is not auto or per-layer"
check "... and writes nothing" test ! -e "$tmp/m.plan.json"
"$sg" "$g" -q --bucket-lowering grouped -o "$tmp/g.plan.json" --report "$tmp/g.report.json"
check "--bucket-lowering grouped writes a plan" has "$tmp/g.plan.json" 'bucket_lowering=grouped'
check "... of coalesced collectives" has "$tmp/g.plan.json" '"op":"all_gather_coalesced"'
check "... and reports the lowering" grep -qE '"lowering":[[:space:]]*"grouped"' "$tmp/g.report.json"
"$sg" "$g" --bucket-lowering packed -o "$tmp/n.plan.json" 2>"$tmp/n.err"
check "unknown --bucket-lowering is a usage error" test $? -eq 2
check "... naming the value" has "$tmp/n.err" "--bucket-lowering: 'packed' is not auto, flat or grouped"
check "... and writes nothing" test ! -e "$tmp/n.plan.json"

# decompose: the TP sample has sites; the mode is recorded in plans made
# with another than auto, reported, and a bad one refused.
t=$data/w2_tiny_tp2_L2_h256.json
"$sg" "$t" -q --decompose all -o "$tmp/n.plan.json" --report "$tmp/n.report.json" >"$tmp/n.out"
check "--decompose all writes a plan with ring steps" has "$tmp/n.plan.json" '"op":"collective_permute"'
check "... recording the mode" has "$tmp/n.plan.json" ' decompose=all"'
check "... and reports every site" grep -qE '"decomposed":[[:space:]]*16' "$tmp/n.report.json"
"$sg" "$t" --decompose all >"$tmp/n.out"
check "the summary lists the sites" grep -qE '^decompose \(all\): 16 collectives, 16 sites, 16 decomposed' "$tmp/n.out"
"$sg" "$t" -q --no-decompose -o "$tmp/o.plan.json"
check "--no-decompose records decompose=off" has "$tmp/o.plan.json" ' decompose=off"'
check "... and has no ring step" bash -c "! grep -q '\"op\":\"collective_permute\"' '$tmp/o.plan.json'"
"$sg" "$t" --decompose sometimes -o "$tmp/p.plan.json" 2>"$tmp/p.err"
check "unknown --decompose is a usage error" test $? -eq 2
check "... naming the value" has "$tmp/p.err" "--decompose: 'sometimes' is not auto, all, all-gather or off"
"$sg" "$t" --dump=decompose --decompose all -q 2>"$tmp/q.err"
check "--dump=decompose dumps after the decompose pass" has "$tmp/q.err" "# after decompose"

# Failures: exit 1, one line naming the file at fault, nothing written.
printf '["not_a_node"]\n' >"$tmp/bad-order.json"
"$sg" "$g" --order "$tmp/bad-order.json" -o "$tmp/f.plan.json" --report "$tmp/f.report.json" 2>"$tmp/f.err"
check "bad --order exits 1" test $? -eq 1
check "... naming the order file" grep -q "^schedgraph: $tmp/bad-order.json: " "$tmp/f.err"
check "... and writes nothing" bash -c "! ls '$tmp'/f.* 2>/dev/null | grep -q json"

"$sg" "$g" --cluster no-such-cluster -o "$tmp/h.plan.json" 2>"$tmp/h.err"
check "unknown --cluster exits 1" test $? -eq 1
check "... with a message" has "$tmp/h.err" "no-such-cluster"
check "... and writes nothing" test ! -e "$tmp/h.plan.json"

"$sg" "$g" --report "$tmp/i.report.json" -o "$tmp/no/such/dir/plan.json" 2>"$tmp/i.err"
check "unwritable -o exits 1" test $? -eq 1
check "... naming the output" grep -q "^schedgraph: $tmp/no/such/dir/plan.json: cannot write" "$tmp/i.err"
check "... and removes the report it had written" test ! -e "$tmp/i.report.json"

echo "cli: $((total - fails)) of $total passed"
[ $fails -eq 0 ]
