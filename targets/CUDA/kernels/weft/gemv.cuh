// Decode projections: y[t, col] = sum_k x[t, k] * w[row(col), k] for all T
// tokens in one pass over the weights, with an optional RMSNorm prologue
// and a fused epilogue (bias, residual add, SwiGLU, split outputs, logits,
// argmax candidates).
//
// A block owns CPB consecutive output columns (CPW per group of KW warps;
// RPC weight rows each: 2 for SwiGLU's gate and up) and one K range of KS
// (grid.y: SPLITS). The KW warps of a group split that K range between
// them and their sums meet in shared memory, so a projection with too few
// columns to fill the GPU needs no second kernel. It stages KC of every
// token's input in shared memory at a time
// (times the norm weight, summing squares on the way), then streams the
// weight rows through one of two engines:
// - SIMT: each lane loads 16 bytes of each of the warp's rows per step and
//   applies them to every token (one FMA per weight and token);
// - MMA: mma.m16n8k16 with the weights as A and the staged tokens as B
//   (several tokens: the FMA engine would be compute-bound; and every
//   quantized projection, whose codes are expanded to f16 pairs on the way,
//   weft/mma_weights.cuh).
// Without split K the warps' sums go through the epilogue here; with it,
// partial sums go to `partials` and gemvReduce sums them and runs the
// epilogue.
//
// Many tokens (prefill, large batches of a quantized projection) come as
// TILES tiles of T tokens, one per grid.z: each reads the weights again,
// from L2 where they fit.
//
// Config: T (tokens per tile), TILES, K, NW (weight rows), NC (output
// columns), VEC, THREADS, WARPS, KW, CPW, RPC, CPB, SPLITS, KS, KC, XS
// (staged row stride), EPS; NORM, PRENORM, MMA, ARGMAX (bool); x_t, w_t,
// s_t (staging), norm_t; MMA: W (the weight-format policy of
// weft/mma_weights.cuh, whose scales come in `scales`), m_t (the 16-bit
// type it expands to); static
// row(col, j). NORM multiplies the staged inputs by the norm weight (plus
// NORM_OFFSET: Gemma's norms scale by 1 + weight) and the
// sums by 1/rms at the end; PRENORM (f16 staging, which could overflow
// before 1/rms) first reads every token's whole row for its rms and stages
// the normalized inputs.
// Epilogue E: a callable (t, col, v[RPC], key) that stores one column of
// one token (and sets `key` for argmax); the entry points make it from
// Config::Epilogue (weft/epilogue.cuh) and their trailing pointers.
// Grid: (ceil(NC / CPB), SPLITS, TILES); block: THREADS.
#pragma once

#include "weft/epilogue.cuh"
#include "weft/mma_weights.cuh"

