#!/usr/bin/env bash
# weft-run as a person uses it in a terminal: a prompt whose answer streams
# (--stream) must print exactly the text the batch form prints at the end
# (--no-stream), --chat must hold a conversation read from stdin
# (system message, three turns, /reset, /exit) with a chat template, and
# --bench all must time every bucket.
#   test/gpu/check_interactive.sh DIR        (DIR from make_plans.sh)
# Prints one line per check and "interactive: OK" or the failures last.
set -uo pipefail
dir="${1:-.gpu}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plan="$dir/llama8b-2l.weft"
run=("$dir/weft-run" "$plan" --random-weights --tokenizer "$tmp/tok.json")
python3 "$here/serve_load.py" --write-tokenizer "$tmp/tok.json" 128256
bad=0
check() { # check NAME CONDITION-EXIT-CODE DETAIL
  if [[ $2 == 0 ]]; then echo "ok    $1"; else echo "FAIL  $1: $3"; bad=$((bad + 1)); fi
}

# Streamed text = the text printed at the end, greedy on the same weights.
"${run[@]}" --prompt "Hello there, how are" --max-tokens 24 --stream > "$tmp/stream.out" 2> "$tmp/stream.err"
rc=$?
"${run[@]}" --prompt "Hello there, how are" --max-tokens 24 --no-stream > "$tmp/batch.out" 2>&1
python3 - "$tmp/stream.out" "$tmp/batch.out" <<'PY'
import sys
streamed = open(sys.argv[1], encoding="utf-8").read()
batch = open(sys.argv[2], encoding="utf-8").read()
text = [l[len("text: "):] for l in batch.splitlines() if l.startswith("text: ")][0]
assert streamed.endswith("\n"), "no final newline"
assert streamed[:-1] == text, f"streamed {streamed[:-1]!r} != {text!r}"
PY
check "--stream prints the same text as --no-stream" $(( rc | $? )) "$(head -c 300 "$tmp/stream.err")"
grep -q "^loaded in .* tok/s" "$tmp/stream.err"
check "--stream reports the speed on stderr" $? "$(cat "$tmp/stream.err")"

# Token ids stream without a tokenizer.
"$dir/weft-run" "$plan" --random-weights --prompt-ids 5,6,7 --max-tokens 8 --stream > "$tmp/ids.out" 2>/dev/null
"$dir/weft-run" "$plan" --random-weights --prompt-ids 5,6,7 --max-tokens 8 --no-stream > "$tmp/ids-batch.out" 2>/dev/null
[[ "tokens: $(cat "$tmp/ids.out")" == "$(grep '^tokens:' "$tmp/ids-batch.out")" ]]
check "--stream without a tokenizer prints the same ids" $? "$(cat "$tmp/ids.out") vs $(grep '^tokens:' "$tmp/ids-batch.out")"

# A conversation: three user turns, a reset between the second and third.
printf 'Hi\nHow are you?\n/reset\nAgain\n/exit\nnever read\n' |
  "${run[@]}" --chat --chat-template "$dir/llama3_style.jinja" --system "be brief" --max-tokens 12 \
    > "$tmp/chat.out" 2> "$tmp/chat.err"
rc=$?
turns=$(grep -c "^(prompt [0-9]* tokens; answer [0-9]* tokens, " "$tmp/chat.err")
[[ $rc == 0 && $turns == 3 ]]
check "--chat: three turns answered, /exit ends" $? "exit $rc, $turns turns: $(head -c 400 "$tmp/chat.err")"
! grep -q "error" "$tmp/chat.err"
check "--chat: no errors" $? "$(grep error "$tmp/chat.err" | head -3)"
# Each answer is at most --max-tokens tokens.
awk '/^\(prompt / { n = $5 + 0; if (n < 1 || n > 12) exit 1 }' "$tmp/chat.err"
check "--chat: each answer 1 to 12 tokens" $? "$(grep tokens "$tmp/chat.err")"
# The same first turn twice gives the same answer (seed per turn): a
# conversation replayed is reproducible.
printf 'Hi\n' | "${run[@]}" --chat --chat-template "$dir/llama3_style.jinja" --system "be brief" \
  --max-tokens 12 > "$tmp/chat1.out" 2>/dev/null
[[ "$(head -c "$(wc -c < "$tmp/chat1.out")" "$tmp/chat.out")" == "$(cat "$tmp/chat1.out")" ]]
check "--chat: the first turn is reproducible" $? "$(cat "$tmp/chat1.out") vs $(head -c 200 "$tmp/chat.out")"
# A conversation that no longer fits the context is refused, not fatal.
long=$(python3 -c 'print(" ".join(["word"] * 6000))')
printf '%s\nHi\n' "$long" | "${run[@]}" --chat --chat-template "$dir/llama3_style.jinja" --max-tokens 4 \
  > "$tmp/long.out" 2> "$tmp/long.err"
rc=$?
[[ $rc == 0 ]] && grep -q "no longer fits the plan's context" "$tmp/long.err" && grep -q "^(prompt .* tokens, " "$tmp/long.err"
check "--chat: an over-long turn is refused and the next one answered" $? "exit $rc: $(head -c 400 "$tmp/long.err")"

# --system is the conversation's first message: the same first turn without
# it has a shorter prompt.
printf 'Hi\n' | "${run[@]}" --chat --chat-template "$dir/llama3_style.jinja" --max-tokens 4 \
  > /dev/null 2> "$tmp/nosystem.err"
with=$(awk '/^\(prompt / { print $2; exit }' "$tmp/chat.err")
without=$(awk '/^\(prompt / { print $2; exit }' "$tmp/nosystem.err")
[[ -n $with && -n $without && $with -gt $without ]]
check "--chat: --system lengthens the first prompt" $? "with $with, without $without tokens"

# --bench all times every bucket of the plan (the buckets named by the
# refusal of an unknown one).
buckets=$("$dir/weft-run" "$plan" --random-weights --bench none 2>&1 | sed -n 's/.*(it has \(.*\))/\1/p' | tr ',' '\n' | wc -l)
timed=$("$dir/weft-run" "$plan" --random-weights --quiet --bench all --bench-steps 2 | grep -c "^bucket ")
[[ $buckets -gt 0 && $timed == "$buckets" ]]
check "--bench all times every bucket" $? "$timed timed of $buckets"

echo "interactive: $([[ $bad == 0 ]] && echo OK || echo "$bad FAILED")"
exit $((bad > 0))
