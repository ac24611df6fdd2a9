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

# Where projections switch from the generated GEMV to cuBLASLt.
for g in "" -gemv8 -gemv16; do
  for bucket in decode_b4 decode_b8 decode_b16; do
    "$run" "$dir/llama8b-fp16-b100$g.weft" --random-weights --quiet --bench "$bucket" \
      --bench-steps 20 --bench-context 512 | sed "s/^/plan b100$g: /"
  done
done 2>&1 | tee "$out/gemv.txt"

# Two devices at batch 1: tensor parallel and a 16+16 pipeline, each with
# the bucket as one CUDA graph and step by step.
{
  "$run" "$dir/llama8b-fp16.weft" --random-weights --quiet --bench decode_b1 --bench-steps 50 \
    | sed 's/^/1 GPU: /'
  maps="0,0"
  [[ $gpus -ge 2 ]] && maps="0,0 0,1"
  for plan in tp pipeline; do
    for m in $maps; do
      for graphs in "" --no-cuda-graphs; do
        "$run" "$dir/llama8b-fp16-$plan.weft" --random-weights --quiet --devices $m $graphs \
          --bench decode_b1 --bench-steps 50 | grep bucket | sed "s/^/$plan on GPUs $m ${graphs:-(graph)}: /"
      done
    done
  done
} 2>&1 | tee "$out/tp.txt"

WEFT_RUN="$run" python3 "$here/check_plans.py" "$dir" 2>&1 | tee "$out/check.txt"
check_rc=${PIPESTATUS[0]}


echo
echo "== summary =="
tail -1 "$out/check.txt"
grep -E "^\| (floor|Weft|HF)" "$out/bench.txt"
grep -E "^bucket" "$out/batches.txt" | awk '{print "  " $0}'
sed 's/^/  /' "$out/gemv.txt"
sed 's/^/  /' "$out/tp.txt"
exit "$check_rc"
