// Embedding: gathers the table rows of the token ids into one or more
// outputs (a fused region may yield the same embedding more than once). An
// id outside the vocabulary gives a row of zeros.
//
// Config (every value a compile-time constant):
//   H        hidden size (row length) V        vocabulary (table rows)
//   VEC      elements per vector access
//   THREADS  threads per block       table_t, out_t  storage types
//   SCALE    factor of every row (Gemma: sqrt(H) rounded to out_t; 1)
// Grid: (ceil(H / VEC / THREADS), tokens); block: THREADS.
// The token count is the grid's, not the Config's, so one binary serves
// every bucket.
#pragma once

#include "weft/common.cuh"

namespace weft::kernels {

template <class C, class... Out>
__device__ __forceinline__ void embedding(const typename C::table_t *__restrict__ table,
                                          const int *__restrict__ ids, Out *__restrict__... outs) {
  using table_t = typename C::table_t;
  using out_t = typename C::out_t;
  const int t = blockIdx.y;
  const int h = (blockIdx.x * C::THREADS + threadIdx.x) * C::VEC;
  if (h >= C::H)
    return;
  const int id = ids[t];
  wf_pack<out_t, C::VEC> o;
  if (id >= 0 && id < C::V) {
    const wf_pack<table_t, C::VEC> r = wf_load<table_t, C::VEC>(table + (size_t)id * C::H + h);
#pragma unroll
    for (int e = 0; e < C::VEC; ++e) {
      if constexpr (C::SCALE != 1.0f)
        o.v[e] = wf_to<out_t>(wf_round<out_t>(wf_f32(r.v[e])) * C::SCALE);
      else
        o.v[e] = wf_to<out_t>(wf_f32(r.v[e]));
    }
  } else {
#pragma unroll
    for (int e = 0; e < C::VEC; ++e)
      o.v[e] = wf_to<out_t>(0.0f);
  }
  (wf_store<out_t, C::VEC>(outs + (size_t)t * C::H + h, o), ...);
}

// The entry point (emitEmbedding): one `out_t` pack element a result;
// Config adds RELEASE_EARLY.
template <class C, class... Out>
__global__ void __launch_bounds__(C::THREADS)
    embeddingKernel(const typename C::table_t *__restrict__ table, const int *__restrict__ ids,
                    Out *__restrict__... outs) {
  wf_grid_dependency_enter<C>();
  embedding<C>(table, ids, outs...);
}

} // namespace weft::kernels
