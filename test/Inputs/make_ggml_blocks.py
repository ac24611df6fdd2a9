#!/usr/bin/env python3
"""Writes test/fixtures/ggml/blocks.json: random blocks of every ggml type
the runtime dequantizes (runtime/io/GgufQuants.h), with extreme scales in
some, and the f32 values the `gguf` Python package's reference dequantizer
gives for them (bit patterns as hex), for GgufQuantsTest to compare with bit
for bit. Needs `pip install gguf numpy`; the test reads the committed file.

    python3 test/Inputs/make_ggml_blocks.py test/fixtures/ggml/blocks.json
"""
import json
import sys

import numpy as np
from gguf.quants import dequantize, GGMLQuantizationType as T

# type: (elements, bytes, byte offsets of the f16 scale fields)
TYPES = {
    "Q4_0": (T.Q4_0, 32, 18, [0]),
    "Q4_1": (T.Q4_1, 32, 20, [0, 2]),
    "Q5_0": (T.Q5_0, 32, 22, [0]),
    "Q5_1": (T.Q5_1, 32, 24, [0, 2]),
    "Q8_0": (T.Q8_0, 32, 34, [0]),
    "Q4_K": (T.Q4_K, 256, 144, [0, 2]),
    "Q5_K": (T.Q5_K, 256, 176, [0, 2]),
    "Q6_K": (T.Q6_K, 256, 210, [208]),
}
# f16 bit patterns: 0, the smallest subnormal, a small normal, 1, -2.5,
# the largest finite, and ordinary values.
EXTREME = [0x0000, 0x0001, 0x0400, 0x3C00, 0xC100, 0x7BFF, 0xFBFF]


def main():
    out = {}
    rng = np.random.default_rng(61)
    for name, (qtype, elements, nbytes, scales) in TYPES.items():
        blocks = []
        count = 10 if elements == 32 else 5
        raw = rng.integers(0, 256, size=(count, nbytes), dtype=np.uint8)
        for b in range(count):
            for k, at in enumerate(scales):
                if b < len(EXTREME):
                    bits = EXTREME[(b + k) % len(EXTREME)]
                else:  # an ordinary scale in [1e-3, 1)
                    bits = int(np.float16(rng.uniform(1e-3, 1.0)).view(np.uint16))
                raw[b, at] = bits & 0xFF
                raw[b, at + 1] = bits >> 8
        values = dequantize(raw, qtype).astype(np.float32).reshape(count, elements)
        for b in range(count):
            blocks.append({"bytes": raw[b].tobytes().hex(),
                           "f32": values[b].view(np.uint32).tolist()})
        out[name] = blocks
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
