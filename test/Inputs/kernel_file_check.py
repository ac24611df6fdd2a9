#!/usr/bin/env python3
"""Holds make_quantized_fixture.kernel_file (what the GPU checks write
beside a plan, test/gpu/check_plans.py) to the file weft-compile writes.

    kernel_file_check.py make DIR (f16|bf16) [--tied]
        a small Llama checkpoint with random weights in DIR: 2 layers,
        hidden 256, FFN 512, 4 heads of 64 (2 KV heads), vocabulary 512, so
        4-bit codes take the tiled order; --tied ties the LM head to the
        embedding
    kernel_file_check.py compare DIR PLAN.weights.safetensors KIND [HEAD_KIND]
        every tensor of the compiler's file against kernel_file's of DIR's
        weights (KIND rtn4|rtn8|fp8 for --weight-dtype int4|int8|fp8,
        HEAD_KIND for --lm-head-dtype): the same names, dtypes, shapes and
        bytes; prints one line and exits 1 on any difference.
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_quantized_fixture as mq  # noqa: E402

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
          "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 64, "num_hidden_layers": 2, "vocab_size": 512, "rms_norm_eps": 1e-5,
          "rope_theta": 10000.0, "max_position_embeddings": 256, "hidden_act": "silu",
          "bos_token_id": 1, "eos_token_id": 2}


def make(d, dtype, tied):
    rng = np.random.default_rng(7)
    c = CONFIG
    h, f, v, hd = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["head_dim"]
    shapes = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    if not tied:
        shapes["lm_head.weight"] = (v, h)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({
            p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
            p + "self_attn.q_proj.weight": (c["num_attention_heads"] * hd, h),
            p + "self_attn.k_proj.weight": (c["num_key_value_heads"] * hd, h),
            p + "self_attn.v_proj.weight": (c["num_key_value_heads"] * hd, h),
            p + "self_attn.o_proj.weight": (h, c["num_attention_heads"] * hd),
            p + "mlp.gate_proj.weight": (f, h), p + "mlp.up_proj.weight": (f, h),
            p + "mlp.down_proj.weight": (h, f)})
    tensors = {}
    for name, shape in shapes.items():
        w = rng.uniform(0.5, 1.5, shape) if len(shape) == 1 else rng.normal(0, 0.05, shape)
        tensors[name] = mq.stored(w, dtype)
    os.makedirs(d, exist_ok=True)
    torch_dtype = "float16" if dtype == "f16" else "bfloat16"
    with open(os.path.join(d, "config.json"), "w") as out:
        json.dump(dict(CONFIG, torch_dtype=torch_dtype, tie_word_embeddings=tied), out, indent=1)
    mq.write_safetensors(os.path.join(d, "model.safetensors"), tensors)


def raw_tensors(path):
    """name: (dtype, shape, bytes) of a safetensors file."""
    blob = open(path, "rb").read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    return {name: (info["dtype"], info["shape"],
                   data[info["data_offsets"][0]:info["data_offsets"][1]])
            for name, info in header.items() if name != "__metadata__"}


def compare(d, path, kind, head_kind):
    config = json.load(open(os.path.join(d, "config.json")))
    dtype = "f16" if config["torch_dtype"] == "float16" else "bf16"
    weights = mq.read_safetensors(os.path.join(d, "model.safetensors"))
    mine, _ = mq.kernel_file(weights, kind, head_kind, dtype,
                             tied=bool(config.get("tie_word_embeddings")))
    theirs = raw_tensors(path)
    if sorted(mine) != sorted(theirs):
        sys.exit(f"{path}: tensors {sorted(theirs)}, kernel_file makes {sorted(mine)}")
    for name in sorted(mine):
        want = mq.tensor_bytes(mine[name])
        got = theirs[name]
        for what, a, b in (("dtype", got[0], want[0]), ("shape", got[1], want[1])):
            if a != b:
                sys.exit(f"{path}: {name}: {what} {a}, kernel_file makes {b}")
        if got[2] != want[2]:
            at = next(i for i in range(len(got[2])) if got[2][i] != want[2][i])
            sys.exit(f"{path}: {name}: bytes differ from byte {at} of {len(got[2])}")
    print(f"{os.path.basename(path)}: {len(mine)} tensors, the same bytes as kernel_file's")


def main():
    a = sys.argv[1:]
    if len(a) >= 3 and a[0] == "make" and a[2] in ("f16", "bf16") and a[3:] in ([], ["--tied"]):
        make(a[1], a[2], a[3:] == ["--tied"])
    elif len(a) in (4, 5) and a[0] == "compare":
        compare(a[1], a[2], a[3], a[4] if len(a) == 5 else None)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
