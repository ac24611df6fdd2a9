// RMSNorm of each token row, one block per token, rounded as Hugging Face
// does: y = norm_w * round_x(x / rms(x)), with rms over the f32 squares;
// with NORM_OFFSET (Gemma) y = round((NORM_OFFSET + norm_w) * x / rms(x)).
//
// Config: K row length, VEC elements per vector access, THREADS
// per block, EPS, NORM_OFFSET; x_t, norm_t, y_t storage types.
// Grid: (tokens); block: THREADS.
// The token count is the grid's, not the Config's, so one binary serves
// every bucket.
#pragma once

#include "weft/common.cuh"

namespace weft::kernels {

// RESIDUAL: y = residual + round_y(norm(x)), rounded again (Gemma's
// post-attention and post-feedforward norms before the residual add).
template <class C, bool RESIDUAL = false>
__device__ __forceinline__ void rmsNormRows(const typename C::x_t *__restrict__ x,
                                            const typename C::norm_t *__restrict__ norm_w,
                                            typename C::y_t *__restrict__ y,
                                            const typename C::y_t *__restrict__ residual =
                                                nullptr) {
  using x_t = typename C::x_t;
  using norm_t = typename C::norm_t;
  using y_t = typename C::y_t;
  __shared__ float red[C::THREADS / 32];
  const x_t *row = x + (size_t)blockIdx.x * C::K;
  float ss = 0.0f;
  for (int i = threadIdx.x * C::VEC; i < C::K; i += C::THREADS * C::VEC) {
    const wf_pack<x_t, C::VEC> xv = wf_load<x_t, C::VEC>(row + i);
#pragma unroll
    for (int e = 0; e < C::VEC; ++e) {
      const float f = wf_f32(xv.v[e]);
      ss += f * f;
    }
  }
  ss = wf_warp_sum(ss);
  if ((threadIdx.x & 31) == 0)
    red[threadIdx.x >> 5] = ss;
  __syncthreads();
  ss = 0.0f;
#pragma unroll
  for (int q = 0; q < C::THREADS / 32; ++q)
    ss += red[q];
  const float inv = 1.0f / sqrtf(ss / C::K + C::EPS);
  y_t *out = y + (size_t)blockIdx.x * C::K;
  const y_t *res = RESIDUAL ? residual + (size_t)blockIdx.x * C::K : nullptr;
  for (int i = threadIdx.x * C::VEC; i < C::K; i += C::THREADS * C::VEC) {
    const wf_pack<x_t, C::VEC> xv = wf_load<x_t, C::VEC>(row + i);
    const wf_pack<norm_t, C::VEC> nv = wf_load<norm_t, C::VEC>(norm_w + i);
    wf_pack<y_t, C::VEC> yv, rv;
    if constexpr (RESIDUAL)
      rv = wf_load<y_t, C::VEC>(res + i);
#pragma unroll
    for (int e = 0; e < C::VEC; ++e) {
      if constexpr (C::NORM_OFFSET != 0.0f) // Gemma: one rounding of the f32 product
        yv.v[e] = wf_to<y_t>((wf_f32(nv.v[e]) + C::NORM_OFFSET) * (wf_f32(xv.v[e]) * inv));
      else
        yv.v[e] = wf_to<y_t>(wf_f32(nv.v[e]) * wf_round<x_t>(wf_f32(xv.v[e]) * inv));
      if constexpr (RESIDUAL)
        yv.v[e] = wf_to<y_t>(wf_f32(rv.v[e]) + wf_f32(yv.v[e]));
    }
    wf_store<y_t, C::VEC>(out + i, yv);
  }
}

// The entry points (emitRmsNormRows; emitNormResidual, whose residual comes
// before y); Config adds RELEASE_EARLY.
template <class C>
__global__ void __launch_bounds__(C::THREADS)
    rmsNormRowsKernel(const typename C::x_t *__restrict__ x,
                      const typename C::norm_t *__restrict__ norm_w,
                      typename C::y_t *__restrict__ y) {
  wf_grid_dependency_enter<C>();
  rmsNormRows<C>(x, norm_w, y);
}

template <class C>
__global__ void __launch_bounds__(C::THREADS)
    rmsNormResidualRowsKernel(const typename C::x_t *__restrict__ x,
                              const typename C::norm_t *__restrict__ norm_w,
                              const typename C::y_t *__restrict__ residual,
                              typename C::y_t *__restrict__ y) {
  wf_grid_dependency_enter<C>();
  rmsNormRows<C, true>(x, norm_w, y, residual);
}

} // namespace weft::kernels
