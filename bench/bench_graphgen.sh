#!/bin/bash
# bench_graphgen.sh: generation speed, output size and peak memory of
# tools/graphgen at scale-test sizes.
#
# Usage: bench/bench_graphgen.sh [BUILD_DIR] [NODES...]
#   BUILD_DIR  a meson build of this tree (default: build-bench, configured
#              here with buildtype=release if missing)
#   NODES      target node counts (default: 10000 100000 1000000)
#
# For each size and each of three parallel layouts (FSDP over 8; FSDP 2 x
# TP/SP 4; FSDP 2 x TP 4 with all_reduce, all at llama-7B widths), graphgen
# writes a graph of about NODES nodes to a file (-o: atomic, fsync'd). Time is
# the best wall time of 3 runs, RSS the largest "Maximum resident set size"
# (/usr/bin/time -v). A second file from the same arguments must be
# byte-identical (cmp). Prints a markdown table. Target: 1M nodes in a few
# seconds with memory that does not grow with the graph beyond a few hundred
# bytes per layer.
. "$(dirname "$0")/common.sh"
bench_args build-bench "10000 100000 1000000" "$@"
bench_build -Dtests=disabled -Dcuda=disabled -- tools/graphgen/graphgen
gen=$build/tools/graphgen/graphgen
bench_need_time

model="--hidden 4096 --ffn 11008 --heads 32 --seq 4096"
layouts=("fsdp8|--dp 8" "fsdp2_tp4_sp|--dp 2 --tp 4" "fsdp2_tp4_ar|--dp 2 --tp 4 --tp-mode allreduce")

bench_machine
echo
echo "| layout | target | layers | nodes | collectives | file MB | best wall s | MB/s | peak RSS MB | identical |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
for n in "${sizes[@]}"; do
  for l in "${layouts[@]}"; do
    name=${l%%|*}
    args=${l#*|}
    best="" rss=0
    for _ in 1 2 3; do
      # shellcheck disable=SC2086
      "$gtime" -v "$gen" $model $args --target-nodes "$n" --stats -o "$tmp/a.json" \
        2>"$tmp/err"
      wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { k = split($2, t, ":"); s = 0;
                          for (i = 1; i <= k; i++) s = s * 60 + t[i]; print s }' "$tmp/err")
      r=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$tmp/err")
      [ "$r" -gt "$rss" ] && rss=$r
      if [ -z "$best" ] || awk "BEGIN { exit !($wall < $best) }"; then best=$wall; fi
    done
    layers=$(sed -n 's/^graphgen: layers \([0-9]*\), nodes \([0-9]*\),.*/\1/p' "$tmp/err")
    nodes=$(sed -n 's/^graphgen: layers \([0-9]*\), nodes \([0-9]*\),.*/\2/p' "$tmp/err")
    colls=$(awk -F': ' '/^graphgen: .* over / { s += $NF } END { print s + 0 }' "$tmp/err")
    # shellcheck disable=SC2086
    "$gen" $model $args --target-nodes "$n" -o "$tmp/b.json"
    same=no
    cmp -s "$tmp/a.json" "$tmp/b.json" && same=yes
    size=$(stat -c %s "$tmp/a.json")
    awk -v nm="$name" -v t="$n" -v L="$layers" -v nd="$nodes" -v c="$colls" -v sz="$size" \
      -v w="$best" -v r="$rss" -v s="$same" \
      'BEGIN { printf "| %s | %d | %d | %d | %d | %.1f | %s | %s | %.1f | %s |\n",
               nm, t, L, nd, c, sz / 1048576, (w > 0 ? sprintf ("%.2f", w) : "<0.01"),
               (w > 0 ? sprintf ("%.0f", sz / 1048576 / w) : "-"), r / 1024, s }'
    rm -f "$tmp/a.json" "$tmp/b.json"
  done
done
