#!/usr/bin/env bash
# Decode attention with its splits combined in a thread-block cluster
# against the combine kernel, same plans otherwise, side by side in one
# run: Llama 3.1 8B fp16 and AWQ int4, decode_b1 and decode_b16 at contexts
# 512 and 4000, two rounds each, alternating (test/gpu/make_cluster_ab.sh
# makes the plans). Prints ms per step, then a table.
#   bash test/gpu/bench_cluster_ab.sh DIR
set -uo pipefail
dir="${1:-.gpu-ab}"
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
log=$(mktemp)
for round in 1 2; do
  for w in fp16 awq; do
    for c in true false; do
      for ctx in 512 4000; do
        "$dir/weft-run" "$dir/llama8b-$w-c$c.weft" --random-weights --quiet \
          --bench decode_b1,decode_b16 --bench-context $ctx --bench-steps 100 2>&1 |
          grep -E "bucket" | sed "s/^/$w clusters=$c ctx=$ctx round=$round: /" | tee -a "$log"
      done
    done
  done
done
python3 - "$log" <<'PY'
import re, sys, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) clusters=(\w+) ctx=(\d+) round=\d+: .*?(decode_b\d+).*?([\d.]+) ms", line)
    if m:
        rows[(m[1], m[4], int(m[3]), m[2])].append(float(m[5]))
print("\n| weights | bucket | context | combine kernel ms | cluster ms | cluster / kernel |")
print("|---|---|---|---|---|---|")
for (w, b, ctx, c) in sorted(rows):
    if c != "true":
        continue
    new, old = rows[(w, b, ctx, "true")], rows.get((w, b, ctx, "false"), [])
    if old:
        print(f"| {w} | {b} | {ctx} | {', '.join(f'{v:.3f}' for v in old)} | "
              f"{', '.join(f'{v:.3f}' for v in new)} | {min(new) / min(old):.3f} |")
PY
