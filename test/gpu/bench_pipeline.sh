#!/usr/bin/env bash
# A 16+16 pipeline of Llama 3.1 8B fp16 over two GPUs serving 100 prompts of
# 32 tokens, 100 new tokens each (weft-run --prompts), with one micro-batch
# and with two in flight, beside one GPU (plan b100) with the same prompts:
#   test/gpu/bench_pipeline.sh DIR
# Needs two GPUs; prints a table last.
set -uo pipefail
dir="${1:-.gpu}"
if [[ $(nvidia-smi -L | wc -l) -lt 2 ]]; then
  echo "bench_pipeline: needs two GPUs (skipped)"
  exit 0
fi
prompts=$(mktemp)
python3 -c 'import random; r=random.Random(100); print("\n".join(",".join(str(r.randrange(3,128000)) for _ in range(32)) for _ in range(100)))' > "$prompts"
run() { # LABEL PLAN ARGS...
  local label=$1 plan=$2; shift 2
  local line
  line=$("$dir/weft-run" "$dir/$plan" --random-weights --quiet --prompts "$prompts" --max-tokens 100 "$@" \
    | grep -E "^(throughput|decode phase)" | tr '\n' ' ')
  local tps per phase
  tps=$(sed -E 's/.*throughput ([0-9.]+) generated.*/\1/' <<<"$line")
  per=$(sed -E 's/.*per sequence ([0-9.]+) tok\/s mean.*/\1/' <<<"$line")
  phase=$(sed -E 's/.*decode phase[^,]*, ([0-9.]+) generated.*/\1/' <<<"$line")
  echo "| $label | $tps | $per | $phase |"
}
echo "| layout | total tok/s | per sequence tok/s | decode phase tok/s |"
echo "|---|---|---|---|"
run "one H200 (plan b100)" llama8b-fp16-b100.weft
run "pipeline 16+16 on GPUs 0,1, 1 micro-batch" llama8b-fp16-pipeline-b100.weft --devices 0,1 --micro-batches 1
run "pipeline 16+16 on GPUs 0,1, 2 micro-batches" llama8b-fp16-pipeline-b100.weft --devices 0,1 --micro-batches 2
rm -f "$prompts"