namespace weft::kernels {

// The epilogue of a split-K GEMV, which only writes partial sums.
struct NoEpilogue {
  template <class... A> __device__ __forceinline__ void operator()(A &&...) const {}
};

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

// Adds a thread's sum of squares to its token's in this warp's row of
// sums (warpSums: [T], written by this warp only): the warp's sum by lane 0
// when the warp's 32 vectors all belong to that token (the rows, or a chunk
// of them, are a multiple of 32 vectors), else lane by lane in lane order.
// The order of the adds never depends on timing, so neither does 1/rms:
// float atomics would add in arrival order, and a last-bit change there
// flips a greedy token whose logit ties another's (runs of one plan then
// disagree).
__device__ __forceinline__ void gemvAddSquares(float *warpSums, int t, float ss,
                                               bool warpOfOneToken) {
  const int lane = threadIdx.x & 31;
  if (warpOfOneToken) {
    ss = wf_warp_sum(ss);
    if (lane == 0)
      warpSums[t] += ss;
    __syncwarp();
    return;
  }
  const unsigned active = __activemask();
  for (int l = 0; l < 32; ++l) {
    if (lane == l)
      warpSums[t] += ss;
    __syncwarp(active);
  }
}

// Token t's sum of squares: the warps' sums in warp order.
template <int WARPS, int T>
__device__ __forceinline__ float gemvSumSquares(const float (&warpSums)[WARPS][T], int t) {
  float s = 0.0f;
#pragma unroll
  for (int w = 0; w < WARPS; ++w)
    s += warpSums[w][t];
  return s;
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
                                     const typename C::w_t *__restrict__ w,
                                     const void *__restrict__ scales, E tileEpilogue,
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
  static_assert(C::TILES == 1 || !C::ARGMAX, "argmax candidates are per launch, not per tile");
  static_assert(!C::PRENORM || C::NORM, "PRENORM is a way of doing NORM");

  // This block's tile of tokens.
  const int t0 = blockIdx.z * T;
  x += (size_t)t0 * K;
  if constexpr (SPLIT)
    partials += (size_t)blockIdx.z * (SPLITS * T * NW + (C::NORM ? SPLITS * T : 0));
  auto epilogue = [&](int t, int col, float (&v)[C::RPC], unsigned long long &key) {
    tileEpilogue(t0 + t, col, v, key);
  };

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
  using W = typename C::W;
  constexpr int ME = C::MMA ? W::CHUNKS * 8 : 8; // MMA: k per lane, row and step
  const int g = lane >> 2, q = lane & 3;
  const w_t *rows[C::MMA ? 1 : CPW * RPC];
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
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          accMma[m][n][e] = 0.0f;
  }
  // MMA: the ME consecutive k (one or two 16-byte loads per row and lane,
  // 4 * ME contiguous k per row and lane quad) that lane (g, q) reads of
  // rows g and g + 8 of a 16-row tile are taken as its A fragments of
  // ME / 4 k16 steps: k ME*q + 4s + {0..3} of step s are its columns 2q,
  // 2q+1, 2q+8, 2q+9; the B fragments are read from shared memory with the
  // same permutation (the sum does not care about the order of k).
  auto mmaRow = [&](int m, int half) {
    const int j = m / (C::MMA ? CPW / 16 : 1);
    const int c = colBase + (m % (C::MMA ? CPW / 16 : 1)) * 16 + g + 8 * half;
    return W(w, scales, C::row(c < C::NC ? c : C::NC - 1, j), K, ME * q);
  };
  // Sums of squares over this block's K range, per warp (gemvAddSquares).
  __shared__ float ssum[C::NORM ? WARPS : 1][C::NORM ? T : 1];
  __shared__ float inv[C::NORM ? T : 1];
  if constexpr (C::NORM)
    for (int i = threadIdx.x; i < WARPS * T; i += THREADS)
      ssum[i / T][i % T] = 0.0f;
  if constexpr (C::PRENORM) {
    // Every token's rms over the whole row first (the rows are small and
    // in L2: the other blocks read them too).
    __syncthreads();
    const int vecs = K / VEC;
    for (int idx = threadIdx.x; idx < T * vecs; idx += THREADS) {
      const int t = idx / vecs, i = (idx - t * vecs) * VEC;
      const wf_pack<x_t, VEC> xv = wf_load<x_t, VEC>(x + (size_t)t * K + i);
      float ss = 0.0f;
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        ss += wf_f32(xv.v[e]) * wf_f32(xv.v[e]);
      gemvAddSquares(ssum[warp], t, ss, vecs % 32 == 0);
    }
    __syncthreads();
    if (threadIdx.x < T)
      inv[threadIdx.x] = 1.0f / sqrtf(gemvSumSquares(ssum, threadIdx.x) / K + C::EPS);
  }
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
        if constexpr (C::PRENORM) {
          // As the rms_norm op rounds its result: x / rms * weight.
          f = f * inv[t] * (wf_f32(nv.v[e]) + C::NORM_OFFSET);
        } else if constexpr (C::NORM) {
          ss += f * f;
          f *= wf_f32(nv.v[e]) + C::NORM_OFFSET;
        }
        sv.v[e] = wf_to<s_t>(f);
      }
      wf_store<s_t, VEC>(xs + t * XS + i, sv);
      if constexpr (C::NORM && !C::PRENORM)
        gemvAddSquares(ssum[warp], t, ss, vecs % 32 == 0);
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
      constexpr int CH = ME / 8;
      // The KW warps of a group take turns at steps of 4 * ME k.
