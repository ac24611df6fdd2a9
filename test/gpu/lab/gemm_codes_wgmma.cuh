// A lab candidate, not used by the compiler and not yet run on a GPU: 4-bit
// quantized projections of many tokens (batched decode, prefill chunks) on
// Hopper's warpgroup MMA, y[t, r] = sum_k x[t, k] w[r, k] with
// w[r, k] = (code - zero) * scale rounded once to f16 or bf16, as the
// checkpoint's dequantization gives it.
//
// Why: gemm_codes.cuh (mma.sync, codes expanded per warp) reached a third of
// mma.sync's rate and the plans expand the codes to an f16 matrix for
// cuBLAS above 32 tokens, so AWQ int4 runs batch 100 at 12.5 ms a step
// against 7.5 for fp16 (benchmarks.md). Here each warpgroup holds 64 weight
// rows times all the step's tokens (N up to 256) in wgmma accumulators and
// expands each code once, in registers, straight into wgmma's A fragment;
// the tokens are B, read by the tensor cores from shared memory. A code then
// costs 13 / 8 instructions (f16; 15 / 8 in bf16) per 2N products, which at
// N >= 64 should hide under the tensor cores' time.
//
// Codes ("warpgroup fragment order", as the lab's make() packs them): for row
// tile m (64 rows), chunk c of 64 inputs, warp w of the warpgroup and lane
// (g = lane / 4, q = lane % 4), four words, word s for inputs
// 64 c + 16 s + {2q, 2q + 1, 2q + 8, 2q + 9} of rows 64 m + 16 w + g and
// + 8: nibble 0 (row g, 2q), 4 (row g, 2q + 1), 1 (row g + 8, 2q),
// 5 (row g + 8, 2q + 1), 2 (row g, 2q + 8), 6 (row g, 2q + 9),
// 3 (row g + 8, 2q + 8), 7 (row g + 8, 2q + 9). One mask-or per pair then
// gives wgmma's A registers a0..a3 (rows g / g + 8, inputs 2q / 2q + 8) as
// (1024 + code) or (1024 + 16 code) in f16, or after a shift (128 + code)
// in bf16 (WgmmaRowPair). A (tile, chunk) is 2 KiB,
// contiguous. Beside them, (scale, zero) pairs of the 16-bit type per row
// and 128 inputs, [NW][K / 128], as the plans keep them.
//
// Block: WGS warpgroups, each its own 64-row tile; grid (NW / 64 / WGS,
// SPLITS), each split a range of K. A ring of STAGES shared buffers holds,
// per 64-input chunk, the tokens (in wgmma's no-swizzle K-major layout:
// 8-token x 8-input core matrices of 128 bytes, K-adjacent ones 128 bytes
// apart, N-adjacent ones 1 KiB), the block's codes and pairs, filled by
// cp.async STAGES - 2 chunks ahead. By default a warpgroup waits for its
// chunk's four MMAs before expanding the next (other warpgroups on the SM
// keep the tensor cores busy meanwhile); with OVERLAP its A registers are
// double-buffered so that the expansion runs under the previous chunk's
// MMAs, which ptxas answers by serializing every MMA (C7513).
//
// Config: m_t (the model's 16-bit type: the tokens, the pairs, the MMAs),
// T (tokens, at most TN), TN (wgmma's N: T rounded up to 8, a size
// wgmma_rs.inc has), K, NW, WGS, SPLITS, STAGES, OVERLAP; SWAP_STRIDES
// exchanges the descriptor's two strides (the lab runs both: the wrong one fails its
// check). Output: f32 [T][NW], or partials [SPLITS][T][NW] summed by
// wgmmaCodesReduce.
#pragma once

#include "gemm_codes.cuh"

#include <cuda_bf16.h>

#include <type_traits>

