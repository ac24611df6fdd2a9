# Shared by make_plans.sh and make_stream_plans.sh (sourced): building plans
# and listing their checks. The caller sets out (the output folder), compile
# (weft-compile), cache (the kernel cache), sparse (make_sparse_checkpoint.py),
# checks (DIR/checks.jsonl) and only (a regular expression over plan file
# names: the others are neither built nor checked).

# build_plan WEFT-COMPILE-ARGS... -o PLAN: every plan for sm_90 (--arch), so
# 3090+3060 partitions run on an H200 with both declared devices mapped
# onto it.
build_plan() {
  local plan="${*: -1}"
  [[ $(basename "$plan") =~ $only ]] || return 0
  "$compile" --arch sm_90 --kernel-cache "$cache" "$@" >/dev/null
}

# model NAME LAYERS [CONFIG [DTYPE]]: a header-only checkpoint of Llama 3.1
# 8B's shapes (CONFIG merged into its config.json) in $out/ckpt, its config
# kept as cfg/NAME for check_plans.py.
model() {
  rm -rf "$out/ckpt"
  python3 "$sparse" "$out/ckpt" --layers "$2" --dtype "${4:-float16}" --config "${3:-{\}}"
  mkdir -p "$out/cfg/$1"
  cp "$out/ckpt/config.json" "$out/cfg/$1/"
}

# check NAME PLAN MODEL DTYPE PROMPT_LEN STEPS DEVICES: one row of the table
# (MODEL: a fixture name or a cfg/ directory; DEVICES: declared devices).
check() {
  [[ -f $out/$2 ]] || return 0
  printf '{"name": "%s", "plan": "%s", "model": "%s", "dtype": "%s", "prompt": %s, "steps": %s, "devices": %s}\n' \
    "$@" >> "$checks"
}

# check_batch NAME PLAN MODEL DTYPE STEPS DEVICES LENGTHS: the prompts (one
# per length, comma-separated) run together through weft-run --prompts;
# every sequence is compared with transformers running it alone.
check_batch() {
  [[ -f $out/$2 ]] || return 0
  printf '{"name": "%s", "plan": "%s", "model": "%s", "dtype": "%s", "steps": %s, "devices": %s, "batch": [%s]}\n' \
    "$@" >> "$checks"
}

# check_batch_args ... as check_batch, then weft-run flags as a JSON array.
check_batch_args() {
  [[ -f $out/$2 ]] || return 0
  printf '{"name": "%s", "plan": "%s", "model": "%s", "dtype": "%s", "steps": %s, "devices": %s, "batch": [%s], "args": %s}\n' \
    "$@" >> "$checks"
}

# check_shared ... as check_batch, then SHARED: how many leading tokens of
# one base prompt each prompt begins with (prefix caching shares them).
check_shared() {
  [[ -f $out/$2 ]] || return 0
  printf '{"name": "%s", "plan": "%s", "model": "%s", "dtype": "%s", "steps": %s, "devices": %s, "batch": [%s], "shared": [%s]}\n' \
    "$@" >> "$checks"
}

# lengths N MAX: N prompt lengths from 1 to MAX, spread and shuffled.
lengths() {
  python3 -c 'import random,sys; n,m=int(sys.argv[1]),int(sys.argv[2]); r=random.Random(n*7919+m); v=[1+(m-1)*i//max(1,n-1) for i in range(n)]; r.shuffle(v); print(",".join(map(str,v)))' "$1" "$2"
}
