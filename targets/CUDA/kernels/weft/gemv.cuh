// Decode projections: y[t, col] = sum_k x[t, k] * w[row(col), k] for all T
// tokens in one pass over the weights, with an optional RMSNorm prologue
// and a fused epilogue (bias, residual add, SwiGLU, split outputs, logits,
// argmax candidates).
//
// A block owns CPB consecutive output columns (CPW per group of KW warps;
// RPC weight rows each: 2 for SwiGLU's gate and up) and one K range of KS
// (grid.y: SPLITS). The KW warps of a group split that K range between
// them and their sums meet in shared memory, so a projection with too few
// columns to fill the GPU needs no second kernel (SIMT engine only). It stages KC of every token's input in shared memory at a time
// (times the norm weight, summing squares on the way), then streams the
// weight rows through one of two engines:
// - SIMT: each lane loads 16 bytes of each of the warp's rows per step and
//   applies them to every token (one FMA per weight and token);
// - MMA: mma.m16n8k16 with the weights as A and the staged tokens as B
//   (several tokens: the FMA engine would be compute-bound).
// Without split K the warps' sums go through the epilogue here; with it,
// partial sums go to `partials` and gemvReduce sums them and runs the
// epilogue.
//
// Config: T, K, NW (weight rows), NC (output columns), VEC, THREADS, WARPS,
// KW, CPW, RPC, CPB, SPLITS, KS, KC, XS (staged row stride), EPS; NORM, MMA,
// ARGMAX (bool); x_t, w_t, s_t (staging), norm_t; static row(col, j).
// Epilogue E: a callable (t, col, v[RPC], key) that stores one column of
// one token (and sets `key` for argmax).
// Grid: (ceil(NC / CPB), SPLITS); block: THREADS.
#pragma once

#include "weft/common.cuh"