namespace weft::kernels {

#include "wgmma_rs.inc"

template <class C> struct WgmmaCodesStage {
  static constexpr int X_BYTES = C::TN * 64 * 2;
  static constexpr int CODE_BYTES = C::WGS * 2048;
  static constexpr int PAIR_BYTES = C::WGS * 64 * 4;
  static constexpr int BYTES = (X_BYTES + CODE_BYTES + PAIR_BYTES + 127) / 128 * 128;
};
template <class C> constexpr int wgmmaCodesSharedBytes() {
  return C::STAGES * WgmmaCodesStage<C>::BYTES;
}

// A shared-memory matrix descriptor without swizzling: start address,
// then the byte distances between core matrices adjacent in K (leading)
// and in N (stride), each in units of 16 bytes.
__device__ __forceinline__ unsigned long long wgmmaDescriptor(unsigned smem, unsigned leading,
                                                              unsigned stride) {
  return (unsigned long long)((smem & 0x3FFFFu) >> 4) |
         ((unsigned long long)(leading >> 4) << 16) | ((unsigned long long)(stride >> 4) << 32);
}

__device__ __forceinline__ void wgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void wgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps `v` in its register up to here: the warpgroup's MMAs read their A
// registers and write their accumulators after the instruction that names
// them has issued, which the compiler does not know.
__device__ __forceinline__ void wgmmaKeep(unsigned &v) { asm volatile("" : "+r"(v)::"memory"); }
__device__ __forceinline__ void wgmmaKeep(float &v) { asm volatile("" : "+f"(v)::"memory"); }

// The biases and scales of one lane's two rows (g and g + 8) for one group,
// in the model's 16-bit type M, and the expansion of a word of codes into
// wgmma's A registers: each weight (code - zero) (exact) times its scale,
// rounded once, as the checkpoint's dequantization.
template <class M> struct WgmmaRowPair;

// f16: a nibble pair as (1024 + code) (one mask-or), or for the high
// nibbles (1024 + 16 code) times 1/16; the bias subtracts (1024 + zero) or
// (64 + zero) in the same add.
template <> struct WgmmaRowPair<__half> {
  using Tag = WgmmaF16;
  __half2 biasLow, scaleLow;   // row g: -(1024 + zero), scale
  __half2 biasHigh, scaleHigh; // row g + 8: -(64 + zero), scale
  __device__ __forceinline__ WgmmaRowPair(unsigned low, unsigned high) {
    const __half2 l = wf_bits_as<__half2>(low), h = wf_bits_as<__half2>(high);
    biasLow = __float2half2_rn(-1024.0f - __high2float(l));
    scaleLow = __low2half2(l);
    biasHigh = __float2half2_rn(-64.0f - __high2float(h));
    scaleHigh = __low2half2(h);
  }
  __device__ __forceinline__ void expand(unsigned word, unsigned (&a)[4]) const {
    const __half2 sixteenth = __float2half2_rn(0.0625f);
    const unsigned lo = wf_mask_or<0x000F000Fu, 0x64006400u>(word);
    const unsigned hi = wf_mask_or<0x00F000F0u, 0x64006400u>(word);
    const unsigned lo8 = wf_mask_or<0x000F000Fu, 0x64006400u>(word >> 8);
    const unsigned hi8 = wf_mask_or<0x00F000F0u, 0x64006400u>(word >> 8);
    a[0] = wf_as_bits(__hmul2(__hadd2(wf_bits_as<__half2>(lo), biasLow), scaleLow));
    a[1] = wf_as_bits(__hmul2(__hfma2(wf_bits_as<__half2>(hi), sixteenth, biasHigh), scaleHigh));
    a[2] = wf_as_bits(__hmul2(__hadd2(wf_bits_as<__half2>(lo8), biasLow), scaleLow));
    a[3] = wf_as_bits(__hmul2(__hfma2(wf_bits_as<__half2>(hi8), sixteenth, biasHigh), scaleHigh));
  }
};

// bf16 (7 fraction bits): each nibble pair shifted down first, as
// (128 + code), minus (128 + zero).
template <> struct WgmmaRowPair<__nv_bfloat16> {
  using Tag = WgmmaBf16;
  __nv_bfloat162 biasLow, scaleLow, biasHigh, scaleHigh; // rows g, g + 8: 128 + zero, scale
  __device__ __forceinline__ WgmmaRowPair(unsigned low, unsigned high) {
    const __nv_bfloat162 l = wf_bits_as<__nv_bfloat162>(low),
                         h = wf_bits_as<__nv_bfloat162>(high);
    biasLow = __float2bfloat162_rn(128.0f + __high2float(l));
    scaleLow = __low2bfloat162(l);
    biasHigh = __float2bfloat162_rn(128.0f + __high2float(h));
    scaleHigh = __low2bfloat162(h);
  }
  __device__ __forceinline__ void expand(unsigned word, unsigned (&a)[4]) const {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const __nv_bfloat162 v =
          wf_bits_as<__nv_bfloat162>(wf_mask_or<0x000F000Fu, 0x43004300u>(word >> (4 * j)));
      a[j] = wf_as_bits(j % 2 == 0 ? __hmul2(__hsub2(v, biasLow), scaleLow)
                                   : __hmul2(__hsub2(v, biasHigh), scaleHigh));
    }
  }
};

