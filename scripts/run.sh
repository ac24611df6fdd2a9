#!/usr/bin/env bash
# Sets everything up, then runs Weft's main job on its built-in default:
# compile the default model (Llama 3.1 8B) for the default topology (RTX 3090
# + RTX 3060 over PCIe, 32 concurrent streams) into a plan file and print the
# plan report. Run the plan on the GPUs with weft-run or weft-serve
# (docs/runtime.md, docs/serving.md).
#
#   scripts/run.sh [weft-compile options...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
build="${WEFT_BUILD_DIR:-$root/build}"
if (($# == 0)); then
  set -- --model builtin:llama-3.1-8b --topology rtx3090+rtx3060 --batch 32 \
    --max-batch 32 --report --svg "$build/weft-report.svg" \
    -o "$build/llama-3.1-8b.rtx3090+rtx3060.weft"
fi
"$build/tools/weft-compile/weft-compile" "$@"
