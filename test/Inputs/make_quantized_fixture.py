#!/usr/bin/env python3
"""Quantized twins of a float fixture, for the reference interpreter's tests.

    make_quantized_fixture.py FIXTURE_DIR OUT_DIR

Reads FIXTURE_DIR (a Hugging Face Llama checkpoint: config.json,
model.safetensors) and writes, under OUT_DIR, for each format:

  awq/          AWQ 4-bit, group 32 (GEMM packing), asymmetric
  gptq4/        GPTQ 4-bit, group 32, asymmetric (zeros stored minus one)
  gptq8/        GPTQ 8-bit, one group per row, symmetric
  <format>-dequant/   the same model with every projection written back as
                      the F16 matrix its packed tensors decode to
  f16/          the fixture in F16, for quantizing at compile time
  rtn4-dequant/, rtn8-dequant/   f16/ with every projection as the F16
                      matrix weft-compile --weight-dtype int4 / int8 must
                      make of it (round-to-nearest, see RTN)

Projections are quantized by round-to-nearest; the embedding, norms and LM
head stay float, as F16. Packing and decoding follow the formats' public
descriptions (compiler/Import/ModelConfig.h), written here with numpy
independently of Weft's C++: the interpreter must give the same logits on a
quantized checkpoint and on its dequantized twin.
"""
import json
import os
import struct
import sys

import numpy as np

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # nibble p of a word holds column AWQ_ORDER[p]


def read_safetensors(path):
    blob = open(path, "rb").read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    kinds = {"F32": np.float32, "F16": np.float16, "BF16": None}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        kind = kinds[info["dtype"]]
        if kind is None:
            raw = np.frombuffer(data[begin:end], dtype=np.uint16).astype(np.uint32) << 16
            arr = raw.view(np.float32)
        else:
            arr = np.frombuffer(data[begin:end], dtype=kind).astype(np.float32)
        out[name] = arr.reshape(info["shape"])
    return out


def write_safetensors(path, tensors):
    header, chunks, offset = {}, [], 0
    names = {np.dtype(np.float16): "F16", np.dtype(np.int32): "I32"}
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        raw = a.tobytes()
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for c in chunks:
            f.write(c)


