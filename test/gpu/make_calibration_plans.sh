#!/usr/bin/env bash
# Plans for test/gpu/bench_calibration.sh, into DIR/cal (here: needs the
# compiler):
#   test/gpu/make_calibration_plans.sh DIR TOPOLOGY.json [CALIBRATED.json [TWO.json]]
# TOPOLOGY.json: the GPU machine's one-H200 topology (weft-detect -o);
# CALIBRATED.json: the same after bench_calibration.sh measure wrote the
# step scales into it. Makes a.weft and pipe.weft from the first, and
# a-cal.weft and pipe-cal.weft from the second when given; the pipeline
# plans declare two copies of the device (run on one GPU, --devices 0,0).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="$1" topo="$2" calibrated="${3:-}" two="${4:-}"
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
# Two real GPUs (TWO.json: weft-detect --calibrate on the two-GPU machine,
# or "2xh200:nvlink" for datasheet figures): tp.weft (tensor parallel over
# both) and pipe2.weft (16+16 pipeline); with CALIBRATED.json also
# tp-cal.weft and pipe2-cal.weft, whose devices take the one-GPU step
# scales: the two-GPU terms (all-reduce, links) come from TWO.json alone.
if [[ -n $two ]]; then
  if [[ -f $two ]]; then
    cp "$two" "$dir/cal/two.json"
    two="$dir/cal/two.json"
  fi
  "$compile" builtin:llama-3.1-8b --topology "$two" --stages 0+1 --batch 100 --context 4096 \
    -o "$dir/cal/tp.weft" >/dev/null
  "$compile" builtin:llama-3.1-8b --topology "$two" --stages 0:16,1 --batch 64 --context 4096 \
    -o "$dir/cal/pipe2.weft" >/dev/null
  if [[ -n $calibrated && -f $two ]]; then
    python3 - "$two" "$calibrated" "$dir/cal/two-cal.json" <<'PY'
import json, sys
two, one = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
scales = {k: v for k, v in one["devices"][0]["calibration"].items()
          if k in ("steps", "prefill_steps")}
for d in two["devices"]:
    d.setdefault("calibration", {"gpu": one["devices"][0]["calibration"]["gpu"]}).update(scales)
json.dump(two, open(sys.argv[3], "w"), indent=2)
PY
    "$compile" builtin:llama-3.1-8b --topology "$dir/cal/two-cal.json" --stages 0+1 --batch 100 \
      --context 4096 -o "$dir/cal/tp-cal.weft" >/dev/null
    "$compile" builtin:llama-3.1-8b --topology "$dir/cal/two-cal.json" --stages 0:16,1 --batch 64 \
      --context 4096 -o "$dir/cal/pipe2-cal.weft" >/dev/null
  fi
fi
ls "$dir/cal"
