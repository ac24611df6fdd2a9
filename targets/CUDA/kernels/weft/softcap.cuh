// Soft-capping of f32 logits rows in place, cap * tanh(logit / cap) (Gemma
// 2's final_logit_softcapping), after a library GEMM wrote them; the
// generated GEMV caps in its epilogue instead.
//
// Config: V row length, THREADS per block, CAP, INV_CAP (1 / CAP).
// Grid: (ceil(V / THREADS), tokens); block: THREADS.
// The token count is the grid's, not the Config's, so one binary serves
// every bucket.
#pragma once

#include "weft/common.cuh"

namespace weft::kernels {

template <class C> __device__ __forceinline__ void softcapRows(float *__restrict__ logits) {
  const int col = blockIdx.x * C::THREADS + threadIdx.x;
  if (col >= C::V)
    return;
  float *v = logits + (size_t)blockIdx.y * C::V + col;
  *v = wf_softcap(*v, C::CAP, C::INV_CAP);
}

// The entry point (emitSoftcapRows); Config adds RELEASE_EARLY.
template <class C>
__global__ void __launch_bounds__(C::THREADS) softcapRowsKernel(float *__restrict__ logits) {
  wf_grid_dependency_enter<C>();
  softcapRows<C>(logits);
}

} // namespace weft::kernels
