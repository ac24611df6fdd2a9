// Copies a projection's output rows [T, NW] into its split results
// (prefill, after the cuBLASLt GEMM; decode projections split in their
// epilogue). Each thread moves VEC consecutive columns of one token into
// the results of the part that holds them, converted to their type, as one
// vector (VEC divides every split's width, so a vector never straddles two
// parts).
//
// Config: NW output row length, VEC elements per vector access, THREADS per
// block; lin_t, the GEMM output type; Parts, weft/epilogue.cuh's Columns of
// each part (SplitParts<...>), whose pointers index the kernel's `out`.
// Grid: (ceil(NW / VEC / THREADS), tokens); block: THREADS. The token count
// is the grid's, so one binary serves every bucket.
#pragma once

#include "weft/epilogue.cuh"

namespace weft::kernels {

template <class... PARTS> struct SplitParts {};

template <class C, class Ptrs, class... PARTS>
__device__ __forceinline__ void splitRows(const typename C::lin_t *__restrict__ y,
                                          const Ptrs &p, SplitParts<PARTS...>) {
  const int t = blockIdx.y;
  const int c = (blockIdx.x * C::THREADS + threadIdx.x) * C::VEC;
  if (c >= C::NW)
    return;
  const wf_pack<typename C::lin_t, C::VEC> v =
      wf_load<typename C::lin_t, C::VEC>(y + (size_t)t * C::NW + c);
  wf_columns_of<PARTS...>(c, [&](auto part) { decltype(part)::store(p, t, c, v); });
}

// The entry point (emitSplitCopy); Config adds RELEASE_EARLY.
template <class C, class... P>
__global__ void __launch_bounds__(C::THREADS)
    splitRowsKernel(const typename C::lin_t *__restrict__ y, P *__restrict__... out) {
  wf_grid_dependency_enter<C>();
  splitRows<C>(y, wf_pointers(out...), typename C::Parts{});
}

} // namespace weft::kernels
