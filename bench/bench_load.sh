#!/bin/bash
# bench_load.sh: load + validate speed and peak memory of schedgraph.
#
# Usage: bench/bench_load.sh [BUILD_DIR] [NODES...]
#   BUILD_DIR  a meson build of this tree (default: build-bench, configured
#              here with buildtype=release if missing)
#   NODES      graph sizes (default: 10000 100000 1000000)
# THREADS=N in the environment passes --threads N (default: schedgraph's,
# one per processor).
#
# For each size, tools/graphgen writes an FSDP-8 llama-like graph of about
# NODES nodes; `schedgraph --stop-after=validate` loads and validates it
# (best of 3 runs for time; peak RSS from /usr/bin/time -v). Prints a
# markdown table. Targets: 100k <= 0.5 s, 1M <= 5 s, RSS <= 1.5 KB/node.
. "$(dirname "$0")/common.sh"
bench_schedgraph "10000 100000 1000000" "$@"

bench_machine
echo
echo "| nodes | file MB | load ms | validate ms | load+validate s | wall s | peak RSS MB | RSS B/node |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for n in "${sizes[@]}"; do
  g=$tmp/g$n.json
  "$gen" --dp 8 --target-nodes "$n" -o "$g"
  best_load="" best_val="" best_wall="" rss=0 nodes=0
  for _ in 1 2 3; do
    "$gtime" -v "$sg" --stop-after=validate ${THREADS:+--threads "$THREADS"} "$g" \
      >"$tmp/out" 2>"$tmp/time"
    load=$(sed -n 's/^passes: load \([0-9.]*\) ms, validate \([0-9.]*\) ms$/\1/p' "$tmp/out")
    val=$(sed -n 's/^passes: load \([0-9.]*\) ms, validate \([0-9.]*\) ms$/\2/p' "$tmp/out")
    nodes=$(sed -n 's/^nodes: \([0-9]*\) .*/\1/p' "$tmp/out")
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0;
                        for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$tmp/time")
    r=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$tmp/time")
    [ "$r" -gt "$rss" ] && rss=$r
    if [ -z "$best_load" ] || awk "BEGIN { exit !($load + $val < $best_load + $best_val) }"; then
      best_load=$load best_val=$val best_wall=$wall
    fi
  done
  size=$(stat -c %s "$g")
  awk -v n="$nodes" -v sz="$size" -v l="$best_load" -v v="$best_val" -v w="$best_wall" -v r="$rss" \
    'BEGIN { printf "| %d | %.1f | %.1f | %.1f | %.3f | %.2f | %.1f | %.0f |\n",
             n, sz / 1048576, l, v, (l + v) / 1000, w, r / 1024, r * 1024 / n }'
  rm -f "$g"
done
