// The decode projection of one token with 4-bit codes in 16-row tiles
// (PackedRows<4, GROUP, 32, M, Codes::Int, true>): the batch-1 step of an
// AWQ, GPTQ or int4 model, where the whole step is a stream of codes and
// the kernel's only job is to keep enough of them in flight.
//
// A block is WARPS warps; warp w owns the 16 output columns
// col0 = (blockIdx.x * WARPS + w) * 16 .. col0 + 15 and, for each of the
// RPC row kinds (2 for SwiGLU's gate and up), the 16-row tile of their
// weight rows. grid.y splits K into SPLITS ranges of SPS steps of 128
// inputs (the last may be shorter). Per step a lane (g, q) loads 16 bytes
// of codes of rows g and g + 8 (inputs 32q .. 32q + 31 of the step, one
// contiguous 512-byte run per warp and tile in the tiled order), U steps
// in flight at a time, expands them to f16 pairs and feeds
// mma.m16n8k16 with the token as column 0 of B (the other seven columns
// are zero); the group's scale multiplies each step's sums (SUM_SCALE).
//
// With a fused RMSNorm, every block first reads the token's whole row for
// its rms (it is small and in L2) and stages the normalized inputs of its
// K range, rounded as the rms_norm op rounds them.
//
// Split K needs no second kernel: each block writes its partial sums to
// `partials` [SPLITS][RPC][NC], and the last block of a column block to
// arrive (a counter per column block in `arrivals`, which the runtime
// zeroes once and atomicInc returns to zero) sums them in split order, so
// the result does not depend on which block was last, and runs the
// epilogue.
//
// Config: K, NW (weight rows), NC (output columns), RPC, GROUP, WARPS,
// THREADS (= WARPS * 32), SPLITS, SPS (steps of 128 per split), U (steps in
// flight), NORM, EPS, NORM_OFFSET, RELEASE_EARLY (programmatic launch: the
// kernel waits for its predecessor itself, after its first loads, and
// then releases its successor at once or as its blocks exit); x_t, norm_t, m_t (the model's 16-bit
// type), W (the PackedRows policy above); static row(col, j).
// Epilogue E: a callable (t, col, v[RPC], key) as in weft/gemv.cuh.
// Grid: (ceil(NC / (16 * WARPS)), SPLITS); block: THREADS.
#pragma once

#include "weft/mma_weights.cuh"

namespace weft::kernels {

template <class C, class E>
__device__ __forceinline__ void gemvOneToken(const typename C::x_t *__restrict__ x,
                                             const typename C::norm_t *__restrict__ norm_w,
                                             const unsigned *__restrict__ w,
                                             const void *__restrict__ scales, E epilogue,
                                             float *__restrict__ partials,
                                             unsigned *__restrict__ arrivals) {
  using W = typename C::W;
  using m_t = typename C::m_t;
  constexpr int K = C::K, NC = C::NC, RPC = C::RPC, WARPS = C::WARPS, U = C::U;
  constexpr int SPLITS = C::SPLITS, SPS = C::SPS, KS = SPS * 128, STEPS = K / 128;
  static_assert(C::THREADS == WARPS * 32, "one warp per 16-column tile");
  static_assert(NC % 16 == 0, "whole 16-column tiles");
  static_assert(K % 128 == 0 && (SPLITS - 1) * SPS < STEPS && SPLITS * SPS >= STEPS,
                "every split has at least one step");
  static_assert(W::CHUNKS == 4 && W::SUM_SCALE == wf_same<m_t, __half>::value && !W::ROW_SCALE,
                "4-bit integer codes, 32 inputs per lane and step");

  __shared__ __align__(16) m_t xs[KS];
  __shared__ float red[WARPS];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  // This warp's 16 columns; a warp past NC (the last block's) repeats the
  // last tile and stores nothing.
  const int tile = blockIdx.x * WARPS + warp;
  const bool owner = tile < NC / 16;
  const int col0 = (owner ? tile : NC / 16 - 1) * 16;
  const int stepBegin = blockIdx.y * SPS;
  const int steps = STEPS - stepBegin < SPS ? STEPS - stepBegin : SPS;
  const int kBegin = stepBegin * 128;

  // Rows g and g + 8 of each row kind's tile.
  auto rowOf = [&](int j, int half) {
    return W(w, scales, C::row(col0 + g + 8 * half, j), K, 32 * q);
  };
  // U steps of codes at a time, the next U in flight while these are
  // multiplied. The codes and scales are constants of the plan, so the
  // first steps' loads go out before waiting for the kernel before this
  // one (programmatic launch), whose outputs are the inputs x.
  using Raw = typename W::Raw;
  Raw rawLo[U][RPC], rawHi[U][RPC];
  auto loadSteps = [&](int s0, Raw (&lo)[U][RPC], Raw (&hi)[U][RPC]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (s0 + u >= steps)
        break;
      const int k = kBegin + (s0 + u) * 128;
#pragma unroll
      for (int j = 0; j < RPC; ++j) {
        lo[u][j] = rowOf(j, 0).load(k);
        hi[u][j] = rowOf(j, 1).load(k);
      }
    }
  };
  auto waitForInputs = [] {
    if constexpr (C::RELEASE_EARLY)
      wf_grid_dependency_control();
    else
      wf_grid_dependency_wait();
  };
  if constexpr (!C::PREFETCH)
    waitForInputs();
  loadSteps(0, rawLo, rawHi);
  if constexpr (C::PREFETCH)
    waitForInputs();