namespace weft::kernels {

// The epilogue of a split-K GEMV, which only writes partial sums.
struct NoEpilogue {};

// The loop over a block's (token, column) items, consecutive threads on
// consecutive columns; `item(t, cl, col, key)` handles one. With argmax, a
// warp's 32 items share one token (CPB is a multiple of 32), so one atomic
// per warp folds its best (logit, index) into s_best: a per-item atomic
// would serialize on T addresses.
template <class C, bool ARGMAX, class Item>
__device__ __forceinline__ void gemvItems(unsigned long long *s_best, Item item) {
  if constexpr (!ARGMAX) {
    for (int i = threadIdx.x; i < C::T * C::CPB; i += C::THREADS) {
      const int t = i / C::CPB, cl = i % C::CPB, col = blockIdx.x * C::CPB + cl;
      if (col >= C::NC)
        continue;
      unsigned long long key = 0ull;
      item(t, cl, col, key);
    }
  } else {
    for (int i0 = 0; i0 < C::T * C::CPB; i0 += C::THREADS) {
      const int i = i0 + threadIdx.x;
      unsigned long long key = 0ull;
      if (i < C::T * C::CPB) {
        const int t = i / C::CPB, cl = i % C::CPB, col = blockIdx.x * C::CPB + cl;
        if (col < C::NC)
          item(t, cl, col, key);
      }
      key = wf_warp_max(key);
      if ((threadIdx.x & 31) == 0 && key != 0ull)
        atomicMax(&s_best[(i0 + (threadIdx.x & ~31)) / C::CPB], key);
    }
  }
}

// The sum for token t, row j of block column cl from the warps' results
// res[warp][column * RPC + j][token]: one warp's, or the KW warps' of the
// column's group.
template <class C>
__device__ __forceinline__ float gemvColumnSum(const float *res, int t, int cl, int j) {
  const int first = (cl / C::CPW) * C::KW; // the group's first warp
  float s = 0.0f;
#pragma unroll
  for (int w = 0; w < C::KW; ++w)
    s += res[(((first + w) * C::CPW + cl % C::CPW) * C::RPC + j) * C::T + t];
  return s;
}

template <class C, class E>
__device__ __forceinline__ void gemv(const typename C::x_t *__restrict__ x,
                                     const typename C::norm_t *__restrict__ norm_w,
                                     const typename C::w_t *__restrict__ w, E epilogue,
                                     float *__restrict__ partials,
                                     unsigned long long *__restrict__ candidates) {
  using x_t = typename C::x_t;
  using w_t = typename C::w_t;
  using s_t = typename C::s_t;
  using norm_t = typename C::norm_t;
  constexpr int T = C::T, K = C::K, NW = C::NW, VEC = C::VEC, THREADS = C::THREADS;
  constexpr int CPW = C::CPW, RPC = C::RPC, CPB = C::CPB, WARPS = C::WARPS, KW = C::KW;
  constexpr int KS = C::KS, KC = C::KC, XS = C::XS, SPLITS = C::SPLITS;
  constexpr bool SPLIT = SPLITS > 1;
  static_assert(WARPS % KW == 0 && CPB == WARPS / KW * CPW, "warp groups must tile the block");
  static_assert(KW == 1 || !C::MMA, "the MMA engine gives each warp whole K chunks");

  // The staged inputs, then (after the main loop) the warps' sums
  // res[warp][column * RPC + j][token].
  constexpr int XS_BYTES = T * XS * (int)sizeof(s_t);
  constexpr int RES_BYTES = WARPS * CPW * RPC * T * (int)sizeof(float);
  __shared__ __align__(16) unsigned char smem[XS_BYTES > RES_BYTES ? XS_BYTES : RES_BYTES];
  s_t *xs = reinterpret_cast<s_t *>(smem);
  float *res = reinterpret_cast<float *>(smem);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int colBase = blockIdx.x * CPB + (warp / KW) * CPW; // this warp's group's columns
  const int kLane = ((warp % KW) * 32 + lane) * VEC;         // its first k in a chunk
  const int kBegin = blockIdx.y * KS;
  const int kEnd = kBegin + KS < K ? kBegin + KS : K;

  // Engine state: the weight rows each lane streams and its accumulators.
  // Columns past NC read the last row (no branch in the loop); dropped later.
  constexpr int MT = C::MMA ? CPW * RPC / 16 : 1; // MMA: 16-row tiles per warp
  constexpr int NT = (T + 7) / 8;                 // MMA: 8-token tiles
  const int g = lane >> 2, q = lane & 3;
  const w_t *rows[C::MMA ? 1 : CPW * RPC];
  const w_t *rowLo[MT], *rowHi[MT]; // MMA: rows g and g + 8 of each tile
  float acc[C::MMA ? 1 : CPW * RPC][T];
  float accMma[MT][NT][4];
  if constexpr (!C::MMA) {
#pragma unroll
    for (int c = 0; c < CPW; ++c)
#pragma unroll
      for (int j = 0; j < RPC; ++j)
        rows[c * RPC + j] = w + (size_t)C::row(colBase + c < C::NC ? colBase + c : C::NC - 1, j) * K;
#pragma unroll
    for (int r = 0; r < CPW * RPC; ++r)
#pragma unroll
      for (int t = 0; t < T; ++t)
        acc[r][t] = 0.0f;
  } else {
    // The 16 consecutive k (two 16-byte loads, 128 contiguous bytes per row
    // and lane quad) that lane (g, q) loads of rows g and g + 8 are taken as
    // its A fragments of four k16 steps: k 16q + 4s + {0..3} of step s are
    // its columns 2q, 2q+1, 2q+8, 2q+9; the B fragments are read from
    // shared memory with the same permutation (the sum does not care about
    // the order of k).
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      const int j = m / (CPW / 16), c = colBase + (m % (CPW / 16)) * 16 + g;
      rowLo[m] = w + (size_t)C::row(c < C::NC ? c : C::NC - 1, j) * K + 16 * q;
      rowHi[m] = w + (size_t)C::row(c + 8 < C::NC ? c + 8 : C::NC - 1, j) * K + 16 * q;
    }
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          accMma[m][n][e] = 0.0f;
  }
  __shared__ float ssum[C::NORM ? T : 1]; // sums of squares over this block's K range
  __shared__ float inv[C::NORM ? T : 1];
  if constexpr (C::NORM)
    if (threadIdx.x < T)
      ssum[threadIdx.x] = 0.0f;
  __shared__ unsigned long long s_best[C::ARGMAX && !SPLIT ? T : 1];
  if constexpr (C::ARGMAX && !SPLIT)
    if (threadIdx.x < T)
      s_best[threadIdx.x] = 0ull;

