// The all-reduce without NCCL: dst[i] += src[i] over COUNT elements, in f32
// arithmetic, rounded back to the storage type. Grid-stride: any grid of
// THREADS-thread blocks covers the whole vector.
//
// Config: COUNT elements, THREADS per block; value_t storage type.
#pragma once

#include "weft/common.cuh"

namespace weft::kernels {

template <class C>
__device__ __forceinline__ void accumulate(typename C::value_t *__restrict__ dst,
                                           const typename C::value_t *__restrict__ src) {
  using value_t = typename C::value_t;
  for (long i = long(blockIdx.x) * C::THREADS + threadIdx.x; i < C::COUNT;
       i += long(gridDim.x) * C::THREADS)
    dst[i] = wf_to<value_t>(wf_f32(dst[i]) + wf_f32(src[i]));
}

// The entry point (emitAccumulateKernel); Config adds RELEASE_EARLY.
template <class C>
__global__ void __launch_bounds__(C::THREADS)
    accumulateKernel(typename C::value_t *__restrict__ dst,
                     const typename C::value_t *__restrict__ src) {
  wf_grid_dependency_enter<C>();
  accumulate<C>(dst, src);
}

} // namespace weft::kernels
