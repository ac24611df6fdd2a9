// What the GPU labs share: CUDA status checks that end the lab with the
// failing call's place, and the plain streaming read that is each lab's
// ceiling (every byte read once, 16 bytes per lane), and Hopper's bulk
// copies into shared memory with their transaction barriers.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

// For the labs that call cuBLAS (cublas_v2.h included before the use).
#define CHECK_BLAS(x)                                                                              \
  do {                                                                                             \
    cublasStatus_t s_ = (x);                                                                       \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      std::fprintf(stderr, "%s:%d: cublas %d\n", __FILE__, __LINE__, int(s_));                   \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

__global__ void streamKernel(const uint4 *__restrict__ p, size_t n, unsigned *sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u)
    *sink = acc;
}

// Hopper's bulk copies and transaction barriers, and the counters between
// the blocks of a persistent kernel: the kernel library's (a trap before
// sm_90; the labs skip those rows there).
#include "weft/bulk_copy.cuh"
using weft::kernels::addRelease;
using weft::kernels::bulkCopy;
using weft::kernels::loadAcquire;
using weft::kernels::mbarArrive;
using weft::kernels::mbarExpectTx;
using weft::kernels::mbarInit;
using weft::kernels::mbarWait;
using weft::kernels::smemAddr;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define LAB_SM90(...) asm volatile(__VA_ARGS__)
#else
#define LAB_SM90(...) __trap()
#endif

__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Milliseconds per call of run() on stream st, over reps calls after one.
template <class F> float timeMs(cudaStream_t st, int reps, F run) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  run();
  CHECK(cudaStreamSynchronize(st));
  CHECK(cudaEventRecord(a, st));
  for (int i = 0; i < reps; ++i)
    run();
  CHECK(cudaEventRecord(b, st));
  CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return ms / reps;
}
