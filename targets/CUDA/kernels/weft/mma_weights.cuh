// How the GEMV's tensor-core engine reads weight rows, one policy per
// storage format. Each lane reads ME (8, 16 or 32) consecutive weights of a
// row per step and hands them to mma.sync as ME / 8 uint4 chunks of 16-bit
// pairs of the engine's type M (f16 or bf16), 8 weights each (see the
// fragment mapping in gemv.cuh).
//
// - DenseRows: 16-bit weights, [NW, K] row-major.
// - PackedRows<BITS, GROUP, ME, M, Codes::Int>: grouped integer codes (BITS
//   4 or 8) as the compiler repacks AWQ and GPTQ checkpoints or quantizes
//   16-bit ones (compiler/Import/QuantizedWeights.h): row r is K * BITS / 32
//   words; within a word, weight k of its 32 / BITS sits at bit
//   (k % 2) * 16 + (k / 2) * BITS, so that one mask and one OR give a pair
//   of neighbours as (B + code) in M (B = 1024 in f16, 128 in bf16 for
//   4-bit codes; 8-bit codes go through f16 into bf16). Beside the codes,
//   one (scale, zero) pair of M per GROUP inputs of each row,
//   [NW, K / GROUP]: weight = (code - zero) * scale. Where a step of the
//   four lanes of a quad (4 * ME consecutive k) lies inside one group
//   (SUM_SCALE, f16 only), the lanes expand only (code - zero), exact in M,
//   and the engine multiplies each step's sums by the group's scale;
//   otherwise the weight is rounded once to M, as the checkpoint's
//   dequantization gives it.
// - PackedRows<8, K, ME, M, Codes::E4M3>: FP8 E4M3 codes in order (weight k
//   of a word at bit 8k, so that one conversion gives a pair) and one f32
//   scale per row, [NW]; the codes are exact in f16 and bf16, and the scale
//   multiplies the row's dot products (ROW_SCALE), not every weight.
//   Converting E4M3 takes sm_89 or newer.
#pragma once

#include "weft/common.cuh"

namespace weft::kernels {

// How codes encode numbers (the compiler's #weft.quant format).
enum class Codes { Int, E4M3 };

template <class E, int ME> struct DenseRows {
  static_assert(ME % 8 == 0, "whole 16-byte chunks");
  static constexpr int CHUNKS = ME / 8;
  static constexpr bool ROW_SCALE = false;
  static constexpr bool SUM_SCALE = false;
  struct Raw {
    uint4 c[CHUNKS];
  };
  const E *row; // this lane's first weight of the row
  // Row `r` of the [*, K] matrix `w`, from this lane's first k `kLane`.
  __device__ __forceinline__ DenseRows(const E *w, const void *, int r, int K, int kLane)
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
  __device__ __forceinline__ float rowScale() const { return 1.0f; }
};

// The 16-bit pair type of M.
template <class M> struct Pair;
template <> struct Pair<__half> {
  using type = __half2;
};
template <> struct Pair<__nv_bfloat16> {
  using type = __nv_bfloat162;
};

template <class A, class B> struct wf_same {
  static constexpr bool value = false;
};
template <class A> struct wf_same<A, A> {
  static constexpr bool value = true;
};

__device__ __forceinline__ float2 wf_pair_f32(__half2 v) { return __half22float2(v); }
__device__ __forceinline__ float2 wf_pair_f32(__nv_bfloat162 v) { return __bfloat1622float2(v); }

template <class T> __device__ __forceinline__ T wf_bits_as(unsigned v) {
  return *reinterpret_cast<T *>(&v);
}
template <class T> __device__ __forceinline__ unsigned wf_as_bits(T v) {
  return *reinterpret_cast<unsigned *>(&v);
}

// Two E4M3 codes (the low one first) as an f16 pair, exactly.
__device__ __forceinline__ unsigned wf_e4m3x2_to_f16x2(unsigned short two) {
  unsigned out;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(out) : "h"(two));
#else
  out = 0u;
  __trap(); // the compiler refuses E4M3 weights for GPUs before sm_89
#endif
  return out;
}

// An f16 pair as a bf16 pair (exact for the integers and E4M3 values
// expanded here).
__device__ __forceinline__ unsigned wf_f16x2_to_bf16x2(unsigned h) {
  return wf_as_bits(__float22bfloat162_rn(__half22float2(wf_bits_as<__half2>(h))));
}

