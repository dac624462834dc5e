#!/bin/bash
# tools/fuzz-long.sh: the long fuzz runs of issue 18: every harness of
# tests/fuzz for HOURS each (the same seeds, dictionaries and options as
# the CI smoke: the smoke tests of a fuzz build, run for longer), then a
# summary for bench/RESULTS.md: hours, executions, executions/s, coverage
# (cov: edges, ft: features), corpus, peak RSS and findings per harness,
# with the machine, the commit and the compiler.
#
#   tools/fuzz-long.sh [--hours H] [--jobs J] [--out DIR] [BUILD [HARNESS...]]
#
# H: hours per harness (default 1; fractions allowed: 0.17 is ten minutes).
# J: harnesses at once (default 1; one core each). BUILD: a fuzz build
# directory (default build-fuzz; configured with clang when missing).
# HARNESS: the harnesses to run (graph, plan, writers, ...; default all).
# DIR (default fuzz-long-DATE): per harness its corpus, findings, log and
# summary; DIR/summary.md the table. Runs under nice -n 19. Exit status 0
# when no harness found anything; the findings' paths are printed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
hours=1 jobs=1 out=
while [ $# -gt 0 ]; do
  case $1 in
  --hours) hours=$2; shift 2 ;;
  --jobs) jobs=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
  -*) echo "fuzz-long.sh: unknown option $1" >&2; exit 2 ;;
  *) break ;;
  esac
done
build=${1:-$root/build-fuzz}
[ $# -gt 0 ] && shift
only="$*"
out=${out:-$root/fuzz-long-$(date +%Y%m%d-%H%M)}
secs=$(awk -v h="$hours" 'BEGIN { s = int(h * 3600 + 0.5); print (s < 1 ? 1 : s) }')
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ ! -f "$build/build.ninja" ]; then
  CC=clang meson setup "$build" "$root" -Dfuzz=true -Db_sanitize=address,undefined \
    -Db_lundef=false -Dcuda=disabled -Dtests=disabled || exit 1
fi
meson configure "$build" -Dfuzz_smoke_seconds="$secs" >/dev/null || exit 1
# the tree the harnesses are built from (the checkout may move on during
# the hours they run)
commit="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo ' (with local changes)')"
ninja -C "$build" >/dev/null || exit 1
names=$(meson test -C "$build" --list 2>/dev/null | sed -n 's/^\(.*:\)\?\(fuzz-smoke-[a-z]*\)$/\2/p')
if [ -n "$only" ]; then
  names=$(for h in $only; do echo "$names" | grep -x "fuzz-smoke-$h" || { echo "fuzz-long.sh: no harness $h" >&2; exit 2; }; done) || exit 2
fi
start=$(date -u +%FT%TZ)
echo "fuzz-long: $(echo "$names" | wc -w) harnesses x $secs s, $jobs at a time, into $out"
FUZZ_OUT_DIR=$out nice -n 19 meson test -C "$build" --num-processes "$jobs" \
  --logbase fuzz-long $names >"$out/meson.log" 2>&1
rc=$?
# the CI value again for the smoke tests of this build
meson configure "$build" -Dfuzz_smoke_seconds=60 >/dev/null

{
  echo "### Fuzzing: $hours h per harness ($start, $(hostname))"
  echo
  echo "Command: \`tools/fuzz-long.sh --hours $hours --jobs $jobs\` at commit" \
       "$commit (built at the start);" \
       "$(clang --version | head -1); ASan + UBSan, seed 1, the dictionaries of tests/fuzz/dict."
  echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')," \
       "$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)."
  echo
  echo "| harness | hours | executions | exec/s | cov (edges) | ft (features) | corpus | peak RSS MiB | findings |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  for s in "$out"/*/summary; do
    # shellcheck disable=SC1090
    (. "$s"; awk -v n="$harness" -v t="$seconds" -v e="$executions" -v c="$cov" -v f="$ft" \
       -v k="$corpus" -v r="$rss_mb" -v x="$findings" 'BEGIN {
         printf "| %s | %.3g | %d | %.0f | %s | %s | %s | %s | %s |\n", n, t / 3600, e, e / t, c, f, k, r, x }')
  done
} >"$out/summary.md"
cat "$out/summary.md"
find "$out" -path '*/findings/*' -type f -printf 'finding: %p\n'
[ $rc -eq 0 ] || echo "fuzz-long: meson test exit $rc (see $out/meson.log)"
exit $rc
