#!/bin/bash
# tools/device/skew.sh [full|dry]: run ON THE GPU MACHINE (device tool,
# kind nvidia-h200-x2), from the repo root, with .carry/ staged by
# tools/device/pack.sh (nothing is built there). Issue 20, item 1 of
# docs/cost-model.md "Rank skew": measures the ranks' skew, with no model
# change.
#   - per graph: `schedrun --profile` (plain: every kernel timed on each
#     rank, us_by_rank), then timing runs (launch graph) of the input order
#     and our schedule (--no-bucket, planned with that profile), whose
#     reports keep every rank's times of the median step (by_rank);
#   - graphs: w2_fsdp2_L2_h1024 (the 2-layer sample, where the judge run saw
#     no skew) and gg_judge_fsdp2_L8_h4096 (graphgen L=8 H=4096 F=14336
#     S=8192 FSDP over 2, the judge run's one miss: 163 us of measured
#     exposure at its last wait);
#   - `sgfit --skew` over the reports and the profiles;
#   - first, tests/runtime/e2e.sh ranks-cuda: by_rank on the CUDA backend
#     exists, is per rank and agrees with the max over ranks (~20 s).
# Output ($OUT): skew.txt (sgfit --skew's tables), skew.json,
# results.tar.gz (graphs, profiles, plans, reports), log.txt. LIMIT seconds
# in all (default 300); a graph that would not fit is skipped.
# dry: the same steps here on the CPU backend with a tiny sample and the
# synthetic profile (which has no us_by_rank: the profile part is left out).
set -u
MODE=${1:-full}
# shellcheck source=tools/device/contention-common.sh
. "$PWD/tools/device/contention-common.sh"
W=${WORK:-/tmp/sg-skew}
LIMIT=${LIMIT:-300}
start

# graph:graphgen-args (or "-" for tests/data):profile-iters:timing-iters:warmup:need-seconds
if [ "$MODE" = dry ]; then
  BACKEND=cpu
  GRAPHS="w2_tiny_fsdp2_L2_h256:-:2:3:1:5"
else
  BACKEND=cuda
  J="--layers,8,--hidden,4096,--ffn,14336,--heads,32,--seq,8192"
  GRAPHS="w2_fsdp2_L2_h1024:-:10:20:3:30 gg_judge_fsdp2_L8_h4096:$J,--dp,2:5:5:2:90"
fi

environment
[ -x "$BIN/sgfit" ] || echo "MISSING $BIN/sgfit"

if [ "$MODE" != dry ]; then
  section "by_rank on the CUDA backend (tests/runtime/e2e.sh ranks-cuda)"
  SG_MPIRUN_ARGS="${MPI[*]:3}" timeout 120 bash tests/runtime/e2e.sh ranks-cuda "$BIN/schedrun" \
    "$BIN/sgeval" "$BIN/mkplan" "$BIN/schedgraph" "$BIN/graphgen" "$ROOT/tests/data"
  echo "e2e ranks-cuda rc=$?"
fi

CONT_OK=0 # profile (contention-common.sh): plain profiles only
reports=() profiles=()
for spec in $GRAPHS; do
  IFS=: read -r g gen pit tit twu need <<< "$spec"
  if ! fits "$need"; then
    section "$g: skipped ($(elapsed) s of $LIMIT used, needs about $need)"
    continue
  fi
  section "$g: graph and profile"
  graph_file "$g" "$gen"
  profile "$g" "$pit" 0
  [ -f "$W/p.$g.json" ] || { echo "no profile for $g"; continue; }
  grep -q us_by_rank "$W/p.$g.json" && profiles+=(--profile "$W/p.$g.json")
  section "$g: timing (input, ours)"
  timed "$g" input "$W/$g.json" --no-reorder "$W/p.$g.json" "$tit" "$twu"
  timed "$g" ours "$W/$g.json" "" "$W/p.$g.json" "$tit" "$twu"
  for v in input ours; do
    [ -f "$W/t.$g.$v.report.json" ] && reports+=("$W/t.$g.$v.report.json")
  done
done

section "sgfit --skew"
if [ ${#reports[@]} -gt 0 ] || [ ${#profiles[@]} -gt 0 ]; then
  "$BIN/sgfit" --skew "${reports[@]}" "${profiles[@]}" -o "$OUT/skew.json" | tee "$OUT/skew.txt"
  echo "sgfit --skew rc=${PIPESTATUS[0]}"
else
  echo "nothing measured" | tee "$OUT/skew.txt"
fi
tar czf "$OUT/results.tar.gz" -C "$W" .
ls -la "$OUT"
echo "done [$(date +%T), $(elapsed) s]"