// (v & MASK) | MAGIC in one LOP3: written in C++ with both constants
// immediate, it compiles to two (an AND, then an OR).
template <unsigned MASK, unsigned MAGIC>
__device__ __forceinline__ unsigned wf_mask_or(unsigned v) {
  unsigned r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(v), "n"(MASK), "n"(MAGIC));
  return r;
}

// f16, a group's (scale, zero): a word of 4-bit codes (PackedRows' order)
// as four exact (code - zero) pairs in 9 instructions: per byte half, the
// low nibbles as 1024 + code (one LOP3, wf_mask_or) plus -(1024 + zero),
// the high ones as 1024 + 16 code (exact: ulp 1 below 2048) times 1/16 plus
// -(64 + zero). The bias is made once per group: the decode stream kernel
// keeps one per 128-input step; PackedRows::expandWord<false> makes it per
// word.
struct CodeBias {
  __half2 low, high;
  __device__ __forceinline__ explicit CodeBias(unsigned sz) {
    const float zero = __high2float(wf_bits_as<__half2>(sz));
    low = __float2half2_rn(-1024.0f - zero);
    high = __float2half2_rn(-64.0f - zero);
  }
  __device__ __forceinline__ void expand(unsigned word, unsigned (&h)[4]) const {
    const __half2 sixteenth = __float2half2_rn(0.0625f);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const unsigned v = word >> (8 * half);
      const unsigned lo = wf_mask_or<0x000F000Fu, 0x64006400u>(v);
      const unsigned hi = wf_mask_or<0x00F000F0u, 0x64006400u>(v);
      h[2 * half] = wf_as_bits(__hadd2(wf_bits_as<__half2>(lo), low));
      h[2 * half + 1] = wf_as_bits(__hfma2(wf_bits_as<__half2>(hi), sixteenth, high));
    }
  }
};

template <int BITS, int GROUP, int ME, class M = __half, Codes FORMAT = Codes::Int,
          bool TILED = false>
