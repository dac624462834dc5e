#!/bin/bash
# tools/device/stage-libs.sh DIR LIB...: run HERE. Copies each shared
# library LIB (a soname, e.g. libglib-2.0.so.0) that this machine has and
# the GPU machine lacks (TOOLCHAIN.md) into DIR, following links; one
# absent here is left out. Used by pack.sh and cpu_bench.sh.
set -euo pipefail
dir=$1
shift
mkdir -p "$dir"
for l in "$@"; do
  # no early exit in awk: ldconfig would die of SIGPIPE and, with pipefail,
  # end this script at random
  p=$(ldconfig -p | awk -v l="$l" '$1 == l && /x86-64/ && !f { print $NF; f = 1 }')
  [ -n "$p" ] && cp -L "$p" "$dir/"
done
exit 0
