#!/usr/bin/env python3
"""Writes a full-size Llama checkpoint whose tensor data is a sparse hole.

The safetensors header is complete and valid, the file has its full size
(16 GB for Llama 3.1 8B in bf16) but occupies almost no disk, so tests can
check that importing reads only headers.

    make_sparse_checkpoint.py OUT_DIR [--shards N] [--layers N] [--dtype float16]
                              [--config JSON] [--quant awq|gptq4|gptq8|ct4|ct8] [--group N]
                              [--drop TENSOR]...

--config merges keys into the Llama 3.1 8B config.json, e.g. another
architecture ('{"model_type": "qwen2", ...}': Q/K/V biases; "qwen3": Q/K
head norms; "gemma2": four norms a layer, tied by default), other sizes,
"head_dim", or "tie_word_embeddings": true (no lm_head tensor).

--quant stores the projections packed, as AWQ (GEMM layout, 4-bit) or GPTQ
(4- or 8-bit) checkpoints do: qweight, qzeros and scales (and g_idx for
GPTQ) instead of weight, or as compressed-tensors pack-quantized ones (ct4,
ct8: weight_packed, weight_scale, weight_shape), with a quantization_config
in config.json; the embedding, norms and LM head stay in --dtype.
"""
import argparse
import json
import os
import struct

DTYPE = "bfloat16"
CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
    "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": DTYPE,
}


def tensors(c):
    h, f, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    d = c.get("head_dim") or h // c["num_attention_heads"]
    q = c["num_attention_heads"] * d
    kv = c["num_key_value_heads"] * d
    bias = c["model_type"] == "qwen2"
    yield "model.embed_tokens.weight", [v, h]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", [h]
        yield p + "self_attn.q_proj.weight", [q, h]
        yield p + "self_attn.k_proj.weight", [kv, h]
        yield p + "self_attn.v_proj.weight", [kv, h]
        if bias:
            yield p + "self_attn.q_proj.bias", [q]
            yield p + "self_attn.k_proj.bias", [kv]
            yield p + "self_attn.v_proj.bias", [kv]
        if c["model_type"] == "qwen3":  # per-head norms of queries and keys
            yield p + "self_attn.q_norm.weight", [d]
            yield p + "self_attn.k_norm.weight", [d]
        yield p + "self_attn.o_proj.weight", [h, q]
        yield p + "post_attention_layernorm.weight", [h]
        if c["model_type"] == "gemma2":  # norms around the MLP too
            yield p + "pre_feedforward_layernorm.weight", [h]
            yield p + "post_feedforward_layernorm.weight", [h]
        yield p + "mlp.gate_proj.weight", [f, h]
        yield p + "mlp.up_proj.weight", [f, h]
        yield p + "mlp.down_proj.weight", [h, f]
    yield "model.norm.weight", [h]
    if not c.get("tie_word_embeddings", c["model_type"] == "gemma2"):
        yield "lm_head.weight", [v, h]


def quantized(items, quant, group):
    """The tensors as a quantized checkpoint stores them: (name, shape, dtype)."""
    bits = 4 if quant in ("awq", "gptq4", "ct4") else 8
    per_word = 32 // bits
    for name, shape in items:
        if not (name.endswith("_proj.weight") and len(shape) == 2):
            yield name, shape, None
            continue
        base = name[:-len("weight")]
        out, inp = shape
        groups = inp // group if group > 0 else 1
        if quant.startswith("ct"):  # compressed-tensors pack-quantized
            yield base + "weight_packed", [out, inp // per_word], "I32"
            yield base + "weight_scale", [out, groups], None  # the model dtype
            yield base + "weight_shape", [2], "I64"
        elif quant == "awq":
            yield base + "qweight", [inp, out // per_word], "I32"
            yield base + "qzeros", [groups, out // per_word], "I32"
            yield base + "scales", [groups, out], "F16"
        else:
            yield base + "qweight", [inp // per_word, out], "I32"
            yield base + "qzeros", [groups, out // per_word], "I32"
            yield base + "scales", [groups, out], "F16"
            yield base + "g_idx", [inp], "I32"


def write_file(path, items):
    header, offset = {}, 0
    default = {"bfloat16": "BF16", "float16": "F16"}[CONFIG["torch_dtype"]]
    for name, shape, dtype in items:
        dtype = dtype or default
        n = {"BF16": 2, "F16": 2, "I32": 4, "I64": 8}[dtype]
        for s in shape:
            n *= s
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        f.truncate(8 + len(blob) + offset)
    return offset


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--layers", type=int, default=CONFIG["num_hidden_layers"])
    ap.add_argument("--dtype", choices=["bfloat16", "float16"], default=DTYPE)
    ap.add_argument("--config", default="{}", help="JSON object merged into config.json")
    ap.add_argument("--quant", choices=["awq", "gptq4", "gptq8", "ct4", "ct8"])
    ap.add_argument("--group", type=int, default=128, help="inputs per scale (-1: per row)")
    ap.add_argument("--drop", action="append", default=[], help="leave this tensor out")
    args = ap.parse_args()
    CONFIG.update(json.loads(args.config))
    CONFIG["num_hidden_layers"] = args.layers
    CONFIG["torch_dtype"] = args.dtype
    if args.quant == "awq":
        CONFIG["quantization_config"] = {"quant_method": "awq", "bits": 4,
                                         "group_size": args.group, "zero_point": True,
                                         "version": "gemm"}
    elif args.quant and args.quant.startswith("ct"):
        weights = {"num_bits": 4 if args.quant == "ct4" else 8, "type": "int",
                   "symmetric": True, "dynamic": False, "actorder": None,
                   "strategy": "group" if args.group > 0 else "channel"}
        if args.group > 0:
            weights["group_size"] = args.group
        CONFIG["quantization_config"] = {
            "quant_method": "compressed-tensors", "format": "pack-quantized",
            "ignore": ["lm_head"], "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                          "input_activations": None}}}
    elif args.quant:
        CONFIG["quantization_config"] = {"quant_method": "gptq",
                                         "bits": 4 if args.quant == "gptq4" else 8,
                                         "group_size": args.group, "sym": True,
                                         "desc_act": False}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(CONFIG, f)
    items = [(n, s, None) for n, s in tensors(CONFIG)]
    if args.quant:
        items = list(quantized([(n, s) for n, s, _ in items], args.quant, args.group))
    items = [t for t in items if t[0] not in args.drop]
    if args.shards == 1:
        write_file(os.path.join(args.out, "model.safetensors"), items)
        return
    per = (len(items) + args.shards - 1) // args.shards
    weight_map, total = {}, 0
    for s in range(args.shards):
        name = f"model-{s + 1:05d}-of-{args.shards:05d}.safetensors"
        chunk = items[s * per:(s + 1) * per]
        total += write_file(os.path.join(args.out, name), chunk)
        weight_map.update({t: name for t, _, _ in chunk})
    with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)


if __name__ == "__main__":
    main()