struct PackedRows {
  static_assert(BITS == 4 || BITS == 8, "4- or 8-bit codes");
  static_assert(FORMAT == Codes::Int || BITS == 8, "E4M3 codes are 8 bits");
  static_assert(GROUP % ME == 0, "a lane's weights share one scale");
  static constexpr int PER_WORD = 32 / BITS;
  static constexpr int WORDS = ME / PER_WORD; // per lane, row and step
  static constexpr int CHUNKS = ME / 8;
  static constexpr bool ROW_SCALE = FORMAT == Codes::E4M3;
  // A quad's step of 4 * ME k inside one group: its scale multiplies the
  // step's sums (one FMA per sum) instead of every weight. Only in f16: a
  // bf16 model's dequantized weight is rounded to bf16 (8 bits), and
  // leaving that rounding out moved logits past the reference's
  // tolerance; f16 keeps 11 bits, below what the sums' order changes.
  static constexpr bool SUM_SCALE =
      FORMAT == Codes::Int && GROUP % (4 * ME) == 0 && wf_same<M, __half>::value;
  static_assert(WORDS == 1 || WORDS == 2 || WORDS == 4, "one 4-, 8- or 16-byte load");
  // TILED: the words of 16-row tiles, step by step of 128 inputs
  // ([NW / 16][K / 128][16 rows][128 / PER_WORD words]), so that a warp's
  // loads of one step (rows g and g + 8, 4 * ME inputs per quad) are
  // consecutive bytes. STEP_WORDS: words of one such tile step.
  static constexpr int TILE_ROW_WORDS = 128 / PER_WORD, STEP_WORDS = 16 * TILE_ROW_WORDS;
  static_assert(!TILED || 128 % (4 * ME) == 0, "a quad's step inside a tile step");
  using M2 = typename Pair<M>::type;
  struct Raw {
    unsigned w[WORDS];
    unsigned sz; // Int: the (scale, zero) pair of M of the lane's group
  };
  const unsigned *row;
  const unsigned *sz; // Int: the row's (scale, zero) pairs; E4M3: its f32 scale
  int kLane;
  __device__ __forceinline__ PackedRows(const unsigned *codes, const void *scales, int r, int K,
                                        int kLane)
      : row(codes + (TILED ? (size_t)(r / 16) * (K / PER_WORD) * 16 + (r % 16) * TILE_ROW_WORDS
                           : (size_t)r * (K / PER_WORD)) +
            kLane / PER_WORD),
        sz(static_cast<const unsigned *>(scales) +
           (ROW_SCALE ? (size_t)r : (size_t)r * (K / GROUP))),
        kLane(kLane) {}
  // The words of this lane's inputs k.. (k a multiple of a quad's step).
  static __device__ __forceinline__ int wordOffset(int k) {
    return TILED ? (k / 128) * STEP_WORDS + (k % 128) / PER_WORD : k / PER_WORD;
  }
  __device__ __forceinline__ Raw load(int k) const {
    Raw raw;
    const unsigned *at = row + wordOffset(k);
    if constexpr (WORDS == 4) {
      const uint4 v = __ldcs(reinterpret_cast<const uint4 *>(at));
      raw.w[0] = v.x, raw.w[1] = v.y, raw.w[2] = v.z, raw.w[3] = v.w;
    } else if constexpr (WORDS == 2) {
      const uint2 v = __ldcs(reinterpret_cast<const uint2 *>(at));
      raw.w[0] = v.x, raw.w[1] = v.y;
    } else {
      raw.w[0] = __ldcs(at);
    }
    raw.sz = ROW_SCALE ? 0u : __ldg(sz + (k + kLane) / GROUP);
    return raw;
  }
  __device__ __forceinline__ float rowScale() const {
    return ROW_SCALE ? __uint_as_float(__ldg(sz)) : 1.0f;
  }
  // SUM_SCALE: the scale of the group a step's codes belong to.
  static __device__ __forceinline__ float stepScale(const Raw &raw) {
    return wf_pair_f32(wf_bits_as<M2>(raw.sz)).x;
  }
  // Integer codes: pair j of a word, codes 2j and 2j + 1, as (B + code) in
  // 16-bit floats, f16 (B = 1024) or, for 4-bit codes, bf16 (B = 128).
  template <bool BF16>
  static __device__ __forceinline__ unsigned pair(unsigned word, int j) {
    constexpr unsigned MASK = BITS == 4 ? 0x000F000Fu : 0x00FF00FFu;
    constexpr unsigned MAGIC = BF16 ? 0x43004300u : 0x64006400u;
    // 4-bit: one LOP3 (wf_mask_or); 8-bit: C++, which becomes one PRMT (the
    // fields are whole bytes; a LOP3 after the shift measured 8% slower).
    if constexpr (BITS == 4)
      return wf_mask_or<MASK, MAGIC>(word >> (j * BITS));
    else
      return ((word >> (j * BITS)) & MASK) | MAGIC;
  }
  // The PER_WORD weights of one word as pairs of M, given the word's
  // (scale, zero) pair (integer codes); SCALED = false leaves the scale
  // out: (code - zero), exact.
  template <bool SCALED = true>
  static __device__ __forceinline__ void expandWord(unsigned word, unsigned szBits,
                                                    unsigned (&h)[PER_WORD / 2]) {
    if constexpr (FORMAT == Codes::E4M3) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const unsigned f = wf_e4m3x2_to_f16x2((unsigned short)(word >> (16 * j)));
        h[j] = wf_same<M, __half>::value ? f : wf_f16x2_to_bf16x2(f);
      }
    } else if constexpr (!SCALED && wf_same<M, __half>::value && BITS == 4) {
      CodeBias(szBits).expand(word, h);
    } else if constexpr (wf_same<M, __half>::value || BITS == 8) {
      // In f16: (1024 + code) - (1024 + zero) is exact; then, for bf16,
      // converted (exact) and scaled in bf16.
      const M2 s2 = wf_bits_as<M2>(szBits);
      const float zero = __high2float(s2);
      const __half2 offset = __float2half2_rn(1024.0f + zero);
#pragma unroll
      for (int j = 0; j < PER_WORD / 2; ++j) {
        const __half2 d = __hsub2(wf_bits_as<__half2>(pair<false>(word, j)), offset);
        if constexpr (!SCALED)
          h[j] = wf_same<M, __half>::value ? wf_as_bits(d) : wf_f16x2_to_bf16x2(wf_as_bits(d));
        else if constexpr (wf_same<M, __half>::value)
          h[j] = wf_as_bits(__hmul2(d, __low2half2(s2)));
        else
          h[j] = wf_as_bits(__hmul2(wf_bits_as<M2>(wf_f16x2_to_bf16x2(wf_as_bits(d))),
                                    __low2bfloat162(s2)));
      }
    } else {
      // 4-bit codes in bf16: (128 + code) - (128 + zero), exact.
      const M2 s2 = wf_bits_as<M2>(szBits);
      const M2 offset = __hadd2(__high2bfloat162(s2), __float2bfloat162_rn(128.0f));
#pragma unroll
      for (int j = 0; j < PER_WORD / 2; ++j) {
        const M2 d = __hsub2(wf_bits_as<M2>(pair<true>(word, j)), offset);
        h[j] = wf_as_bits(SCALED ? __hmul2(d, __low2bfloat162(s2)) : d);
      }
    }
  }
  __device__ __forceinline__ void expand(const Raw &raw, int, uint4 (&out)[CHUNKS]) const {
    unsigned h[ME / 2];
#pragma unroll
    for (int w = 0; w < WORDS; ++w) {
      unsigned part[PER_WORD / 2];
      expandWord<!SUM_SCALE>(raw.w[w], raw.sz, part);
#pragma unroll
      for (int j = 0; j < PER_WORD / 2; ++j)
        h[w * (PER_WORD / 2) + j] = part[j];
    }
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
      out[c] = make_uint4(h[4 * c], h[4 * c + 1], h[4 * c + 2], h[4 * c + 3]);
  }
};