template <class C>
__device__ __forceinline__ void wgmmaCodes(const typename C::m_t *__restrict__ x,
                                           const unsigned *__restrict__ codes,
                                           const unsigned *__restrict__ pairs,
                                           float *__restrict__ out) {
  using S = WgmmaCodesStage<C>;
  constexpr int T = C::T, TN = C::TN, K = C::K, NW = C::NW, WGS = C::WGS;
  constexpr int STAGES = C::STAGES, THREADS = WGS * 128;
  constexpr int CHUNKS = K / 64 / C::SPLITS;
  static_assert(T <= TN && TN % 8 == 0 && TN <= 256, "tokens: one wgmma N");
  static_assert(K % (64 * C::SPLITS) == 0 && NW % (64 * WGS) == 0, "whole chunks and tiles");
  static_assert(STAGES >= 3, "the ring fills STAGES - 2 chunks ahead");
  extern __shared__ __align__(128) unsigned char wgmma_codes_smem[];
  const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, q = lane % 4;
  const int tile0 = blockIdx.x * WGS, chunk0 = blockIdx.y * CHUNKS;

  auto stage = [&](int b) { return wgmma_codes_smem + b * S::BYTES; };
  // Chunk c of the split (tokens, the block's codes and pairs) into stage b.
  auto load = [&](int c, int b) {
    unsigned char *st = stage(b);
    const int kc = chunk0 + c;
    for (int i = threadIdx.x; i < TN * 8; i += THREADS) {
      const int n = i / 8, kb = i % 8;
      const bool real = n < T;
      wf_copy_async16(st + ((n / 8) * 8 + kb) * 128 + (n % 8) * 16,
                      real ? x + (size_t)n * K + kc * 64 + kb * 8 : x, real);
    }
    for (int i = threadIdx.x; i < WGS * 128; i += THREADS) {
      const int j = i / 128, piece = i % 128;
      wf_copy_async16(st + S::X_BYTES + j * 2048 + piece * 16,
                      codes + ((size_t)(tile0 + j) * (K / 64) + kc) * 512 + piece * 4, true);
    }
    for (int i = threadIdx.x; i < WGS * 64; i += THREADS) {
      const int j = i / 64, r = i % 64;
      wf_copy_async4(st + S::X_BYTES + S::CODE_BYTES + i * 4,
                     pairs + ((size_t)(tile0 + j) * 64 + r) * (K / 128) + kc * 64 / 128);
    }
  };

  float acc[TN / 2];
#pragma unroll
  for (int i = 0; i < TN / 2; ++i)
    acc[i] = 0.0f;
  unsigned a[2][4][4] = {};

#pragma unroll
  for (int i = 0; i < STAGES - 2; ++i) {
    if (i < CHUNKS)
      load(i, i);
    wf_copy_async_commit();
  }
  // Chunk c with A buffer B (c % 2).
  auto body = [&](auto buffer, int c) {
    constexpr int B = decltype(buffer)::value;
    wf_copy_async_wait<STAGES - 3>();
    // This thread's copies of chunk c, written through the generic proxy,
    // made visible to the tensor cores' async proxy (before the barrier
    // that publishes them to the other threads).
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    wgmmaWait<1>(); // this warpgroup's chunk c - 2 is done: buffer B and its stage are free
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        wgmmaKeep(a[B][s][e]);
    __syncthreads(); // chunk c has landed for all; no warpgroup reads chunk c - 2's stage
    if (c + STAGES - 2 < CHUNKS)
      load(c + STAGES - 2, (c + STAGES - 2) % STAGES);
    wf_copy_async_commit();
    const unsigned char *st = stage(c % STAGES);
    const uint4 w4 = *reinterpret_cast<const uint4 *>(st + S::X_BYTES + wg * 2048 +
                                                      (warp * 32 + lane) * 16);
    const unsigned *ps = reinterpret_cast<const unsigned *>(st + S::X_BYTES + S::CODE_BYTES);
    const WgmmaRowPair<typename C::m_t> rp(ps[wg * 64 + warp * 16 + g],
                                           ps[wg * 64 + warp * 16 + g + 8]);
    const unsigned words[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
    for (int s = 0; s < 4; ++s)
      rp.expand(words[s], a[B][s]);
    wgmmaFence();
    const unsigned xs = (unsigned)__cvta_generic_to_shared(st);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      // Inputs 16 s .. 16 s + 15 of the chunk: core matrices 2 s and 2 s + 1.
      const unsigned long long desc =
          C::SWAP_STRIDES ? wgmmaDescriptor(xs + 256 * s, 1024, 128)
                          : wgmmaDescriptor(xs + 256 * s, 128, 1024);
      wgmmaRs(WgmmaN<TN>{}, typename WgmmaRowPair<typename C::m_t>::Tag{}, acc, a[B][s][0],
              a[B][s][1], a[B][s][2], a[B][s][3], desc, 1);
    }
    wgmmaCommit();
    if constexpr (!C::OVERLAP) {
      // Each chunk's MMAs done before the next chunk's expansion: ptxas
      // then keeps the four MMAs of a chunk in flight together (with the
      // expansion between the MMAs of two chunks, it serializes them all,
      // warning C7513); other warpgroups on the SM fill the gap.
      wgmmaWait<0>();
#pragma unroll
      for (int i = 0; i < TN / 2; ++i)
        wgmmaKeep(acc[i]);
    }
  };
  for (int c = 0; c < CHUNKS; c += 2) {
    body(std::integral_constant<int, 0>{}, c);
    if (c + 1 < CHUNKS)
      body(std::integral_constant<int, 1>{}, c + 1);
  }
  wgmmaWait<0>();
#pragma unroll
  for (int i = 0; i < TN / 2; ++i)
    wgmmaKeep(acc[i]);

  // Accumulator 4 i + e: row g (+ 8 for e >= 2) of the warp's 16, token
  // 8 i + 2 q + (e & 1).
  float *dst = out + (C::SPLITS > 1 ? (size_t)blockIdx.y * T * NW : 0);
  const int row = (tile0 + wg) * 64 + warp * 16 + g;
#pragma unroll
  for (int i = 0; i < TN / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int t = 8 * i + 2 * q + (e & 1);
      if (t < T)
        dst[(size_t)t * NW + row + (e >= 2 ? 8 : 0)] = acc[4 * i + e];
    }
}

// out[t][r] = the sum over the splits of partials[s][t][r].
template <class C>
__device__ __forceinline__ void wgmmaCodesReduce(const float *__restrict__ partials,
                                                 float *__restrict__ out) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (size_t)C::T * C::NW)
    return;
  float v = 0.0f;
#pragma unroll
  for (int s = 0; s < C::SPLITS; ++s)
    v += partials[(size_t)s * C::T * C::NW + i];
  out[i] = v;
}

} // namespace weft::kernels
