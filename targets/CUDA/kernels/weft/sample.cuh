// Token selection from logits rows, one block per token: argmax (the
// lowest index among equal logits) and weft.sample (temperature, top-k,
// top-p, then the token where the cumulative probability first exceeds a
// uniform draw).
//
// Sampling keeps as candidates the tokens within CUT / temperature of the
// best logit (the rest carry under e^-CUT of its probability each, below
// f32 resolution of any sum), in shared memory when they fit (CAP), else
// re-read from the row. Every decision (the k-th candidate, the top-p
// boundary, the sampled token) is a search in the total order of wf_key
// (logit descending, index ascending) by radix selection: 8 bits a pass over
// histograms of counts or probability mass, REPLICAS copies to spread the
// atomics. Masses are added as integers (wf_fixed: units of 2^-40), so no
// sum depends on the order of the adds: the candidates' slots and the
// atomics follow the warps' timing, and float sums in that order changed
// their last bits from run to run, so a seed did not always give the same
// tokens.
//
// Config: V vocabulary (row length), THREADS per block, WARPS;
// sampling also CAP, REPLICAS, CUT. Grid: (tokens); block: THREADS.
// The token count is the grid's, not the Config's, so one binary serves
// every bucket.
#pragma once

#include "weft/common.cuh"

namespace weft::kernels {

template <class C> struct wf_sample_shared {
  // The block reductions read red64[lane]: one entry for each of 32 warps.
  static_assert(C::WARPS == 32, "wf_block_sum64 and wf_block_max take 32 warps");
  unsigned long long keys[C::CAP];
  float probs[C::CAP];
  unsigned count[C::REPLICAS][257]; // padded: replicas of one bin sit in different banks
  // wf_fixed masses: 8 bytes a bin, so half the copies keep the block's
  // static shared memory under 48 KB.
  unsigned long long mass[C::REPLICAS / 2][257];
  unsigned long long red64[C::WARPS];
  int n;
  int digit;
  unsigned binCount;
  unsigned long long targetLeft;
  unsigned rankLeft;
  unsigned long long found;
};

// A probability (at most 1) as an integer count of 2^-40: a sum of the
// 128K candidates a row can hold stays below 2^58, and each is off by at
// most 2^-41, under f32's resolution of any sum that holds the best token
// (at least 1). A candidate under 2^-41 (below 5e-13 of the best token's
// probability) weighs 0.
__device__ __forceinline__ unsigned long long wf_fixed(float p) {
  return __float2ull_rn(p * 1099511627776.0f);
}
__device__ __forceinline__ unsigned long long wf_warp_sum64(unsigned long long v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <class C>
__device__ __forceinline__ unsigned long long wf_block_sum64(unsigned long long v,
                                                             wf_sample_shared<C> &sm) {
  v = wf_warp_sum64(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0)
    sm.red64[threadIdx.x >> 5] = v;
  __syncthreads();
  return wf_warp_sum64(sm.red64[threadIdx.x & 31]);
}

template <class C>
__device__ __forceinline__ unsigned long long wf_block_max(unsigned long long v,
                                                           wf_sample_shared<C> &sm) {
  v = wf_warp_max(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0)
    sm.red64[threadIdx.x >> 5] = v;
  __syncthreads();
  return wf_warp_max(sm.red64[threadIdx.x & 31]);
}

// Calls f(key, probability) for each candidate this thread owns.
template <class C, typename F>
__device__ __forceinline__ void wf_each(const wf_sample_shared<C> &sm, bool inShared,
                                        const float *row, float top, float invT, F f) {
  if (inShared) {
    for (int i = threadIdx.x; i < sm.n; i += C::THREADS)
      f(sm.keys[i], sm.probs[i]);
  } else {
    for (int j = threadIdx.x; j < C::V; j += C::THREADS) {
      const float v = row[j];
      const float z = (v - top) * invT;
      if (z >= -C::CUT)
        f(wf_key(v, j), expf(z));
    }
  }
}

enum { WF_RANK = 0, WF_MASS_REACHES = 1, WF_MASS_EXCEEDS = 2 };

// The key of the candidate (key >= lower) where the running total in key
// order first passes the target: for WF_RANK the candidate of rank `rank`
// (0 = best); for WF_MASS_REACHES the first whose cumulative mass is >=
// `target`; for WF_MASS_EXCEEDS the first whose cumulative mass is >
// `target`. If rounding leaves the target beyond the total, the last one.
template <class C>
__device__ __noinline__ unsigned long long wf_select(wf_sample_shared<C> &sm, bool inShared, const float *row,
                                        float top, float invT, unsigned long long lower,
                                        int mode, unsigned rank,
                                        unsigned long long target) {
  unsigned long long prefix = 0ull, mask = 0ull;
  const int lane = threadIdx.x & 31, rep = lane % C::REPLICAS;
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < C::REPLICAS * 257; i += C::THREADS) {
      (&sm.count[0][0])[i] = 0u;
      if (i < C::REPLICAS / 2 * 257)
        (&sm.mass[0][0])[i] = 0ull;
    }
    __syncthreads();
    wf_each(sm, inShared, row, top, invT, [&](unsigned long long key, float p) {
      if (key >= lower && (key & mask) == prefix) {
        const int d = (int)((key >> shift) & 255ull);
        atomicAdd(&sm.count[rep][d], 1u);
        if (mode != WF_RANK)
          atomicAdd(&sm.mass[rep / 2][d], wf_fixed(p));
      }
    });
    __syncthreads();
    if (threadIdx.x < 32) {
      // Lane l owns bins 255 - 8l down to 248 - 8l: lanes in key order.
      unsigned c8[8];
      unsigned long long m8[8];
      unsigned cs = 0u;
      unsigned long long ms = 0ull;
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const int d = 255 - 8 * lane - q;
        unsigned c = 0u;
        unsigned long long m = 0ull;
#pragma unroll
        for (int r = 0; r < C::REPLICAS; ++r)
          c += sm.count[r][d];
#pragma unroll
        for (int r = 0; r < C::REPLICAS / 2; ++r)
          m += sm.mass[r][d];
        c8[q] = c;
        m8[q] = m;
        cs += c;
        ms += m;
      }
      unsigned ci = cs;
      unsigned long long mi = ms;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const unsigned cu = __shfl_up_sync(0xffffffffu, ci, o);
        const unsigned long long mu = __shfl_up_sync(0xffffffffu, mi, o);
        if (lane >= o) {
          ci += cu;
          mi += mu;
        }
      }
      const bool hit = cs > 0u && (mode == WF_RANK ? ci > rank
                                   : mode == WF_MASS_REACHES ? mi >= target
                                                             : mi > target);
      const unsigned hits = __ballot_sync(0xffffffffu, hit);
      const unsigned nonEmpty = __ballot_sync(0xffffffffu, cs > 0u);
      const int owner = hits ? __ffs(hits) - 1 : (nonEmpty ? 31 - __clz(nonEmpty) : 0);
      if (lane == owner) {
        unsigned cBefore = ci - cs;
        unsigned long long mBefore = mi - ms;
        int pick = -1, last = 0;
        for (int q = 0; q < 8; ++q) {
          if (c8[q] == 0u)
            continue;
          last = q;
          const bool reached = mode == WF_RANK ? cBefore + c8[q] > rank
                               : mode == WF_MASS_REACHES ? mBefore + m8[q] >= target
                                                         : mBefore + m8[q] > target;
          if (hits && reached) {
            pick = q;
            break;
          }
          cBefore += c8[q];
          mBefore += m8[q];
        }
        if (pick < 0) { // beyond the total: the last candidate
          pick = last;
          sm.targetLeft = ~0ull;
          sm.rankLeft = c8[last] - 1u;
        } else {
          sm.targetLeft = target - mBefore;
          sm.rankLeft = mode == WF_RANK ? rank - cBefore : 0u;
        }
        sm.digit = 255 - 8 * lane - pick;
        sm.binCount = c8[pick];
      }
    }
    __syncthreads();
    prefix |= (unsigned long long)sm.digit << shift;
    mask |= 255ull << shift;
    rank = sm.rankLeft;
    target = sm.targetLeft;
    const unsigned binCount = sm.binCount;
    __syncthreads();
    if (binCount == 1u) { // one candidate left: fetch its key
      wf_each(sm, inShared, row, top, invT, [&](unsigned long long key, float) {
        if (key >= lower && (key & mask) == prefix)
          sm.found = key;
      });
      __syncthreads();
      const unsigned long long key = sm.found;
      __syncthreads();
      return key;
    }
  }
  return prefix;
}

