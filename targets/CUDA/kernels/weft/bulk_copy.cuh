// Hopper's bulk copies into shared memory with their transaction barriers
// (cp.async.bulk + mbarrier), and the counters between the blocks of a
// persistent kernel (an acquire load; adds that release this thread's
// writes, and through a barrier before them its block's, without a full
// fence). Used by weft/decode_stream.cuh and the GPU labs
// (test/gpu/lab/lab.cuh). sm_90 and newer; elsewhere the copies trap.
#pragma once

namespace weft::kernels {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define WF_SM90_ASM(...) asm volatile(__VA_ARGS__)
#else
#define WF_SM90_ASM(...) __trap()
#endif

__device__ __forceinline__ unsigned smemAddr(const void *p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
// A barrier `count` arrivals complete (and, armed by mbarExpectTx, the
// bytes of the copies bound to it).
__device__ __forceinline__ void mbarInit(unsigned long long *bar, unsigned count = 1) {
  WF_SM90_ASM("mbarrier.init.shared::cta.b64 [%0], %1;\n"
              "fence.mbarrier_init.release.cluster;" ::"r"(smemAddr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbarArrive(unsigned long long *bar) {
  WF_SM90_ASM("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smemAddr(bar)) : "memory");
}
// One arrival that also expects `bytes` of bulk copies.
__device__ __forceinline__ void mbarExpectTx(unsigned long long *bar, unsigned bytes) {
  WF_SM90_ASM("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smemAddr(bar)),
              "r"(bytes) : "memory");
}
// Waits for the barrier's phase of this parity to complete.
__device__ __forceinline__ void mbarWait(unsigned long long *bar, unsigned parity) {
  WF_SM90_ASM("{\n .reg .pred p;\n WAIT:\n"
              " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
              " @!p bra WAIT;\n}" ::"r"(smemAddr(bar)), "r"(parity) : "memory");
}
// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global
// into shared memory, completing on `bar`.
__device__ __forceinline__ void bulkCopy(void *dst, const void *src, unsigned bytes,
                                         unsigned long long *bar) {
  WF_SM90_ASM(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
      ::"r"(smemAddr(dst)), "l"(src), "r"(bytes), "r"(smemAddr(bar)) : "memory");
}

__device__ __forceinline__ unsigned loadAcquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void addRelease(unsigned *c) {
  asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(c) : "memory");
}
// Also acquires what the earlier adders released (the last to arrive reads
// their results).
__device__ __forceinline__ unsigned addAcqRel(unsigned *c) {
  unsigned old;
  asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;" : "=r"(old) : "l"(c) : "memory");
  return old;
}

} // namespace weft::kernels
