#!/usr/bin/env bash
# The plans and checks of the decode-attention cluster A/B, into DIR
# (default .gpu-ab/): a subset of make_plans.sh's correctness checks
# (every decode attention shape the clusters change: fp16, bf16, f32,
# sliding window, head_dim 256 with soft-capping, 4-bit projections, tensor
# parallel, batches of 3 to 64 sequences) and Llama 3.1 8B fp16 and AWQ
# int4 benchmark plans compiled twice, with and without
# --attention-clusters. Then, on the GPU machine:
#   WEFT_RUN=DIR/weft-run python3 test/gpu/check_plans.py DIR
#   bash test/gpu/bench_cluster_ab.sh DIR
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$root/.gpu-ab}"
build="${WEFT_BUILD_DIR:-$root/build}"
compile="$build/tools/weft-compile/weft-compile"
cache="${WEFT_KERNEL_CACHE:-$build/test/kernel-cache}"
sparse="$root/test/Inputs/make_sparse_checkpoint.py"
rm -rf "$out"; mkdir -p "$out/cfg"
checks="$out/checks.jsonl"; : > "$checks"
build_plan() { "$compile" --arch sm_90 --kernel-cache "$cache" "$@" >/dev/null; }
check() {
  printf '{"name": "%s", "plan": "%s", "model": "%s", "dtype": "%s", "prompt": %s, "steps": %s, "devices": %s}\n' "$@" >> "$checks"
}
check_batch() {
  printf '{"name": "%s", "plan": "%s", "model": "%s", "dtype": "%s", "steps": %s, "devices": %s, "batch": [%s]}\n' "$@" >> "$checks"
}
lengths() {
  python3 -c 'import random,sys; n,m=int(sys.argv[1]),int(sys.argv[2]); r=random.Random(n*7919+m); v=[1+(m-1)*i//max(1,n-1) for i in range(n)]; r.shuffle(v); print(",".join(map(str,v)))' "$1" "$2"
}
model() {
  rm -rf "$out/ckpt"
  python3 "$sparse" "$out/ckpt" --layers "$2" --dtype "${4:-float16}" --config "$3"
  mkdir -p "$out/cfg/$1"; cp "$out/ckpt/config.json" "$out/cfg/$1/"
}
for f in llama:float32 gemma2:float32 qwen2:bfloat16; do
  name="${f%%:*}"; dtype="${f##*:}"
  build_plan --model "$root/test/fixtures/$name" --topology h200 --max-batch 1 --prefill-chunks 8 -o "$out/$name.weft"
  check "fixture $name" "$name.weft" "fixture:$name" "$dtype" 8 32 1
done
model llama8b-2l 2 '{}'
build_plan --model "$out/ckpt" --topology h200 --max-batch 2 --prefill-chunks 8,32 -o "$out/llama8b-2l.weft"
build_plan --model "$out/ckpt" --topology 2xh200:nvlink --stages 0+1 --max-batch 1 --prefill-chunks 8,32 -o "$out/llama8b-2l-tp.weft"
build_plan --model "$out/ckpt" --topology h200 --batch 8 --max-batch 64 --prefill-chunks 32,512 -o "$out/llama8b-2l-mb64.weft"
build_plan --model "$out/ckpt" --topology h200 --weight-dtype int4 --max-batch 4 --prefill-chunks 8,32,128 -o "$out/llama8b-2l-int4.weft" 2>/dev/null
rm -f "$out"/*.weights.safetensors
check "Llama-3.1-8B sizes, 2 layers" llama8b-2l.weft cfg/llama8b-2l float16 8 32 1
check "  same, prompt 600 (context past 512)" llama8b-2l-mb64.weft cfg/llama8b-2l float16 600 32 1
check "  same, TP 2" llama8b-2l-tp.weft cfg/llama8b-2l float16 8 32 2
check "  same, int4 quantized here" llama8b-2l-int4.weft rtn4:cfg/llama8b-2l float16 8 32 1
for n in 3 16 64; do
  check_batch "Llama-3.1-8B sizes, 2 layers, $n sequences" llama8b-2l-mb64.weft cfg/llama8b-2l float16 16 1 "$(lengths $n 700)"
done
model mistral7b-2l 2 '{"architectures": ["MistralForCausalLM"], "model_type": "mistral",
  "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
  "num_key_value_heads": 8, "vocab_size": 32000, "rope_theta": 10000.0, "rope_scaling": null,
  "max_position_embeddings": 32768, "sliding_window": 300}'
build_plan --model "$out/ckpt" --topology h200 --max-batch 1 --prefill-chunks 8,32,512 -o "$out/mistral7b-2l.weft"
check "Mistral-7B sizes, 2 layers, window 300, prompt 500" mistral7b-2l.weft cfg/mistral7b-2l float16 500 32 1
model qwen3-8b-2l 2 '{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
  "hidden_size": 4096, "intermediate_size": 12288, "num_attention_heads": 32,
  "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "rope_theta": 1000000.0,
  "rope_scaling": null, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
  "attention_bias": false}' bfloat16
build_plan --model "$out/ckpt" --topology h200 --batch 4 --max-batch 64 --prefill-chunks 8,32 -o "$out/qwen3-8b-2l-mb64.weft"
check "Qwen3-8B sizes, 2 layers" qwen3-8b-2l-mb64.weft cfg/qwen3-8b-2l bfloat16 20 32 1
check_batch "  same, 24 sequences" qwen3-8b-2l-mb64.weft cfg/qwen3-8b-2l bfloat16 16 1 "$(lengths 24 300)"
# Benchmarks: the full models, each compiled with and without clusters.
model llama8b 32 '{}'
for c in true false; do
  build_plan --model "$out/ckpt" --topology h200 --max-batch 16 --decode-buckets 1,16 --attention-clusters=$c -o "$out/llama8b-fp16-c$c.weft"
done
rm -rf "$out/ckpt"
python3 "$sparse" "$out/ckpt" --layers 32 --dtype float16 --quant awq --group 128
for c in true false; do
  build_plan --model "$out/ckpt" --topology h200 --max-batch 16 --decode-buckets 1,16 --attention-clusters=$c -o "$out/llama8b-awq-c$c.weft"
done
rm -rf "$out/ckpt" "$out"/*.weights.safetensors
cp "$build/tools/weft-run/weft-run" "$out/"
mkdir -p "$out/lib"
ldd "$out/weft-run" | awk '/httplib|brotli|sodium/ {print $3}' | xargs -r cp -L -t "$out/lib/"
echo "$(wc -l < "$checks") checks, $(ls "$out"/*.weft | wc -l) plans in $out"
