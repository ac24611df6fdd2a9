// How the GEMV's tensor-core engine reads weight rows, one policy per
// storage format. Each lane reads ME (8, 16 or 32) consecutive weights of a
// row per step
// and hands them to mma.sync as ME / 8 uint4 chunks of f16 (or bf16) pairs,
// 8 weights each (see the fragment mapping in gemv.cuh).
//
// - DenseRows: 16-bit weights, [NW, K] row-major.
// - PackedRows<BITS>: grouped integer codes (BITS 4 or 8) as the compiler
//   repacks AWQ and GPTQ checkpoints (compiler/Import/QuantizedWeights.h):
//   row r is K * BITS / 32 words; within a word, weight k of its
//   32 / BITS sits at bit (k % 2) * 16 + (k / 2) * BITS, so that one mask
//   and one OR give the f16 pair (1024 + code[2j], 1024 + code[2j + 1])
//   (1024 + c is exact in f16 for c < 1024). Beside the codes, one
//   (scale, zero) f16 pair per GROUP inputs of each row, [NW, K / GROUP]:
//   weight = (code - zero) * scale, rounded once to f16, exactly as the
//   checkpoint's f16 dequantization gives it.
#pragma once

#include "weft/common.cuh"

namespace weft::kernels {

template <class E, int ME> struct DenseRows {
  static_assert(ME % 8 == 0, "whole 16-byte chunks");
  static constexpr int CHUNKS = ME / 8;
  struct Raw {
    uint4 c[CHUNKS];
  };
  const E *row; // this lane's first weight of the row
  // Row `r` of the [*, K] matrix `w`, from this lane's first k `kLane`.
  __device__ __forceinline__ DenseRows(const E *w, const __half2 *, int r, int K, int kLane)
      : row(w + (size_t)r * K + kLane) {}
  __device__ __forceinline__ Raw load(int k) const {
    Raw raw;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
      raw.c[c] = __ldcs(reinterpret_cast<const uint4 *>(row + k + 8 * c));
    return raw;
  }
  __device__ __forceinline__ void expand(const Raw &raw, int, uint4 (&out)[CHUNKS]) const {
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
      out[c] = raw.c[c];
  }
};

template <int BITS, int GROUP, int ME> struct PackedRows {
  static_assert(BITS == 4 || BITS == 8, "4- or 8-bit codes");
  static_assert(GROUP % ME == 0, "a lane's weights share one scale");
  static constexpr int PER_WORD = 32 / BITS;
  static constexpr int WORDS = ME / PER_WORD; // per lane, row and step
  static constexpr int CHUNKS = ME / 8;
  static_assert(WORDS == 1 || WORDS == 2 || WORDS == 4, "one 4-, 8- or 16-byte load");
  struct Raw {
    unsigned w[WORDS];
    __half2 sz; // (scale, zero) of the lane's group
  };
  const unsigned *row;
  const __half2 *sz;
  int kLane;
  __device__ __forceinline__ PackedRows(const unsigned *codes, const __half2 *scales, int r,
                                        int K, int kLane)
      : row(codes + (size_t)r * (K / PER_WORD) + kLane / PER_WORD),
        sz(scales + (size_t)r * (K / GROUP)), kLane(kLane) {}
  __device__ __forceinline__ Raw load(int k) const {
    Raw raw;
    if constexpr (WORDS == 4) {
      const uint4 v = __ldcs(reinterpret_cast<const uint4 *>(row + k / PER_WORD));
      raw.w[0] = v.x, raw.w[1] = v.y, raw.w[2] = v.z, raw.w[3] = v.w;
    } else if constexpr (WORDS == 2) {
      const uint2 v = __ldcs(reinterpret_cast<const uint2 *>(row + k / PER_WORD));
      raw.w[0] = v.x, raw.w[1] = v.y;
    } else {
      raw.w[0] = __ldcs(row + k / PER_WORD);
    }
    raw.sz = __ldg(sz + (k + kLane) / GROUP);
    return raw;
  }
  // Pair j of a word: codes 2j and 2j + 1 as (1024 + code) in f16.
  static __device__ __forceinline__ unsigned pair(unsigned word, int j) {
    constexpr unsigned MASK = BITS == 4 ? 0x000F000Fu : 0x00FF00FFu;
    return ((word >> (j * BITS)) & MASK) | 0x64006400u;
  }
  // The PER_WORD weights of one word as f16 pairs, given the word's
  // (scale, zero).
  static __device__ __forceinline__ void expandWord(unsigned word, __half2 sz,
                                                    unsigned (&h)[PER_WORD / 2]) {
    const __half2 scale = __low2half2(sz);
    // 1024 + zero: subtracting it leaves code - zero, exact in f16.
    const __half2 offset = __hadd2(__high2half2(sz), __float2half2_rn(1024.0f));
#pragma unroll
    for (int j = 0; j < PER_WORD / 2; ++j) {
      unsigned p = pair(word, j);
      __half2 v = __hmul2(__hsub2(*reinterpret_cast<__half2 *>(&p), offset), scale);
      h[j] = *reinterpret_cast<unsigned *>(&v);
    }
  }
  __device__ __forceinline__ void expand(const Raw &raw, int, uint4 (&out)[CHUNKS]) const {
    unsigned h[ME / 2];
#pragma unroll
    for (int w = 0; w < WORDS; ++w) {
      unsigned part[PER_WORD / 2];
      expandWord(raw.w[w], raw.sz, part);
#pragma unroll
      for (int j = 0; j < PER_WORD / 2; ++j)
        h[w * (PER_WORD / 2) + j] = part[j];
    }
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
      out[c] = make_uint4(h[4 * c], h[4 * c + 1], h[4 * c + 2], h[4 * c + 3]);
  }
};

// A quantized projection's codes expanded to its [NW, K] f16 matrix, for a
// library GEMM over many tokens (each weight is then read by the GEMM's
// tiles, not expanded again per tile). Config: NW, K, BITS, GROUP, THREADS.
// Grid: ceil(NW * K * BITS / 32 / THREADS); block: THREADS; a thread per
// word of codes.
template <class C>
__device__ __forceinline__ void expandCodes(const unsigned *__restrict__ codes,
                                            const __half2 *__restrict__ scales,
                                            __half *__restrict__ out) {
  using P = PackedRows<C::BITS, C::GROUP, 8>;
  constexpr int WPR = C::K / P::PER_WORD; // words per row
  const long long word = (long long)blockIdx.x * C::THREADS + threadIdx.x;
  if (word >= (long long)C::NW * WPR)
    return;
  const int row = int(word / WPR), k = int(word % WPR) * P::PER_WORD;
  unsigned h[P::PER_WORD / 2];
  P::expandWord(__ldcs(codes + word), __ldg(scales + (size_t)row * (C::K / C::GROUP) + k / C::GROUP),
                h);
  unsigned *dst = reinterpret_cast<unsigned *>(out + (size_t)row * C::K + k);
#pragma unroll
  for (int j = 0; j < P::PER_WORD / 2; ++j)
    dst[j] = h[j];
}

} // namespace weft::kernels
