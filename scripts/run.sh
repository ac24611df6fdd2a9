#!/usr/bin/env bash
# Sets everything up, then runs Weft's main job on its built-in default:
# import the default model and print its summary.
#
#   scripts/run.sh [weft-compile options...]   (default: --model builtin:llama-3.1-8b)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
build="${WEFT_BUILD_DIR:-$root/build}"
if (($# == 0)); then
  set -- --model builtin:llama-3.1-8b
fi
"$build/tools/weft-compile/weft-compile" "$@"
