#!/usr/bin/env bash
# The plans of the decode stream kernel's GPU checks and benchmark (weft-compile
# --decode-stream; docs/codegen.md), a subset of make_plans.sh's that builds
# in a few minutes: Llama 3.1 8B layer sizes with 2 layers in fp16, bf16,
# int4, int8 and fp8 (quantized here from both) and all 32 layers in fp16,
# int4, int8 and fp8, each with the stream kernel and without, their
# checks.jsonl for check_plans.py, and weft-run.
#   test/gpu/make_stream_plans.sh DIR                  (here)
#   python3 test/gpu/check_plans.py DIR                (there: against transformers)
#   python3 test/gpu/bench_ab.py DIR/weft-run --buckets decode_b1 --contexts 512,4000 \
#     --labels kernels,stream llama8b:DIR/llama8b-fp16.weft:DIR/llama8b-fp16-stream.weft
# With WEFT_AB_LIBRARY=LIB (a folder holding weft/*.cuh, e.g. the last commit's
# weft/decode_stream.cuh from `git show`), also llama8b-fp16-stream-ab.weft: the
# 32-layer stream plan with its kernels compiled from LIB over the embedded
# library (weft-compile --kernel-library), the other side of an A/B of a
# kernel change (and llama8b-{int4,int8,fp8}-stream-ab.weft likewise):
#   python3 test/gpu/bench_ab.py DIR/weft-run --buckets decode_b1 --contexts 128,512,4000 \
#     --labels before,after l32:DIR/llama8b-fp16-stream-ab.weft:DIR/llama8b-fp16-stream.weft
# WEFT_STREAM_PLANS=REGEX: only the plans whose file names match (e.g.
# 'int8|fp8': the 8-bit checks and A/B plans).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$root/.gpu-stream}"
build="${WEFT_BUILD_DIR:-$root/build}"
compile="$build/tools/weft-compile/weft-compile"
cache="${WEFT_KERNEL_CACHE:-$build/test/kernel-cache}"
sparse="$root/test/Inputs/make_sparse_checkpoint.py"
rm -rf "$out"
mkdir -p "$out/cfg"
checks="$out/checks.jsonl"
: > "$checks"
# WEFT_STREAM_PLANS=REGEX builds (and checks) only the plans whose file
# names match it, e.g. 'int8|fp8' for the 8-bit ones: a smaller carry.
only="${WEFT_STREAM_PLANS:-.}"
source "$root/test/gpu/plan_helpers.sh"
for dt in float16:fp16 bfloat16:bf16; do
  model "llama8b-2l-${dt#*:}" 2 '{}' "${dt%:*}"
  for s in "" -stream; do
    build_plan --model "$out/ckpt" --topology h200 --max-batch 1 --prefill-chunks 8,32 \
      --decode-stream=$([[ -n $s ]] && echo true || echo false) -o "$out/llama8b-2l-${dt#*:}$s.weft"
    check "Llama-3.1-8B sizes, 2 layers, ${dt#*:}${s:+, stream kernel}" "llama8b-2l-${dt#*:}$s.weft" \
      "cfg/llama8b-2l-${dt#*:}" "${dt%:*}" 8 32 1
    check "  same, prompt 20" "llama8b-2l-${dt#*:}$s.weft" "cfg/llama8b-2l-${dt#*:}" "${dt%:*}" 20 32 1
  done
done
# 4-bit codes (--weight-dtype int4: group 128, 16-row tiles) at these sizes,
# from fp16 and bf16, with the stream kernel's tensor-core consumer and
# without; check_plans.py writes the codes beside each plan from the weights
# it makes (rtn4:, the file the compiler wrote from this header-only
# checkpoint holds zeros).
for dt in float16:fp16 bfloat16:bf16; do
  m="llama8b-2l-int4-${dt#*:}"
  model "$m" 2 '{}' "${dt%:*}"
  for s in "" -stream; do
    build_plan --model "$out/ckpt" --topology h200 --weight-dtype int4 --max-batch 1 --prefill-chunks 8,32 \
      --decode-stream=$([[ -n $s ]] && echo true || echo false) -o "$out/$m$s.weft" 2>/dev/null
    rm -f "$out/$m$s.weights.safetensors"
    check "Llama-3.1-8B sizes, 2 layers, int4 from ${dt#*:}${s:+, stream kernel}" "$m$s.weft" \
      "rtn4:cfg/$m" "${dt%:*}" 8 32 1
    check "  same, prompt 20" "$m$s.weft" "rtn4:cfg/$m" "${dt%:*}" 20 32 1
  done
