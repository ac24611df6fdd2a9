#!/usr/bin/env bash
# Decode step times of Llama 3.1 8B fp16 at batch 1, 8, 32 and 100 (and a
# 512-token prefill chunk) on the GPU machine, from the plan make_plans.sh
# writes:  test/gpu/bench_batches.sh .gpu
set -euo pipefail
dir="${1:-.gpu}"
for bucket in decode_b1 decode_b8 decode_b32 decode_b100 prefill_c512; do
  "$dir/weft-run" "$dir/llama8b-fp16-b100.weft" --random-weights --quiet \
    --bench "$bucket" --bench-steps 20 --bench-context 512
done
