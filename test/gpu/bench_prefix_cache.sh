#!/usr/bin/env bash
# Prefix caching under load, on the GPU machine: weft-serve with the cache
# on and with --no-prefix-cache, each under the same weft-bench workloads:
#   - 50 users whose requests share a 2,000-token system prompt (token ids,
#     completions) with 32-token questions, and the same users without it;
#   - 20 users in 10-turn chat conversations (each turn resends the
#     conversation so far).
#   test/gpu/bench_prefix_cache.sh DIR [OUT]
# DIR holds weft-serve, weft-bench, lib/, llama3_style.jinja and the plan
# (WEFT_SERVE_PLAN, default DIR/llama8b-fp16-mb64.weft: Llama 3.1 8B fp16,
# --batch 64 --max-batch 64 --context 4096). Prints a table last; OUT keeps
# each run's JSON.
set -uo pipefail
dir="${1:-.gpu}"
out="${2:-$dir/results}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$out"
plan="${WEFT_SERVE_PLAN:-$dir/llama8b-fp16-mb64.weft}"
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
port=8412
url="http://127.0.0.1:$port"
python3 "$here/serve_load.py" --write-tokenizer "$out/tokenizer.json" 128256

rows=()
# serve LABEL [weft-serve flags]: starts the server, runs the workloads,
# stops it.
serve() {
  local label=$1
  shift
  "$dir/weft-serve" "$plan" --random-weights --tokenizer "$out/tokenizer.json" \
    --chat-template "$dir/llama3_style.jinja" --port $port --model-name llama "$@" \
    > "$out/serve-$label.log" 2>&1 &
  local pid=$!
  for _ in $(seq 600); do
    curl -sf "$url/health" > /dev/null && break
    kill -0 $pid 2>/dev/null || { echo "weft-serve exited:"; tail -5 "$out/serve-$label.log"; return 1; }
    sleep 0.5
  done
  bench() { # bench NAME weft-bench-flags...
    local name=$1
    shift
    "$dir/weft-bench" --model llama --url "$url" --max-tokens 32 --json "$out/$label-$name.json" \
      "$@" > "$out/$label-$name.txt" 2>&1
    cat "$out/$label-$name.txt"
    python3 - "$out/$label-$name.json" "$label" "$name" <<'PY' >> "$out/rows.txt"
import json, sys
j = json.load(open(sys.argv[1]))["levels"][0]
p = j.get("prompt_tokens", 0)
c = j.get("cached_prompt_tokens", 0)
first, last = j.get("ttft_p50_first_turn_seconds", 0), j.get("ttft_p50_last_turn_seconds", 0)
turns = f"{first*1e3:.0f} / {last*1e3:.0f} ms" if last else "-"
print(f"| {sys.argv[2]} | {sys.argv[3]} | {j['errors']} | {j['ttft_seconds']['p50']*1e3:.0f} ms | "
      f"{j['ttft_seconds']['p99']*1e3:.0f} ms | {turns} | {j['total_tokens_per_second']:.0f} | "
      f"{100.0*c/p if p else 0:.0f}% |")
PY
  }
  bench system2000 --endpoint completions --prompt-ids 32 --system-prompt 2000 --users 50 \
    --requests-per-user 2
  bench nosystem --endpoint completions --prompt-ids 32 --users 50 --requests-per-user 2
  bench turns10 --endpoint chat --users 20 --turns 10 --requests-per-user 10
  curl -s "$url/metrics" | grep -E "^weft_prefix_cache" | tee "$out/metrics-$label.txt"
  kill -TERM $pid
  wait $pid
}
: > "$out/rows.txt"
serve cache-on
serve cache-off --no-prefix-cache
echo
echo "== prefix caching under load (max_tokens 32; TTFT p50 of first / 10th turns) =="
echo "| server | workload | errors | TTFT p50 | TTFT p99 | turns 1 / 10 | total tok/s | prompt tokens cached |"
echo "|---|---|---|---|---|---|---|---|"
cat "$out/rows.txt"