// The mass (wf_fixed) of the candidates with keys >= lower.
template <class C>
__device__ __noinline__ unsigned long long wf_mass_from(wf_sample_shared<C> &sm, bool inShared,
                                                        const float *row, float top, float invT,
                                                        unsigned long long lower) {
  unsigned long long s = 0ull;
  wf_each(sm, inShared, row, top, invT, [&](unsigned long long key, float p) {
    if (key >= lower)
      s += wf_fixed(p);
  });
  return wf_block_sum64(s, sm);
}

// share * mass, for a share in [0, 1].
__device__ __forceinline__ unsigned long long wf_fixed_share(float share, unsigned long long mass) {
  return (unsigned long long)((double)share * (double)mass);
}

// The row's best key (wf_key order): 16-byte loads, four in flight per
// thread, where the row length allows them.
template <class C> __device__ __forceinline__ unsigned long long wf_row_best(const float *row) {
  unsigned long long best = 0ull;
  if constexpr (C::V % 4 == 0) {
    constexpr int N4 = C::V / 4, U = 4;
    const float4 *r4 = reinterpret_cast<const float4 *>(row);
    int j = threadIdx.x;
    for (; j + (U - 1) * C::THREADS < N4; j += U * C::THREADS) {
      float4 v[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        v[u] = r4[j + u * C::THREADS];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int i = 4 * (j + u * C::THREADS);
        best = wf_max64(best, wf_max64(wf_max64(wf_key(v[u].x, i), wf_key(v[u].y, i + 1)),
                                       wf_max64(wf_key(v[u].z, i + 2), wf_key(v[u].w, i + 3))));
      }
    }
    for (; j < N4; j += C::THREADS) {
      const float4 v = r4[j];
      best = wf_max64(best, wf_max64(wf_max64(wf_key(v.x, 4 * j), wf_key(v.y, 4 * j + 1)),
                                     wf_max64(wf_key(v.z, 4 * j + 2), wf_key(v.w, 4 * j + 3))));
    }
  } else {
    for (int j = threadIdx.x; j < C::V; j += C::THREADS)
      best = wf_max64(best, wf_key(row[j], j));
  }
  return best;
}

