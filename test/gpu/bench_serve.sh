#!/usr/bin/env bash
# weft-serve under the reference workload, on the GPU machine, from the
# directory test/gpu/make_plans.sh filled (llama8b-fp16-b100.weft, weft-run,
# weft-serve, weft-bench, llama3_style.jinja):
#   test/gpu/bench_serve.sh DIR [OUT]
# In one run: decode_b100 alone (weft-run --bench), then weft-serve with
# random weights, a synthetic 128,256-token tokenizer and the Llama 3 style
# chat template; one chat request with logprobs checked for shape; weft-bench
# at 1, 10, 50 and 100 users (completions of 32 token ids, streamed,
# max_tokens 100, 3 requests each), with Poisson arrivals at 150/s, and at
# 100 users on the chat route; serve_load.py at 100
# users (the Python client, same shapes); SIGTERM and the exit code. Prints
# a table last; OUT keeps bench.json and bench.svg. WEFT_SERVE_PLAN picks
# another plan.
set -uo pipefail
dir="${1:-.gpu}"
out="${2:-$dir/results}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$out"
plan="${WEFT_SERVE_PLAN:-$dir/llama8b-fp16-b100.weft}"
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # make_plans.sh put them there
port=8411
url="http://127.0.0.1:$port"

bucket=$("$dir/weft-run" "$plan" --random-weights --quiet --bench decode_b100 --bench-context 80 \
  --bench-steps 50 | grep -E "^bucket")
echo "$bucket"

python3 "$here/serve_load.py" --write-tokenizer "$out/tokenizer.json" 128256
"$dir/weft-serve" "$plan" --random-weights --tokenizer "$out/tokenizer.json" \
  --chat-template "$dir/llama3_style.jinja" --port $port --model-name llama \
  > "$out/serve.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
  curl -sf "$url/health" > /dev/null && break
  kill -0 $pid 2>/dev/null || { echo "weft-serve exited:"; tail -5 "$out/serve.log"; exit 1; }
  sleep 0.5
done

# One chat request with logprobs: the shape a client reads.
python3 - "$url" <<'PY'
import json, sys, urllib.request
body = {"model": "llama", "messages": [{"role": "system", "content": "Be brief."},
                                       {"role": "user", "content": "Name three rivers."}],
        "max_tokens": 8, "temperature": 0, "logprobs": True, "top_logprobs": 5}
req = urllib.request.Request(sys.argv[1] + "/v1/chat/completions", json.dumps(body).encode(),
                             {"Content-Type": "application/json"})
a = json.load(urllib.request.urlopen(req))
c = a["choices"][0]["logprobs"]["content"]
ok = len(c) == a["usage"]["completion_tokens"] and all(len(t["top_logprobs"]) == 5 for t in c) \
    and all(t["top_logprobs"][0]["logprob"] >= t["logprob"] - 1e-4 for t in c) \
    and all(t["logprob"] <= 0 for t in c)
print(f"chat with logprobs: {a['usage']['completion_tokens']} tokens, "
      f"prompt {a['usage']['prompt_tokens']} tokens, first logprob {c[0]['logprob']:.3f}, "
      f"top-5 shape {'ok' if ok else 'WRONG'}")
PY

# The reference workload: 32-token prompts (token ids), 100 new tokens.
"$dir/weft-bench" --model llama --url "$url" --endpoint completions --prompt-ids 32 \
  --users 1,10,50,100 --requests-per-user 3 --max-tokens 100 --json "$out/bench.json" \
  --svg "$out/bench.svg" 2>&1 | tee "$out/bench.txt"
# Open loop: Poisson arrivals at 150 requests/s (above what 100 users ask).
"$dir/weft-bench" --model llama --url "$url" --endpoint completions --prompt-ids 32 \
  --rate 150 --requests 450 --max-tokens 100 --json "$out/bench-poisson.json" 2>&1 \
  | tee "$out/bench-poisson.txt"
# The chat route under load (the synthetic tokenizer spells the template
# and the instruction byte by byte: ~240-token prompts).
"$dir/weft-bench" --model llama --url "$url" --endpoint chat --users 100 --requests-per-user 1 \
  --max-tokens 100 --json "$out/bench-chat.json" 2>&1 | tee "$out/bench-chat.txt"
python3 "$here/serve_load.py" "$url" llama --users 100 --rounds 3 --prompt-tokens 32 \
  --max-tokens 100 2>&1 | tee "$out/serve_load.txt"
curl -s "$url/metrics" | grep -E "^weft_(requests_total|generated_tokens_total|prompt_tokens_total)" \
  | head -5

kill -TERM $pid
wait $pid
echo "weft-serve exit code after SIGTERM: $?"
echo
echo "== serving =="
echo "$bucket"
grep -E "^\|" "$out/bench.txt" | head -8
echo "Poisson, 150 requests/s:"
grep -E "^\| rate" "$out/bench-poisson.txt"
echo "chat route, 100 users:"
grep -E "^\| 100" "$out/bench-chat.txt"
tail -3 "$out/serve_load.txt"
