// The LM head of a step with more rows than sequences (a prefill chunk) on
// the rows whose next token is sampled only: the last row of each run of
// equal slots. A sequence's rows are adjacent in a step, and the runtime
// reads the token and the logits of each run's last row only, so the other
// rows' logits and tokens are never computed.
//
// gatherSampledRows finds the run ends and copies their hidden states (and
// sampling parameters) into R compact rows, in order; the LM head and the
// token selection run on those; scatterSampledRows puts the logits and
// tokens back at the rows they came from. A compact row past the last run
// end reads zeros (temperature 0: greedy) and is dropped by the scatter.
//
// Config: T (the step's rows), R (compact rows: the sequences a step may
// hold, at most T), H (hidden width), V (vocabulary), MAX_SEQUENCES (a slot
// in [0, MAX_SEQUENCES) is a sequence; others are padding), SAMPLE (gather
// the sampling parameters too), THREADS; x_t.
#pragma once

#include "weft/common.cuh"

namespace weft::kernels {

// Whether row t ends a run of a sequence's rows.
template <class C>
__device__ __forceinline__ bool endsRun(const int *__restrict__ slots, int t) {
  const int s = slots[t];
  return s >= 0 && s < C::MAX_SEQUENCES && (t + 1 == C::T || slots[t + 1] != s);
}

// Grid: (R); block: THREADS. Block b finds the b-th run end (every block
// counts them itself: T is a few thousand at most) and copies its row.
template <class C>
__device__ __forceinline__ void gatherSampledRows(
    const int *__restrict__ slots, const typename C::x_t *__restrict__ x,
    const float *__restrict__ temperature, const int *__restrict__ top_k,
    const float *__restrict__ top_p, const float *__restrict__ uniform, int *__restrict__ rows,
    typename C::x_t *__restrict__ xs, float *__restrict__ temperature_s,
    int *__restrict__ top_k_s, float *__restrict__ top_p_s, float *__restrict__ uniform_s) {
  constexpr int PER = (C::T + C::THREADS - 1) / C::THREADS; // rows a thread looks at
  __shared__ int counts[C::THREADS];
  __shared__ int found;
  const int b = blockIdx.x, tid = threadIdx.x;
  // Thread tid looks at rows [tid * PER, tid * PER + PER): its run ends.
  int mine = 0;
  for (int i = 0; i < PER; ++i) {
    const int t = tid * PER + i;
    mine += t < C::T && endsRun<C>(slots, t);
  }
  counts[tid] = mine;
  if (tid == 0)
    found = -1;
  __syncthreads();
  // The counts' inclusive prefix sums, in log2(THREADS) steps.
  for (int step = 1; step < C::THREADS; step *= 2) {
    const int add = tid >= step ? counts[tid - step] : 0;
    __syncthreads();
    counts[tid] += add;
    __syncthreads();
  }
  const int before = counts[tid] - mine; // run ends in earlier threads' rows
  if (b >= before && b < before + mine) {
    int seen = before;
    for (int i = 0; i < PER; ++i) {
      const int t = tid * PER + i;
      if (t < C::T && endsRun<C>(slots, t)) {
        if (seen == b)
          found = t;
        ++seen;
      }
    }
  }
  __syncthreads();
  const int t = found;
  if (tid == 0) {
    rows[b] = t;
    if constexpr (C::SAMPLE) {
      temperature_s[b] = t >= 0 ? temperature[t] : 0.0f;
      top_k_s[b] = t >= 0 ? top_k[t] : 0;
      top_p_s[b] = t >= 0 ? top_p[t] : 1.0f;
      uniform_s[b] = t >= 0 ? uniform[t] : 0.0f;
    }
  }
  using x_t = typename C::x_t;
  for (int i = tid; i < C::H; i += C::THREADS)
    xs[(size_t)b * C::H + i] = t >= 0 ? x[(size_t)t * C::H + i] : wf_to<x_t>(0.0f);
}

// Grid: (ceil(V / THREADS), R); block: THREADS. Compact row blockIdx.y's
// logits (when the region yields them: `logits` non-null) and token go to
// row rows[blockIdx.y].
template <class C>
__device__ __forceinline__ void scatterSampledRows(const int *__restrict__ rows,
                                                   const float *__restrict__ logits_s,
                                                   float *__restrict__ logits,
                                                   const int *__restrict__ ids_s,
                                                   int *__restrict__ ids) {
  const int b = blockIdx.y, t = rows[b];
  if (t < 0)
    return;
  const int col = blockIdx.x * C::THREADS + threadIdx.x;
  if (logits != nullptr && col < C::V)
    logits[(size_t)t * C::V + col] = logits_s[(size_t)b * C::V + col];
  if (ids != nullptr && blockIdx.x == 0 && threadIdx.x == 0)
    ids[t] = ids_s[b];
}

// The entry points (emitSampledRowsLogits); Config adds RELEASE_EARLY
// (common.cuh). The gather, without and with the sampling parameters:
template <class C>
__global__ void __launch_bounds__(C::THREADS)
    gatherSampledRowsKernel(const int *__restrict__ slots, const typename C::x_t *__restrict__ x,
                            int *__restrict__ rows, typename C::x_t *__restrict__ xs) {
  wf_grid_dependency_enter<C>();
  gatherSampledRows<C>(slots, x, nullptr, nullptr, nullptr, nullptr, rows, xs, nullptr, nullptr,
                       nullptr, nullptr);
}

template <class C>
__global__ void __launch_bounds__(C::THREADS) gatherSampledRowsSamplingKernel(
    const int *__restrict__ slots, const typename C::x_t *__restrict__ x,
    const float *__restrict__ temperature, const int *__restrict__ top_k,
    const float *__restrict__ top_p, const float *__restrict__ uniform, int *__restrict__ rows,
    typename C::x_t *__restrict__ xs, float *__restrict__ temperature_s,
    int *__restrict__ top_k_s, float *__restrict__ top_p_s, float *__restrict__ uniform_s) {
  wf_grid_dependency_enter<C>();
  gatherSampledRows<C>(slots, x, temperature, top_k, top_p, uniform, rows, xs, temperature_s,
                       top_k_s, top_p_s, uniform_s);
}

// The scatter of the logits (the first token result takes them along) and
// of the tokens, one `int` pack element a token result:
template <class C, class... Ids>
__global__ void __launch_bounds__(C::THREADS)
    scatterSampledRowsKernel(const int *__restrict__ rows, const float *__restrict__ logits_s,
                             const int *__restrict__ ids_s, float *__restrict__ logits,
                             Ids *__restrict__... ids) {
  wf_grid_dependency_enter<C>();
  if constexpr (sizeof...(Ids) == 0) {
    scatterSampledRows<C>(rows, logits_s, logits, ids_s, nullptr);
  } else {
    int i = 0;
    (scatterSampledRows<C>(rows, logits_s, i++ == 0 ? logits : nullptr, ids_s, ids), ...);
  }
}

// ... and of the tokens alone, where the region yields no logits:
template <class C, class... Ids>
__global__ void __launch_bounds__(C::THREADS)
    scatterSampledTokensKernel(const int *__restrict__ rows, const float *__restrict__ logits_s,
                               const int *__restrict__ ids_s, Ids *__restrict__... ids) {
  wf_grid_dependency_enter<C>();
  if constexpr (sizeof...(Ids) == 0)
    scatterSampledRows<C>(rows, logits_s, nullptr, ids_s, nullptr);
  else
    (scatterSampledRows<C>(rows, logits_s, nullptr, ids_s, ids), ...);
}

} // namespace weft::kernels
