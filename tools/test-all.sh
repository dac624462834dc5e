#!/bin/bash
# tools/test-all.sh: builds and runs every test twice, as CI does, then the
# fuzz harnesses:
#  1. a warnings-as-errors build (-Dwerror=true): Check unit tests, golden
#     tests, MPI tests;
#  2. an address,undefined sanitizer build of the same tests;
#  3. a clang libFuzzer build (tests/fuzz/README.md): a bounded smoke of
#     every harness and a replay of every reproducer.
# Exits non-zero if any build or test fails. Build dirs: build-ci,
# build-ci-asan, build-ci-fuzz (reused when present). Extra arguments go to
# the `meson test` of steps 1 and 2.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1

# OpenMPI refuses to run as root without these (CI containers run as root).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

configure() {
  local dir=$1
  shift
  if [ -f "$dir/build.ninja" ]; then
    meson setup --reconfigure "$dir" "$root" "$@" >/dev/null
  else
    meson setup "$dir" "$root" "$@" >/dev/null
  fi
}

status=0
step() {
  local name=$1
  shift
  echo "=== $name"
  if ! "$@"; then
    echo "=== $name: FAILED"
    status=1
    return 1
  fi
}

# cuDNN attention (runtime/cuda/attn_cudnn.cpp) compiles where cuDNN's
# headers are beside CUDA's and cudnn-frontend can be fetched; otherwise the
# CUDA backend builds with the math path alone (-Dcudnn=auto).
bash tools/setup-cudnn-frontend.sh ||
  echo "=== cudnn-frontend unavailable: building without cuDNN attention"
if step "configure build-ci (werror)" configure build-ci -Dwerror=true -Dcuda=auto; then
  step "build build-ci" ninja -C build-ci &&
    step "test build-ci" meson test -C build-ci --print-errorlogs "$@"
fi

# The sanitizer build leaves CUDA out: device code is not instrumented and
# there is no GPU to run it on in CI. MPI's own allocations are not ours.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$root/tools/lsan.supp:print_suppressions=0
if step "configure build-ci-asan (address,undefined)" configure build-ci-asan -Dwerror=true \
    -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled; then
  step "build build-ci-asan" ninja -C build-ci-asan &&
    step "test build-ci-asan" meson test -C build-ci-asan --print-errorlogs "$@"
fi

# 3. The libFuzzer harnesses (tests/fuzz): clang with ASan + UBSan, a
# bounded smoke of every harness (fuzz_smoke_seconds each, fixed seed; two
# at a time on 2 cores) and a replay of every reproducer. Needs clang and
# its libFuzzer runtime: installed here when missing and running as root
# (CI); SG_SKIP_FUZZ=1 leaves the step out (say so when you report).
have_libfuzzer() {
  command -v clang >/dev/null &&
    echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' |
    clang -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null
}
if [ "${SG_SKIP_FUZZ:-0}" = 1 ]; then
  echo "=== fuzz: SKIPPED (SG_SKIP_FUZZ=1)"
else
  if ! have_libfuzzer && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    step "install clang and libFuzzer" bash -c \
      'apt-get update -qq && apt-get install -y -qq clang libclang-rt-14-dev >/dev/null'
  fi
  if ! have_libfuzzer; then
    echo "=== fuzz: clang with libFuzzer not found (apt-get install clang libclang-rt-14-dev)"
    echo "=== fuzz: FAILED"
    status=1
  elif CC=clang step "configure build-ci-fuzz (clang, libFuzzer, address,undefined)" \
      configure build-ci-fuzz -Dwerror=true -Dfuzz=true -Db_sanitize=address,undefined \
      -Db_lundef=false -Dcuda=disabled -Dtests=disabled; then
    step "build build-ci-fuzz" ninja -C build-ci-fuzz &&
      step "test build-ci-fuzz (suite fuzz)" meson test -C build-ci-fuzz --suite fuzz \
        --num-processes 2 --print-errorlogs
  fi
fi

if [ $status -eq 0 ]; then
  echo "=== all tests passed (werror, address,undefined and fuzz builds)"
else
  echo "=== FAILED (see above)"
fi
exit $status
