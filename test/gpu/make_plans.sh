#!/usr/bin/env bash
# Compiles everything the GPU checks run, into DIR (default .gpu/): plans,
# the config.json of every model they were compiled from, checks.jsonl
# (what check_plans.py runs), the weft-run, weft-serve, weft-bench and weft-detect
# binaries and a chat template for bench_serve.sh.
#   test/gpu/make_plans.sh [DIR]        (here: needs the full build)
#   test/gpu/run_all.sh DIR             (there: checks, then benchmarks)
# WEFT_PLANS=REGEX: only the plans whose file names match (and their checks).
# Every plan is emitted for sm_90 (--arch), so 3090+3060 partitions run on an
# H200 with both declared devices mapped onto it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$root/.gpu}"
build="${WEFT_BUILD_DIR:-$root/build}"
compile="$build/tools/weft-compile/weft-compile"
cache="${WEFT_KERNEL_CACHE:-$build/test/kernel-cache}"
sparse="$root/test/Inputs/make_sparse_checkpoint.py"
rm -rf "$out/cfg" "$out"/*.weft "$out"/*.weights.safetensors
mkdir -p "$out/cfg"
checks="$out/checks.jsonl"
: > "$checks"
# WEFT_PLANS=REGEX builds (and checks) only the plans whose file names
# match it, e.g. 'bench' for bench_quantized.py's six: a smaller carry.
only="${WEFT_PLANS:-.}"
source "$root/test/gpu/plan_helpers.sh"

# The Hugging Face fixtures: one device, and tensor parallel over two.
for f in llama:float32 llama_tied_bf16:bfloat16 mistral:float16 qwen2:bfloat16 llama_sharded:float16 qwen3:bfloat16 gemma2:float32; do
  name="${f%%:*}"; dtype="${f##*:}"
  # Plans sample by default (temperature 0 is greedy); two fixtures keep
  # the argmax head so both ends of the graph stay checked.
  head=""
  [[ $name == llama || $name == mistral ]] && head=--sampling=false
  build_plan --model "$root/test/fixtures/$name" --topology h200 --max-batch 1 --prefill-chunks 8 $head -o "$out/$name.weft"
  check "fixture $name" "$name.weft" "fixture:$name" "$dtype" 8 32 1
  if [[ "$name" != llama_tied_bf16 ]]; then # one KV head: no TP
    build_plan --model "$root/test/fixtures/$name" --topology 2xh200:nvlink --stages 0+1 --max-batch 1 \
      --prefill-chunks 8 -o "$out/$name-tp.weft"
    check "fixture $name, TP 2" "$name-tp.weft" "fixture:$name" "$dtype" 8 32 2
  fi
done

build_plan --model "$root/test/fixtures/qwen2" --topology h200 --batch 4 --max-batch 32 --prefill-chunks 8,32 \
  -o "$out/qwen2-mb32.weft"
check_batch "fixture qwen2 (bf16), 24 sequences" qwen2-mb32.weft fixture:qwen2 bfloat16 16 1 "$(lengths 24 60)"

# Quantized (issue 12): the AWQ, GPTQ 4-bit, GPTQ 8-bit and
# compressed-tensors (ct4, ct8; ct4-bf16 from a BF16 model) twins of the
# llama fixture that make_quantized_fixture.py writes at build time, with
# their dequantized twins for transformers. One sequence, 24 at once (batched decode, prefill
# chunks, token tiles), and TP 2 where the groups allow it (GPTQ 8-bit and
# ct8 have one group per row).
quantized="$build/test/unit/quantized"
for fd in awq:float16 gptq4:float16 gptq8:float16 ct4:float16 ct8:float16 ct4-bf16:bfloat16; do
  f="${fd%%:*}"; dtype="${fd##*:}"
  rm -rf "$out/q-$f" "$out/q-$f-dequant"
  cp -r "$quantized/$f" "$out/q-$f"
  cp -r "$quantized/$f-dequant" "$out/q-$f-dequant"
  build_plan --model "$out/q-$f" --topology h200 --max-batch 1 --prefill-chunks 8 -o "$out/q-$f.weft"
  check "quantized $f" "q-$f.weft" "quant:q-$f" "$dtype" 8 32 1
  build_plan --model "$out/q-$f" --topology h200 --batch 4 --max-batch 32 --prefill-chunks 8,32,96 \
    -o "$out/q-$f-mb32.weft"
  check_batch "quantized $f, 24 sequences" "q-$f-mb32.weft" "quant:q-$f" "$dtype" 16 1 "$(lengths 24 60)"
  if [[ $f == awq || $f == gptq4 || $f == ct4 ]]; then
    build_plan --model "$out/q-$f" --topology 2xh200:nvlink --stages 0+1 --max-batch 1 \
      --prefill-chunks 8 -o "$out/q-$f-tp.weft"
    check "quantized $f, TP 2" "q-$f-tp.weft" "quant:q-$f" float16 8 32 2
  fi
done

# Quantized at compile time (--weight-dtype int4 / int8) from the F16 copy
# of the llama fixture, against transformers on the twins numpy quantized
# by the same rule (make_quantized_fixture.py: rtn4-dequant, rtn8-dequant).
for b in 4 8; do
  rm -rf "$out/q-rtn$b" "$out/q-rtn$b-dequant"
  cp -r "$quantized/f16" "$out/q-rtn$b"
  cp -r "$quantized/rtn$b-dequant" "$out/q-rtn$b-dequant"
  build_plan --model "$out/q-rtn$b" --topology h200 --weight-dtype int$b --max-batch 1 \
    --prefill-chunks 8 -o "$out/q-rtn$b.weft" 2>/dev/null
  check "quantized here: int$b" "q-rtn$b.weft" "quant:q-rtn$b" float16 8 32 1
  build_plan --model "$out/q-rtn$b" --topology h200 --weight-dtype int$b --batch 4 --max-batch 32 \
    --prefill-chunks 8,32,96 -o "$out/q-rtn$b-mb32.weft" 2>/dev/null
  check_batch "quantized here: int$b, 24 sequences" "q-rtn$b-mb32.weft" "quant:q-rtn$b" float16 16 1 "$(lengths 24 60)"
done
# The same from the BF16 copy (scales in bf16, bf16 tensor cores), and FP8
# E4M3 from both (its twins hold the f32 products; transformers rounds them
# to the check's dtype).
for q in int4:rtn4:bf16 int8:rtn8:bf16 fp8:fp8:f16 fp8:fp8:bf16; do
  IFS=: read -r wd twin src <<< "$q"
  tag="$twin"; [[ $src == bf16 ]] && tag="$twin-bf16"
  dtype=float16; [[ $src == bf16 ]] && dtype=bfloat16
  rm -rf "$out/q-$tag" "$out/q-$tag-dequant"
  cp -r "$quantized/$src" "$out/q-$tag"
  cp -r "$quantized/$tag-dequant" "$out/q-$tag-dequant"
  build_plan --model "$out/q-$tag" --topology h200 --weight-dtype "$wd" --max-batch 1 \
    --prefill-chunks 8 -o "$out/q-$tag.weft" 2>/dev/null
  check "quantized here: $wd from $src" "q-$tag.weft" "quant:q-$tag" "$dtype" 8 32 1
  build_plan --model "$out/q-$tag" --topology h200 --weight-dtype "$wd" --batch 4 --max-batch 32 \
    --prefill-chunks 8,32,96 -o "$out/q-$tag-mb32.weft" 2>/dev/null
  check_batch "quantized here: $wd from $src, 24 sequences" "q-$tag-mb32.weft" "quant:q-$tag" "$dtype" 16 1 "$(lengths 24 60)"
done

# model NAME LAYERS CONFIG_JSON [DTYPE]: a sparse checkpoint (headers only),
# its config.json kept in cfg/NAME for transformers on the GPU machine.

# Llama 3.1 8B layer sizes, 2 layers: one device, a 3090+3060 pipeline
# (capped so the layers split), tensor parallel.
model llama8b-2l 2 '{}'
build_plan --model "$out/ckpt" --topology h200 --max-batch 2 --prefill-chunks 8,32 -o "$out/llama8b-2l.weft"
build_plan --model "$out/ckpt" --topology rtx3090+rtx3060 --memory-cap 0=2.2GB,1=2.2GB --max-batch 1 \
  --prefill-chunks 8 -o "$out/llama8b-2l-pipeline.weft"
build_plan --model "$out/ckpt" --topology 2xh200:nvlink --stages 0+1 --max-batch 1 --prefill-chunks 8,32 \
  -o "$out/llama8b-2l-tp.weft"
check "Llama-3.1-8B sizes, 2 layers" llama8b-2l.weft cfg/llama8b-2l float16 8 32 1
check "  same, prompt 20 (cuBLASLt prefill)" llama8b-2l.weft cfg/llama8b-2l float16 20 32 1
check "  same, pipeline 3090+3060" llama8b-2l-pipeline.weft cfg/llama8b-2l float16 8 32 2
check "  same, TP 2" llama8b-2l-tp.weft cfg/llama8b-2l float16 8 32 2
check "  same, TP 2, prompt 20" llama8b-2l-tp.weft cfg/llama8b-2l float16 20 32 2
# Quantized at compile time, at these sizes: the codes the compiler writes
# from this header-only checkpoint are zeros, so check_plans.py writes the
# file beside the plan from the weights it makes (rtn4:, rtn8:).
for b in 4 8; do
  build_plan --model "$out/ckpt" --topology h200 --weight-dtype int$b --max-batch 4 \
    --prefill-chunks 8,32,128 -o "$out/llama8b-2l-int$b.weft" 2>/dev/null
  rm -f "$out/llama8b-2l-int$b.weights.safetensors"
  check "  same, int$b quantized here" "llama8b-2l-int$b.weft" "rtn$b:cfg/llama8b-2l" float16 8 32 1
  check "  same, int$b quantized here, prompt 100" "llama8b-2l-int$b.weft" "rtn$b:cfg/llama8b-2l" float16 100 32 1
done
build_plan --model "$out/ckpt" --topology h200 --weight-dtype fp8 --max-batch 4 \
  --prefill-chunks 8,32,128 -o "$out/llama8b-2l-fp8.weft" 2>/dev/null
rm -f "$out/llama8b-2l-fp8.weights.safetensors"
check "  same, fp8 quantized here" "llama8b-2l-fp8.weft" "fp8:cfg/llama8b-2l" float16 8 32 1
check "  same, fp8 quantized here, prompt 100" "llama8b-2l-fp8.weft" "fp8:cfg/llama8b-2l" float16 100 32 1
# The LM head quantized too (--lm-head-dtype int8 / int4) over int4 layers:
# every decode bucket to 64 (the quantized GEMV to 32, expanded codes above)
# and prefill chunks; greedy (argmax candidates in the GEMV) for the int4
# head. check_plans.py quantizes the head as the projections
# ("rtn4+rtn8:": projections rtn4, head rtn8).
for h in 8 4; do
  build_plan --model "$out/ckpt" --topology h200 --weight-dtype int4 --lm-head-dtype int$h \
    --batch 8 --max-batch 64 --prefill-chunks 8,32,128 -o "$out/llama8b-2l-int4-head$h.weft" 2>/dev/null
  rm -f "$out/llama8b-2l-int4-head$h.weights.safetensors"
  check "  same, int4 quantized here, int$h LM head" "llama8b-2l-int4-head$h.weft" \
    "rtn4+rtn$h:cfg/llama8b-2l" float16 8 32 1
  check "  same, int4, int$h LM head, prompt 100" "llama8b-2l-int4-head$h.weft" \
    "rtn4+rtn$h:cfg/llama8b-2l" float16 100 32 1
  check_batch "  same, int4, int$h LM head, 64 sequences" "llama8b-2l-int4-head$h.weft" \
    "rtn4+rtn$h:cfg/llama8b-2l" float16 8 1 "$(lengths 64 300)"
done
# The quantized head on the last stage of a 3090+3060 pipeline, and beside
# tensor-parallel layers.
build_plan --model "$out/ckpt" --topology rtx3090+rtx3060 --stages 0:1,1 --weight-dtype int4 \
  --lm-head-dtype int8 --max-batch 4 --prefill-chunks 8,32 -o "$out/llama8b-2l-int4-head8-pipeline.weft" 2>/dev/null
build_plan --model "$out/ckpt" --topology 2xh200:nvlink --stages 0+1 --weight-dtype int4 \
  --lm-head-dtype int4 --max-batch 4 --prefill-chunks 8,32 -o "$out/llama8b-2l-int4-head4-tp.weft" 2>/dev/null
rm -f "$out"/llama8b-2l-int4-head*-{pipeline,tp}.weights.safetensors
check "  same, int4, int8 LM head, pipeline 3090+3060" "llama8b-2l-int4-head8-pipeline.weft" \
  "rtn4+rtn8:cfg/llama8b-2l" float16 8 32 2
check "  same, int4, int4 LM head, TP 2" "llama8b-2l-int4-head4-tp.weft" "rtn4+rtn4:cfg/llama8b-2l" float16 8 32 2
build_plan --model "$out/ckpt" --topology h200 --weight-dtype int4 --lm-head-dtype int4 --sampling=false \
  --max-batch 4 --prefill-chunks 8,32,128 -o "$out/llama8b-2l-int4-head4-greedy.weft" 2>/dev/null
rm -f "$out/llama8b-2l-int4-head4-greedy.weights.safetensors"
check "  same, int4, int4 LM head, greedy plan (argmax in the GEMV)" "llama8b-2l-int4-head4-greedy.weft" \
  "rtn4+rtn4:cfg/llama8b-2l" float16 8 32 1
# 100 sequences at once through int4 codes: decode buckets to 100, whose
# largest expand the codes for cuBLASLt.
build_plan --model "$out/ckpt" --topology h200 --weight-dtype int4 --batch 100 --max-batch 100 \
  --decode-buckets 1,8,32,64,100 --prefill-chunks 32,512 -o "$out/llama8b-2l-int4-b100.weft" 2>/dev/null
rm -f "$out/llama8b-2l-int4-b100.weights.safetensors"
check_batch "  same, int4 quantized here, 100 sequences" llama8b-2l-int4-b100.weft rtn4:cfg/llama8b-2l float16 8 1 "$(lengths 100 300)"
# The same layers in BF16: the batch-1 decode stream kernel in bf16, then
# int4 and fp8 with bf16 tensor cores.
model llama8b-2l-bf16 2 '{}' bfloat16
build_plan --model "$out/ckpt" --topology h200 --max-batch 1 --prefill-chunks 8,32 \
  -o "$out/llama8b-2l-bf16.weft"
check "Llama-3.1-8B sizes, 2 layers, bf16 (decode stream kernel)" llama8b-2l-bf16.weft \
  cfg/llama8b-2l-bf16 bfloat16 8 32 1
for wd in int4:rtn4 fp8:fp8; do
  build_plan --model "$out/ckpt" --topology h200 --weight-dtype "${wd%%:*}" --max-batch 4 \
    --prefill-chunks 8,32,128 -o "$out/llama8b-2l-bf16-${wd%%:*}.weft" 2>/dev/null
  rm -f "$out/llama8b-2l-bf16-${wd%%:*}.weights.safetensors"
  check "Llama-3.1-8B sizes, 2 layers, bf16, ${wd%%:*} quantized here" "llama8b-2l-bf16-${wd%%:*}.weft" \
    "${wd##*:}:cfg/llama8b-2l-bf16" bfloat16 8 32 1
  check "  same, prompt 100" "llama8b-2l-bf16-${wd%%:*}.weft" "${wd##*:}:cfg/llama8b-2l-bf16" bfloat16 100 32 1
done
# For sanitize.sh: every decode bucket to 64 and prefill chunks of 32 and
# 512 through FP8 codes (fp16) and int4 codes with bf16 tensor cores.
build_plan --model "$out/ckpt" --topology h200 --weight-dtype int4 --batch 8 --max-batch 64 \
  --prefill-chunks 32,512 -o "$out/llama8b-2l-bf16-int4-mb64.weft" 2>/dev/null
model llama8b-2l 2 '{}'
build_plan --model "$out/ckpt" --topology h200 --weight-dtype fp8 --batch 8 --max-batch 64 \
  --prefill-chunks 32,512 -o "$out/llama8b-2l-fp8-mb64.weft" 2>/dev/null
rm -f "$out"/llama8b-2l-*-mb64.weights.safetensors
# 64 sequences at once through FP8 codes and through int4 codes with bf16
# tensor cores (buckets 1 to 64, prefill chunks of several sequences).
check_batch "Llama-3.1-8B sizes, 2 layers, fp8 quantized here, 64 sequences" llama8b-2l-fp8-mb64.weft \
  fp8:cfg/llama8b-2l float16 32 1 "$(lengths 64 700)"
check_batch "Llama-3.1-8B sizes, 2 layers, bf16, int4 quantized here, 64 sequences" \
  llama8b-2l-bf16-int4-mb64.weft rtn4:cfg/llama8b-2l-bf16 bfloat16 32 1 "$(lengths 64 700)"
# Batched: every decode bucket (1 to 64) with sequences of different
# lengths, prefill chunks holding several sequences beside decode tokens;
# one device, a pipeline and tensor parallel.
build_plan --model "$out/ckpt" --topology h200 --batch 8 --max-batch 64 --prefill-chunks 32,512 \
  -o "$out/llama8b-2l-mb64.weft"
build_plan --model "$out/ckpt" --topology rtx3090+rtx3060 --memory-cap 0=2.4GB,1=2.4GB --batch 8 \
  --max-batch 64 --prefill-chunks 32,512 -o "$out/llama8b-2l-pipeline-mb64.weft"
build_plan --model "$out/ckpt" --topology 2xh200:nvlink --stages 0+1 --batch 8 --max-batch 64 \
  --prefill-chunks 32,512 -o "$out/llama8b-2l-tp-mb64.weft"
for n in 3 8 16 32; do
  check_batch "Llama-3.1-8B sizes, 2 layers, $n sequences" llama8b-2l-mb64.weft cfg/llama8b-2l float16 16 1 "$(lengths $n 300)"
done
check_batch "Llama-3.1-8B sizes, 2 layers, 64 sequences" llama8b-2l-mb64.weft cfg/llama8b-2l float16 32 1 "$(lengths 64 700)"
check_batch "  same, pipeline 3090+3060" llama8b-2l-pipeline-mb64.weft cfg/llama8b-2l float16 32 2 "$(lengths 64 700)"
check_batch_args "  same, pipeline, 2 micro-batches in flight" llama8b-2l-pipeline-mb64.weft cfg/llama8b-2l float16 32 2 "$(lengths 64 700)" '["--micro-batches", "2"]'
check_batch "  same, TP 2" llama8b-2l-tp-mb64.weft cfg/llama8b-2l float16 32 2 "$(lengths 64 700)"
# Prefix caching (weft-run --prompts shares KV blocks by content): 64
# prompts of 40-700 tokens that begin with 0-600 tokens of one base prompt,
# around the 16-token block boundaries, each against transformers alone.
shared=$(python3 -c 'import random; r=random.Random(58); print(",".join(str(r.choice([0,1,15,16,17,31,32,33,100,255,256,257,600])) for _ in range(64)))')
shared_lengths=$(python3 -c 'import random,sys; r=random.Random(59); s=[int(x) for x in sys.argv[1].split(",")]; print(",".join(str(min(700, k+r.randint(1,100))) for k in s))' "$shared")
check_shared "Llama-3.1-8B sizes, 2 layers, 64 sequences" llama8b-2l-mb64.weft cfg/llama8b-2l float16 32 1 "$shared_lengths" "$shared"
check_shared "  same, pipeline 3090+3060" llama8b-2l-pipeline-mb64.weft cfg/llama8b-2l float16 32 2 "$shared_lengths" "$shared"
check_shared "  same, TP 2" llama8b-2l-tp-mb64.weft cfg/llama8b-2l float16 32 2 "$shared_lengths" "$shared"
# The LM head of prefill chunks on each sequence's last row only
# (--logits-rows=last): sequences alone and 64 at once (chunks holding
# several sequences beside decode tokens), sampling and greedy, a 3090+3060
# pipeline, and an int4 head of a 16-sequence plan (its GEMV on 16 compact
# rows).
for g in true false; do
  build_plan --model "$out/ckpt" --topology h200 --batch 8 --max-batch 64 --prefill-chunks 32,512 \
    --logits-rows=last --sampling=$g -o "$out/llama8b-2l-lastrows-s$g.weft"
  check "  same, logits of the last rows (sampling=$g), prompt 100" llama8b-2l-lastrows-s$g.weft \
    cfg/llama8b-2l float16 100 32 1
  check_batch "  same, logits of the last rows (sampling=$g), 64 sequences" llama8b-2l-lastrows-s$g.weft \
    cfg/llama8b-2l float16 32 1 "$(lengths 64 700)"
done
build_plan --model "$out/ckpt" --topology rtx3090+rtx3060 --memory-cap 0=2.4GB,1=2.4GB --batch 8 \
  --max-batch 64 --prefill-chunks 32,512 --logits-rows=last -o "$out/llama8b-2l-lastrows-pipeline.weft"
check_batch "  same, logits of the last rows, pipeline 3090+3060" llama8b-2l-lastrows-pipeline.weft \
  cfg/llama8b-2l float16 32 2 "$(lengths 64 700)"
build_plan --model "$out/ckpt" --topology h200 --weight-dtype int4 --lm-head-dtype int4 --batch 8 \
  --max-batch 16 --prefill-chunks 32,512 --logits-rows=last -o "$out/llama8b-2l-lastrows-head4.weft" 2>/dev/null
rm -f "$out/llama8b-2l-lastrows-head4.weights.safetensors"
check_batch "  same, int4, int4 LM head, logits of the last rows, 16 sequences" llama8b-2l-lastrows-head4.weft \
  "rtn4+rtn4:cfg/llama8b-2l" float16 32 1 "$(lengths 16 700)"
# 64 sequences, greedy: the head's GEMV in two tiles of 32 compact rows,
# then an argmax kernel.
build_plan --model "$out/ckpt" --topology h200 --weight-dtype int4 --lm-head-dtype int4 --batch 8 \
  --max-batch 64 --prefill-chunks 32,512 --sampling=false --logits-rows=last \
  -o "$out/llama8b-2l-lastrows-head4-greedy.weft" 2>/dev/null
rm -f "$out/llama8b-2l-lastrows-head4-greedy.weights.safetensors"
check_batch "  same, int4, int4 LM head, logits of the last rows, greedy, 64 sequences" \
  llama8b-2l-lastrows-head4-greedy.weft "rtn4+rtn4:cfg/llama8b-2l" float16 32 1 "$(lengths 64 700)"

# Mistral 7B and Qwen2 7B layer sizes, 2 layers.
model mistral7b-2l 2 '{"architectures": ["MistralForCausalLM"], "model_type": "mistral",
  "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
  "num_key_value_heads": 8, "vocab_size": 32000, "rope_theta": 10000.0, "rope_scaling": null,
  "max_position_embeddings": 32768, "sliding_window": 4096}'
build_plan --model "$out/ckpt" --topology h200 --max-batch 1 --prefill-chunks 8,32 -o "$out/mistral7b-2l.weft"
check "Mistral-7B sizes, 2 layers" mistral7b-2l.weft cfg/mistral7b-2l float16 8 32 1
model qwen2-7b-2l 2 '{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
  "hidden_size": 3584, "intermediate_size": 18944, "num_attention_heads": 28,
  "num_key_value_heads": 4, "vocab_size": 152064, "rope_theta": 1000000.0, "rope_scaling": null,
  "max_position_embeddings": 32768, "rms_norm_eps": 1e-06}'
build_plan --model "$out/ckpt" --topology h200 --max-batch 1 --prefill-chunks 8,32 -o "$out/qwen2-7b-2l.weft"
build_plan --model "$out/ckpt" --topology 2xh200:nvlink --stages 0+1 --max-batch 1 --prefill-chunks 8,32 \
  -o "$out/qwen2-7b-2l-tp.weft"
check "Qwen2-7B sizes, 2 layers" qwen2-7b-2l.weft cfg/qwen2-7b-2l float16 20 32 1
check "  same, TP 2" qwen2-7b-2l-tp.weft cfg/qwen2-7b-2l float16 20 32 2

# Qwen3 8B layer sizes, 2 layers, bf16 as the checkpoints are: per-head
# q/k norms in the rope kernel, 24 sequences at once (batched decode,
# prefill chunks) and TP 2.
model qwen3-8b-2l 2 '{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
  "hidden_size": 4096, "intermediate_size": 12288, "num_attention_heads": 32,
  "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "rope_theta": 1000000.0,
  "rope_scaling": null, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
  "attention_bias": false}' bfloat16
# one_and_tp_mb64 NAME: NAME-mb64.weft on one device and NAME-tp-mb64.weft
# tensor parallel over two, from $out/ckpt: buckets to 64 and prefill
# chunks 8/32, as sanitize.sh runs them.
one_and_tp_mb64() {
  build_plan --model "$out/ckpt" --topology h200 --batch 4 --max-batch 64 --prefill-chunks 8,32 \
    -o "$out/$1-mb64.weft"
  build_plan --model "$out/ckpt" --topology 2xh200:nvlink --stages 0+1 --batch 4 --max-batch 64 \
    --prefill-chunks 8,32 -o "$out/$1-tp-mb64.weft"
}
one_and_tp_mb64 qwen3-8b-2l
check "Qwen3-8B sizes, 2 layers" qwen3-8b-2l-mb64.weft cfg/qwen3-8b-2l bfloat16 20 32 1
check_batch "  same, 24 sequences" qwen3-8b-2l-mb64.weft cfg/qwen3-8b-2l bfloat16 16 1 "$(lengths 24 300)"
check "  same, TP 2" qwen3-8b-2l-tp-mb64.weft cfg/qwen3-8b-2l bfloat16 20 32 2

# Gemma 2: the fixture with 24 sequences (prefill chunks through cuBLASLt
# and the logits soft cap after it), and the 9B (head_dim 256) and 27B
# (head_dim 128, query_pre_attn_scalar 144) layer sizes, 2 layers, bf16,
# with a sliding window of 16 on layer 0 so that prompts and decode cross
# it; one device (buckets to 64) and TP 2.
build_plan --model "$root/test/fixtures/gemma2" --topology h200 --batch 4 --max-batch 32 --prefill-chunks 8,32 \
  -o "$out/gemma2-mb32.weft"
check_batch "fixture gemma2 (f32), 24 sequences" gemma2-mb32.weft fixture:gemma2 float32 16 1 "$(lengths 24 60)"
gemma='"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "rope_theta": 10000.0,
  "rope_scaling": null, "max_position_embeddings": 8192, "rms_norm_eps": 1e-06, "sliding_window": 16,
  "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "hidden_activation": "gelu_pytorch_tanh",
  "hidden_act": "gelu_pytorch_tanh", "tie_word_embeddings": true, "vocab_size": 256000'
model gemma2-9b-2l 2 "{$gemma, \"hidden_size\": 3584, \"intermediate_size\": 14336,
  \"num_attention_heads\": 16, \"num_key_value_heads\": 8, \"head_dim\": 256, \"query_pre_attn_scalar\": 256}" bfloat16
one_and_tp_mb64 gemma2-9b-2l
check "Gemma-2-9B sizes, 2 layers, window 16" gemma2-9b-2l-mb64.weft cfg/gemma2-9b-2l bfloat16 20 32 1
check_batch "  same, 24 sequences" gemma2-9b-2l-mb64.weft cfg/gemma2-9b-2l bfloat16 16 1 "$(lengths 24 300)"
check "  same, TP 2" gemma2-9b-2l-tp-mb64.weft cfg/gemma2-9b-2l bfloat16 20 32 2
# A quantized head tied to the embedding (a quantized copy of the table; the
# embedding keeps it in bf16), soft-capped, over int4 layers: check_plans.py
# unties transformers' head to compare.
build_plan --model "$out/ckpt" --topology h200 --weight-dtype int4 --lm-head-dtype int8 --max-batch 4 \
  --prefill-chunks 8,32 -o "$out/gemma2-9b-2l-int4-head8.weft" 2>/dev/null
rm -f "$out/gemma2-9b-2l-int4-head8.weights.safetensors"
check "  same, int4, int8 LM head tied to the embedding" gemma2-9b-2l-int4-head8.weft \
  "rtn4+rtn8:cfg/gemma2-9b-2l" bfloat16 20 32 1
model gemma2-27b-2l 2 "{$gemma, \"hidden_size\": 4608, \"intermediate_size\": 36864,
  \"num_attention_heads\": 32, \"num_key_value_heads\": 16, \"head_dim\": 128, \"query_pre_attn_scalar\": 144}" bfloat16
build_plan --model "$out/ckpt" --topology h200 --batch 4 --max-batch 64 --prefill-chunks 8,32 \
  -o "$out/gemma2-27b-2l-mb64.weft"
check "Gemma-2-27B sizes, 2 layers, window 16" gemma2-27b-2l-mb64.weft cfg/gemma2-27b-2l bfloat16 20 32 1
check_batch "  same, 24 sequences" gemma2-27b-2l-mb64.weft cfg/gemma2-27b-2l bfloat16 16 1 "$(lengths 24 300)"

# Random sizes (fixed seed): every kernel kind at shapes no real model has.
python3 - "$out/random.txt" <<'PY'
import json, random, sys
rnd = random.Random(2026)
lines = []
for i, arch in enumerate(["llama", "mistral", "qwen2"]):
    hd = rnd.choice([64, 80, 128])
    kv = rnd.choice([2, 4])
    heads = kv * rnd.choice([1, 2, 3, 4])
    hidden = rnd.choice([heads * hd, 64 * rnd.randrange(8, 40)])
    cfg = {"architectures": [{"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                              "qwen2": "Qwen2ForCausalLM"}[arch]],
           "model_type": arch, "hidden_size": hidden, "head_dim": hd,
           "intermediate_size": 64 * rnd.randrange(hidden // 64, 4 * hidden // 64),
           "num_attention_heads": heads, "num_key_value_heads": kv,
           "vocab_size": 8 * rnd.randrange(2000, 9000), "rope_scaling": None,
           "rope_theta": rnd.choice([10000.0, 500000.0]), "max_position_embeddings": 8192,
           "tie_word_embeddings": rnd.random() < 0.5}
    if arch == "mistral":
        cfg["sliding_window"] = rnd.choice([16, 24])  # shorter than the prompt + steps
    dtype = rnd.choice(["float16", "bfloat16"])
    lines.append(f"random{i} {dtype} {rnd.choice([8, 20])} {json.dumps(cfg)}")
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
while read -r name dtype prompt cfg; do
  rm -rf "$out/ckpt"
  python3 "$sparse" "$out/ckpt" --layers 2 --dtype "$dtype" --config "$cfg"
  mkdir -p "$out/cfg/$name" && cp "$out/ckpt/config.json" "$out/cfg/$name/"
  desc=$(python3 -c 'import json,sys; c=json.loads(sys.argv[1]); print("{model_type} h{hidden_size} {num_attention_heads}/{num_key_value_heads}x{head_dim} ffn{intermediate_size} v{vocab_size}".format(**c))' "$cfg")
  build_plan --model "$out/ckpt" --topology h200 --max-batch 1 --prefill-chunks 8,32 -o "$out/$name.weft"
  check "random: $desc $dtype" "$name.weft" "cfg/$name" "$dtype" "$prompt" 32 1
  build_plan --model "$out/ckpt" --topology 2xh200:nvlink --stages 0+1 --max-batch 1 --prefill-chunks 8,32 \
    -o "$out/$name-tp.weft"
  check "  same, TP 2" "$name-tp.weft" "cfg/$name" "$dtype" "$prompt" 32 2
done < "$out/random.txt"

# The full Llama 3.1 8B in fp16: correctness (batch 1), the batch-1
# benchmark, batched decode (buckets up to 100 streams, KV cache for
# 100 x 4096 tokens) and tensor parallel over two GPUs.
model llama8b 32 '{}'
# Default prefill chunks (128 and 512): what a user's batch-1 plan holds, so
# bench_ttft.sh times a 512-token prompt as one chunk.
build_plan --model "$out/ckpt" --topology h200 --max-batch 1 -o "$out/llama8b-fp16.weft"
check "Llama-3.1-8B, all 32 layers" llama8b-fp16.weft cfg/llama8b float16 8 32 1
# Default prefill chunks: 192 (100 decode tokens and a short prompt) and 512.
build_plan --model "$out/ckpt" --topology h200 --batch 100 --max-batch 100 \
  -o "$out/llama8b-fp16-b100.weft"
for g in 8 16; do # the default switches at 4 tokens; the sweep compares
  build_plan --model "$out/ckpt" --topology h200 --batch 100 --max-batch 100 --prefill-chunks 512 \
    --max-gemv-tokens $g -o "$out/llama8b-fp16-b100-gemv$g.weft"
done
build_plan --model "$out/ckpt" --topology 2xh200:nvlink --stages 0:16,1 --max-batch 1 \
  --prefill-chunks 32 -o "$out/llama8b-fp16-pipeline.weft"
build_plan --model "$out/ckpt" --topology 2xh200:nvlink --stages 0+1 --max-batch 1 --prefill-chunks 32 \
  -o "$out/llama8b-fp16-tp.weft"
# A 16+16 pipeline for 100 streams (bench_pipeline.sh: one micro-batch or
# two in flight); decode buckets include 50, half of 100.
build_plan --model "$out/ckpt" --topology 2xh200:nvlink --stages 0:16,1 --batch 100 --max-batch 100 \
  --decode-buckets 1,2,4,8,16,32,50,64,100 -o "$out/llama8b-fp16-pipeline-b100.weft"
check "  same, TP 2" llama8b-fp16-tp.weft cfg/llama8b float16 8 32 2
check_batch "  same, 100 sequences (plan b100)" llama8b-fp16-b100.weft cfg/llama8b float16 16 1 "$(lengths 100 700)"
check "  same, pipeline 16+16" llama8b-fp16-pipeline.weft cfg/llama8b float16 8 32 2
build_plan --model "$out/ckpt" --topology h200 --batch 100 --decode-buckets 1,16,32,64,100 \
  --prefill-chunks 512 --context 1024 -o "$out/llama8b-fp16-bench.weft"
# The same with the LM head of the 512-token chunk on all its rows (the
# default is its sequences' last rows), for an A/B of prefill_c512
# (bench_ab.py).
build_plan --model "$out/ckpt" --topology h200 --batch 100 --decode-buckets 1,16,32,64,100 \
  --prefill-chunks 512 --context 1024 --logits-rows=all -o "$out/llama8b-fp16-allrows-bench.weft"
rm -rf "$out/ckpt"

# The full Qwen3 8B in bf16: correctness (batch 1, all 36 layers) and
# bench_decode.py's batch-1 comparison.
model qwen3-8b 36 '{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
  "hidden_size": 4096, "intermediate_size": 12288, "num_attention_heads": 32,
  "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "rope_theta": 1000000.0,
  "rope_scaling": null, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
  "attention_bias": false}' bfloat16
build_plan --model "$out/ckpt" --topology h200 --max-batch 1 -o "$out/qwen3-8b-bf16.weft"
check "Qwen3-8B, all 36 layers" qwen3-8b-bf16.weft cfg/qwen3-8b bfloat16 8 32 1
rm -rf "$out/ckpt"

# The full Gemma 2 9B in bf16 (its own config: window 4096 on even layers):
# correctness at batch 1 and bench_decode.py's comparison.
model gemma2-9b 42 '{"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
  "hidden_size": 3584, "intermediate_size": 14336, "num_attention_heads": 16,
  "num_key_value_heads": 8, "head_dim": 256, "vocab_size": 256000, "rope_theta": 10000.0,
  "rope_scaling": null, "max_position_embeddings": 8192, "rms_norm_eps": 1e-06,
  "query_pre_attn_scalar": 256, "sliding_window": 4096, "attn_logit_softcapping": 50.0,
  "final_logit_softcapping": 30.0, "hidden_activation": "gelu_pytorch_tanh",
  "hidden_act": "gelu_pytorch_tanh", "tie_word_embeddings": true}' bfloat16
build_plan --model "$out/ckpt" --topology h200 --max-batch 1 -o "$out/gemma2-9b-bf16.weft"
check "Gemma-2-9B, all 42 layers" gemma2-9b-bf16.weft cfg/gemma2-9b bfloat16 8 32 1
rm -rf "$out/ckpt"

# Llama 3.1 8B with 4-bit (AWQ, group 128), 8-bit (GPTQ, one group per
# row) and FP8 projections beside fp16, for bench_quantized.py: decode buckets 1,
# 16, 32, 64 and 100, a 512-token prefill chunk, random weights (the file the compiler
# repacks from these header-only checkpoints holds zeros: not carried).
# Also 2-layer plans of the same formats for sanitize.sh (every decode
# bucket to 64, prefill chunks 32 and 512).
for q in awq:128 gptq8:-1; do
  rm -rf "$out/ckpt"
  python3 "$sparse" "$out/ckpt" --layers 32 --dtype float16 --quant "${q%%:*}" --group "${q##*:}"
  build_plan --model "$out/ckpt" --topology h200 --batch 100 --decode-buckets 1,16,32,64,100 \
    --prefill-chunks 512 --context 1024 -o "$out/llama8b-${q%%:*}-bench.weft"
  # AWQ with the LM head quantized too (--lm-head-dtype int8 / int4).
  if [[ $q == awq:* ]]; then
    for h in 8 4; do
      build_plan --model "$out/ckpt" --topology h200 --lm-head-dtype int$h --batch 100 \
        --decode-buckets 1,16,32,64,100 --prefill-chunks 512 --context 1024 \
        -o "$out/llama8b-awq-head$h-bench.weft" 2>/dev/null
    done
  fi
  rm -rf "$out/ckpt"
  python3 "$sparse" "$out/ckpt" --layers 2 --dtype float16 --quant "${q%%:*}" --group "${q##*:}"
  build_plan --model "$out/ckpt" --topology h200 --batch 8 --max-batch 64 --prefill-chunks 32,512 \
    -o "$out/llama8b-2l-${q%%:*}-mb64.weft"
  rm -f "$out"/llama8b-*"${q%%:*}"*.weights.safetensors
done
# FP8 E4M3 quantized here from the fp16 checkpoint (one f32 scale per row).
rm -rf "$out/ckpt"
python3 "$sparse" "$out/ckpt" --layers 32 --dtype float16
build_plan --model "$out/ckpt" --topology h200 --weight-dtype fp8 --batch 100 --decode-buckets 1,16,32,64,100 \
  --prefill-chunks 512 --context 1024 -o "$out/llama8b-fp8-bench.weft" 2>/dev/null
rm -f "$out/llama8b-fp8-bench.weights.safetensors"
rm -rf "$out/ckpt"

rm -rf "$out/pyfb" "$out"/*.whl
for tool in weft-run weft-serve weft-bench weft-detect; do
  if [[ -x "$build/tools/$tool/$tool" ]]; then
    cp "$build/tools/$tool/$tool" "$out/"
  fi
done
cp "$root/test/chat/templates/llama3_style.jinja" "$out/"
# Libraries the GPU machine may lack (cpp-httplib, brotli, libsodium; weft-run
# needs libsodium too): run_all.sh and bench_serve.sh put lib/ on LD_LIBRARY_PATH.
if [[ -x "$out/weft-serve" ]]; then
  mkdir -p "$out/lib"
  ldd "$out/weft-serve" | awk '/httplib|brotli|sodium/ {print $3}' | xargs -r cp -L -t "$out/lib/"
fi
echo "$(wc -l < "$checks") checks, $(ls "$out"/*.weft | wc -l) plans in $out"
