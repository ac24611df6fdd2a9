#!/usr/bin/env bash
# Plans for A/B runs of kernel-library variants against the kept library, in
# one GPU call: for the kept library and every variant, Llama 3.1 8B with 32
# layers as AWQ int4 (groups of 128, an int4 LM head: issue 12's batch-1
# plan) and as fp16, and the 2-layer checks against transformers (int4 from
# fp16 and from bf16, fp16), all max-batch 1 (the decode stream kernel).
#   test/gpu/make_ab_plans.sh DIR NAME=VARIANT [NAME=VARIANT ...]      (here)
# VARIANT: a patch to the repository's targets/ (e.g. one in test/gpu/lab/,
# applied to a copy), patches joined by + (applied in order), or a kernel
# library folder (one holding weft/*.cuh).
# Then, there, the commands this prints at the end: check_plans.py over
# DIR/checks.jsonl, and bench_ab.py with a pair per variant (kept, NAME).
# WEFT_AB_PLANS=REGEX: only the plans whose file names match (e.g. 'awq'
# for the int4 plans alone; checks of the others are left out).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ $# -lt 2 || $1 == *=* ]]; then
  echo "usage: $0 DIR NAME=PATCH_OR_LIBRARY [NAME=PATCH_OR_LIBRARY ...]" >&2
  exit 2
fi
out="$1"
shift
build="${WEFT_BUILD_DIR:-$root/build}"
compile="$build/tools/weft-compile/weft-compile"
cache="${WEFT_KERNEL_CACHE:-$build/test/kernel-cache}"
sparse="$root/test/Inputs/make_sparse_checkpoint.py"
only="${WEFT_AB_PLANS:-.}"

# Every variant's library first, so a bad patch stops before any compile.
names=(kept)
libs=("$root/targets/CUDA/kernels")
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for arg in "$@"; do
  name="${arg%%=*}" variant="${arg#*=}"
  if [[ -z $name || $name == "$arg" || ! $name =~ ^[A-Za-z0-9_.-]+$ || $name == kept ]]; then
    echo "$0: '$arg': expected NAME=PATCH_OR_LIBRARY (NAME of letters, digits, . _ -; not 'kept')" >&2
    exit 2
  fi
  if [[ -d $variant ]]; then
    [[ -d $variant/weft ]] || { echo "$0: $variant: no weft/ inside (a kernel library)" >&2; exit 1; }
    libs+=("$(cd "$variant" && pwd)")
  else
    mkdir -p "$work/$name"
    cp -r "$root/targets" "$work/$name/"
    IFS=+ read -r -a patches <<< "$variant"
    for p in "${patches[@]}"; do
      [[ -f $p ]] || { echo "$0: $p: no such patch or folder" >&2; exit 1; }
      if ! patch -s -d "$work/$name" -p1 < "$p"; then
        echo "$0: $p does not apply to targets/${patches[1]:+ (after the patches before it)}" >&2
        exit 1
      fi
    done
    libs+=("$work/$name/targets/CUDA/kernels")
  fi
  names+=("$name")
done

[[ -x $compile ]] || { echo "$0: no $compile (build first, or set WEFT_BUILD_DIR)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/cfg" "$out/lib"
checks="$out/checks.jsonl"
: > "$checks"
source "$root/test/gpu/plan_helpers.sh"

# 2 layers at Llama 3.1 8B's sizes, checked against transformers.
for dt in float16:fp16 bfloat16:bf16; do
  m="llama8b-2l-int4-${dt#*:}"
  model "$m" 2 '{}' "${dt%:*}"
  for i in "${!names[@]}"; do
    plan="$m-${names[$i]}.weft"
    build_plan --model "$out/ckpt" --topology h200 --weight-dtype int4 --max-batch 1 \
      --prefill-chunks 8,32 --kernel-library "${libs[$i]}" -o "$out/$plan" 2>/dev/null
    rm -f "$out/${plan%.weft}.weights.safetensors"
    check "2 layers, int4 from ${dt#*:}, ${names[$i]}" "$plan" "rtn4:cfg/$m" "${dt%:*}" 8 32 1
    check "  same, prompt 20" "$plan" "rtn4:cfg/$m" "${dt%:*}" 20 32 1
  done
done
model llama8b-2l-fp16 2 '{}' float16
for i in "${!names[@]}"; do
  plan="llama8b-2l-fp16-${names[$i]}.weft"
  build_plan --model "$out/ckpt" --topology h200 --max-batch 1 --prefill-chunks 8,32 \
    --kernel-library "${libs[$i]}" -o "$out/$plan" 2>/dev/null
  check "2 layers, fp16, ${names[$i]}" "$plan" cfg/llama8b-2l-fp16 float16 20 32 1
done
# All 32 layers for bench_ab.py (random weights: the files beside the
# plans are not kept).
model llama8b 32
for i in "${!names[@]}"; do
  build_plan --model "$out/ckpt" --topology h200 --max-batch 1 --kernel-library "${libs[$i]}" \
    -o "$out/fp16-${names[$i]}.weft" 2>/dev/null
done
rm -rf "$out/ckpt"
python3 "$sparse" "$out/ckpt" --layers 32 --dtype float16 --quant awq --group 128 >/dev/null
for i in "${!names[@]}"; do
  build_plan --model "$out/ckpt" --topology h200 --max-batch 1 --lm-head-dtype int4 \
    --kernel-library "${libs[$i]}" -o "$out/awq-${names[$i]}.weft" 2>/dev/null
done
rm -rf "$out/ckpt"
rm -f "$out"/*.weights.safetensors
cp "$build/tools/weft-run/weft-run" "$out/"
ldd "$out/weft-run" | awk '/sodium/ {print $3}' | xargs -r cp -L -t "$out/lib/"

# The commands name DIR as given from the repository root (the device runs
# them there).
rel="$(realpath -m "$out")"
rel="${rel#"$root"/}"
mib=$(du -sm "$out" | cut -f1)
if ((mib > 60)); then
  echo "$0: warning: $out holds $mib MiB, more than a GPU call carries (64 MiB in all):" \
    "fewer variants a call, or WEFT_AB_PLANS (e.g. 'awq|int4')" >&2
fi
pairs=""
for name in "${names[@]:1}"; do
  for w in awq fp16; do
    [[ -f $out/$w-$name.weft ]] && pairs+=" $w-$name:$rel/$w-kept.weft:$rel/$w-$name.weft"
  done
done
echo "$(ls "$out"/*.weft | wc -l) plans and $(wc -l < "$checks") checks in $out ($(du -sh "$out" | cut -f1)); there:"
echo "  export LD_LIBRARY_PATH=\$PWD/$rel/lib"
echo "  WEFT_RUN=$rel/weft-run python3 test/gpu/check_plans.py $rel"
echo "  python3 test/gpu/bench_ab.py $rel/weft-run --buckets decode_b1 --contexts 128,512 --rounds 2 \\"
echo "    --labels kept,variant$pairs"
