// Rotary embedding (rotate half) of attention heads and the write of keys
// and values into the paged KV cache, for one (token, head, pair) per
// thread: element i and i + HALF of a head are a pair.
//
// A kernel holds up to three head groups (queries, keys, values; each
// normalized per head or not, rotated or not, yielded and/or cached): the
// compiler writes one struct per group, derived from HeadGroup, and the
// Config that lists them. The rope frequencies are the compiler's, in
// double, in a __constant__ table Config::invFreq reads. A projection's
// epilogue runs the same groups on its sums (weft/epilogue.cuh).
//
// Config: D head_dim, HALF = D / 2, HEADS_PER_BLOCK, HEADS of all
// groups, THREADS = HEADS_PER_BLOCK * HALF, invFreq(table, i), Groups
// (HeadGroups<...>); with a cache also KV_HEADS, BLOCK_TOKENS, MAX_BLOCKS
// (block-table row length), MAX_SEQUENCES, cache_t and the pointers
// WRITE_POSITIONS, SLOTS, BLOCK_TABLES, K_CACHE, V_CACHE.
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

// One group of heads (queries, keys or values). The compiler derives a
// struct per group that sets HEADS and what else applies; pointers are
// indices into the kernel's trailing pointer pack (wf_ptrs).
struct HeadGroup {
  static constexpr int IN = -1;        // kernel: the [T, HEADS * D] input
  static constexpr int NORM_W = -1;    // kernel: the head norm's [D] weight; -1: none
  static constexpr float EPS = 0.0f;   // the head norm's epsilon
  static constexpr int TABLE = -1;     // the rope table (Config::invFreq); -1: not rotated
  static constexpr int POSITIONS = -1; // kernel: the rope's int positions
  static constexpr int CACHE = 0;      // written to the K (1) or V (2) cache; 0: neither
  static constexpr int OUT = 0, OUTS = 0; // its results, [T, HEADS * D] of res_t each
  // Types: res_t (results and rounding), norm_t (the head norm's result);
  // in an epilogue part_t, what the sums are rounded to first.
};
template <class... G> struct HeadGroups {};

// f(G{}, h) for the group G of GROUPS that holds `head` (h: the head's
// index within G; groups follow each other from START). BOUND_LAST: heads
// past the last group reach nothing; otherwise the last group takes them.
template <bool BOUND_LAST, int START, class G, class... Rest, class F>
__device__ __forceinline__ void wf_head_group_of(int head, F &&f) {
  if constexpr (sizeof...(Rest) == 0 && !BOUND_LAST) {
    f(G{}, head - START);
  } else if constexpr (sizeof...(Rest) == 0) {
    if (head < START + G::HEADS)
      f(G{}, head - START);
  } else {
    if (head < START + G::HEADS)
      f(G{}, head - START);
    else
      wf_head_group_of<BOUND_LAST, START + G::HEADS, Rest...>(head, f);
  }
}

// Stores the pair into each of group G's results.
template <class C, class G, class Ptrs>
__device__ __forceinline__ void storeGroupPair(const Ptrs &p, int t, int h, int i, float a,
                                               float b) {
  wf_static_for<G::OUT, G::OUT + G::OUTS>([&](auto o) {
    storePair<C, G::HEADS, typename G::res_t>(t, h, i, a, b, p.template get<decltype(o)::value>());
  });
}

// The kernel's work for one thread. With head norms, every thread loads its
// pair (or zeros) and takes part in the heads' sums before any returns;
// without, threads past the last head return at once.
template <class C, class Ptrs, class... G>
__device__ __forceinline__ void ropeKvWrite(const Ptrs &p, HeadGroups<G...>) {
  constexpr bool ANY_NORM = ((G::NORM_W >= 0) || ...);
  constexpr bool CACHED = ((G::CACHE != 0) || ...);
  const int t = blockIdx.y;
  const int head = blockIdx.x * C::HEADS_PER_BLOCK + threadIdx.x / C::HALF;
  const int i = threadIdx.x % C::HALF;
  float a = 0.0f, b = 0.0f, headSquares = 0.0f;
  if constexpr (ANY_NORM) {
    float squares = 0.0f;
    wf_head_group_of</*BOUND_LAST=*/true, 0, G...>(head, [&](auto group, int h) {
      using H = decltype(group);
      loadPair<C, H::HEADS>(p.template get<H::IN>(), t, h, i, a, b);
      if constexpr (H::NORM_W >= 0)
        squares = a * a + b * b;
    });
    headSquares = headSumSquares<C>(squares);
  }
  if (head >= C::HEADS)
    return;
  CacheSlot slot{};
  if constexpr (CACHED)
    slot = cacheSlot<C>(p.template get<C::WRITE_POSITIONS>()[t], p.template get<C::SLOTS>()[t],
                        p.template get<C::BLOCK_TABLES>());
  wf_head_group_of</*BOUND_LAST=*/false, 0, G...>(head, [&](auto group, int h) {
    using H = decltype(group);
    if constexpr (!ANY_NORM)
      loadPair<C, H::HEADS>(p.template get<H::IN>(), t, h, i, a, b);
    if constexpr (H::NORM_W >= 0)
      normPair<C, typename H::norm_t>(headSquares, p.template get<H::NORM_W>(), i, H::EPS, a, b);
    if constexpr (H::TABLE >= 0)
      rotatePair<typename H::res_t>(p.template get<H::POSITIONS>()[t], C::invFreq(H::TABLE, i),
                                    a, b);
    storeGroupPair<C, H>(p, t, h, i, a, b);
    if constexpr (H::CACHE != 0)
      cachePair<C>(p.template get<H::CACHE == 1 ? C::K_CACHE : C::V_CACHE>(), slot, h, i, a, b);
  });
}

// The entry point (emitRopeKvWrite): the pointers Config and its groups
// index, in order; Config adds RELEASE_EARLY.
template <class C, class... P>
__global__ void __launch_bounds__(C::THREADS) ropeKvWriteKernel(P *__restrict__... ptrs) {
  wf_grid_dependency_enter<C>();
  ropeKvWrite<C>(wf_pointers(ptrs...), typename C::Groups{});
}

} // namespace weft::kernels
