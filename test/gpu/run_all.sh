#!/usr/bin/env bash
# Every GPU check and benchmark, in one run on the GPU machine, from the
# directory test/gpu/make_plans.sh filled (plans, configs, weft-run):
#   test/gpu/run_all.sh DIR [OUT]
# Prints batch-1 decode end to end, batched decode step times next to their
# bandwidth floor and the scheduler against decode_b100 (bench_batches.py),
# memcheck of the batched plans (sanitize.sh), the correctness table
# (check_plans.py), the sampler token by token (check_sampling.py), weft-run
# streaming and --chat (check_interactive.sh), decoding run to run, greedy
# and seeded (check_determinism.py), and a summary last. WEFT_FULL=1 adds the batch-1
# comparison with transformers, the GEMV switch sweep and two-device decode.
# OUT (default DIR/results) keeps every output.
set -uo pipefail
dir="${1:-.gpu}"
out="${2:-$dir/results}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$out"
run="$dir/weft-run"
# Libraries the GPU machine may lack (libsodium, cpp-httplib): make_plans.sh put them there.
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpus.txt"
gpus=$(nvidia-smi -L | wc -l)

# Batch 1, end to end through weft-run (scheduler, CUDA graphs): 32-token
# prompt, 100 new tokens.
ids=$(python3 -c 'print(",".join(str(7 + 997 * i % 128000) for i in range(32)))')
"$run" "$dir/llama8b-fp16.weft" --random-weights --quiet --prompt-ids "$ids" --max-tokens 100 \
  | grep -E "^loaded" | sed 's/^/batch 1, llama8b: /' | tee "$out/e2e.txt"

# Batched decode next to its floor, and the scheduler against decode_b100.
python3 "$here/bench_batches.py" "$dir" "$out" 2>&1 | tee "$out/batches-table.txt"

# Quantized projections (int4, int8) beside fp16, each against its floor.
python3 "$here/bench_quantized.py" "$dir" "$run" 2>&1 | tee "$out/quantized.txt"

if [[ -n "${WEFT_FULL:-}" ]]; then
  python3 "$here/bench_decode.py" "$dir/llama8b-fp16.weft" "$run" 2>&1 | tee "$out/bench.txt"
  # Where projections switch from the generated GEMV to cuBLASLt.
  for g in "" -gemv8 -gemv16; do
    "$run" "$dir/llama8b-fp16-b100$g.weft" --random-weights --quiet \
      --bench decode_b4,decode_b8,decode_b16 --bench-steps 20 --bench-context 512 | sed "s/^/plan b100$g: /"
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
fi

bash "$here/sanitize.sh" "$dir" 2>&1 | tee "$out/sanitize.txt"
san_rc=${PIPESTATUS[0]}

WEFT_RUN="$run" python3 "$here/check_plans.py" "$dir" 2>&1 | tee "$out/check.txt"
check_rc=${PIPESTATUS[0]}

python3 "$here/check_sampling.py" "$dir" 2>&1 | tee "$out/sampling.txt"
sampling_rc=${PIPESTATUS[0]}

bash "$here/check_interactive.sh" "$dir" 2>&1 | tee "$out/interactive.txt"
interactive_rc=${PIPESTATUS[0]}

# Decoding gives the same tokens in every run: greedy (batch 1, stream
# kernel; 16 sequences together through the batched buckets), then sampled.
python3 "$here/check_determinism.py" "$run" "$dir/llama8b-fp16.weft" \
  "$dir/llama8b-fp16-b100.weft:16" 2>&1 | tee "$out/determinism.txt"
determinism_rc=${PIPESTATUS[0]}
# And sampling with a seed (temperature 1, the whole distribution).
python3 "$here/check_determinism.py" "$run" "$dir/llama8b-fp16-b100.weft:16" --sample 1.0,0,1.0,5 \
  2>&1 | tee -a "$out/determinism.txt"
[[ ${PIPESTATUS[0]} == 0 ]] || determinism_rc=1


echo
echo "== summary =="
tail -1 "$out/check.txt"
tail -1 "$out/sampling.txt"
tail -1 "$out/interactive.txt"
grep -E "^\|" "$out/determinism.txt"
cat "$out/e2e.txt"
grep -E "^(\||copy)" "$out/batches-table.txt"
grep -E "^\|" "$out/quantized.txt"
sed 's/^/  /' "$out/sanitize.txt" | grep memcheck
[[ -f "$out/gemv.txt" ]] && sed 's/^/  /' "$out/gemv.txt"
[[ -f "$out/tp.txt" ]] && sed 's/^/  /' "$out/tp.txt"
[[ $check_rc == 0 && $san_rc == 0 && $sampling_rc == 0 && $interactive_rc == 0 &&
   $determinism_rc == 0 ]]
