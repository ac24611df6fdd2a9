#!/usr/bin/env bash
# Whether a change to the kernel library changes any generated kernel: builds
# a spread of plans twice, with the kernel library built into weft-compile
# and with LIB's headers over it (--kernel-library), for sm_90 and sm_86, and
# compares every kernel's PTX (scripts/kernel_ptx.py). For refactoring the
# CUDA headers where no GPU is at hand: the same PTX needs no new GPU run.
#   scripts/kernel_refactor_check.sh [LIB [OUT]]
# LIB: a folder holding weft/*.cuh (default targets/CUDA/kernels: the working
# tree's, against the build's); OUT: scratch (default a temporary folder).
# The spread: the checkpoint fixtures (f32, f16, bf16; Gemma 2, Qwen 3, a
# tied head) and Llama 3.1 8B shapes with 2 layers in f16 and bf16, 16-bit,
# int4, int8 and fp8 (an int4 LM head too), decode buckets to 64, prefill
# chunks of 32 and 512, the decode stream kernel and tensor parallel over 2.
# Exits 0 when every kernel compiled to the same PTX.
#
# WEFT_BEFORE_COMPILE=OLD/weft-compile compares two compilers instead, for a
# change of the emitters: the spread built by OLD (before) and by the
# build's (after), with LIB left out, kernels matched by name without the
# source hash and their PTX compared with entry symbols and parameter
# names set aside (kernel_ptx.py --by-base-name); where the PTX differs, it
# also compares each name's instruction counts, parameter loads aside
# (--counts: for a change of kernels' parameters).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
lib="$(cd "${1:-$root/targets/CUDA/kernels}" && pwd)"
out="${2:-$(mktemp -d)}"
compile="${WEFT_BUILD_DIR:-$root/build}/tools/weft-compile/weft-compile"
fixtures="$root/test/fixtures"
mkdir -p "$out"
shapes='{"hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256}'
for dt in float16 bfloat16; do
  [[ -d $out/l8-$dt ]] || python3 "$root/test/Inputs/make_sparse_checkpoint.py" "$out/l8-$dt" \
    --layers 2 --dtype $dt --config "$shapes"
done
before_compile="${WEFT_BEFORE_COMPILE:-}"
plans() { # plans CACHE [weft-compile args]: the spread, into CACHE
  local cache=$1
  shift
  local compiler="$compile"
  [[ -n $before_compile && $cache == */before ]] && compiler="$before_compile"
  c() { "$compiler" --kernel-cache "$cache" "$@" -o "$out/x.weft" >/dev/null 2>&1 ||
          { echo "weft-compile failed: $*" >&2; exit 1; }; }
  for arch in sm_90 sm_86; do
    for f in llama qwen2 gemma2 mistral qwen3 llama_tied_bf16; do
      c "$@" --model "$fixtures/$f" --topology h200 --arch $arch --max-batch 8 --prefill-chunks 16,64
    done
    for dt in float16 bfloat16; do
      c "$@" --model "$out/l8-$dt" --topology h200 --arch $arch --max-batch 64 --prefill-chunks 32,512
      c "$@" --model "$out/l8-$dt" --topology h200 --arch $arch --max-batch 1 --prefill-chunks 32
      c "$@" --model "$out/l8-$dt" --topology h200 --arch $arch --weight-dtype int4 --max-batch 64 \
        --prefill-chunks 32,512
      c "$@" --model "$out/l8-$dt" --topology h200 --arch $arch --weight-dtype int4 --max-batch 1 \
        --lm-head-dtype int4 --prefill-chunks 32
      c "$@" --model "$out/l8-$dt" --topology h200 --arch $arch --weight-dtype int8 --max-batch 16 \
        --prefill-chunks 64
    done
    c "$@" --model "$out/l8-float16" --topology 2xh200:nvlink --stages 0+1 --arch $arch --max-batch 8 \
      --prefill-chunks 64
  done
  c "$@" --model "$out/l8-float16" --topology h200 --weight-dtype fp8 --max-batch 16 --prefill-chunks 64
  c "$@" --model "$out/l8-float16" --topology h200 --weight-dtype fp8 --max-batch 1 --decode-stream \
    --prefill-chunks 32
}
rm -rf "$out/before" "$out/after"
if [[ -n $before_compile ]]; then
  echo "building the plans with $before_compile..."
  plans "$out/before"
  echo "building them with $compile..."
  plans "$out/after"
  status=0
  python3 "$root/scripts/kernel_ptx.py" --by-base-name "$out/before" "$out/after" || status=$?
  # Where the PTX differs (a kernel's parameters changed), whether the
  # bodies still have the same instruction counts.
  if ((status)); then
    echo "instruction counts, parameter loads aside:"
    python3 "$root/scripts/kernel_ptx.py" --by-base-name --counts "$out/before" "$out/after" || true
  fi
  exit $status
fi
echo "building the plans with the library built into $compile..."
plans "$out/before"
echo "building them with $lib over it..."
plans "$out/after" --kernel-library "$lib"
python3 "$root/scripts/kernel_ptx.py" "$out/before" "$out/after"
