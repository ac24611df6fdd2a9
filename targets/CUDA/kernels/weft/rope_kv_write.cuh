// Rotary embedding (rotate half) of attention heads and the write of keys
// and values into the paged KV cache, for one (token, head, pair) per
// thread: element i and i + HALF of a head are a pair.
//
// A generated kernel holds up to three head groups (queries, keys, values;
// each normalized per head or not, rotated or not, yielded and/or cached) and dispatches each thread to
// its group with these helpers; the rope frequencies are the compiler's,
// in double, as a __constant__ table per distinct rope.
//
// Config: D head_dim, HALF = D / 2, HEADS_PER_BLOCK, HEADS of all
// groups, THREADS = HEADS_PER_BLOCK * HALF; with a cache also KV_HEADS,
// BLOCK_TOKENS, MAX_BLOCKS (block-table row length), MAX_SEQUENCES, cache_t.
// Grid: (ceil(HEADS / HEADS_PER_BLOCK), tokens); block: THREADS.
// The token count is the grid's, not the Config's, so one binary serves
// every bucket.
#pragma once

#include "weft/common.cuh"

namespace weft::kernels {

// cos and sin of position * inv_freq. The angle is reduced modulo 2*pi in
// double first: in f32, large positions would lose the phase.
__device__ __forceinline__ void ropeAngle(int pos, double inv, float &c, float &s) {
  double a = (double)pos * inv;
  a -= 6.283185307179586 * floor(a * 0.15915494309189535);
  sincosf((float)a, &s, &c);
}

// Where token t's keys and values go: the cache row of its position, or
// none for padding (slot -1) and anything outside the block table. The
// engine checks every index before launch; this keeps a kernel in bounds.
struct CacheSlot {
  bool valid;
  size_t row; // (page * BLOCK_TOKENS + pos % BLOCK_TOKENS) * KV_HEADS
};

template <class C>
__device__ __forceinline__ CacheSlot cacheSlot(int pos, int seq,
                                               const int *__restrict__ block_tables) {
  const bool inTable = pos >= 0 && pos < C::BLOCK_TOKENS * C::MAX_BLOCKS && seq >= 0 &&
                       seq < C::MAX_SEQUENCES;
  const int page = inTable ? block_tables[(size_t)seq * C::MAX_BLOCKS + pos / C::BLOCK_TOKENS]
                           : -1;
  CacheSlot s;
  s.valid = page >= 0;
  s.row = ((size_t)(page < 0 ? 0 : page) * C::BLOCK_TOKENS + (pos < 0 ? 0 : pos) % C::BLOCK_TOKENS) *
          C::KV_HEADS;
  return s;
}

// The pair (i, i + HALF) of head h of token t in a [T, HEADS_OF_GROUP * D]
// tensor, as f32.
template <class C, int HEADS_OF_GROUP, class In>
__device__ __forceinline__ void loadPair(const In *__restrict__ x, int t, int h, int i, float &a,
                                         float &b) {
  const In *src = x + (size_t)t * HEADS_OF_GROUP * C::D + h * C::D;
  a = wf_f32(src[i]);
  b = wf_f32(src[i + C::HALF]);
}

// Head norms (Qwen3's q_norm and k_norm): the sum of a*a + b*b over the
// HALF threads of each head, in every thread of it. Called by every thread
// of the block (others pass 0): heads of more than 64 features span warps,
// summed through shared memory behind one barrier. HALF is a power of two
// (the compiler checks), so the lanes of a head are an aligned run.
template <class C> __device__ __forceinline__ float headSumSquares(float v) {
  static_assert((C::HALF & (C::HALF - 1)) == 0, "head norms need a power-of-two head_dim");
  static_assert(C::THREADS % 32 == 0, "whole warps");
  constexpr int LANES = C::HALF < 32 ? C::HALF : 32;
#pragma unroll
  for (int o = LANES / 2; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  if constexpr (C::HALF > 32) {
    constexpr int WARPS = C::HALF / 32; // per head
    __shared__ float partial[C::THREADS / 32];
    const int warp = threadIdx.x / 32;
    if (threadIdx.x % 32 == 0)
      partial[warp] = v;
    __syncthreads();
    v = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w)
      v += partial[warp / WARPS * WARPS + w];
  }
  return v;
}

// RMSNorm of the pair given its head's sum of squares, rounded as the
// model's norm is: weight * round_Res(x / rms), then round_Res again.
template <class C, class Res, class W>
__device__ __forceinline__ void normPair(float sumSquares, const W *__restrict__ weight, int i,
                                         float eps, float &a, float &b) {
  const float inv = 1.0f / sqrtf(sumSquares * (1.0f / C::D) + eps);
  a = wf_round<Res>(wf_f32(weight[i]) * wf_round<Res>(a * inv));
  b = wf_round<Res>(wf_f32(weight[i + C::HALF]) * wf_round<Res>(b * inv));
}

// Rotates the pair by position * inv_freq, rounding to Res as the model's
// rope result is.
template <class Res>
__device__ __forceinline__ void rotatePair(int pos, double inv, float &a, float &b) {
  float c, s;
  ropeAngle(pos, inv, c, s);
  const float ra = wf_round<Res>(a * c - b * s);
  const float rb = wf_round<Res>(b * c + a * s);
  a = ra;
  b = rb;
}

// Stores the pair into each of `outs` ([T, HEADS_OF_GROUP * D] of Res).
template <class C, int HEADS_OF_GROUP, class Res, class... Out>
__device__ __forceinline__ void storePair(int t, int h, int i, float a, float b,
                                          Out *__restrict__... outs) {
  const size_t at = (size_t)t * HEADS_OF_GROUP * C::D + h * C::D + i;
  ((outs[at] = wf_to<Res>(a), outs[at + C::HALF] = wf_to<Res>(b)), ...);
}

// Writes the pair into the K or V cache at the token's slot.
template <class C>
__device__ __forceinline__ void cachePair(typename C::cache_t *__restrict__ cache, CacheSlot s,
                                          int h, int i, float a, float b) {
  using cache_t = typename C::cache_t;
  if (!s.valid)
    return;
  cache[(s.row + h) * C::D + i] = wf_to<cache_t>(a);
  cache[(s.row + h) * C::D + i + C::HALF] = wf_to<cache_t>(b);
}

} // namespace weft::kernels
