#!/usr/bin/env bash
# Load time and time to first token, end to end through weft-run, each in a
# fresh process as a user starts it:
#   test/gpu/bench_ttft.sh DIR [OUT]
# For each plan and prompt length: the load phases (GPUs, collectives,
# kernels, buffers, weights, warm-up) and the prefill time of the first
# request. Prints a table last.
set -uo pipefail
dir="${1:-.gpu}"
out="${2:-$dir/results}"
mkdir -p "$out"
run="$dir/weft-run"
ids() { python3 -c 'import sys; n=int(sys.argv[1]); print(",".join(str(7 + 997 * i % 128000) for i in range(n)))' "$1"; }
: > "$out/ttft.txt"
for plan in llama8b-fp16 llama8b-fp16-b100; do
  for n in 32 512; do
    "$run" "$dir/$plan.weft" --random-weights --quiet --prompt-ids "$(ids $n)" --max-tokens 4 \
      | grep -E "^(load phases|loaded)" | sed "s/^/$plan prompt $n: /" | tee -a "$out/ttft.txt"
  done
done
python3 - "$out/ttft.txt" <<'PY'
import re, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) prompt (\d+): (.*)", line.strip())
    if not m:
        continue
    key = (m.group(1), int(m.group(2)))
    r = rows.setdefault(key, {})
    body = m.group(3)
    if body.startswith("load phases:"):
        for name, s in re.findall(r"([\w-]+) ([0-9.]+) s", body):
            r[name] = float(s)
    else:
        r["load"] = float(re.search(r"loaded in ([0-9.]+) s", body).group(1))
        r["prefill"] = float(re.search(r"prefill \d+ tokens in ([0-9.]+) ms", body).group(1))
print()
print(f"{'plan':<20} {'prompt':>6} {'TTFT ms':>8} {'load s':>7} {'GPUs':>6} {'kernels':>8} {'weights':>8} {'warm-up':>8}")
for (plan, n), r in sorted(rows.items()):
    print(f"{plan:<20} {n:>6} {r.get('prefill', 0):>8.1f} {r.get('load', 0):>7.2f} {r.get('GPUs', 0):>6.2f} "
          f"{r.get('kernels', 0):>8.2f} {r.get('weights', 0):>8.2f} {r.get('warm-up', 0):>8.2f}")
PY