  // The token's 1 / rms over the whole row.
  float inv = 1.0f;
  if constexpr (C::NORM) {
    float ss = 0.0f;
    for (int i = threadIdx.x * 8; i < K; i += C::THREADS * 8) {
      const wf_pack<typename C::x_t, 8> v = wf_load<typename C::x_t, 8>(x + i);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        ss += wf_f32(v.v[e]) * wf_f32(v.v[e]);
    }
    ss = wf_warp_sum(ss);
    if (lane == 0)
      red[warp] = ss;
    __syncthreads();
    float total = 0.0f;
#pragma unroll
    for (int i = 0; i < WARPS; ++i)
      total += red[i];
    inv = 1.0f / sqrtf(total / K + C::EPS);
  }
  // Stage this split's inputs (normalized: x / rms * weight, rounded to m_t).
  for (int i = threadIdx.x * 8; i < steps * 128; i += C::THREADS * 8) {
    const wf_pack<typename C::x_t, 8> v = wf_load<typename C::x_t, 8>(x + kBegin + i);
    wf_pack<m_t, 8> s;
    if constexpr (C::NORM) {
      const wf_pack<typename C::norm_t, 8> n = wf_load<typename C::norm_t, 8>(norm_w + kBegin + i);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        s.v[e] = wf_to<m_t>(wf_f32(v.v[e]) * inv * (wf_f32(n.v[e]) + C::NORM_OFFSET));
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        s.v[e] = wf_to<m_t>(wf_f32(v.v[e]));
    }
    wf_store<m_t, 8>(xs + i, s);
  }
  __syncthreads();

  // Token 0's sums of rows g (acc[j][0]) and g + 8 (acc[j][2]).
  float acc[RPC][4] = {};
  for (int s0 = 0; s0 < steps; s0 += U) {
    Raw nextLo[U][RPC], nextHi[U][RPC];
    if (C::PREFETCH && s0 + U < steps)
      loadSteps(s0 + U, nextLo, nextHi);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (s0 + u >= steps)
        break;
      const int k = (s0 + u) * 128; // within the staged inputs
      uint4 b[4];
#pragma unroll
      for (int h = 0; h < 4; ++h)
        b[h] = g == 0 ? *reinterpret_cast<const uint4 *>(xs + k + 32 * q + 8 * h)
                      : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
      for (int j = 0; j < RPC; ++j) {
        uint4 el[4], eh[4];
        rowOf(j, 0).expand(rawLo[u][j], kBegin + k, el);
        rowOf(j, 1).expand(rawHi[u][j], kBegin + k, eh);
        float step[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        float (&d)[4] = W::SUM_SCALE ? step : acc[j];
#pragma unroll
        for (int h = 0; h < 4; ++h) {
          wf_mma_m16n8k16<m_t>(d, el[h].x, eh[h].x, el[h].y, eh[h].y, b[h].x, b[h].y);
          wf_mma_m16n8k16<m_t>(d, el[h].z, eh[h].z, el[h].w, eh[h].w, b[h].z, b[h].w);
        }
        if constexpr (W::SUM_SCALE) {
          acc[j][0] = fmaf(step[0], W::stepScale(rawLo[u][j]), acc[j][0]);
          acc[j][2] = fmaf(step[2], W::stepScale(rawHi[u][j]), acc[j][2]);
        }
      }
    }
    if (C::PREFETCH && s0 + U < steps) {
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < RPC; ++j) {
          rawLo[u][j] = nextLo[u][j];
          rawHi[u][j] = nextHi[u][j];
        }
    } else if (!C::PREFETCH && s0 + U < steps) {
      loadSteps(s0 + U, rawLo, rawHi);
    }
  }

  if constexpr (SPLITS == 1) {
    if (q == 0 && owner) {
      unsigned long long key = 0ull;
      float v[RPC];
#pragma unroll
      for (int j = 0; j < RPC; ++j)
        v[j] = acc[j][0];
      epilogue(0, col0 + g, v, key);
#pragma unroll
      for (int j = 0; j < RPC; ++j)
        v[j] = acc[j][2];
      epilogue(0, col0 + g + 8, v, key);
    }
  } else {
    if (q == 0 && owner)
#pragma unroll
      for (int j = 0; j < RPC; ++j) {
        float *row = partials + ((size_t)blockIdx.y * RPC + j) * NC;
        row[col0 + g] = acc[j][0];
        row[col0 + g + 8] = acc[j][2];
      }
    // The last of the column block's SPLITS blocks sums the partials.
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
      last = atomicInc(arrivals + blockIdx.x, SPLITS - 1) == SPLITS - 1;
    __syncthreads();
    if (!last)
      return;
    __threadfence();
    for (int c = threadIdx.x; c < WARPS * 16; c += C::THREADS) {
      const int col = blockIdx.x * WARPS * 16 + c;
      if (col >= NC)
        continue;
      float v[RPC];
#pragma unroll
      for (int j = 0; j < RPC; ++j) {
        float t = 0.0f;
#pragma unroll
        for (int s = 0; s < SPLITS; ++s)
          t += __ldcg(partials + ((size_t)s * RPC + j) * NC + col);
        v[j] = t;
      }
      unsigned long long key = 0ull;
      epilogue(0, col, v, key);
    }
  }
}

} // namespace weft::kernels
