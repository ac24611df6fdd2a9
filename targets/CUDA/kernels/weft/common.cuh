// Weft's device-side basics, included by every generated kernel: storage
// types to and from f32, vector loads and stores, weight streaming, warp
// reductions, the ordering key of argmax and sampling, and the grid
// dependency control of programmatic dependent launch.
//
// Kernel templates live beside this file (targets/CUDA/kernels/weft/); the
// compiler embeds them at build time (KernelLibrary.cpp) and hands them to
// NVRTC as in-memory headers, so a generated kernel is a few lines that
// instantiate a template with the model's dimensions as constants.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

// Storage types <-> f32; every rounding is to nearest even, as PyTorch's.
__device__ __forceinline__ float wf_f32(float v) { return v; }
__device__ __forceinline__ float wf_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float wf_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T wf_to(float v);
template <> __device__ __forceinline__ float wf_to<float>(float v) { return v; }
template <> __device__ __forceinline__ __half wf_to<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 wf_to<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
// What `v` becomes once stored as T: the model rounds every op's result to
// its dtype, so fused kernels round where an op boundary used to be.
template <typename T> __device__ __forceinline__ float wf_round(float v) {
  return wf_f32(wf_to<T>(v));
}

// The MLP gate activations, in f32: SiLU (x * sigmoid(x)) and GELU with
// the tanh approximation (PyTorch's gelu(approximate="tanh")).
__device__ __forceinline__ float wf_silu(float x) { return x / (1.0f + expf(-x)); }
// Soft-capping (Gemma 2's attention scores and final logits):
// cap * tanh(x / cap), given cap and 1 / cap.
__device__ __forceinline__ float wf_softcap(float x, float cap, float invCap) {
  return cap * tanhf(x * invCap);
}
__device__ __forceinline__ float wf_gelu_tanh(float x) {
  const float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x); // sqrt(2/pi)
  return 0.5f * x * (1.0f + tanhf(inner));
}

// N consecutive elements moved by one (at most 16-byte) access.
template <typename T, int N>
struct alignas(sizeof(T) * N > 16 ? 16 : sizeof(T) * N) wf_pack {
  T v[N];
};

template <typename T, int N>
__device__ __forceinline__ wf_pack<T, N> wf_load(const T *p) {
  return *reinterpret_cast<const wf_pack<T, N> *>(p);
}
template <typename T, int N>
__device__ __forceinline__ void wf_store(T *p, const wf_pack<T, N> &v) {
  *reinterpret_cast<wf_pack<T, N> *>(p) = v;
}

// Weights are read once per launch: stream them (evict-first) so that they
// do not push the activations out of L2.
template <typename T, int N>
__device__ __forceinline__ wf_pack<T, N> wf_stream(const T *p) {
  wf_pack<T, N> r;
  if constexpr (sizeof(r) == 16) {
    *reinterpret_cast<uint4 *>(&r) = __ldcs(reinterpret_cast<const uint4 *>(p));
  } else if constexpr (sizeof(r) == 8) {
    *reinterpret_cast<uint2 *>(&r) = __ldcs(reinterpret_cast<const uint2 *>(p));
  } else if constexpr (sizeof(r) == 4) {
    *reinterpret_cast<unsigned *>(&r) = __ldcs(reinterpret_cast<const unsigned *>(p));
  } else {
    r = wf_load<T, N>(p);
  }
  return r;
}

// c += a (16x16, row-major) * b (16x8, column-major) on tensor cores, f32
// accumulation (mma.sync m16n8k16), for 16-bit inputs of type E; a0-a3 and
// b0-b1 are the fragments in the instruction's register layout.
template <class E>
__device__ __forceinline__ void wf_mma_m16n8k16(float (&c)[4], unsigned a0, unsigned a1,
                                                unsigned a2, unsigned a3, unsigned b0,
                                                unsigned b1);
