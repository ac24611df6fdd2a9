// Projection epilogues: what happens to the RPC sums v of output column
// `col` of token `t` once a projection has them, in the decode GEMV
// (weft/gemv.cuh), its split-K reduce, and the kernel over a cuBLASLt
// GEMM's f32 rows: the bias, then a value (the sum, soft-capped logits, a
// residual add, SwiGLU), then stores into the results, or RoPE and the
// KV-cache write.
//
// The compiler composes one from the parts below as `using Epilogue = ...`
// in the kernel's Config. Each part names the kernel parameters it reads or
// writes by their index in the kernel's trailing pointer pack (wf_ptrs), so
// the kernel's parameters are exactly the pointers the epilogue uses.
//
// An epilogue is a type with
//   template <class C, class Ptrs>
//   static void apply(const Ptrs &p, int t, int col, float (&v)[C::RPC],
//                     unsigned long long &key);
// where C is the kernel's Config: NC output columns, row(col, j) (the weight
// row of sum j), ARGMAX (set `key` for the argmax over columns); a RoPE
// epilogue adds the constants of weft/rope_kv_write.cuh (D, HALF,
// invFreq(table, i); with a cache KV_HEADS, BLOCK_TOKENS, MAX_BLOCKS,
// MAX_SEQUENCES, cache_t).
#pragma once

#include "weft/rope_kv_write.cuh"