#pragma unroll 2
      for (int k = (warp % KW) * 4 * ME; k < len; k += KW * 4 * ME) {
        // All loads of the step first, then their expansion and the MMAs.
        typename W::Raw rawLo[MT], rawHi[MT];
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          rawLo[m] = mmaRow(m, 0).load(k0 + k);
          rawHi[m] = mmaRow(m, 1).load(k0 + k);
        }
        uint4 lo[MT][CH], hi[MT][CH];
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          mmaRow(m, 0).expand(rawLo[m], k0 + k, lo[m]);
          mmaRow(m, 1).expand(rawHi[m], k0 + k, hi[m]);
        }
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          const int token = n * 8 + g;
          uint4 b[CH];
#pragma unroll
          for (int h = 0; h < CH; ++h)
            b[h] = token < T ? *reinterpret_cast<const uint4 *>(xs + token * XS + k + ME * q + 8 * h)
                             : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
          for (int m = 0; m < MT; ++m) {
            // SUM_SCALE: the step's sums apart, then times the group's
            // scale of rows g (e = 0, 1) and g + 8 (e = 2, 3).
            float step[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            float (&d)[4] = W::SUM_SCALE ? step : accMma[m][n];
#pragma unroll
            for (int h = 0; h < CH; ++h) {
              wf_mma_m16n8k16<typename C::m_t>(d, lo[m][h].x, hi[m][h].x, lo[m][h].y,
                                               hi[m][h].y, b[h].x, b[h].y);
              wf_mma_m16n8k16<typename C::m_t>(d, lo[m][h].z, hi[m][h].z, lo[m][h].w,
                                               hi[m][h].w, b[h].z, b[h].w);
            }
            if constexpr (W::SUM_SCALE) {
              const float sLo = W::stepScale(rawLo[m]), sHi = W::stepScale(rawHi[m]);
              accMma[m][n][0] = fmaf(step[0], sLo, accMma[m][n][0]);
              accMma[m][n][1] = fmaf(step[1], sLo, accMma[m][n][1]);
              accMma[m][n][2] = fmaf(step[2], sHi, accMma[m][n][2]);
              accMma[m][n][3] = fmaf(step[3], sHi, accMma[m][n][3]);
            }
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
    // n * 8 + 2q + (e & 1). Formats with a scale per row (E4M3) apply it
    // to the sums here.
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      float rowScale[2] = {1.0f, 1.0f};
      if constexpr (W::ROW_SCALE) {
        rowScale[0] = mmaRow(m, 0).rowScale();
        rowScale[1] = mmaRow(m, 1).rowScale();
      }
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int token = n * 8 + 2 * q + (e & 1);
          const int c = (m % (CPW / 16)) * 16 + g + (e >= 2 ? 8 : 0), j = m / (CPW / 16);
          if (token < T)
            res[(warp * CPW * RPC + c * RPC + j) * T + token] =
                W::ROW_SCALE ? accMma[m][n][e] * rowScale[e >= 2] : accMma[m][n][e];
        }
    }
  }
  __syncthreads();
  if constexpr (C::NORM && !C::PRENORM) {
    if (threadIdx.x < T) {
      const float s = gemvSumSquares(ssum, threadIdx.x);
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
        if constexpr (C::NORM && !C::PRENORM)
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
// runs the epilogue. Grid: (ceil(NC / CPB), 1, TILES); block: THREADS.
template <class C, class E>
__device__ __forceinline__ void gemvReduce(const float *__restrict__ partials, E tileEpilogue,
                                           unsigned long long *__restrict__ candidates) {
  constexpr int T = C::T, NW = C::NW, RPC = C::RPC, SPLITS = C::SPLITS;
  constexpr bool NORM = C::NORM && !C::PRENORM; // partial sums of squares to add up
  const int t0 = blockIdx.z * T;
  partials += (size_t)blockIdx.z * (SPLITS * T * NW + (C::NORM ? SPLITS * T : 0));
  auto epilogue = [&](int t, int col, float (&v)[C::RPC], unsigned long long &key) {
    tileEpilogue(t0 + t, col, v, key);
  };
  __shared__ unsigned long long s_best[C::ARGMAX ? T : 1];
  if constexpr (C::ARGMAX)
    if (threadIdx.x < T)
      s_best[threadIdx.x] = 0ull;
  __shared__ float inv[NORM ? T : 1];
  if constexpr (NORM) {
    if (threadIdx.x < T) {
      float sumsq = 0.0f;
#pragma unroll
      for (int q = 0; q < SPLITS; ++q)
        sumsq += partials[(size_t)SPLITS * T * NW + q * T + threadIdx.x];
      inv[threadIdx.x] = 1.0f / sqrtf(sumsq / C::K + C::EPS);
    }
  }
  if constexpr (C::ARGMAX || NORM)
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
      if constexpr (NORM)
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

// Config::Epilogue over the pointers p as the callable gemv and gemvReduce
// take.
template <class C, class Ptrs> __device__ __forceinline__ auto gemvEpilogue(const Ptrs &p) {
  return [p](int t, int col, float (&v)[C::RPC], unsigned long long &key) {
    C::Epilogue::template apply<C>(p, t, col, v, key);
  };
}

// The entry points (emitGemv, emitEpilogueRows); Config adds Epilogue and
// RELEASE_EARLY. A parameter the Config does not use (norm_w without NORM,
// w_scales without codes, candidates without ARGMAX) is null; `out` are
// the pointers Config::Epilogue indexes.
//
// The GEMV, its epilogue in place.
template <class C, class... P>
__global__ void __launch_bounds__(C::THREADS)
    gemvKernel(const typename C::x_t *__restrict__ x, const typename C::norm_t *__restrict__ norm_w,
               const typename C::w_t *__restrict__ w, const void *__restrict__ w_scales,
               unsigned long long *__restrict__ candidates, P *__restrict__... out) {
  static_assert(C::SPLITS == 1, "a split-K GEMV writes partials: gemvSplitKernel");
  wf_grid_dependency_enter<C>();
  gemv<C>(x, norm_w, w, w_scales, gemvEpilogue<C>(wf_pointers(out...)), nullptr, candidates);
}

// The GEMV of one K split: partial sums for gemvReduceKernel.
template <class C>
__global__ void __launch_bounds__(C::THREADS)
    gemvSplitKernel(const typename C::x_t *__restrict__ x,
                    const typename C::norm_t *__restrict__ norm_w,
                    const typename C::w_t *__restrict__ w, const void *__restrict__ w_scales,
                    float *__restrict__ partials) {
  static_assert(C::SPLITS > 1, "one split: gemvKernel");
  wf_grid_dependency_enter<C>();
  gemv<C>(x, norm_w, w, w_scales, NoEpilogue{}, partials, nullptr);
}

// Sums the partials of gemvSplitKernel and runs the epilogue; with one
// split, the epilogue over f32 rows [T, NW] (a cuBLASLt GEMM's).
template <class C, class... P>
__global__ void __launch_bounds__(C::THREADS)
    gemvReduceKernel(const float *__restrict__ partials,
                     unsigned long long *__restrict__ candidates, P *__restrict__... out) {
  wf_grid_dependency_enter<C>();
  gemvReduce<C>(partials, gemvEpilogue<C>(wf_pointers(out...)), candidates);
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

// The entry point of the argmax over candidates (emitGemv): one `int` pack
// element a result; Config adds RELEASE_EARLY.
template <class C, class... Ids>
__global__ void __launch_bounds__(C::THREADS)
    argmaxCandidatesKernel(const unsigned long long *__restrict__ candidates,
                           Ids *__restrict__... ids) {
  wf_grid_dependency_enter<C>();
  argmaxCandidates<C>(candidates, ids...);
}

} // namespace weft::kernels
