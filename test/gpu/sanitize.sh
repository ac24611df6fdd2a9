#!/usr/bin/env bash
# compute-sanitizer memcheck over the batched plans make_plans.sh writes:
# one device, a 3090+3060 pipeline and tensor parallel (both declared
# devices on GPU 0, and on GPUs 0 and 1 where there are two), each at
# decode buckets 1, 2, 4, 8 and 64 and with a
# step that mixes prefill chunks of several sequences with decode tokens;
# then the pipeline with two micro-batches in flight, and sampling; and the
# quantized projections (4-bit groups, 8-bit rows) on one device, with the
# LM head quantized too (int8, int4), and
# Qwen3's head norms and Gemma 2 (one device, tensor parallel).
#   test/gpu/sanitize.sh DIR          (WEFT_SANITIZE=REGEX: only plans matching it)
# Prints one line per run and exits non-zero on any reported error.
set -uo pipefail
dir="${1:-.gpu}"
san="${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}"
prompts=$(mktemp)
python3 -c 'import random; r=random.Random(5); print("\n".join(",".join(str(r.randrange(3,128000)) for _ in range(n)) for n in (1, 7, 33, 90, 2, 140, 17, 60)))' > "$prompts"
rc=0
gpus=$(nvidia-smi -L | wc -l)
# memcheck LABEL PLAN WEFT-RUN-ARGS...: one weft-run under memcheck (graphs
# off, so each kernel launch is checked), one line of result.
memcheck() {
  local label=$1 plan=$2
  shift 2
  # --report-api-errors no: NCCL probes kernels built for other
  # architectures with cudaFuncGetAttributes, which fails by design;
  # Weft checks the status of every CUDA call it makes itself.
  local log code summary
  log=$(timeout 300 "$san" --tool memcheck --report-api-errors no --error-exitcode 7 "$dir/weft-run" \
    "$plan" --random-weights --quiet --no-cuda-graphs "$@" 2>&1)
  code=$?
  summary=$(grep -E "ERROR SUMMARY" <<<"$log" | tail -1)
  echo "memcheck $label: exit $code, ${summary:-no summary}"
  if [[ $code != 0 ]]; then
    rc=1
    grep -E "Invalid|error|Error" <<<"$log" | head -20
  fi
}
runs=("llama8b-2l-mb64:" "llama8b-2l-pipeline-mb64:0,0" "llama8b-2l-tp-mb64:0,0"
      "llama8b-2l-awq-mb64:" "llama8b-2l-gptq8-mb64:" "llama8b-2l-fp8-mb64:"
      "llama8b-2l-bf16-int4-mb64:" "llama8b-2l-int4-head8:" "llama8b-2l-int4-head4:"
      "llama8b-2l-lastrows-strue:" "llama8b-2l-lastrows-sfalse:" "llama8b-2l-lastrows-head4-greedy:"
      "qwen3-8b-2l-mb64:" "qwen3-8b-2l-tp-mb64:0,0"
      "gemma2-9b-2l-mb64:" "gemma2-9b-2l-tp-mb64:0,0" "gemma2-27b-2l-mb64:")
if [[ $gpus -ge 2 ]]; then
  runs+=("llama8b-2l-pipeline-mb64:0,1" "llama8b-2l-tp-mb64:0,1")
fi
only="${WEFT_SANITIZE:-}" # a regular expression over plan names: those runs only
for r in "${runs[@]}"; do
  plan="${r%%:*}"; map="${r##*:}"
  [[ -n $only && ! $plan =~ $only ]] && continue
  devices=""
  [[ -n $map ]] && devices="--devices $map"
  for what in bench prompts; do
    if [[ $what == bench ]]; then
      args=(--bench decode_b1,decode_b2,decode_b4,decode_b8,decode_b64 --bench-steps 1 --bench-context 40)
    else
      args=(--prompts "$prompts" --max-tokens 4)
    fi
    memcheck "$plan ${map:+on GPUs $map }$what" "$dir/$plan.weft" $devices "${args[@]}"
  done
done
[[ -n $only ]] && { rm -f "$prompts"; exit $rc; }
# Two micro-batches in flight through the pipeline (per-device graphs off:
# --no-cuda-graphs, as above), mixed prefill and decode.
for map in 0,0 $([[ $gpus -ge 2 ]] && echo 0,1); do
  memcheck "llama8b-2l-pipeline-mb64 on GPUs $map, 2 micro-batches, prompts" \
    "$dir/llama8b-2l-pipeline-mb64.weft" --devices $map --micro-batches 2 --prompts "$prompts" --max-tokens 4
done
# Sampling (weft/sample.cuh): candidates in shared memory (temperature 1,
# top-k, top-p) and a flat row with more candidates than fit, re-read from
# global memory (temperature 50).
memcheck "llama8b-2l-mb64 prompts, sampling T 1 top-k 40 top-p 0.9" "$dir/llama8b-2l-mb64.weft" \
  --prompts "$prompts" --max-tokens 4 --temperature 1 --top-k 40 --top-p 0.9 --seed 3
memcheck "llama8b-2l-mb64 prompts, sampling T 50" "$dir/llama8b-2l-mb64.weft" \
  --prompts "$prompts" --max-tokens 4 --temperature 50 --seed 4
rm -f "$prompts"
exit $rc