  for (int k0 = kBegin; k0 < kEnd; k0 += KC) {
    const int len = kEnd - k0 < KC ? kEnd - k0 : KC;
    __syncthreads(); // the previous chunk is consumed
    // Stage this chunk of every token's input (times the norm weight): one
    // flat loop over (token, vector) so that the loads of all tokens are in
    // flight together.
    const int vecs = len / VEC;
#pragma unroll 2
    for (int idx = threadIdx.x; idx < T * vecs; idx += THREADS) {
      const int t = idx / vecs, i = (idx - t * vecs) * VEC;
      const wf_pack<x_t, VEC> xv = wf_load<x_t, VEC>(x + (size_t)t * K + k0 + i);
      wf_pack<norm_t, VEC> nv;
      float ss = 0.0f;
      if constexpr (C::NORM)
        nv = wf_load<norm_t, VEC>(norm_w + k0 + i);
      wf_pack<s_t, VEC> sv;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        float f = wf_f32(xv.v[e]);
        if constexpr (C::NORM) {
          ss += f * f;
          f *= wf_f32(nv.v[e]);
        }
        sv.v[e] = wf_to<s_t>(f);
      }
      wf_store<s_t, VEC>(xs + t * XS + i, sv);
      if constexpr (C::NORM) {
        // A warp covers 32 vectors of one token when the chunk is a
        // multiple of 32 vectors (all but a ragged last chunk).
        if (vecs % 32 == 0) {
          ss = wf_warp_sum(ss);
          if (lane == 0)
            atomicAdd(&ssum[t], ss);
        } else {
          atomicAdd(&ssum[t], ss);
        }
      }
    }
    __syncthreads();
    if constexpr (!C::MMA) {
#pragma unroll 2
      for (int k = kLane; k < len; k += KW * 32 * VEC) {
        float wf[CPW * RPC][VEC];
#pragma unroll
        for (int r = 0; r < CPW * RPC; ++r) {
          const wf_pack<w_t, VEC> wv = wf_stream<w_t, VEC>(rows[r] + k0 + k);
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            wf[r][e] = wf_f32(wv.v[e]);
        }
#pragma unroll
        for (int t = 0; t < T; ++t) {
          const wf_pack<s_t, VEC> sv = wf_load<s_t, VEC>(xs + t * XS + k);
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const float xf = wf_f32(sv.v[e]);
#pragma unroll
            for (int r = 0; r < CPW * RPC; ++r)
              acc[r][t] += wf[r][e] * xf;
          }
        }
      }
    } else {
#pragma unroll 2
      for (int k = 0; k < len; k += 64) {
        uint4 lo[MT][2], hi[MT][2];
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            lo[m][h] = __ldcs(reinterpret_cast<const uint4 *>(rowLo[m] + k0 + k + 8 * h));
            hi[m][h] = __ldcs(reinterpret_cast<const uint4 *>(rowHi[m] + k0 + k + 8 * h));
          }
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          const int token = n * 8 + g;
          uint4 b[2] = {make_uint4(0u, 0u, 0u, 0u), make_uint4(0u, 0u, 0u, 0u)};
          if (token < T) {
            b[0] = *reinterpret_cast<const uint4 *>(xs + token * XS + k + 16 * q);
            b[1] = *reinterpret_cast<const uint4 *>(xs + token * XS + k + 16 * q + 8);
          }
#pragma unroll
          for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              wf_mma_m16n8k16<w_t>(accMma[m][n], lo[m][h].x, hi[m][h].x, lo[m][h].y, hi[m][h].y,
                                b[h].x, b[h].y);
              wf_mma_m16n8k16<w_t>(accMma[m][n], lo[m][h].z, hi[m][h].z, lo[m][h].w, hi[m][h].w,
                                b[h].z, b[h].w);
            }
        }
      }
    }
  }
  __syncthreads(); // xs becomes res
  if constexpr (!C::MMA) {
    // Every lane holds every sum after the butterfly; one lane stores each.
#pragma unroll
    for (int r = 0; r < CPW * RPC; ++r)
#pragma unroll
      for (int t = 0; t < T; ++t) {
        const float v = wf_warp_sum(acc[r][t]);
        if (lane == ((r * T + t) & 31))
          res[(warp * CPW * RPC + r) * T + t] = v;
      }
  } else {
    // Fragment (m, n, e) holds row g (+8 for e >= 2) of tile m and token
    // n * 8 + 2q + (e & 1).
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int token = n * 8 + 2 * q + (e & 1);
          const int c = (m % (CPW / 16)) * 16 + g + (e >= 2 ? 8 : 0), j = m / (CPW / 16);
          if (token < T)
            res[(warp * CPW * RPC + c * RPC + j) * T + token] = accMma[m][n][e];
        }
  }
  __syncthreads();
  if constexpr (C::NORM) {
    if (threadIdx.x < T) {
      const float s = ssum[threadIdx.x];
      if constexpr (SPLIT) {
        // Partial sums of squares after the partial dot products.
        if (blockIdx.x == 0)
          partials[(size_t)SPLITS * T * NW + blockIdx.y * T + threadIdx.x] = s;
      } else {
        inv[threadIdx.x] = 1.0f / sqrtf(s / K + C::EPS);
      }
    }
    if constexpr (!SPLIT)
      __syncthreads();
  }
  if constexpr (SPLIT) {
    // Partial sums of this K split: [SPLITS][T][NW].
    gemvItems<C, false>(nullptr, [&](int t, int cl, int col, unsigned long long &) {
#pragma unroll
      for (int j = 0; j < RPC; ++j)
        partials[((size_t)blockIdx.y * T + t) * NW + C::row(col, j)] =
            gemvColumnSum<C>(res, t, cl, j);
    });
  } else {
    gemvItems<C, C::ARGMAX>(s_best, [&](int t, int cl, int col, unsigned long long &key) {
      float v[RPC];
#pragma unroll
      for (int j = 0; j < RPC; ++j) {
        v[j] = gemvColumnSum<C>(res, t, cl, j);
        if constexpr (C::NORM)
          v[j] = v[j] * inv[t];
      }
      epilogue(t, col, v, key);
    });
    if constexpr (C::ARGMAX) {
      __syncthreads();
      // One candidate per token per block; a second kernel picks the best.
      if (threadIdx.x < T)
        candidates[(size_t)blockIdx.x * T + threadIdx.x] = s_best[threadIdx.x];
    }
  }
}

