// silu(gate) * up (GELU: gelu_tanh(gate) * up) over a projection's output [T, NW] whose columns hold the
// gate at GATE and up at UP, I wide each (prefill, after the GEMM). The
// activation is rounded to lin_t where the model's op boundary is.
//
// Config: NW output row length, I width, GATE and UP column
// offsets, VEC elements per vector access, THREADS per block, GELU; lin_t,
// out_t.
// Grid: (ceil(I / VEC / THREADS), tokens); block: THREADS.
// The token count is the grid's, not the Config's, so one binary serves
// every bucket.
#pragma once

#include "weft/common.cuh"

namespace weft::kernels {

template <class C, class... Out>
__device__ __forceinline__ void swigluRows(const typename C::lin_t *__restrict__ y,
                                           Out *__restrict__... outs) {
  using lin_t = typename C::lin_t;
  using out_t = typename C::out_t;
  const int t = blockIdx.y;
  const int c = (blockIdx.x * C::THREADS + threadIdx.x) * C::VEC;
  if (c >= C::I)
    return;
  const wf_pack<lin_t, C::VEC> g = wf_load<lin_t, C::VEC>(y + (size_t)t * C::NW + C::GATE + c);
  const wf_pack<lin_t, C::VEC> u = wf_load<lin_t, C::VEC>(y + (size_t)t * C::NW + C::UP + c);
  wf_pack<out_t, C::VEC> o;
#pragma unroll
  for (int e = 0; e < C::VEC; ++e) {
    const float gate = wf_f32(g.v[e]);
    const float act = wf_round<lin_t>(C::GELU ? wf_gelu_tanh(gate) : wf_silu(gate));
    o.v[e] = wf_to<out_t>(act * wf_f32(u.v[e]));
  }
  (wf_store<out_t, C::VEC>(outs + (size_t)t * C::I + c, o), ...);
}

// The entry point (emitSwigluRows): one `out_t` pack element a result;
// Config adds RELEASE_EARLY.
template <class C, class... Out>
__global__ void __launch_bounds__(C::THREADS)
    swigluRowsKernel(const typename C::lin_t *__restrict__ y, Out *__restrict__... outs) {
  wf_grid_dependency_enter<C>();
  swigluRows<C>(y, outs...);
}

} // namespace weft::kernels