template <class C, class... Ids>
__device__ __forceinline__ void argmaxRows(const float *__restrict__ logits,
                                           Ids *__restrict__... ids) {
  const int t = blockIdx.x;
  const float *row = logits + (size_t)t * C::V;
  unsigned long long best = wf_row_best<C>(row);
  best = wf_block_max_in_first<C::THREADS>(best);
  if (threadIdx.x == 0)
    ((ids[t] = wf_key_index(best)), ...);
}

template <class C, class... Ids>
__device__ __forceinline__ void sampleRows(const float *__restrict__ logits,
                                           const float *__restrict__ temperature,
                                           const int *__restrict__ top_k,
                                           const float *__restrict__ top_p,
                                           const float *__restrict__ uniform,
                                           Ids *__restrict__... ids) {
  __shared__ wf_sample_shared<C> sm;
  const int t = blockIdx.x;
  const float *row = logits + (size_t)t * C::V;
  unsigned long long best = wf_row_best<C>(row);
  best = wf_block_max(best, sm);
  const float temp = temperature[t];
  const float top = wf_key_value(best);
  // Temperature 0 (or an unusable row) selects greedily.
  if (!(temp > 0.0f) || !(top > -wf_inf()) || top != top) {
    if (threadIdx.x == 0)
      ((ids[t] = wf_key_index(best)), ...);
    return;
  }
  const float invT = 1.0f / temp;

  // Gather the candidates; warp-aggregated slots keep the counter cold.
  if (threadIdx.x == 0)
    sm.n = 0;
  __syncthreads();
  for (int j0 = 0; j0 < C::V; j0 += C::THREADS) {
    const int j = j0 + threadIdx.x;
    const float v = j < C::V ? row[j] : -wf_inf();
    const float z = (v - top) * invT;
    const bool in = j < C::V && z >= -C::CUT;
    const unsigned ballot = __ballot_sync(0xffffffffu, in);
    int base = 0;
    if ((threadIdx.x & 31) == 0 && ballot)
      base = atomicAdd(&sm.n, __popc(ballot));
    base = __shfl_sync(0xffffffffu, base, 0);
    const int slot = base + __popc(ballot & ((1u << (threadIdx.x & 31)) - 1u));
    if (in && slot < C::CAP) {
      sm.keys[slot] = wf_key(v, j);
      sm.probs[slot] = expf(z);
    }
  }
  __syncthreads();
  const int n = sm.n;
  const bool inShared = n <= C::CAP;

  // Top-k: keys at or above the k-th candidate's.
  unsigned long long lower = 0ull;
  const int k = top_k[t];
  if (k > 0 && k < n)
    lower = wf_select(sm, inShared, row, top, invT, 0ull, WF_RANK, (unsigned)(k - 1), 0.0f);
  const unsigned long long total = wf_mass_from(sm, inShared, row, top, invT, lower);
  // Top-p: the shortest prefix whose mass reaches top_p of the total.
  unsigned long long kept = total;
  const float p = top_p[t];
  if (p < 1.0f) {
    lower = wf_select(sm, inShared, row, top, invT, lower, WF_MASS_REACHES, 0u,
                      wf_fixed_share(p, total));
    kept = wf_mass_from(sm, inShared, row, top, invT, lower);
  }
  // The token whose cumulative probability first exceeds uniform.
  const unsigned long long chosen =
      wf_select(sm, inShared, row, top, invT, lower, WF_MASS_EXCEEDS, 0u,
                wf_fixed_share(uniform[t], kept));
  if (threadIdx.x == 0)
    ((ids[t] = wf_key_index(chosen)), ...);
}

// The entry points (emitArgmaxRows, emitSample): one `int` pack element a
// result the tokens go to; Config adds RELEASE_EARLY.
template <class C, class... Ids>
__global__ void __launch_bounds__(C::THREADS)
    argmaxRowsKernel(const float *__restrict__ logits, Ids *__restrict__... ids) {
  wf_grid_dependency_enter<C>();
  argmaxRows<C>(logits, ids...);
}

template <class C, class... Ids>
__global__ void __launch_bounds__(C::THREADS)
    sampleRowsKernel(const float *__restrict__ logits, const float *__restrict__ temperature,
                     const int *__restrict__ top_k, const float *__restrict__ top_p,
                     const float *__restrict__ uniform, Ids *__restrict__... ids) {
  wf_grid_dependency_enter<C>();
  sampleRows<C>(logits, temperature, top_k, top_p, uniform, ids...);
}

} // namespace weft::kernels