// Split K: sums the partials (and the norm's partial sums of squares), then
// runs the epilogue. Grid: (ceil(NC / CPB)); block: THREADS.
template <class C, class E>
__device__ __forceinline__ void gemvReduce(const float *__restrict__ partials, E epilogue,
                                           unsigned long long *__restrict__ candidates) {
  constexpr int T = C::T, NW = C::NW, RPC = C::RPC, SPLITS = C::SPLITS;
  __shared__ unsigned long long s_best[C::ARGMAX ? T : 1];
  if constexpr (C::ARGMAX)
    if (threadIdx.x < T)
      s_best[threadIdx.x] = 0ull;
  __shared__ float inv[C::NORM ? T : 1];
  if constexpr (C::NORM) {
    if (threadIdx.x < T) {
      float sumsq = 0.0f;
#pragma unroll
      for (int q = 0; q < SPLITS; ++q)
        sumsq += partials[(size_t)SPLITS * T * NW + q * T + threadIdx.x];
      inv[threadIdx.x] = 1.0f / sqrtf(sumsq / C::K + C::EPS);
    }
  }
  if constexpr (C::ARGMAX || C::NORM)
    __syncthreads();
  gemvItems<C, C::ARGMAX>(s_best, [&](int t, int, int col, unsigned long long &key) {
    float v[RPC];
#pragma unroll
    for (int j = 0; j < RPC; ++j) {
      const int row = C::row(col, j);
      float s = 0.0f;
#pragma unroll
      for (int q = 0; q < SPLITS; ++q)
        s += partials[((size_t)q * T + t) * NW + row];
      if constexpr (C::NORM)
        s = s * inv[t];
      v[j] = s;
    }
    epilogue(t, col, v, key);
  });
  if constexpr (C::ARGMAX) {
    __syncthreads();
    if (threadIdx.x < T)
      candidates[(size_t)blockIdx.x * T + threadIdx.x] = s_best[threadIdx.x];
  }
}

// Argmax over the per-block candidates of a logits GEMV (the lowest index
// among equal logits). Config: T, BLOCKS (candidates per token), THREADS.
// Grid: (T); block: THREADS.
template <class C, class... Ids>
__device__ __forceinline__ void argmaxCandidates(
    const unsigned long long *__restrict__ candidates, Ids *__restrict__... ids) {
  const int t = blockIdx.x;
  unsigned long long best = 0ull;
  for (int i = threadIdx.x; i < C::BLOCKS; i += C::THREADS)
    best = wf_max64(best, candidates[(size_t)i * C::T + t]);
  best = wf_block_max_in_first<C::THREADS>(best);
  if (threadIdx.x == 0)
    ((ids[t] = wf_key_index(best)), ...);
}

} // namespace weft::kernels
