#!/usr/bin/env bash
# Tensor parallel over two GPUs against one GPU, Llama 3.1 8B fp16 with
# random weights (issue 13, item 5):
#   test/gpu/bench_tp.sh DIR [OUT]
# - batch 1 end to end through weft-run (32-token prompt, 100 new tokens),
#   one GPU (llama8b-fp16.weft) and TP 2 (llama8b-fp16-tp.weft on GPUs 0,1),
#   three runs each;
# - the decode_b1 bucket alone, TP 2 as one CUDA graph and step by step;
# - batched decode buckets (cal/a.weft against cal/tp.weft, context 512).
# Needs two GPUs; prints a table last.
set -uo pipefail
dir="${1:-.gpu}"
out="${2:-$dir/results}"
run="$dir/weft-run"
mkdir -p "$out"
if [[ $(nvidia-smi -L | wc -l) -lt 2 ]]; then
  echo "bench_tp: needs two GPUs (skipped)"
  exit 0
fi
ids=$(python3 -c 'print(",".join(str(7 + 997 * i % 128000) for i in range(32)))')
log="$out/tp-bench.txt"
: > "$log"
for i in 1 2 3; do
  "$run" "$dir/llama8b-fp16.weft" --random-weights --quiet --prompt-ids "$ids" --max-tokens 100 \
    | grep -E "^loaded" | sed "s/^/e2e one GPU run $i: /" | tee -a "$log"
  "$run" "$dir/llama8b-fp16-tp.weft" --random-weights --quiet --devices 0,1 --prompt-ids "$ids" \
    --max-tokens 100 | grep -E "^loaded" | sed "s/^/e2e TP 2 run $i: /" | tee -a "$log"
done
"$run" "$dir/llama8b-fp16.weft" --random-weights --quiet --bench decode_b1 --bench-steps 100 \
  | grep bucket | sed 's/^/bucket one GPU: /' | tee -a "$log"
for graphs in "" --no-cuda-graphs; do
  "$run" "$dir/llama8b-fp16-tp.weft" --random-weights --quiet --devices 0,1 $graphs \
    --bench decode_b1 --bench-steps 100 | grep bucket \
    | sed "s/^/bucket TP 2 ${graphs:-(graph)}: /" | tee -a "$log"
done
if [[ -f $dir/cal/tp.weft ]]; then
  "$run" "$dir/cal/a.weft" --random-weights --quiet --bench decode_b8,decode_b32,decode_b100 \
    --bench-context 512 --bench-steps 30 | grep bucket | sed 's/^/batched one GPU: /' | tee -a "$log"
  "$run" "$dir/cal/tp.weft" --random-weights --quiet --devices 0,1 \
    --bench decode_b8,decode_b32,decode_b100 --bench-context 512 --bench-steps 30 | grep bucket \
    | sed 's/^/batched TP 2: /' | tee -a "$log"
fi
echo
python3 - "$log" <<'PY'
import re, statistics, sys
e2e, buckets = {}, {}
for line in open(sys.argv[1]):
    m = re.match(r"e2e (.*) run \d+: .*\(([\d.]+) tok/s, ([\d.]+) ms/token\)", line)
    if m:
        e2e.setdefault(m.group(1), []).append(float(m.group(3)))
    m = re.match(r"(bucket|batched) (.*?): bucket (\S+): (\d+) tokens, ([\d.]+) ms/step", line)
    if m:
        buckets[(m.group(2), m.group(3))] = float(m.group(5))
print("| what | one GPU ms | TP 2 ms | TP 2 speed-up |")
print("|---|---|---|---|")
one, tp = e2e.get("one GPU", []), e2e.get("TP 2", [])
for i, (a, b) in enumerate(zip(one, tp)):
    print(f"| batch 1 end to end, run {i + 1} (ms/token) | {a:.3f} | {b:.3f} | {a / b:.2f}x |")
b1 = buckets.get(("one GPU", "decode_b1"))
for mode in ("TP 2 (graph)", "TP 2 --no-cuda-graphs"):
    t = buckets.get((mode, "decode_b1"))
    if b1 and t:
        print(f"| decode_b1 bucket, {mode} | {b1:.3f} | {t:.3f} | {b1 / t:.2f}x |")
for b in ("decode_b8", "decode_b32", "decode_b100"):
    a, t = buckets.get(("one GPU", b)), buckets.get(("TP 2", b))
    if a and t:
        print(f"| {b}, context 512 | {a:.3f} | {t:.3f} | {a / t:.2f}x |")
if one and tp:
    worst = min(a / b for a, b in zip(one, tp))
    print(f"batch 1 end to end: TP 2 speed-up {worst:.2f}x at worst over {len(tp)} runs (goal 1.5x)")
PY
