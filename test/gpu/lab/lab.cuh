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

__device__ __forceinline__ unsigned smemAddr(const void *p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
// Hopper's bulk copies and transaction barriers; elsewhere (the lab skips
// these rows before sm_90) a trap.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define LAB_SM90(...) asm volatile(__VA_ARGS__)
#else
#define LAB_SM90(...) __trap()
#endif
__device__ __forceinline__ void mbarInit(unsigned long long *bar, unsigned count = 1) {
  LAB_SM90("mbarrier.init.shared::cta.b64 [%0], %1;\n"
           "fence.mbarrier_init.release.cluster;" ::"r"(smemAddr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbarArrive(unsigned long long *bar) {
  LAB_SM90("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smemAddr(bar)) : "memory");
}
__device__ __forceinline__ void mbarExpectTx(unsigned long long *bar, unsigned bytes) {
  LAB_SM90("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smemAddr(bar)),
           "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbarWait(unsigned long long *bar, unsigned parity) {
  LAB_SM90("{\n .reg .pred p;\n WAIT:\n"
           " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
           " @!p bra WAIT;\n}" ::"r"(smemAddr(bar)), "r"(parity) : "memory");
}
__device__ __forceinline__ void bulkCopy(void *dst, const void *src, unsigned bytes,
                                         unsigned long long *bar) {
  LAB_SM90("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
           ::"r"(smemAddr(dst)), "l"(src), "r"(bytes), "r"(smemAddr(bar)) : "memory");
}

// Counters between the blocks of a persistent kernel: an acquire load, and
// an add releasing this thread's writes and (through a barrier before it)
// its block's, without a full fence.
__device__ __forceinline__ unsigned loadAcquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned addRelease(unsigned *c) {
  unsigned old;
  asm volatile("atom.add.release.gpu.global.u32 %0, [%1], 1;" : "=r"(old) : "l"(c) : "memory");
  return old;
}

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
