// What the attention kernels share (weft/attention_decode.cuh,
// weft/attention_prefill.cuh): which rows are real and who owns them, the
// positions a decode split covers, 16-bit pairs for the tensor cores,
// cp.async copies and ldmatrix loads.
//
// Every function takes the kernel's Config C, which the compiler writes
// with the model and cache dimensions as constants (AttentionEmitter.cpp):
// elem_t (f32, f16 or bf16), kTokens, kHeads, kKvHeads, kGroup, kHeadDim,
// kWindow (0: none), kScale, kScaleLog2, kSoftcapLog2 (0: none),
// kBlockTokens, kMaxBlocks,
// kMaxSequences, kMaxContext, kQueryWidth, kRowStride, kChunkKernel, and
// what each kernel adds (its header lists them).
#pragma once

#include "weft/common.cuh"

// A kernel's body names only some of its configuration.
#pragma nv_diag_suppress 177 // declared but never referenced

namespace weft::kernels::attention {

// A scaled score in base 2, soft-capped where the model caps them (Gemma
// 2): cap * tanh(s / cap) is, in base 2, capL * tanh(s2 / capL) with capL
// = cap * log2(e). Applied to computed scores only, before any masking.
template <class C> __device__ __forceinline__ float capScore(float s2) {
  if constexpr (C::kSoftcapLog2 > 0.0f)
    return wf_softcap(s2, C::kSoftcapLog2, 1.0f / C::kSoftcapLog2);
  else
    return s2;
}

// Pads and out-of-range tokens (negative position or slot) get a zero output.
template <class C>
__device__ __forceinline__ bool tokenValid(int pos, int slot) {
  return pos >= 0 && pos < C::kMaxContext && slot >= 0 && slot < C::kMaxSequences;
}

// Which kernel owns a valid row when the region has both: a row whose
// neighbour continues its sequence (same slot) is part of a prefill chunk
// and goes to the tensor-core chunk kernel; a sequence with one token in the
// step (a decode token, or a one-token prompt) goes to flash-decoding, which
// reads its K/V once for the whole query-head group. Both kernels are
// correct for any row; the split only decides which one is fast for it.
// Tokens of a sequence need not be adjacent (each run of equal slots is a
// chunk of its own); invalid rows always belong to flash-decoding (zeros).
template <class C>
__device__ __forceinline__ bool chunkRow(const int *__restrict__ slots, int t) {
  if constexpr (!C::kChunkKernel)
    return false;
  const int s = slots[t];
  return (t > 0 && slots[t - 1] == s) || (t + 1 < C::kTokens && slots[t + 1] == s);
}

// A token attends to positions [firstVisible(pos), pos].
template <class C>
__device__ __forceinline__ int firstVisible(int pos) {
  return C::kWindow > 0 ? max(0, pos - C::kWindow + 1) : 0;
}

// Each decode split takes an equal share of the visible span, rounded up to
// the granule, so short contexts use few splits and long ones all of them;
// the split and combine kernels agree on it exactly.
template <class C>
__device__ __forceinline__ int splitLength(int span) {
  const int share = (span + C::kSplits - 1) / C::kSplits;
  return (share + C::kGranule - 1) / C::kGranule * C::kGranule;
}

// Both halves of a 32-bit word of two 16-bit values, low one first, as f32.
template <class E> __device__ __forceinline__ float2 unpackPair(unsigned w);
// A bf16 is the top half of an f32, so widening is a shift or a mask.
template <> __device__ __forceinline__ float2 unpackPair<__nv_bfloat16>(unsigned w) {
  return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}
template <> __device__ __forceinline__ float2 unpackPair<__half>(unsigned w) {
  __half2_raw r;
  r.x = (unsigned short)(w & 0xffffu);
  r.y = (unsigned short)(w >> 16);
  return __half22float2(__half2(r));
}

// Two probabilities as one 32-bit mma operand; `sum` gets the rounded
// values, so the weights normalized by are the ones multiplied.
template <class E> __device__ __forceinline__ unsigned packPair(float x, float y, float &sum);
template <>
__device__ __forceinline__ unsigned packPair<__nv_bfloat16>(float x, float y, float &sum) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
  sum += __low2float(v) + __high2float(v);
  return *reinterpret_cast<const unsigned *>(&v);
}
template <> __device__ __forceinline__ unsigned packPair<__half>(float x, float y, float &sum) {
  const __half2 v = __floats2half2_rn(x, y);
  sum += __low2float(v) + __high2float(v);
  return *reinterpret_cast<const unsigned *>(&v);
}
__device__ __forceinline__ void storePair(__nv_bfloat16 *p, float x, float y) {
  *reinterpret_cast<__nv_bfloat162 *>(p) = __floats2bfloat162_rn(x, y);
}
__device__ __forceinline__ void storePair(__half *p, float x, float y) {
  *reinterpret_cast<__half2 *>(p) = __floats2half2_rn(x, y);
}

// cp.async of 16 bytes with zero fill: keys outside the tile's range read
// as zeros, so a masked probability (0) never meets a NaN from stale shared
// memory.
__device__ __forceinline__ void copyAsync16(void *dst, const void *src, bool fill) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "r"(fill ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void copyAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void copyAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 tiles of 16-bit values from shared memory, as mma fragments
// (loadMatrixT: transposed).
template <class E> __device__ __forceinline__ void loadMatrix(unsigned (&r)[4], const E *p) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}
template <class E> __device__ __forceinline__ void loadMatrixT(unsigned (&r)[4], const E *p) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}

// c += a (16x16, row) * b (16x8, col), f32 accumulation.
template <class E>
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
  wf_mma_m16n8k16<E>(c, a[0], a[1], a[2], a[3], b0, b1);
}

} // namespace weft::kernels::attention
