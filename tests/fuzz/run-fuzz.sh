#!/bin/bash
# run-fuzz.sh: runs one libFuzzer harness of tests/fuzz (docs: README.md).
#
#   run-fuzz.sh [--time S] [--dict F] [--out DIR] [--plans SCHEDGRAPH] [--seed N]
#               HARNESS SEED...
#   run-fuzz.sh --replay HARNESS INPUT...
#
# Fuzzing: SEEDs (files or directories; every *.json in a directory) are
# copied into a fresh seed corpus (with --plans, also the plans that
# SCHEDGRAPH writes from every seed it accepts, at default options and with
# --no-reorder --no-bucket), then HARNESS runs for S seconds (default 60)
# with a fixed seed (-seed=N, default 1), one process, per-input timeout
# 20 s and 2 GiB of memory. New inputs go to DIR/corpus, findings
# (crash-*, leak-*, timeout-*, oom-*) to DIR/findings, libFuzzer's output
# to DIR/log, and one summary line to stdout:
#   fuzz HARNESS: S s, N executions, cov C, ft F, corpus K, findings M
# Without --out, DIR is $FUZZ_OUT_DIR/HARNESS when that is set, else a
# temporary directory kept only when there is a finding. DIR/summary holds
# the same numbers as key=value lines (tools/fuzz-long.sh). Exit status: 0 no finding, 1 a finding (its path is printed),
# 2 usage.
# Replay: every INPUT (files, or *.json of directories) runs once through
# HARNESS, as a regression test of the reproducers; exit 0 when none
# crashes.
set -uo pipefail
time=60 dict= out= plans= seed=1 replay=0
while [ $# -gt 0 ]; do
  case $1 in
  --time) time=$2; shift 2 ;;
  --dict) dict=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  --plans) plans=$2; shift 2 ;;
  --seed) seed=$2; shift 2 ;;
  --replay) replay=1; shift ;;
  -*) echo "run-fuzz.sh: unknown option $1" >&2; exit 2 ;;
  *) break ;;
  esac
done
[ $# -ge 1 ] || { echo "usage: run-fuzz.sh [options] HARNESS SEED..." >&2; exit 2; }
harness=$1; shift
name=$(basename "$harness")
export ASAN_OPTIONS=${FUZZ_ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Each input: the JSON files of a directory, or a file as given.
inputs () {
  for s in "$@"; do
    if [ -d "$s" ]; then
      find "$s" -maxdepth 1 -type f -name '*.json' | sort
    elif [ -f "$s" ]; then
      echo "$s"
    else
      echo "run-fuzz.sh: no seed $s" >&2
    fi
  done
}

if [ $replay -eq 1 ]; then
  mapfile -t files < <(inputs "$@")
  [ ${#files[@]} -gt 0 ] || { echo "fuzz $name: nothing to replay"; exit 0; }
  "$harness" -runs=1 "${files[@]}" >"${TMPDIR:-/tmp}/replay.$$.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    tail -40 "${TMPDIR:-/tmp}/replay.$$.log"
    echo "fuzz $name: replay of ${#files[@]} inputs FAILED (exit $rc)"
  else
    echo "fuzz $name: replayed ${#files[@]} inputs, none crashed"
  fi
  rm -f "${TMPDIR:-/tmp}/replay.$$.log"
  exit $((rc != 0))
fi

keep=1
[ -z "$out" ] && [ -n "${FUZZ_OUT_DIR:-}" ] && out=$FUZZ_OUT_DIR/$name
if [ -z "$out" ]; then
  out=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-$name.XXXXXX")
  keep=0
fi
mkdir -p "$out/corpus" "$out/seeds" "$out/findings"
i=0
while read -r f; do
  cp "$f" "$out/seeds/$(printf '%04d' $i)-$(basename "$f")"
  if [ -n "$plans" ]; then
    "$plans" "$f" -q -o "$out/seeds/$(printf '%04d' $i)-plan.json" >/dev/null 2>&1
    "$plans" "$f" -q --no-reorder --no-bucket \
      -o "$out/seeds/$(printf '%04d' $i)-plan-input.json" >/dev/null 2>&1
  fi
  i=$((i + 1))
done < <(inputs "$@")
args=(-seed="$seed" -max_total_time="$time" -timeout=20 -rss_limit_mb=2048
      -print_final_stats=1 -artifact_prefix="$out/findings/")
[ -n "$dict" ] && args+=(-dict="$dict")
"$harness" "${args[@]}" "$out/corpus" "$out/seeds" >"$out/log" 2>&1
rc=$?
stat () { sed -n "s/^stat::$1: *//p" "$out/log" | tail -1; }
last=$(grep -E '^#[0-9]+' "$out/log" | tail -1)
cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
findings=$(find "$out/findings" -type f | wc -l)
execs=$(stat number_of_executed_units)
echo "fuzz $name: ${time} s, ${execs:-?} executions, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}, findings $findings"
# for tools/fuzz-long.sh
printf 'harness=%s\nseconds=%s\nexecutions=%s\ncov=%s\nft=%s\ncorpus=%s\nfindings=%s\nrss_mb=%s\nexit=%s\n' \
  "$name" "$time" "${execs:-0}" "${cov:-0}" "${ft:-0}" "${corp:-0}" "$findings" \
  "$(stat peak_rss_mb)" "$rc" >"$out/summary"
if [ $rc -ne 0 ] || [ "$findings" -gt 0 ]; then
  grep -E 'ERROR|BUG|runtime error|SUMMARY|Test unit written' "$out/log" | head -20
  find "$out/findings" -type f -printf 'finding: %p\n'
  echo "fuzz $name: log in $out/log"
  exit 1
fi
[ $keep -eq 0 ] && rm -rf "$out"
exit 0
