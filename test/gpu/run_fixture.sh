#!/usr/bin/env bash
# ctest `gpu` test: compiles a fixture's plan, runs it with weft-run, and
# checks the greedy tokens against transformers' continuation recorded in
# the fixture's reference.json. Exits 77 (ctest: skipped) without a GPU.
#   run_fixture.sh BUILD_DIR FIXTURE_DIR
set -euo pipefail
build="$1"; fixture="$2"
run="$build/tools/weft-run/weft-run"
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIPPED: no NVIDIA GPU on this machine"
  exit 77
fi
arch="sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)"
plan="$(mktemp -d)/fixture.weft"
"$build/tools/weft-compile/weft-compile" --model "$fixture" --topology h200 --arch "$arch" \
  --max-batch 1 --prefill-chunks 8 --kernel-cache "$build/test/kernel-cache" -o "$plan" >/dev/null
read -r prompt expected < <(python3 -c "
import json, sys
r = json.load(open('$fixture/reference.json'))
print(','.join(map(str, r['prompt_ids'])), ' '.join(map(str, r['greedy_continuation'])))")
got=$("$run" "$plan" --weights "$fixture" --prompt-ids "$prompt" --max-tokens 8 --quiet |
      sed -n 's/^tokens: //p')
echo "expected: $expected"
echo "got:      $got"
[[ "$got" == "$expected" ]]