namespace weft::kernels {

//===----------------------------------------------------------------------===//
// Bias: added to every sum first, v[j] += bias[row(col, j)]
//===----------------------------------------------------------------------===//

struct NoBias {
  template <class C, class Ptrs>
  static __device__ __forceinline__ void add(const Ptrs &, int, float (&)[C::RPC]) {}
};

// The bias at pointer PTR ([NW], one per weight row).
template <int PTR> struct Bias {
  template <class C, class Ptrs>
  static __device__ __forceinline__ void add(const Ptrs &p, int col, float (&v)[C::RPC]) {
    const auto *bias = p.template get<PTR>();
#pragma unroll
    for (int j = 0; j < C::RPC; ++j)
      v[j] += wf_f32(bias[C::row(col, j)]);
  }
};

//===----------------------------------------------------------------------===//
// Values: what a column's sums become before they are stored
//===----------------------------------------------------------------------===//

// The sum itself.
struct Sum {
  template <class C, class Ptrs>
  static __device__ __forceinline__ float of(const Ptrs &, int, int, const float (&v)[C::RPC]) {
    return v[0];
  }
};

// Soft-capped logits (Gemma 2): SOFTCAP * tanh(sum / SOFTCAP), with C's
// SOFTCAP and INV_SOFTCAP.
struct Softcapped {
  template <class C, class Ptrs>
  static __device__ __forceinline__ float of(const Ptrs &, int, int, const float (&v)[C::RPC]) {
    return wf_softcap(v[0], C::SOFTCAP, C::INV_SOFTCAP);
  }
};

// residual[t, col] (pointer PTR, [T, NC]) plus the sum rounded to Lin: the
// projection's output is rounded to its dtype before the add, as the
// unfused graph does.
template <int PTR, class Lin> struct PlusResidual {
  template <class C, class Ptrs>
  static __device__ __forceinline__ float of(const Ptrs &p, int t, int col,
                                             const float (&v)[C::RPC]) {
    return wf_f32(p.template get<PTR>()[(size_t)t * C::NC + col]) + wf_round<Lin>(v[0]);
  }
};

// act(gate) * up of the sums gate (v[0]) and up (v[1]): SiLU, or GELU-tanh
// with GELU (Gemma's GeGLU), each rounded to Lin where the model's ops
// round.
template <class Lin, bool GELU> struct GatedActivation {
  template <class C, class Ptrs>
  static __device__ __forceinline__ float of(const Ptrs &, int, int, const float (&v)[C::RPC]) {
    const float gate = wf_round<Lin>(v[0]), up = wf_round<Lin>(v[1]);
    const float act = wf_round<Lin>(GELU ? wf_gelu_tanh(gate) : wf_silu(gate));
    return act * up;
  }
};

//===----------------------------------------------------------------------===//
// Stores: which results a column goes to
//===----------------------------------------------------------------------===//

template <class T> __device__ __forceinline__ void wf_store_as(T *out, float y) {
  *out = wf_to<T>(y);
}
template <class T, class In, int VEC>
__device__ __forceinline__ void wf_store_as(T *out, const wf_pack<In, VEC> &y) {
  wf_pack<T, VEC> o;
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    o.v[e] = wf_to<T>(wf_f32(y.v[e]));
  wf_store<T, VEC>(out, o);
}

// Output columns [OFFSET, OFFSET + SIZE) go to COUNT results, the pointers
// FIRST, FIRST + 1, ... ([T, SIZE] each, of its pointer's type): one part of
// a split, or (0, NC) a projection's whole output. COUNT 0: the part is
// yielded nowhere.
template <int OFFSET, int SIZE, int FIRST, int COUNT> struct Columns {
  static constexpr int END = OFFSET + SIZE;
  // The value y of column col (or the VEC values from column col on) of
  // token t.
  template <class Ptrs, class Y>
  static __device__ __forceinline__ void store(const Ptrs &p, int t, int col, const Y &y) {
    wf_static_for<FIRST, FIRST + COUNT>([&](auto i) {
      wf_store_as(p.template get<decltype(i)::value>() + (size_t)t * SIZE + (col - OFFSET), y);
    });
  }
};

// f(Part{}) for the part of PARTS (each a Columns) that holds column col;
// the last takes every column past the others.
template <class First, class... Rest, class F>
__device__ __forceinline__ void wf_columns_of(int col, F &&f) {
  if constexpr (sizeof...(Rest) == 0)
    f(First{});
  else if (col < First::END)
    f(First{});
  else
    wf_columns_of<Rest...>(col, f);
}

//===----------------------------------------------------------------------===//
// Epilogues
//===----------------------------------------------------------------------===//

// BIAS, then VALUE, stored into the results of the PARTS (Columns) that
// holds the column; with C::ARGMAX, the value is also the column's argmax
// key.
template <class BIAS, class VALUE, class... PARTS> struct ColumnEpilogue {
  template <class C, class Ptrs>
  static __device__ __forceinline__ void apply(const Ptrs &p, int t, int col, float (&v)[C::RPC],
                                               unsigned long long &key) {
    BIAS::template add<C>(p, col, v);
    const float y = VALUE::template of<C>(p, t, col, v);
    wf_columns_of<PARTS...>(col, [&](auto part) { decltype(part)::store(p, t, col, y); });
    if constexpr (C::ARGMAX)
      key = wf_key(y, col);
    else
      (void)key;
  }
};

// Where a RoPE epilogue writes keys and values into the paged cache: the
// pointers of the write's positions, the slots, the block table and the K
// and V caches.
template <int WRITE_POSITIONS, int SLOTS, int BLOCK_TABLES, int K_CACHE, int V_CACHE>
struct CacheWrite {
  template <class C, class Ptrs>
  static __device__ __forceinline__ CacheSlot slot(const Ptrs &p, int t) {
    return cacheSlot<C>(p.template get<WRITE_POSITIONS>()[t], p.template get<SLOTS>()[t],
                        p.template get<BLOCK_TABLES>());
  }
  template <int CACHE, class Ptrs> static __device__ __forceinline__ auto cache(const Ptrs &p) {
    return p.template get<CACHE == 1 ? K_CACHE : V_CACHE>();
  }
};
struct NoCacheWrite {};

// RoPE and the KV-cache write in a projection's epilogue: BIAS first (the
// bias of both rows of the pair), then the two sums are the pair (i, i +
// HALF) of head col / HALF of the split's parts, the head groups GROUPS
// (weft/rope_kv_write.cuh's HeadGroup: part_t, the part's type, which the
// sums are rounded to first, as the unfused split would store them; TABLE,
// CACHE, OUT and OUTS). POSITIONS: the rope positions' pointer (-1: nothing
// is rotated); CACHE: a CacheWrite, or NoCacheWrite.
template <class BIAS, int POSITIONS, class CACHE, class... GROUPS> struct RopeEpilogue {
  template <class C, class Ptrs>
  static __device__ __forceinline__ void apply(const Ptrs &p, int t, int col, float (&v)[C::RPC],
                                               unsigned long long &) {
    BIAS::template add<C>(p, col, v);
    const int head = col / C::HALF, i = col % C::HALF;
    wf_head_group_of</*BOUND_LAST=*/false, 0, GROUPS...>(head, [&](auto group, int h) {
      using G = decltype(group);
      float a = wf_round<typename G::part_t>(v[0]), b = wf_round<typename G::part_t>(v[1]);
      if constexpr (G::TABLE >= 0)
        rotatePair<typename G::res_t>(p.template get<POSITIONS>()[t], C::invFreq(G::TABLE, i), a,
                                      b);
      storeGroupPair<C, G>(p, t, h, i, a, b);
      if constexpr (G::CACHE != 0)
        cachePair<C>(CACHE::template cache<G::CACHE>(p), CACHE::template slot<C>(p, t), h, i, a,
                     b);
    });
  }
};

} // namespace weft::kernels
