// Copies a projection's output rows [T, NW] into its split results
// (prefill, after the cuBLASLt GEMM; decode projections split in their
// epilogue). Each thread moves VEC consecutive columns of one token; the
// Store callable, written by the compiler, knows which result a column range
// belongs to and its type, and writes them as one vector (VEC divides every
// split's width, so a vector never straddles two results).
//
// Config: NW output row length, VEC elements per vector access, THREADS per
// block; lin_t, the GEMM output type. Store: a callable (t, c, y) writing
// the VEC values y of token t from column c on.
// Grid: (ceil(NW / VEC / THREADS), tokens); block: THREADS. The token count
// is the grid's, so one binary serves every bucket.
#pragma once

#include "weft/common.cuh"

namespace weft::kernels {

template <class C, class Store>
__device__ __forceinline__ void splitRows(const typename C::lin_t *__restrict__ y, Store store) {
  const int t = blockIdx.y;
  const int c = (blockIdx.x * C::THREADS + threadIdx.x) * C::VEC;
  if (c >= C::NW)
    return;
  store(t, c, wf_load<typename C::lin_t, C::VEC>(y + (size_t)t * C::NW + c));
}

} // namespace weft::kernels
