#!/bin/bash
# run-regress.sh SCHEDGRAPH SCHEDRUN TESTS_DIR: every reproducer of a past
# fuzz finding (tests/fuzz/regress/HARNESS/*.json) through the command
# line that reads that kind of file, in every build (the sanitizer build
# included). A file named accept-* must now be accepted (exit 0, outputs
# written); any other must be rejected cleanly: exit 1, one line on stderr
# naming the file at fault, no output written. No run may print a GLib
# warning or critical or a sanitizer report.
#   graph, writers: schedgraph --validate FILE -o --report --trace (the
#             validator between passes, as fuzz_writers runs it: a pass
#             that breaks the IR fails even where the writers would not)
#   cluster:  schedgraph tests/graphs/accept-small.json --cluster FILE ...
#   profile:  schedgraph tests/data/w2_tiny_fsdp2_L2_h256.json --profile FILE ...
#   order:    schedgraph tests/data/w2_tiny_fsdp2_L2_h256.json --order FILE ...
#   plan:     mpirun -np 2 schedrun FILE --report --dump-outputs (skipped
#             when SCHEDRUN is empty: a build without MPI)
set -u
sg=$1 sr=$2 tests=$3
regress=$tests/fuzz/regress
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
MPI_ASAN="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fails=0 total=0
fail () { echo "FAIL: $*"; fails=$((fails + 1)); }

# check KIND FILE CULPRIT CMD...: CULPRIT is the file the message must name.
check () {
  local kind=$1 file=$2 culprit=$3
  shift 3
  total=$((total + 1))
  rm -rf "$tmp/out"
  mkdir -p "$tmp/out"
  "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$? name
  name=$(basename "$file")
  if grep -qE 'GLib-|CRITICAL|WARNING \*\*|runtime error|Sanitizer|This indicates a bug' \
       "$tmp/stderr"; then
    fail "$kind/$name: $(head -3 "$tmp/stderr")"
  elif [[ $name == accept-* ]]; then
    if [ $rc -ne 0 ]; then
      fail "$kind/$name: exit $rc, want 0: $(head -2 "$tmp/stderr")"
    else
      echo "ok: $kind/$name accepted"
    fi
  elif [ $rc -ne 1 ]; then
    fail "$kind/$name: exit $rc, want 1: $(head -2 "$tmp/stderr")"
  elif [ -n "$(ls -A "$tmp/out")" ]; then
    fail "$kind/$name: wrote $(ls "$tmp/out")"
  elif ! grep -qF -- "$culprit" "$tmp/stderr"; then
    fail "$kind/$name: the message does not name $culprit: $(head -2 "$tmp/stderr")"
  else
    echo "ok: $kind/$name: $(head -1 "$tmp/stderr")"
  fi
}

outs=(-o "$tmp/out/plan.json" --report "$tmp/out/report.json" --trace "$tmp/out/trace.json")
shopt -s nullglob
for f in "$regress"/graph/*.json "$regress"/writers/*.json; do
  check "$(basename "$(dirname "$f")")" "$f" "$f" "$sg" --validate "$f" "${outs[@]}"
done
for f in "$regress"/cluster/*.json; do
  check cluster "$f" "$f" "$sg" "$tests/graphs/accept-small.json" --cluster "$f" "${outs[@]}"
done
for f in "$regress"/profile/*.json; do
  check profile "$f" "$f" "$sg" "$tests/data/w2_tiny_fsdp2_L2_h256.json" --profile "$f" "${outs[@]}"
done
for f in "$regress"/order/*.json; do
  check order "$f" "$f" "$sg" "$tests/data/w2_tiny_fsdp2_L2_h256.json" --order "$f" "${outs[@]}"
done
if [ -n "$sr" ]; then
  for f in "$regress"/plan/*.json; do
    check plan "$f" "rank 0: plan $f" env ASAN_OPTIONS="$MPI_ASAN" timeout 120 mpirun -np 2 "$sr" "$f" \
      --report "$tmp/out/report.json" --dump-outputs "$tmp/out/dump" --timeout 60
  done
else
  echo "skip: plan reproducers (no schedrun in this build)"
fi
echo "fuzz regress: $((total - fails)) of $total passed"
[ $fails -eq 0 ]
