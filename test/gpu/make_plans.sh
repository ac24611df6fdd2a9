#!/usr/bin/env bash
# Compiles the plans that check_plans.py runs on a GPU machine, into DIR
# (default .gpu/), with the Python FlatBuffers bindings and wheel it needs:
#   test/gpu/make_plans.sh [DIR]      (here: needs the full build)
#   PYTHONPATH=DIR/pyfb:... python3 test/gpu/check_plans.py DIR   (there)
# Every plan is emitted for sm_90 (--arch), so 3090+3060 partitions run on an
# H200 with both declared devices mapped onto it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$root/.gpu}"
build="${WEFT_BUILD_DIR:-$root/build}"
compile="$build/tools/weft-compile/weft-compile"
cache="${WEFT_KERNEL_CACHE:-$build/test/kernel-cache}"
mkdir -p "$out"
for f in llama llama_tied_bf16 mistral qwen2 llama_sharded; do
  "$compile" --model "$root/test/fixtures/$f" --topology h200 --max-batch 1 \
    --prefill-chunks 8 --arch sm_90 --kernel-cache "$cache" -o "$out/$f.weft" >/dev/null
done
# Llama 3.1 8B layer sizes, 2 layers, fp16 (a sparse checkpoint: headers only).
ckpt="$out/real8b-2l-checkpoint"
rm -rf "$ckpt"
python3 "$root/test/Inputs/make_sparse_checkpoint.py" "$ckpt" --layers 2 --dtype float16
"$compile" --model "$ckpt" --topology h200 --max-batch 2 --prefill-chunks 8,32 \
  --arch sm_90 --kernel-cache "$cache" -o "$out/real8b-2l.weft" >/dev/null
# The same model split over a capped 3090 and 3060: a two-stage pipeline.
"$compile" --model "$ckpt" --topology rtx3090+rtx3060 --memory-cap 0=2.2GB,1=2.2GB \
  --max-batch 1 --prefill-chunks 8 --arch sm_90 --kernel-cache "$cache" \
  -o "$out/real8b-2l-pipeline.weft" >/dev/null
rm -rf "$ckpt" "$out/pyfb"
flatc --python -o "$out/pyfb" "$root/runtime/plan/plan.fbs"
ls "$out"/*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps \
  --only-binary=:all: -d "$out" flatbuffers==24.3.25
echo "plans in $out"
# Runtime binary and the benchmark plan: full Llama 3.1 8B in fp16, batch 1.
bench="$out/llama8b-fp16-checkpoint"
python3 "$root/test/Inputs/make_sparse_checkpoint.py" "$bench" --dtype float16
"$compile" --model "$bench" --topology h200 --max-batch 1 --prefill-chunks 32 \
  --arch sm_90 --kernel-cache "$cache" -o "$out/llama8b-fp16.weft" >/dev/null
# Batched decode (buckets up to 100 streams, KV cache for 100 x 4096 tokens).
"$compile" --model "$bench" --topology h200 --batch 100 --max-batch 100 \
  --prefill-chunks 512 --arch sm_90 --kernel-cache "$cache" \
  -o "$out/llama8b-fp16-b100.weft" >/dev/null
rm -rf "$bench"
if [[ -x "$build/tools/weft-run/weft-run" ]]; then
  cp "$build/tools/weft-run/weft-run" "$out/"
fi
