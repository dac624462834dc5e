# bench/common.sh: the preamble of the bench_*.sh scripts that build this
# tree and time graphs of several sizes. Sourced, not run:
#   . "$(dirname "$0")/common.sh"
# It sets `root` (the repository), `tmp` (a directory removed on exit) and
# strict mode, and defines the functions below.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# bench_args DEFAULT_BUILD "DEFAULT_SIZES" [BUILD_DIR [NODES...]]: sets
# `build` (BUILD_DIR, else $root/DEFAULT_BUILD) and the array `sizes`
# (NODES, else the words of DEFAULT_SIZES).
bench_args () {
  local def_build=$1 def_sizes=$2
  shift 2
  build=${1:-$root/$def_build}
  shift || true
  sizes=("$@")
  [ ${#sizes[@]} -gt 0 ] || read -r -a sizes <<<"$def_sizes"
}

# bench_build [MESON_OPTION...] -- TARGET...: configures $build with
# buildtype=release and the options when it has no build.ninja yet, then
# builds the targets (quietly). A directory without build.ninja that holds
# every target already (binaries built elsewhere and copied, as on the GPU
# machine, which has no meson: tools/device/cpu_bench.sh) is used as it is.
bench_build () {
  local opts=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    opts+=("$1")
    shift
  done
  shift
  if [ ! -f "$build/build.ninja" ]; then
    local t prebuilt=1
    for t in "$@"; do
      [ -x "$build/$t" ] || prebuilt=0
    done
    [ $prebuilt = 1 ] && return 0
    meson setup "$build" "$root" --buildtype=release "${opts[@]}" >/dev/null
  fi
  ninja -C "$build" "$@" >/dev/null
}

# bench_schedgraph DEFAULT_SIZES [BUILD_DIR [SIZES...]]: the preamble of the
# scripts that time the schedgraph CLI: bench_args with build-bench, a
# release build of schedgraph and graphgen (no tests, no CUDA), `sg` and
# `gen` set to them, and GNU time required.
bench_schedgraph () {
  local def_sizes=$1
  shift
  bench_args build-bench "$def_sizes" "$@"
  bench_build -Dtests=disabled -Dcuda=disabled -- tools/schedgraph/schedgraph tools/graphgen/graphgen
  sg=$build/tools/schedgraph/schedgraph
  gen=$build/tools/graphgen/graphgen
  bench_need_time
}

# bench_need_time: stops the script unless GNU time is there (peak RSS):
# `gtime` is /usr/bin/time, or $SG_TIME (a copy of GNU time's binary).
gtime=${SG_TIME:-/usr/bin/time}
bench_need_time () {
  [ -x "$gtime" ] || {
    echo "$(basename "$0"): needs GNU time at $gtime (apt-get install time, or SG_TIME=PATH)" >&2
    exit 1
  }
}

# bench_size_args SIZE: sets the array `size_args` to graphgen's arguments
# for the pipeline's graph sizes (issue 16; dp 2 x tp 4): 6k (32 layers,
# H=4096, ~6,684 nodes), 36k and 1m (--target-nodes, Llama-70B widths:
# H=8192, F=28672, 64 heads); stops the script on another size.
bench_size_args () {
  local big=(--hidden 8192 --ffn 28672 --heads 64 --dp 2 --tp 4)
  case $1 in
    6k) size_args=(--layers 32 --hidden 4096 --dp 2 --tp 4) ;;
    36k) size_args=(--target-nodes 36000 "${big[@]}") ;;
    1m) size_args=(--target-nodes 1000000 "${big[@]}") ;;
    *) echo "$(basename "$0"): unknown size $1 (6k, 36k, 1m)" >&2; exit 2 ;;
  esac
}

# bench_machine: the "machine:" line each RESULTS.md section starts with.
bench_machine () {
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
}
