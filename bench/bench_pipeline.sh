#!/bin/bash
# bench_pipeline.sh: end-to-end schedgraph speed and peak memory (issue 16,
# item 4): load -> ... -> plan (-o), the whole default pass list.
#
# Usage: bench/bench_pipeline.sh [BUILD_DIR] [SIZES...]
#   BUILD_DIR  a meson build of this tree (default: build-bench, configured
#              here with buildtype=release if missing)
#   SIZES      any of: 6k 36k 1m (default: all three)
#
# Graphs (tools/graphgen, dp 2 x tp 4):
#   6k   --layers 32 --hidden 4096                       (~6,684 nodes)
#   36k  --target-nodes 36000 --hidden 8192 --ffn 28672 --heads 64
#   1m   --target-nodes 1000000 --hidden 8192 --ffn 28672 --heads 64
# Each graph is planned 3 times; the table shows the minimum wall time (the
# machine is shared: the minimum is the least disturbed run), the CPU time
# (user + system) of that run, the pass times of that run (schedgraph's
# "passes:" line, wall) and the peak RSS over the runs (/usr/bin/time -v).
# Targets: 6k <= 0.05 s, 36k <= 0.25 s, 1M <= 5 s, peak RSS <= 1 KB/node.
# The load average before each graph is printed: on a busy machine wall
# times exceed CPU times. THREADS=N in the environment passes --threads N
# (default: schedgraph's, one thread per processor).
. "$(dirname "$0")/common.sh"
bench_schedgraph "6k 36k 1m" "$@"

bench_machine
echo
echo "| graph | nodes | target s | min wall s | cpu s | peak RSS MB | RSS B/node | passes (ms, best run) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
for size in "${sizes[@]}"; do
  bench_size_args "$size"
  case $size in
    6k) target=0.05 ;;
    36k) target=0.25 ;;
    1m) target=5 ;;
  esac
  g=$tmp/g$size.json
  "$gen" "${size_args[@]}" -o "$g"
  echo "$size: load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  best="" cpu="" passes="" rss=0 nodes=0
  for _ in 1 2 3; do
    "$gtime" -v "$sg" ${THREADS:+--threads "$THREADS"} -o "$tmp/plan" "$g" >"$tmp/out" 2>"$tmp/time"
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0;
                        for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$tmp/time")
    r=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$tmp/time")
    [ "$r" -gt "$rss" ] && rss=$r
    nodes=$(sed -n 's/^nodes: \([0-9]*\) .*/\1/p' "$tmp/out" | head -1)
    if [ -z "$best" ] || awk "BEGIN { exit !($wall < $best) }"; then
      best=$wall
      cpu=$(awk -F': ' '/User time|System time/ { s += $2 } END { print s }' "$tmp/time")
      passes=$(sed -n 's/^passes: //p' "$tmp/out")
    fi
  done
  awk -v g="$size" -v n="$nodes" -v t="$target" -v w="$best" -v c="$cpu" -v r="$rss" -v p="$passes" \
    'BEGIN { printf "| %s | %d | %s | %.3f | %.2f | %.1f | %.0f | %s |\n",
             g, n, t, w, c, r / 1024, (n ? r * 1024 / n : 0), p }'
  rm -f "$g" "$tmp/plan"
done
