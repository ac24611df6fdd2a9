#!/usr/bin/env python3
"""Checks the fragment mapping of stream4mma (layer_stream_int4_lab.cu) on the
CPU: one 16-row tile and one warp's 64 words of 4-bit codes (4 groups of 128
inputs), put into mma.m16n8k16's A and B fragments the way the kernel's lanes
do (lane (g, q) expands word 4 s + q of rows g and g + 8 into pairs
(t, t + 4); the token's inputs in the same order in column 0), multiplied as
the instruction does, and scaled per group, against the direct sum.

    python3 test/gpu/lab/int4_mma_mapping.py    (needs numpy)

Fragments (PTX ISA, m16n8k16 .f16): A a0 (g, 2q..2q+1), a1 (g+8, 2q..),
a2 (g, 2q+8..), a3 (g+8, 2q+8..); B b0 (k 2q..2q+1, n g), b1 (k 2q+8..,
n g); D d0, d1 (g, n 2q..), d2, d3 (g+8, n 2q..).
"""
import sys

import numpy as np
rng = np.random.default_rng(1)
WPW, K = 64, 64 * 8
codes = rng.integers(0, 16, size=(16, K))
zero = rng.integers(0, 16, size=(16, K // 128)).astype(float)
scale = rng.uniform(0.5, 1.5, size=(16, K // 128))
x = rng.normal(size=K)
direct = np.array([sum(scale[r, k // 128] * (codes[r, k] - zero[r, k // 128]) * x[k] for k in range(K)) for r in range(16)])
tot = np.zeros(16)
for grp in range(WPW // 16):
    D = np.zeros((16, 8))
    for st4 in range(4):
        for step in range(2):
            A = np.zeros((16, 16)); B = np.zeros((16, 8))
            for lane in range(32):
                g, q = lane >> 2, lane & 3
                word = grp * 16 + 4 * st4 + q
                def pair(r, t):  # (code - zero) for k = 8W+t, 8W+t+4
                    return [codes[r, 8 * word + t] - zero[r, word // 16], codes[r, 8 * word + t + 4] - zero[r, word // 16]]
                ts = (0, 1) if step == 0 else (2, 3)
                A[g, 2*q:2*q+2] = pair(g, ts[0]); A[g+8, 2*q:2*q+2] = pair(g+8, ts[0])
                A[g, 2*q+8:2*q+10] = pair(g, ts[1]); A[g+8, 2*q+8:2*q+10] = pair(g+8, ts[1])
                if g == 0:
                    B[2*q:2*q+2, 0] = [x[8*word+ts[0]], x[8*word+ts[0]+4]]
                    B[2*q+8:2*q+10, 0] = [x[8*word+ts[1]], x[8*word+ts[1]+4]]
            D += A @ B
    for g in range(8):
        tot[g] += scale[g, grp] * D[g, 0]
        tot[g + 8] += scale[g + 8, grp] * D[g + 8, 0]
diff = np.abs(tot - direct).max()
print(f"max |difference| {diff:.3g}, max |value| {np.abs(direct).max():.3g}",
      "ok" if diff < 1e-9 * np.abs(direct).max() else "DIFFER")
sys.exit(0 if diff < 1e-9 * np.abs(direct).max() else 1)