def quantize(w, bits, group, symmetric):
    """Round-to-nearest of w [out, in] per row and group of inputs: integer
    codes q [out, in], zeros [out, groups], f16 scales [out, groups]."""
    out, inp = w.shape
    group = group if group > 0 else inp
    top = 2 ** bits - 1
    g = w.reshape(out, inp // group, group)
    if symmetric:
        scale = np.abs(g).max(axis=2) / (top / 2)
        zero = np.full(scale.shape, 2 ** (bits - 1), dtype=np.int64)
    else:
        lo, hi = g.min(axis=2), g.max(axis=2)
        scale = (hi - lo) / top
        # GPTQ stores zeros minus one: keep them >= 1 so that a stored -1
        # cannot wrap to the top code.
        zero = np.clip(np.round(-lo / np.where(scale > 0, scale, 1)), 1, top).astype(np.int64)
    scale = np.where(scale > 0, scale, 1e-3).astype(np.float16)
    s = scale.astype(np.float32)[:, :, None]
    q = np.clip(np.round(g / s) + zero[:, :, None], 0, top).astype(np.int64)
    return q.reshape(out, inp), zero, scale


def dequantize(q, zero, scale, group):
    """(q - zero) * scale, as F16 (the product is exact in f32, then rounded)."""
    out, inp = q.shape
    group = group if group > 0 else inp
    g = q.reshape(out, inp // group, group)
    w = (g - zero[:, :, None]).astype(np.float32) * scale.astype(np.float32)[:, :, None]
    return w.reshape(out, inp).astype(np.float16)


def pack_words(values, bits, order=None):
    """Packs the last axis, 32 / bits values a word, value k (or order[k]) at
    bits k * bits; returns int32."""
    per = 32 // bits
    v = values.reshape(values.shape[:-1] + (values.shape[-1] // per, per)).astype(np.uint64)
    if order is not None:
        v = v[..., order]
    shifts = (np.arange(per, dtype=np.uint64) * bits)
    words = (v << shifts).sum(axis=-1).astype(np.uint64) & 0xFFFFFFFF
    return words.astype(np.uint32).view(np.int32)


def packed(fmt, q, zero, scale, group):
    """The tensors a checkpoint of `fmt` stores for one projection."""
    out, inp = q.shape
    if fmt == "awq":
        return {"qweight": pack_words(q.T, 4, AWQ_ORDER),          # [in, out / 8]
                "qzeros": pack_words(zero.T, 4, AWQ_ORDER),        # [groups, out / 8]
                "scales": scale.T.copy()}                          # [groups, out]
    bits = 4 if fmt == "gptq4" else 8
    g = group if group > 0 else inp
    return {"qweight": pack_words(q, bits).T.copy(),             # [in * bits / 32, out]
            "qzeros": pack_words(zero.T - 1, bits),                 # [groups, out * bits / 32]
            "scales": scale.T.copy(),
            "g_idx": (np.arange(inp) // g).astype(np.int32)}


FORMATS = {
    "awq": dict(bits=4, group=32, symmetric=False,
                config={"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True,
                        "version": "gemm"}),
    "gptq4": dict(bits=4, group=32, symmetric=False,
                  config={"quant_method": "gptq", "bits": 4, "group_size": 32, "sym": False,
                          "desc_act": False}),
    "gptq8": dict(bits=8, group=-1, symmetric=True,
                  config={"quant_method": "gptq", "bits": 8, "group_size": -1, "sym": True,
                          "desc_act": False}),
}


# Quantized at compile time (weft-compile --weight-dtype int4|int8) from the
# F16 checkpoint `f16/`: round-to-nearest by quantize() above, 4-bit with
# groups of 128 inputs (the whole row where 128 does not divide it),
# asymmetric; 8-bit with one symmetric group per row.
RTN = {"rtn4": dict(bits=4, group=128, symmetric=False),
       "rtn8": dict(bits=8, group=-1, symmetric=True)}


def rtn_group(group, inp):
    return group if group > 0 and inp % group == 0 else -1


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    config = json.load(open(os.path.join(src, "config.json")))
    weights = read_safetensors(os.path.join(src, "model.safetensors"))
    config.pop("dtype", None)
    config["torch_dtype"] = "float16"
    half = {name: w.astype(np.float16) for name, w in weights.items()}
    twins = {"f16": half}
    for fmt, spec in RTN.items():
        twins[fmt + "-dequant"] = {
            name: dequantize(*quantize(w.astype(np.float32), spec["bits"],
                                       rtn_group(spec["group"], w.shape[1]), spec["symmetric"]),
                             rtn_group(spec["group"], w.shape[1]))
            if name.endswith("_proj.weight") else w
            for name, w in half.items()}
    for suffix, tensors in twins.items():
        d = os.path.join(out, suffix)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f, indent=1)
        write_safetensors(os.path.join(d, "model.safetensors"), tensors)
    for fmt, spec in FORMATS.items():
        quant, dequant = {}, {}
        for name, w in weights.items():
            if not name.endswith("_proj.weight"):
                quant[name] = dequant[name] = w.astype(np.float16)
                continue
            q, zero, scale = quantize(w, spec["bits"], spec["group"], spec["symmetric"])
            dequant[name] = dequantize(q, zero, scale, spec["group"])
            base = name[:-len("weight")]
            for part, t in packed(fmt, q, zero, scale, spec["group"]).items():
                quant[base + part] = t
        for suffix, tensors, cfg in ((fmt, quant, dict(config, quantization_config=spec["config"])),
                                     (fmt + "-dequant", dequant, config)):
            d = os.path.join(out, suffix)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(cfg, f, indent=1)
            write_safetensors(os.path.join(d, "model.safetensors"), tensors)


if __name__ == "__main__":
    main()
