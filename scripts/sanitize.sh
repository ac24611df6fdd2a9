#!/usr/bin/env bash
# The runtime's unit tests (every parser of untrusted input: safetensors,
# plans and their seals, tokenizers, chat templates, request bodies, the
# scheduler and the server) built with AddressSanitizer and
# UndefinedBehaviorSanitizer and run once; any report fails. Runtime only
# (no LLVM), in build-asan/. Timing tests are left out: sanitizers slow
# everything down. Called by scripts/test.sh; WEFT_SANITIZE=0 skips it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${WEFT_SANITIZE_BUILD_DIR:-$root/build-asan}"
flags="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -G Ninja -S "$root" -B "$build" -DWEFT_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld \
    "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_C_FLAGS=$flags" \
    -DCUDAToolkit_ROOT="${CUDA_HOME:-/usr/local/cuda}" >"$build.configure.log" 2>&1 || {
    cat "$build.configure.log"; echo "sanitize: cmake configure failed"; exit 1; }
fi
ninja -C "$build" -j"${WEFT_JOBS:-$(nproc)}" --quiet weft-unit-tests
echo "sanitize: runtime unit tests under AddressSanitizer and UndefinedBehaviorSanitizer"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  "$build/test/unit/weft-unit-tests" --gtest_brief=1 --gtest_filter='-*InUnderASecond*'