template <>
__device__ __forceinline__ void wf_mma_m16n8k16<__nv_bfloat16>(float (&c)[4], unsigned a0,
                                                               unsigned a1, unsigned a2,
                                                               unsigned a3, unsigned b0,
                                                               unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void wf_mma_m16n8k16<__half>(float (&c)[4], unsigned a0, unsigned a1,
                                                        unsigned a2, unsigned a3, unsigned b0,
                                                        unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float wf_inf() { return __int_as_float(0x7f800000); }

__device__ __forceinline__ float wf_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ unsigned long long wf_max64(unsigned long long a,
                                                       unsigned long long b) {
  return a > b ? a : b;
}

__device__ __forceinline__ unsigned long long wf_warp_max(unsigned long long v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = wf_max64(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The largest key of a block of THREADS threads, in thread 0 (every thread
// of the block calls it once).
template <int THREADS>
__device__ __forceinline__ unsigned long long wf_block_max_in_first(unsigned long long v) {
  __shared__ unsigned long long red[THREADS / 32];
  v = wf_warp_max(v);
  if ((threadIdx.x & 31) == 0)
    red[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int q = 1; q < THREADS / 32; ++q)
      v = wf_max64(v, red[q]);
  return v;
}

// Token order as one integer: a larger logit first, the lower index among
// equal logits (as weft.argmax and weft.sample break ties); NaN last.
__device__ __forceinline__ unsigned long long wf_key(float v, int index) {
  unsigned b = __float_as_uint(v);
  b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  if (v != v)
    b = 0u;
  return ((unsigned long long)b << 32) | (unsigned long long)(0xffffffffu - (unsigned)index);
}
__device__ __forceinline__ int wf_key_index(unsigned long long key) {
  return (int)(0xffffffffu - (unsigned)(key & 0xffffffffull));
}
__device__ __forceinline__ float wf_key_value(unsigned long long key) {
  unsigned b = (unsigned)(key >> 32);
  b = (b & 0x80000000u) ? (b & 0x7fffffffu) : ~b;
  return __uint_as_float(b);
}

// A kernel's trailing pointer parameters, typed, in order: the pack the
// compiler's Config indexes (an epilogue's bias, residual and results; a
// head group's input and outputs). get<I>() is the I-th.
template <class... P> struct wf_ptrs {};
template <class H, class... R> struct wf_ptrs<H, R...> {
  H *__restrict__ head;
  wf_ptrs<R...> rest;
  template <int I> __device__ __forceinline__ auto get() const {
    if constexpr (I == 0)
      return head;
    else
      return rest.template get<I - 1>();
  }
};
__device__ __forceinline__ wf_ptrs<> wf_pointers() { return {}; }
template <class H, class... R>
__device__ __forceinline__ wf_ptrs<H, R...> wf_pointers(H *head, R *...rest) {
  return {head, wf_pointers(rest...)};
}

// f(wf_index<I>{}) for I in [BEGIN, END), unrolled at compile time (each I a
// constant: a pointer's index, a head group's number).
template <int I> struct wf_index {
  static constexpr int value = I;
};
template <int BEGIN, int END, class F> __device__ __forceinline__ void wf_static_for(F &&f) {
  if constexpr (BEGIN < END) {
    f(wf_index<BEGIN>{});
    wf_static_for<BEGIN + 1, END>(f);
  }
}

// Programmatic dependent launch (sm_90 and newer). Called first thing in
// every kernel, before any global memory access; without the launch
// attribute both return at once, and before sm_90 they compile to nothing.
//
// wf_grid_dependency_wait: wait for the kernel before this one to finish and
// flush its writes. The next kernel is released as this one's blocks exit:
// its launch is staged, but none of its blocks take a place on the GPU while
// this one runs. What most kernels call (measured: resident waiting blocks
// slow the running GEMMs and GEMVs down more than the early launch gains).
__device__ __forceinline__ void wf_grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// wf_grid_dependency_control: the wait, then release the next kernel at
// once, so its blocks are resident when this one ends. For a kernel whose
// successor should start without a launch gap (split-K partials before their
// reduction; 4-bit GEMVs, short enough for the gap to matter). The order matters: released before its
// own wait, every later kernel of a graph would become resident at once and
// crowd the running one off the GPU.
__device__ __forceinline__ void wf_grid_dependency_control() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// What every __global__ template of the library does first: one of the two
// above, as its Config says (C::RELEASE_EARLY, which the emitter writes:
// KernelEmitter.h, EmittedKernel::releaseEarly, says which kernels release
// early and why).
template <class C> __device__ __forceinline__ void wf_grid_dependency_enter() {
  if constexpr (C::RELEASE_EARLY)
    wf_grid_dependency_control();
  else
    wf_grid_dependency_wait();
}

} // namespace
