#!/usr/bin/env bash
# Installs what Weft's build needs on Debian 12 (only what is missing, quietly),
# then configures and builds everything in build/. Safe to run again.
#
#   scripts/setup.sh            full build (compiler, runtime, tools, tests)
#   WEFT_RUNTIME_ONLY=1 ...     runtime only (no LLVM/MLIR), e.g. on a GPU box
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${WEFT_BUILD_DIR:-$root/build}"
runtime_only="${WEFT_RUNTIME_ONLY:-0}"

packages=(cmake ninja-build python3 libgtest-dev nlohmann-json3-dev libpcre2-dev
          libflatbuffers-dev flatbuffers-compiler libcpp-httplib-dev pkgconf libutf8proc-dev
          python3-jinja2 libsodium-dev)
if [[ "$runtime_only" != 1 ]]; then
  packages+=(clang-19 lld-19 libclang-rt-19-dev llvm-19-dev llvm-19-tools
             libmlir-19-dev mlir-19-tools python3-numpy patch)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) == 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

cuda="${CUDA_HOME:-/usr/local/cuda}"
if [[ ! -f "$build/build.ninja" ]]; then
  args=(-G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
        -DCUDAToolkit_ROOT="$cuda")
  # The Python modules installed above (numpy, jinja2) belong to Debian's
  # python3; a python3 earlier on PATH (pyenv, a venv) may lack them.
  [[ -x /usr/bin/python3 ]] && args+=(-DPython3_EXECUTABLE=/usr/bin/python3)
  if [[ "$runtime_only" == 1 ]]; then
    args+=(-DWEFT_RUNTIME_ONLY=ON)
  else
    # clang builds the libFuzzer targets; lld links MLIR tools quickly.
    args+=(-DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19
           -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld
           -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld)
  fi
  cmake "${args[@]}" >"$build.configure.log" 2>&1 || {
    cat "$build.configure.log"; echo "setup: cmake configure failed"; exit 1; }
fi
ninja -C "$build" -j"${WEFT_JOBS:-$(nproc)}" --quiet