// A quantized projection's codes expanded to its [NW, K] matrix of M, for a
// library GEMM over many tokens (each weight is then read by the GEMM's
// tiles, not expanded again per tile). Config: NW, K, BITS, GROUP, THREADS,
// FORMAT, TILED (the codes' order, as PackedRows), m_t (M). E4M3 weights
// are rounded to M here (code * scale); the GEMV engine applies their
// scale to the sums instead.
// Grid: ceil(NW * K * BITS / 32 / THREADS); block: THREADS; a thread per
// word of codes, in their order.
template <class C>
__device__ __forceinline__ void expandCodes(const unsigned *__restrict__ codes,
                                            const void *__restrict__ scales,
                                            typename C::m_t *__restrict__ out) {
  using M = typename C::m_t;
  using P = PackedRows<C::BITS, C::GROUP, 8, M, C::FORMAT, C::TILED>;
  constexpr int WPR = C::K / P::PER_WORD; // words per row
  const long long word = (long long)blockIdx.x * C::THREADS + threadIdx.x;
  if (word >= (long long)C::NW * WPR)
    return;
  int row, k;
  if constexpr (C::TILED) {
    const long long tileStep = word / P::STEP_WORDS;
    const int within = int(word % P::STEP_WORDS);
    row = int(tileStep / (C::K / 128)) * 16 + within / P::TILE_ROW_WORDS;
    k = int(tileStep % (C::K / 128)) * 128 + within % P::TILE_ROW_WORDS * P::PER_WORD;
  } else {
    row = int(word / WPR), k = int(word % WPR) * P::PER_WORD;
  }
  const unsigned *sz = static_cast<const unsigned *>(scales);
  unsigned h[P::PER_WORD / 2];
  if constexpr (C::FORMAT == Codes::E4M3) {
    P::expandWord(__ldcs(codes + word), 0u, h);
    const float s = __uint_as_float(__ldg(sz + row));
#pragma unroll
    for (int j = 0; j < P::PER_WORD / 2; ++j) {
      const float2 f = wf_pair_f32(wf_bits_as<typename P::M2>(h[j]));
      h[j] = wf_as_bits(typename P::M2{wf_to<M>(f.x * s), wf_to<M>(f.y * s)});
    }
  } else {
    P::expandWord(__ldcs(codes + word), __ldg(sz + (size_t)row * (C::K / C::GROUP) + k / C::GROUP),
                  h);
  }
  unsigned *dst = reinterpret_cast<unsigned *>(out + (size_t)row * C::K + k);
#pragma unroll
  for (int j = 0; j < P::PER_WORD / 2; ++j)
    dst[j] = h[j];
}

// The entry point of the codes' expansion (emitExpandCodes); Config adds
// RELEASE_EARLY.
template <class C>
__global__ void __launch_bounds__(C::THREADS)
    expandCodesKernel(const unsigned *__restrict__ w, const void *__restrict__ w_scales,
                      typename C::m_t *__restrict__ expanded) {
  wf_grid_dependency_enter<C>();
  expandCodes<C>(w, w_scales, expanded);
}

} // namespace weft::kernels
