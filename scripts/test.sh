#!/usr/bin/env bash
# Sets everything up, fetches the real-model fixture, then runs every test
# suite (lit, GoogleTest, bounded fuzzing), then the runtime's unit tests under AddressSanitizer and
# UndefinedBehaviorSanitizer (scripts/sanitize.sh; WEFT_SANITIZE=0 skips
# it). Tests labelled `gpu` skip, visibly, where no GPU is present.
# Extra arguments go to ctest (e.g. -L lit, -R Safetensors).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
build="${WEFT_BUILD_DIR:-$root/build}"
# The real-model fixture (SmolLM2-135M-Instruct's GGUF, pinned): the tests
# that need it skip without it, so a machine without network still tests.
python3 "$root/scripts/fetch_fixtures.py" "$build" || true
ctest --test-dir "$build" --output-on-failure -j"${WEFT_JOBS:-$(nproc)}" "$@"
if [[ "${WEFT_SANITIZE:-1}" != 0 && $# == 0 ]]; then
  "$root/scripts/sanitize.sh"
fi
