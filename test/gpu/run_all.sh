#!/usr/bin/env bash
# Every GPU check and benchmark, in one run on the GPU machine, from the
# directory test/gpu/make_plans.sh filled (plans, configs, weft-run):
#   test/gpu/run_all.sh DIR [OUT]
# Prints the batch-1 benchmark against the copy-bandwidth floor and
# transformers (bench_decode.py), step times at batch 1-100 and of
# tensor-parallel decode, the correctness table (check_plans.py), and a
# summary last.
# OUT (default DIR/results) keeps every output.
set -uo pipefail
dir="${1:-.gpu}"
out="${2:-$dir/results}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$out"
run="$dir/weft-run"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpus.txt"
gpus=$(nvidia-smi -L | wc -l)

python3 "$here/bench_decode.py" "$dir/llama8b-fp16.weft" "$run" 2>&1 | tee "$out/bench.txt"

bash "$here/bench_batches.sh" "$dir" 2>&1 | tee "$out/batches.txt"

{
  "$run" "$dir/llama8b-fp16.weft" --random-weights --quiet --bench decode_b1 --bench-steps 50 \
    | sed 's/^/1 GPU: /'
  "$run" "$dir/llama8b-fp16-tp.weft" --random-weights --quiet --devices 0,0 --bench decode_b1 \
    --bench-steps 50 | sed 's/^/TP 2 on 1 GPU (peer copies): /'
  if [[ $gpus -ge 2 ]]; then
    "$run" "$dir/llama8b-fp16-tp.weft" --random-weights --quiet --devices 0,1 --bench decode_b1 \
      --bench-steps 50 | sed 's/^/TP 2 on 2 GPUs: /'
  fi
} 2>&1 | tee "$out/tp.txt"

WEFT_RUN="$run" python3 "$here/check_plans.py" "$dir" 2>&1 | tee "$out/check.txt"
check_rc=${PIPESTATUS[0]}


echo
echo "== summary =="
tail -1 "$out/check.txt"
grep -E "^\| (floor|Weft|HF)" "$out/bench.txt"
grep -E "^bucket" "$out/batches.txt" | awk '{print "  " $0}'
sed 's/^/  /' "$out/tp.txt"
exit "$check_rc"