done
# 8-bit codes with a scale per row (--weight-dtype int8: a (scale, zero)
# pair per row; fp8: E4M3, an f32 scale per row), from fp16 and bf16, with
# the stream kernel's CUDA-core consumer and without (rtn8: / fp8: as rtn4:).
for q in int8:rtn8 fp8:fp8; do
  for dt in float16:fp16 bfloat16:bf16; do
    m="llama8b-2l-${q%%:*}-${dt#*:}"
    model "$m" 2 '{}' "${dt%:*}"
    for s in "" -stream; do
      build_plan --model "$out/ckpt" --topology h200 --weight-dtype "${q%%:*}" --max-batch 1 \
        --prefill-chunks 8,32 --decode-stream=$([[ -n $s ]] && echo true || echo false) \
        -o "$out/$m$s.weft" 2>/dev/null
      rm -f "$out/$m$s.weights.safetensors"
      check "Llama-3.1-8B sizes, 2 layers, ${q%%:*} from ${dt#*:}${s:+, stream kernel}" "$m$s.weft" \
        "${q##*:}:cfg/$m" "${dt%:*}" 8 32 1
      check "  same, prompt 20" "$m$s.weft" "${q##*:}:cfg/$m" "${dt%:*}" 20 32 1
    done
  done
done
# Other shapes the kernel takes: Llama 3.2 3B's (hidden 3072, 3 query heads
# per KV head: rows that are not whole 2048-wide slices) in bf16, and
# Llama 2 7B's (FFN 11008, a KV head per query head) in fp16; 2 layers each.
model llama3b-2l 2 '{"hidden_size": 3072, "intermediate_size": 8192,
  "num_attention_heads": 24, "num_key_value_heads": 8, "head_dim": 128, "tie_word_embeddings": true}' bfloat16
build_plan --model "$out/ckpt" --topology h200 --max-batch 1 --prefill-chunks 8,32 -o "$out/llama3b-2l-stream.weft"
check "Llama-3.2-3B sizes, 2 layers, bf16, stream kernel" llama3b-2l-stream.weft cfg/llama3b-2l bfloat16 20 32 1
model llama2-2l 2 '{"intermediate_size": 11008, "num_key_value_heads": 32,
  "rope_scaling": null, "rope_theta": 10000.0}' float16
build_plan --model "$out/ckpt" --topology h200 --max-batch 1 --prefill-chunks 8,32 -o "$out/llama2-2l-stream.weft"
check "Llama-2-7B sizes, 2 layers, fp16, stream kernel" llama2-2l-stream.weft cfg/llama2-2l float16 20 32 1
model llama8b 32
for s in "" -stream; do
  build_plan --model "$out/ckpt" --topology h200 --max-batch 1 --decode-stream=$([[ -n $s ]] && echo true || echo false) \
    -o "$out/llama8b-fp16$s.weft"
  check "Llama-3.1-8B, all 32 layers${s:+, stream kernel}" "llama8b-fp16$s.weft" cfg/llama8b float16 8 32 1
done
# The same in int4, int8 and fp8 for bench_ab.py (random weights: the
# zeros the compiler writes beside them are not kept).
for q in int4 int8 fp8; do
  for s in "" -stream; do
    build_plan --model "$out/ckpt" --topology h200 --weight-dtype $q --max-batch 1 \
      --decode-stream=$([[ -n $s ]] && echo true || echo false) -o "$out/llama8b-$q$s.weft" 2>/dev/null
    rm -f "$out/llama8b-$q$s.weights.safetensors"
  done
done
if [[ -n ${WEFT_AB_LIBRARY:-} ]]; then
  build_plan --model "$out/ckpt" --topology h200 --max-batch 1 --kernel-library "$WEFT_AB_LIBRARY" \
    -o "$out/llama8b-fp16-stream-ab.weft"
  check "Llama-3.1-8B, all 32 layers, stream kernel from $WEFT_AB_LIBRARY" llama8b-fp16-stream-ab.weft \
    cfg/llama8b float16 8 32 1
  # The quantized 32-layer stream plans from the same library (bench_ab.py
  # beside llama8b-{int4,int8,fp8}-stream.weft; random weights).
  for q in int4 int8 fp8; do
    build_plan --model "$out/ckpt" --topology h200 --weight-dtype $q --max-batch 1 --decode-stream \
      --kernel-library "$WEFT_AB_LIBRARY" -o "$out/llama8b-$q-stream-ab.weft" 2>/dev/null
    rm -f "$out/llama8b-$q-stream-ab.weights.safetensors"
  done
fi
rm -rf "$out/ckpt"
cp "$build/tools/weft-run/weft-run" "$out/"
mkdir -p "$out/lib"
ldd "$out/weft-run" | awk '/sodium/ {print $3}' | xargs -r cp -L -t "$out/lib/"
echo "$(wc -l < "$checks") checks, $(ls "$out"/*.weft | wc -l) plans in $out"
