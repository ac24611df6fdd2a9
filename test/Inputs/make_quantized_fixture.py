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
  f16/, bf16/   the fixture in F16 and in BF16, for quantizing at compile
                time
  rtn4-dequant/, rtn8-dequant/   f16/ with every projection as the F16
                      matrix weft-compile --weight-dtype int4 / int8 must
                      make of it (round-to-nearest, see RTN)
  rtn4-bf16-dequant/, rtn8-bf16-dequant/   the same of bf16/, in BF16
  fp8-dequant/, fp8-bf16-dequant/   f16/ and bf16/ with every projection as
                      the F32 values of --weight-dtype fp8 (E4M3 codes times
                      their row's f32 scale, see quantize_e4m3)
  rtn4-head-dequant/, ..., fp8-bf16-head-dequant/   each RTN twin with the
                      LM head quantized the same way too (--lm-head-dtype)

Projections are quantized by round-to-nearest; the embedding, norms and LM
head stay float, as F16 (but for the -head twins' LM head). Packing and decoding follow the formats' public
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


class BF16:
    """An array of float32 values that are bf16 numbers, to be written as
    BF16 (numpy has no bfloat16)."""

    def __init__(self, values):
        self.values = np.ascontiguousarray(values, dtype=np.float32)
        self.shape = self.values.shape


def round_bf16(x):
    """float32 values rounded to the nearest bf16 (ties to even), as float32."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def round_to(x, dtype):
    """float32 values rounded to "f16" or "bf16", as float32."""
    x = np.asarray(x, dtype=np.float32)
    return x.astype(np.float16).astype(np.float32) if dtype == "f16" else round_bf16(x)


def stored(values, dtype):
    """An array to write as `dtype` ("f16", "bf16" or "f32")."""
    if dtype == "f16":
        return np.asarray(values, dtype=np.float32).astype(np.float16)
    if dtype == "bf16":
        return BF16(round_bf16(values))
    return np.asarray(values, dtype=np.float32)


def tensor_bytes(t):
    """(safetensors dtype, shape, raw bytes) of an array or BF16."""
    if isinstance(t, BF16):
        return "BF16", list(t.shape), (t.values.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    names = {np.dtype(np.float16): "F16", np.dtype(np.int32): "I32", np.dtype(np.int64): "I64",
             np.dtype(np.float32): "F32"}
    a = np.ascontiguousarray(t)
    return names[a.dtype], list(a.shape), a.tobytes()


def write_safetensors(path, tensors):
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        kind, shape, raw = tensor_bytes(tensors[name])
        header[name] = {"dtype": kind, "shape": shape,
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


def quantize(w, bits, group, symmetric, dtype="f16"):
    """Round-to-nearest of w [out, in] per row and group of inputs: integer
    codes q [out, in], zeros [out, groups], scales [out, groups] rounded to
    `dtype` ("f16": as np.float16; "bf16": as float32 values)."""
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
    scale = round_to(np.where(scale > 0, scale, 1e-3), dtype)
    s = scale[:, :, None]
    q = np.clip(np.round(g / s) + zero[:, :, None], 0, top).astype(np.int64)
    return q.reshape(out, inp), zero, (scale.astype(np.float16) if dtype == "f16" else scale)


def dequantize(q, zero, scale, group, dtype="f16"):
    """(q - zero) * scale rounded to `dtype` (the product is exact in f32):
    np.float16 for "f16", float32 values for "bf16"."""
    out, inp = q.shape
    group = group if group > 0 else inp
    g = q.reshape(out, inp // group, group)
    w = (g - zero[:, :, None]).astype(np.float32) * scale.astype(np.float32)[:, :, None]
    w = round_to(w.reshape(out, inp), dtype)
    return w.astype(np.float16) if dtype == "f16" else w


E4M3_MAX = 448.0


def round_e4m3(x):
    """float32 values rounded to the nearest FP8 E4M3 number (ties to even;
    beyond +-448 saturates), as float32."""
    x = np.asarray(x, dtype=np.float32)
    a = np.minimum(np.abs(x), E4M3_MAX).astype(np.float64)
    _, e = np.frexp(a)  # a = f * 2^e, f in [0.5, 1)
    step = np.maximum(e - 1, -6) - 3  # 3 fraction bits; subnormals below 2^-6
    q = np.round(np.ldexp(a, -step)) * np.ldexp(1.0, step)  # np.round: ties to even
    return (np.sign(x) * np.minimum(q, E4M3_MAX)).astype(np.float32)


def e4m3_bits(v):
    """The E4M3 bytes of values that are E4M3 numbers (round_e4m3's)."""
    v = np.asarray(v, dtype=np.float64)
    a = np.abs(v)
    _, e = np.frexp(a)
    normal = (e - 1) >= -6
    mant = np.where(normal, np.ldexp(a, 4 - e) - 8, np.ldexp(a, 9))
    exp = np.where(normal, e - 1 + 7, 0)
    b = (exp.astype(np.int64) << 3) | mant.astype(np.int64)
    b = np.where(a == 0, 0, b)
    return (b | np.where(np.signbit(v), 0x80, 0)).astype(np.uint8)


def quantize_e4m3(w):
    """--weight-dtype fp8: per row, scale max|w| / 448 in f32 and codes
    w / scale rounded to E4M3. Returns the codes' values [out, in] and the
    scales [out] (float32); the weight is codes * scale in f32."""
    w = np.asarray(w, dtype=np.float32)
    amax = np.abs(w).max(axis=1)
    scale = np.where(amax > 0, amax / np.float32(E4M3_MAX), 1.0).astype(np.float32)
    return round_e4m3(w / scale[:, None]), scale


def fp8_values(w):
    """What --weight-dtype fp8 makes of w: codes * scale, in f32."""
    codes, scale = quantize_e4m3(w)
    return (codes * scale[:, None]).astype(np.float32)


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
                "scales": scale.T.astype(np.float16)}              # [groups, out]
    if fmt.startswith("ct"):  # compressed-tensors pack-quantized, symmetric: q = value + 2^(bits-1)
        bits = 4 if fmt == "ct4" else 8
        return {"weight_packed": pack_words(q, bits),                 # [out, in * bits / 32]
                "weight_scale": scale.astype(np.float16),             # [out, groups]
                "weight_shape": np.array([out, inp], dtype=np.int64)}
    bits = 4 if fmt == "gptq4" else 8
    g = group if group > 0 else inp
    return {"qweight": pack_words(q, bits).T.copy(),             # [in * bits / 32, out]
            "qzeros": pack_words(zero.T - 1, bits),                 # [groups, out * bits / 32]
            "scales": scale.T.astype(np.float16),
            "g_idx": (np.arange(inp) // g).astype(np.int32)}


def compressed_tensors(bits, group):
    """compressed-tensors' quantization_config for symmetric integer weights
    (group: inputs per scale, or -1 for one per output channel)."""
    weights = {"num_bits": bits, "type": "int", "symmetric": True, "dynamic": False,
               "actorder": None, "strategy": "group" if group > 0 else "channel"}
    if group > 0:
        weights["group_size"] = group
    return {"quant_method": "compressed-tensors", "format": "pack-quantized",
            "quantization_status": "compressed", "ignore": ["lm_head"],
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                          "input_activations": None,
                                          "output_activations": None}}}


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
    "ct4": dict(bits=4, group=32, symmetric=True, config=compressed_tensors(4, 32)),
    "ct8": dict(bits=8, group=-1, symmetric=True, config=compressed_tensors(8, -1)),
}


# Quantized at compile time (weft-compile --weight-dtype int4|int8) from the
# F16 checkpoint `f16/`: round-to-nearest by quantize() above, 4-bit with
# groups of 128 inputs (the whole row where 128 does not divide it),
# asymmetric; 8-bit with one symmetric group per row.
RTN = {"rtn4": dict(bits=4, group=128, symmetric=False),
       "rtn8": dict(bits=8, group=-1, symmetric=True)}


def rtn_group(group, inp):
    return group if group > 0 and inp % group == 0 else -1


def kernel_file(weights, kind, head_kind=None, dtype="f16", tied=False):
    """What weft-compile --weight-dtype KIND (--lm-head-dtype HEAD_KIND)
    writes beside a plan, from `weights` (name: float32 values, already in
    `dtype`, "f16" or "bf16"; kinds "rtn4", "rtn8", "fp8"). Returns (the
    file's tensors, the quantized weights' values as the model computes
    with them: name: float32). Every projection is quantized by KIND's rule,
    the LM head by HEAD_KIND's; a head `tied` to the embedding is quantized
    from the table, under the table's name (the embedding keeps gathering
    the 16-bit table). Tensors: NAME.codes (I32 [out, in * bits / 32];
    integer codes, input k of a word at bit (k % 2) * 16 + (k / 2) * bits;
    4-bit codes with out % 16 == 0 and in % 128 == 0 in tiles of 16 rows
    and 128 inputs, [out / 16, 16 * in / 8]; E4M3: input k at bit 8k) and
    NAME.scales (integers: [out, 2 * groups] (scale, zero) pairs in
    `dtype`; E4M3: F32 [out, 1])."""
    tensors, values = {}, {}
    rules = [(name, kind, name) for name in sorted(weights) if name.endswith("_proj.weight")]
    if head_kind:
        head = "model.embed_tokens.weight" if tied else "lm_head.weight"
        rules.append((head, head_kind, "lm_head.weight"))
    for name, rule, used_as in rules:
        w = np.asarray(weights[name], dtype=np.float32)
        out, inp = w.shape
        if rule == "fp8":
            codes, scale = quantize_e4m3(w)
            values[used_as] = (codes * scale[:, None]).astype(np.float32)
            words = e4m3_bits(codes).reshape(out, inp // 4, 4).astype(np.uint64)
            words = (words << (np.arange(4, dtype=np.uint64) * 8)).sum(axis=-1)
            tensors[name + ".codes"] = (words & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
            tensors[name + ".scales"] = scale.reshape(out, 1)
            continue
        bits = int(rule[3])
        spec = RTN[rule]
        group = rtn_group(spec["group"], inp)
        q, zero, scale = quantize(w, bits, group, spec["symmetric"], dtype)
        values[used_as] = dequantize(q, zero, scale, group, dtype).astype(np.float32)
        per = 32 // bits
        slots = np.array([(k % 2) * 16 + (k // 2) * bits for k in range(per)], dtype=np.uint64)
        words = (q.reshape(out, inp // per, per).astype(np.uint64) << slots).sum(axis=-1)
        words = (words & 0xFFFFFFFF).astype(np.uint32)
        if bits == 4 and out % 16 == 0 and inp % 128 == 0:
            # The compiler's tiled order (#weft.quant's `tiled`):
            # [out / 16][in / 128][16 rows][16 words].
            words = (words.reshape(out // 16, 16, inp // 128, 16).transpose(0, 2, 1, 3)
                     .reshape(out // 16, 16 * inp // per))
        tensors[name + ".codes"] = words.view(np.int32)
        pairs = np.stack([scale.astype(np.float32), zero.astype(np.float32)], axis=-1)
        tensors[name + ".scales"] = stored(pairs.reshape(out, -1), dtype)
    return tensors, values


def quantized(name, head):
    """Whether an RTN twin holds `name` quantized: the projections, and with
    `head` (weft-compile --lm-head-dtype) the LM head too."""
    return name.endswith("_proj.weight") or (head and name == "lm_head.weight")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    config = json.load(open(os.path.join(src, "config.json")))
    weights = read_safetensors(os.path.join(src, "model.safetensors"))
    config.pop("dtype", None)
    config["torch_dtype"] = "float16"
    twins = {}  # directory: (tensors, torch_dtype)
    for dtype, torch_dtype, tag in (("f16", "float16", ""), ("bf16", "bfloat16", "-bf16")):
        source = {name: round_to(w, dtype) for name, w in weights.items()}
        twins[dtype] = ({name: stored(w, dtype) for name, w in source.items()}, torch_dtype)
        for fmt, spec in RTN.items():
            def rtn(w):
                group = rtn_group(spec["group"], w.shape[1])
                q, zero, scale = quantize(w, spec["bits"], group, spec["symmetric"], dtype)
                return dequantize(q, zero, scale, group, dtype)
            for head in (False, True):
                twins[fmt + tag + ("-head" if head else "") + "-dequant"] = (
                    {name: stored(rtn(w) if quantized(name, head) else w, dtype)
                     for name, w in source.items()}, torch_dtype)
        # FP8: the exact f32 products (the kernels scale the dot products),
        # so the twin is F32.
        for head in (False, True):
            twins["fp8" + tag + ("-head" if head else "") + "-dequant"] = (
                {name: fp8_values(w) if quantized(name, head) else w
                 for name, w in source.items()}, "float32")
    for suffix, (tensors, torch_dtype) in twins.items():
        d = os.path.join(out, suffix)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(dict(config, torch_dtype=torch_dtype), f, indent=1)
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
    # compressed-tensors of a BF16 model keeps its scales (and the rest) in
    # bf16: ct4-bf16, with its bf16 twin.
    spec = FORMATS["ct4"]
    quant, dequant = {}, {}
    for name, w in weights.items():
        w = round_to(w, "bf16")
        if not name.endswith("_proj.weight"):
            quant[name] = dequant[name] = stored(w, "bf16")
            continue
        q, zero, scale = quantize(w, spec["bits"], spec["group"], True, "bf16")
        dequant[name] = stored(dequantize(q, zero, scale, spec["group"], "bf16"), "bf16")
        base = name[:-len("weight")]
        for part, t in packed("ct4", q, zero, scale, spec["group"]).items():
            quant[base + part] = stored(scale, "bf16") if part == "weight_scale" else t
    cfg = dict(config, torch_dtype="bfloat16")
    for suffix, tensors, c in (("ct4-bf16", quant, dict(cfg, quantization_config=spec["config"])),
                               ("ct4-bf16-dequant", dequant, cfg)):
        d = os.path.join(out, suffix)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(c, f, indent=1)
        write_safetensors(os.path.join(d, "model.safetensors"), tensors)


if __name__ == "__main__":
    main()
