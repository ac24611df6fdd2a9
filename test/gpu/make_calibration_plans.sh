#!/usr/bin/env bash
# Plans for test/gpu/bench_calibration.sh, into DIR/cal (here: needs the
# compiler):
#   test/gpu/make_calibration_plans.sh DIR TOPOLOGY.json [CALIBRATED.json]
# TOPOLOGY.json: the GPU machine's one-H200 topology (weft-detect -o);
# CALIBRATED.json: the same after bench_calibration.sh measure wrote the
# step scales into it. Makes a.weft and pipe.weft from the first, and
# a-cal.weft and pipe-cal.weft from the second when given; the pipeline
# plans declare two copies of the device (run on one GPU, --devices 0,0).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="$1" topo="$2" calibrated="${3:-}"
compile="${WEFT_BUILD_DIR:-$root/build}/tools/weft-compile/weft-compile"
mkdir -p "$dir/cal"
# twice FILE OUT: FILE's device twice, as a pipeline's two stages on one GPU.
twice() {
  python3 - "$1" "$2" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
d = t["devices"][0]
t["name"] = "2 x " + t.get("name", "device") + " (one GPU, --devices 0,0)"
t["devices"] = [d, dict(d)]
t["links"] = [{"devices": [0, 1], "kind": "pcie", "bandwidth_gbps": 50, "latency_us": 10}]
t.setdefault("host", {})["pcie_bandwidth_gbps"] = [50, 50]
json.dump(t, open(sys.argv[2], "w"), indent=2)
PY
}
plans() { # TOPOLOGY SUFFIX
  cp "$1" "$dir/cal/h200$2.json"
  twice "$1" "$dir/cal/2xh200$2.json"
  "$compile" builtin:llama-3.1-8b --topology "$dir/cal/h200$2.json" --batch 100 --context 4096 \
    -o "$dir/cal/a$2.weft" >/dev/null
  "$compile" builtin:llama-3.1-8b --topology "$dir/cal/2xh200$2.json" --stages 0:16,1 \
    --batch 64 --context 4096 -o "$dir/cal/pipe$2.weft" >/dev/null
}
plans "$topo" ""
[[ -n $calibrated ]] && plans "$calibrated" "-cal"
ls "$dir/cal"
