#!/usr/bin/env bash
# Predicted against measured step times, and the calibration loop (issue 17):
#   test/gpu/bench_calibration.sh DIR OUT [measure|check]
# DIR/cal holds a.weft (Llama 3.1 8B fp16 for the detected h200.json, batch
# 100, context 4096) and pipe.weft (the same on two declared H200s, a 16+16
# pipeline, run on one GPU with --devices 0,0); for `check`, a-cal.weft and
# pipe-cal.weft compiled from the calibrated files
# (test/gpu/make_calibration_plans.sh makes all four). With two GPUs and
# DIR/cal/tp.weft, also a TP 2 plan and a 16+16 pipeline on GPUs 0,1
# (tp.weft/pipe2.weft; tp-cal.weft/pipe2-cal.weft for `check`).
#   measure: times every bucket at contexts 512 and 4095 (the last position
#            of a 4096-token context), writes the fitted
#            step scales into OUT/h200-cal.json (a copy of DIR/cal/h200.json),
#            and times other buckets and contexts the fit did not see.
#   check:   the same buckets with plans compiled from the calibrated file.
# Prints each bucket's measured and predicted step time; a table last.
set -uo pipefail
dir="${1:-.gpu}"
out="${2:-$dir/results}"
mode="${3:-measure}"
run="$dir/weft-run"
mkdir -p "$out"
fitted=decode_b1,decode_b2,decode_b4,decode_b8,decode_b16,decode_b32,decode_b64,decode_b100,prefill_c512
unseen=decode_b1,decode_b8,decode_b32,decode_b64,decode_b100
pipe=decode_b1,decode_b8,decode_b32,decode_b64,prefill_c512
cal=()
a="$dir/cal/a.weft" p="$dir/cal/pipe.weft"
if [[ $mode == measure ]]; then
  cp "$dir/cal/h200.json" "$out/h200-cal.json"
  cal=(--write-calibration "$out/h200-cal.json")
else
  a="$dir/cal/a-cal.weft" p="$dir/cal/pipe-cal.weft"
fi
{
  "$run" "$a" --random-weights --quiet --bench "$fitted" --bench-context 512,4095 \
    --bench-steps 30 "${cal[@]}" | sed 's/^/1 GPU: /'
  "$run" "$a" --random-weights --quiet --bench "$unseen" --bench-context 1024,2048 \
    --bench-steps 30 | sed 's/^/1 GPU, contexts not fitted: /'
  "$run" "$p" --random-weights --quiet --devices 0,0 --bench "$pipe" \
    --bench-context 512,4095 --bench-steps 30 | sed 's/^/pipeline 16+16 on GPUs 0,0: /'
  # Two real GPUs: tensor parallel (all-reduces) and a pipeline over the link.
  if [[ $(nvidia-smi -L | wc -l) -ge 2 && -f $dir/cal/tp.weft ]]; then
    sfx=""
    [[ $mode == check ]] && sfx=-cal
    "$run" "$dir/cal/tp$sfx.weft" --random-weights --quiet --devices 0,1 --bench "$fitted" \
      --bench-context 512,4095 --bench-steps 30 | sed 's/^/TP 2 on GPUs 0,1: /'
    "$run" "$dir/cal/pipe2$sfx.weft" --random-weights --quiet --devices 0,1 --bench "$pipe" \
      --bench-context 512,4095 --bench-steps 30 | sed 's/^/pipeline 16+16 on GPUs 0,1: /'
  fi
} 2>&1 | tee "$out/calibration-$mode.txt"
echo
python3 - "$out/calibration-$mode.txt" <<'PY'
import re, sys
rows = []
for line in open(sys.argv[1]):
    m = re.match(r"(.*?): bucket (\S+): (\d+) tokens, ([\d.]+) ms/step.*context (\d+)\); "
                 r"predicted ([\d.]+) ms, measured/predicted ([\d.]+)", line)
    if m:
        rows.append((m.group(1), m.group(2), int(m.group(5)), float(m.group(4)), float(m.group(6)),
                     float(m.group(7))))
print(f"| {'plan':32} | {'bucket':12} | {'context':>7} | {'measured ms':>11} | {'predicted ms':>12} | {'error':>7} |")
print(f"|{'-'*34}|{'-'*14}|{'-'*9}|{'-'*13}|{'-'*14}|{'-'*9}|")
worst = 0
for plan, bucket, ctx, meas, pred, ratio in rows:
    err = pred / meas - 1
    worst = max(worst, abs(err))
    print(f"| {plan:32} | {bucket:12} | {ctx:7} | {meas:11.3f} | {pred:12.3f} | {err*100:+6.1f}% |")
print(f"worst prediction error: {worst*100:.1f}% over {len(rows)} buckets")
PY
