// Can fp16 batch-1 decode stream a layer's weights at the copy rate if the
// stream never stops at a projection boundary? Llama 3.1 8B layers at one
// token (QKV 6144 x 4096, O 4096 x 4096, gate/up 2 x 14336 x 4096 with
// SwiGLU, down 4096 x 14336), LAYERS layers with weights of their own
// (3.5 GB, far past L2), run as:
//
// - separate: a GEMV kernel per projection (a warp per output row, 16-byte
//   loads, the input staged in shared memory), the layers' launches in one
//   CUDA graph with programmatic dependent launch, as plans run them;
// - stream: one persistent kernel, a block per SM. One producer lane per
//   block copies chunks of rows (32 KiB: 4 rows of K 4096, 2 SwiGLU
//   outputs, 1 row of K 14336) of every projection of every layer, in
//   order, into a ring of STAGES shared-memory stages by bulk copies
//   (cp.async.bulk + mbarrier), never waiting for a projection's input:
//   which rows come next does not depend on the activations. Chunks are
//   fixed per block, or claimed from a counter per projection (`dynamic`).
//   The consumer warps wait for a projection's input (a counter of the
//   previous phase's finished blocks), keep their K / CW slice of it in
//   registers, take the stages as they land and free them; the block sums
//   its warps' partials at the end of the projection;
// - stream, producer waiting: the producer too waits for each projection's
//   input (no streaming across the boundary), to see what crossing is worth;
// - whole layer (`full`): the same kernel with the RMSNorms (each block
//   holds the whole input, so its own RMS), the residual adds, and decode
//   attention between QKV and O over a cache of `context` positions: items
//   (KV head, split) over the grid, the group's 4 query heads at once, the
//   last split of a KV head to arrive weighing the splits together; with
//   `kvRing` the producer also copies each item's K/V rows into shared
//   memory at the start of the layer, and a warp per query head reads them
//   there (a lane per position);
// - a plain streaming read of the same bytes, a kernel per projection and
//   one kernel for everything: the ceilings.
//
// Printed: us per layer for each (TB/s of the projections' bytes), a
// timeline of layer STAMP_LAYER (global timer per block and event), the
// stream kernel's outputs against the separate kernels' and layer 0 of the
// whole layer against a CPU reference
// (test/gpu/results/layer-stream-lab-2026-12-03.txt).
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I targets/CUDA/kernels \
//        test/gpu/lab/layer_stream_lab.cu -o layer_stream_lab && ./layer_stream_lab
#include "lab.cuh"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>
#include <cmath>
#include <cstdio>
#include <vector>

constexpr int HIDDEN = 4096, QKV = 6144, FFN = 14336, LAYERS = 8, PROJS = 4;

// ---- Projections ----

// One projection: K inputs, NOUT outputs (each a row, or a gate and an up
// row for SwiGLU), weights row-major f16.
struct Proj {
  int K, nout, glu;
  const __half *w, *wu; // rows; SwiGLU's up rows
  const __half *x;      // input, K values
  __half *y;            // output, nout values
  const __half *resid;  // full layer: added to the outputs (O, down)
  int norm;             // full layer: RMSNorm of the input (QKV, gate/up)
};
// The full layer's attention over a cache of `context` positions, one
// query head per block (blocks [0, HEADS)): the query is the first
// HIDDEN outputs of QKV, the result O's input.
constexpr int HEADS = 32, KV_HEADS = 8, HEAD_DIM = 128;
constexpr int GROUP = HEADS / KV_HEADS, MAX_SPLITS = 16;
struct Attn {
  const __half *q, *k, *v; // k, v: [context][KV_HEADS][HEAD_DIM]
  __half *out;
};
struct Params {
  Proj proj[LAYERS * PROJS];
  Attn attn[LAYERS];
  int full;       // norms, attention and residuals between the projections
  int context;
  int splits; // attention splits per KV head (at most gridDim.x / KV_HEADS)
  unsigned *done;     // [LAYERS * PHASES] finished blocks, zero at launch
  unsigned *arrivals; // [LAYERS * KV_HEADS] finished attention splits, zero at launch
  float *scratch;     // attention splits' partials
  unsigned long long *stamps; // timeline of layer STAMP_LAYER: [EVENTS][blocks]
  int ahead;      // the producer streams across projection boundaries
  int fence;      // counters by a full fence and an atomic, not a release atomic
  int evictFirst; // weights' bulk copies marked to leave L2 first
  int rowReduce;  // a stage's rows summed over the warp by one butterfly
  int pad;        // counters this many apart (32: a 128-byte line each)
  int sleepNs;    // polling: 0 acquire loads every 32 ns, else relaxed loads this often
  int dynamic;    // chunks claimed from a counter per projection, not fixed per block
  int kvRing;     // attention items' K/V rows by bulk copies into shared memory
  int oneRound;   // the combine loads all splits' partials in one round
  unsigned *next; // [LAYERS * PROJS * pad] next unclaimed chunk, zero at launch
};
// Phases of a layer: QKV, attention, O, gate/up, down. Without `full` the
// attention phase is skipped and O reads QKV's first outputs.
constexpr int PHASES = 5;
// The timeline of one layer (global timer, ns), per block: each phase's
// start (input ready) and end (outputs written); attention's end is its
// partial's, then the combine's end for the last item of a KV head.
constexpr int STAMP_LAYER = 4, EVENTS = 2 * PHASES + 6;
__device__ __forceinline__ unsigned long long globalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void stamp(const Params &P, int layer, int event) {
  if (P.stamps && layer == STAMP_LAYER && threadIdx.x == 0)
    P.stamps[event * gridDim.x + blockIdx.x] = globalTimer();
}
// The same, once `dep` (a loaded value) has arrived.
__device__ __forceinline__ void stampAfter(const Params &P, int layer, int event, float dep) {
  if (P.stamps && layer == STAMP_LAYER && threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("add.f32 %1, %1, 0f00000000;\n\tmov.u64 %0, %%globaltimer;"
                 : "=l"(t), "+f"(dep));
    P.stamps[event * gridDim.x + blockIdx.x] = t;
  }
}
__host__ __device__ constexpr int phaseOf(int proj) { return proj == 0 ? 0 : proj + 1; }

__device__ __forceinline__ float silu(float g) { return g / (1.0f + __expf(-g)); }
// 8 f16 weights times 8 f32 inputs, into acc.
__device__ __forceinline__ void dot8(uint4 w, const float *x, float &acc) {
  const unsigned u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&u[i]));
    acc = fmaf(f.x, x[2 * i], acc);
    acc = fmaf(f.y, x[2 * i + 1], acc);
  }
}

// R row sums spread over a warp's lanes, reduced by one butterfly: after
// it, lanes 32 / R * j hold row j's sum (R - 1 + log2(32 / R) shuffles
// instead of 5 R). Returns this lane's sum; `row` is its row.
template <int R> __device__ __forceinline__ float rowsReduce(float (&v)[R], int lane, int &row) {
  static_assert(R == 1 || R == 2 || R == 4, "1, 2 or 4 rows");
  float keep = v[0];
  row = 0;
  if constexpr (R == 4) {
    const bool h16 = lane & 16, h8 = lane & 8;
    float k0 = h16 ? v[2] : v[0], k1 = h16 ? v[3] : v[1];
    k0 += __shfl_xor_sync(0xffffffffu, h16 ? v[0] : v[2], 16);
    k1 += __shfl_xor_sync(0xffffffffu, h16 ? v[1] : v[3], 16);
    keep = h8 ? k1 : k0;
    keep += __shfl_xor_sync(0xffffffffu, h8 ? k0 : k1, 8);
    row = (h16 ? 2 : 0) + (h8 ? 1 : 0);
#pragma unroll
    for (int o = 4; o > 0; o >>= 1)
      keep += __shfl_xor_sync(0xffffffffu, keep, o);
  } else if constexpr (R == 2) {
    const bool h16 = lane & 16;
    keep = h16 ? v[1] : v[0];
    keep += __shfl_xor_sync(0xffffffffu, h16 ? v[0] : v[1], 16);
    row = h16 ? 1 : 0;
#pragma unroll
    for (int o = 8; o > 0; o >>= 1)
      keep += __shfl_xor_sync(0xffffffffu, keep, o);
  } else {
    keep = warpSum(keep);
  }
  return keep;
}

// ---- Separate kernels ----

// A warp per output (its gate and up rows for SwiGLU), 8 warps a block;
// the input staged in shared memory as f16; loads U vectors deep.
template <int K, bool GLU>
__global__ void __launch_bounds__(256) gemvSeparate(Proj p) {
  constexpr int V = K / 8, U = 8;
  __shared__ __align__(16) __half xs[K];
  asm volatile("griddepcontrol.wait;" ::: "memory");
  for (int i = threadIdx.x; i < V; i += 256)
    reinterpret_cast<uint4 *>(xs)[i] = reinterpret_cast<const uint4 *>(p.x)[i];
  __syncthreads();
  const int lane = threadIdx.x & 31, o = blockIdx.x * 8 + (threadIdx.x >> 5);
  if (o >= p.nout)
    return;
  const uint4 *wr = reinterpret_cast<const uint4 *>(p.w + (size_t)o * K);
  const uint4 *ur = GLU ? reinterpret_cast<const uint4 *>(p.wu + (size_t)o * K) : nullptr;
  float a = 0.f, b = 0.f;
  for (int v0 = lane; v0 < V; v0 += 32 * U) {
    uint4 wv[U], uv[U];
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const int v = v0 + 32 * j;
      if (v < V) {
        wv[j] = __ldcs(wr + v);
        if constexpr (GLU)
          uv[j] = __ldcs(ur + v);
      }
    }
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const int v = v0 + 32 * j;
      if (v < V) {
        float xf[8];
        const uint4 xv = reinterpret_cast<const uint4 *>(xs)[v];
        const unsigned xu[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&xu[i]));
          xf[2 * i] = f.x;
          xf[2 * i + 1] = f.y;
        }
        dot8(wv[j], xf, a);
        if constexpr (GLU)
          dot8(uv[j], xf, b);
      }
    }
  }
  a = warpSum(a);
  if constexpr (GLU)
    b = warpSum(b);
  if (lane == 0)
    p.y[o] = __float2half(GLU ? silu(a) * b : a);
}

// ---- One persistent kernel streaming every layer's rows ----

constexpr int CW = 8;                       // consumer warps
constexpr int STHREADS = (CW + 1) * 32;     // and one producer warp
constexpr int STAGE_BYTES = 32 * 1024;      // 4 rows of 4096 f16, or one of 14336
constexpr int MAX_ROWS = 320;               // a block's rows of one projection
constexpr int ATTN_FLOATS = CW * 4 * (128 + 2); // CW x GROUP x (HEAD_DIM + m, l)
// `kvRing`: an attention item's K and V rows, brought into shared memory by
// bulk copies issued with its block's QKV rows (they do not depend on the
// step), rows KV_STRIDE bytes apart (16 bytes of padding: conflict-free
// 16-byte reads of different rows), at most KV_MAX positions an item.
constexpr int KV_MAX = 64, KV_STRIDE = 128 * 2 + 16, KV_BYTES = 2 * KV_MAX * KV_STRIDE;
// Outputs per stage: 4 rows of K 4096, 2 SwiGLU outputs (4 rows), 1 row of
// K 14336.
__host__ __device__ constexpr int outsPerStage(int K, bool glu) {
  return K > 4096 ? 1 : glu ? 2 : 4;
}

__device__ __forceinline__ void consumerBarrier() {
  asm volatile("bar.sync 1, %0;" ::"n"(CW * 32) : "memory");
}
__device__ __forceinline__ unsigned loadRelaxed(const unsigned *p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// Waits until *c reaches n: polling by acquire loads every 32 ns (the
// first runs), or by relaxed loads every `sleepNs` and one acquire fence.
__device__ __forceinline__ void waitCount(const unsigned *c, unsigned n, int sleepNs = 0) {
  if (sleepNs == 0) {
    while (loadAcquire(c) < n)
      __nanosleep(32);
    return;
  }
  while (loadRelaxed(c) < n)
    __nanosleep(sleepNs);
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
}

struct Ring {
  unsigned char *stage;           // STAGES * STAGE_BYTES
  unsigned long long *full, *empty;
  int *chunk;   // [STAGES] the chunk in each stage; -1: the projection's end for this block
  int *taken;   // [MAX_ROWS] the chunks this block took of the current projection, in order
  unsigned char *kv;             // KV_BYTES: K rows, then V rows
  unsigned long long *kvFull;    // completes once a layer
};

// The consumer warps' part of one projection with K inputs: wait for the
// input, keep this warp's K / CW slice of it in registers (lane l holds
// inputs w * K / CW + l * 8 + 256 j), then per stage each warp's partial
// sums of its rows, and at the end the block's outputs.
// After the block's last write of a phase: counts the block done, releasing
// its writes (by a full fence and an atomic with `fence`).
__device__ __forceinline__ void finishPhase(const Params &P, int phase) {
  consumerBarrier();
  if (threadIdx.x == 0) {
    if (P.fence)
      __threadfence(), atomicAdd(&P.done[phase * P.pad], 1u);
    else
      addRelease(&P.done[phase * P.pad]);
  }
}

// The counter a phase waits for (the phase before it) and its target.
__device__ __forceinline__ bool dependency(const Params &P, int phase, const unsigned *&c,
                                           unsigned &n) {
  if (phase == 0)
    return false;
  int prev = phase - 1;
  if (!P.full && prev % PHASES == 1)
    prev -= 1; // no attention phase: O waits for QKV
  c = &P.done[prev * P.pad];
  n = prev % PHASES == 1 ? KV_HEADS : gridDim.x;
  return true;
}

template <int K, bool GLU, int STAGES>
__device__ __forceinline__ void consume(const Params &P, int q, int &it,
                                        const Ring &r, float (*part)[CW], float *red) {
  constexpr int VPL = K / (CW * 256), OPS = outsPerStage(K, GLU);
  static_assert(K % (CW * 256) == 0, "whole vectors per lane");
  const Proj &p = P.proj[q];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int phase = (q / PROJS) * PHASES + phaseOf(q % PROJS);
  const unsigned *dc;
  unsigned dn;
  if (dependency(P, phase, dc, dn)) {
    if (threadIdx.x == 0)
      waitCount(dc, dn, P.sleepNs);
    consumerBarrier();
  }
  stamp(P, q / PROJS, 2 * phaseOf(q % PROJS));
  float xf[VPL * 8];
  const int base = w * (K / CW) + lane * 8;
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    const uint4 v = __ldcg(reinterpret_cast<const uint4 *>(p.x + base + 256 * j));
    const unsigned u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&u[i]));
      xf[8 * j + 2 * i] = f.x;
      xf[8 * j + 2 * i + 1] = f.y;
    }
  }
  if (P.full && p.norm) { // every block holds the whole input: its own RMS
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < VPL * 8; ++i)
      ss = fmaf(xf[i], xf[i], ss);
    ss = warpSum(ss);
    if (lane == 0)
      red[w] = ss;
    consumerBarrier();
    ss = 0.f;
#pragma unroll
    for (int v = 0; v < CW; ++v)
      ss += red[v];
    const float scale = rsqrtf(ss / K + 1e-5f);
#pragma unroll
    for (int i = 0; i < VPL * 8; ++i)
      xf[i] *= scale;
  }
  // Stages until the producer's end mark; the k-th chunk's sums go to
  // rows [k * OPS * RPO, ...) of `part`.
  int k = 0;
  for (;; ++it, ++k) {
    const int s = it % STAGES;
    mbarWait(&r.full[s], (it / STAGES) & 1);
    const int c = r.chunk[s];
    if (c < 0) {
      __syncwarp();
      if (lane == 0)
        mbarArrive(&r.empty[s]);
      ++it;
      break;
    }
    if (threadIdx.x == 0)
      r.taken[k] = c;
    const int o = c * OPS, n = min(OPS, p.nout - o);
    const __half *st = reinterpret_cast<const __half *>(r.stage + (size_t)s * STAGE_BYTES);
    if (P.rowReduce) {
      constexpr int R = OPS * (GLU ? 2 : 1);
      float v[R];
#pragma unroll
      for (int i = 0; i < OPS; ++i)
#pragma unroll
        for (int g = 0; g < (GLU ? 2 : 1); ++g) {
          const __half *row = st + (size_t)(g * OPS + i) * K + base;
          float a = 0.f;
          if (i < n) {
#pragma unroll
            for (int j = 0; j < VPL; ++j)
              dot8(*reinterpret_cast<const uint4 *>(row + 256 * j), xf + 8 * j, a);
          }
          v[i * (GLU ? 2 : 1) + g] = a;
        }
      int rr;
      const float sum = rowsReduce<R>(v, lane, rr);
      if ((lane & (32 / R - 1)) == 0 && rr / (GLU ? 2 : 1) < n)
        part[k * OPS * (GLU ? 2 : 1) + rr][w] = sum;
    } else {
#pragma unroll
      for (int i = 0; i < OPS; ++i) {
        if (i < n) {
#pragma unroll
          for (int g = 0; g < (GLU ? 2 : 1); ++g) {
            const __half *row = st + (size_t)(g * OPS + i) * K + base;
            float a = 0.f;
#pragma unroll
            for (int j = 0; j < VPL; ++j)
              dot8(*reinterpret_cast<const uint4 *>(row + 256 * j), xf + 8 * j, a);
            a = warpSum(a);
            if (lane == 0)
              part[(k * OPS + i) * (GLU ? 2 : 1) + g][w] = a;
          }
        }
      }
    }
    __syncwarp();
    if (lane == 0)
      mbarArrive(&r.empty[s]);
  }
  consumerBarrier();
  for (int t = threadIdx.x; t < k * OPS; t += CW * 32) {
    const int o = r.taken[t / OPS] * OPS + t % OPS;
    if (o >= p.nout)
      continue;
    float a = 0.f, b = 0.f;
#pragma unroll
    for (int v = 0; v < CW; ++v) {
      a += part[t * (GLU ? 2 : 1)][v];
      if constexpr (GLU)
        b += part[t * 2 + 1][v];
    }
    if (P.full && p.resid)
      a += __half2float(p.resid[o]);
    p.y[o] = __float2half(GLU ? silu(a) * b : a);
  }
  finishPhase(P, phase);
  stamp(P, q / PROJS, 2 * phaseOf(q % PROJS) + 1);
}

// Attention, flash-decoding over the whole grid: item (KV head, split)
// for blocks [0, KV_HEADS * splits), the group's GROUP query heads at once,
// positions of split s. Each consumer warp keeps an online softmax per head
// over the positions it takes (U at a time, their K and V rows loaded
// together, 4 dims a lane); the warps merge in shared memory into the
// item's partial (m, l, acc) in `scratch`; the last item of a KV head to
// arrive weighs its splits together into the attention output.

// The last split's combine, a thread per (head, 2 dims), every split's
// partial loaded at once (its own function: few registers live, no spill
// between the loads).
__device__ __noinline__ void combineOneRound(const Params &P, int layer, int kv, __half *outp) {
  const int splits = P.splits;
  const float *pm = P.scratch, *pl = pm + HEADS * splits, *pacc = pl + HEADS * splits;
  const int t = threadIdx.x, g = t / (HEAD_DIM / 2), d = 2 * (t % (HEAD_DIM / 2));
  const int h = kv * GROUP + g;
  float mv[MAX_SPLITS], lv[MAX_SPLITS], M = -1e30f, L = 0.f;
  float2 av[MAX_SPLITS], A = make_float2(0.f, 0.f);
#pragma unroll
  for (int s2 = 0; s2 < MAX_SPLITS; ++s2)
    if (s2 < splits) {
      mv[s2] = __ldcg(pm + h * splits + s2);
      lv[s2] = __ldcg(pl + h * splits + s2);
      av[s2] = __ldcg(reinterpret_cast<const float2 *>(pacc + ((size_t)h * splits + s2) *
                                                                  HEAD_DIM + d));
    }
#pragma unroll
  for (int s2 = 0; s2 < MAX_SPLITS; ++s2)
    if (s2 < splits)
      M = fmaxf(M, mv[s2]);
#pragma unroll
  for (int s2 = 0; s2 < MAX_SPLITS; ++s2)
    if (s2 < splits) {
      const float c = exp2f(mv[s2] - M);
      L += lv[s2] * c;
      A.x += av[s2].x * c, A.y += av[s2].y * c;
    }
  if (t == 0)
    stampAfter(P, layer, 2 * PHASES + 5, L);
  const float rl = 1.f / L;
  *reinterpret_cast<__half2 *>(outp + h * HEAD_DIM + d) = __floats2half2_rn(A.x * rl, A.y * rl);
}

// The positions [lo, hi) of split `split` of the context.
__device__ __forceinline__ void splitRange(const Params &P, int split, int &lo, int &hi) {
  lo = (int)((long long)P.context * split / P.splits);
  hi = (int)((long long)P.context * (split + 1) / P.splits);
}

// One attention item from K/V rows in shared memory: warp g takes query head
// g of the group, a lane per position (two for more than 32): the scores
// from the row and the query (in shared memory, broadcast), the softmax over
// the warp, then the weighted values with the lanes over the dimensions.
// Writes the item's partial (m, l, acc) like the register path.
__device__ __noinline__ void ringItem(const Params &P, int layer, int kv, int split, int lo, int hi,
                         float *smemA, const Ring &r) {
  const Attn &a = P.attn[layer];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, n = hi - lo, splits = P.splits;
  const float scale = 1.4426950408889634f / sqrtf((float)HEAD_DIM);
  float *qs = smemA, *probs = smemA + GROUP * HEAD_DIM; // [GROUP][HEAD_DIM], [GROUP][KV_MAX]
  for (int i = threadIdx.x; i < GROUP * HEAD_DIM; i += CW * 32)
    qs[i] = __half2float(__ldcg(a.q + kv * GROUP * HEAD_DIM + i)) * scale;
  mbarWait(r.kvFull, layer & 1);
  consumerBarrier();
  stamp(P, layer, 2 * PHASES + 2);
  stamp(P, layer, 2 * PHASES + 3);
  if (w < GROUP) {
    const float *qg = qs + w * HEAD_DIM;
    float sc[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int p = lane + 32 * i;
      sc[i] = -1e30f;
      if (p < n) {
        const uint4 *kr = reinterpret_cast<const uint4 *>(r.kv + p * KV_STRIDE);
        float acc = 0.f;
#pragma unroll
        for (int j = 0; j < HEAD_DIM / 8; ++j)
          dot8(kr[j], qg + 8 * j, acc);
        sc[i] = acc;
      }
    }
    float m = fmaxf(sc[0], sc[1]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    const float p0 = lane < n ? exp2f(sc[0] - m) : 0.f;
    const float p1 = lane + 32 < n ? exp2f(sc[1] - m) : 0.f;
    const float l = warpSum(p0 + p1);
    probs[w * KV_MAX + lane] = p0;
    probs[w * KV_MAX + lane + 32] = p1;
    __syncwarp();
    float o4[4] = {0.f, 0.f, 0.f, 0.f};
    const unsigned char *vbase = r.kv + KV_MAX * KV_STRIDE + lane * 8;
    for (int p = 0; p < n; ++p) {
      const float pr = probs[w * KV_MAX + p];
      const uint2 v = *reinterpret_cast<const uint2 *>(vbase + p * KV_STRIDE);
      const float2 f0 = __half22float2(*reinterpret_cast<const __half2 *>(&v.x));
      const float2 f1 = __half22float2(*reinterpret_cast<const __half2 *>(&v.y));
      o4[0] = fmaf(pr, f0.x, o4[0]);
      o4[1] = fmaf(pr, f0.y, o4[1]);
      o4[2] = fmaf(pr, f1.x, o4[2]);
      o4[3] = fmaf(pr, f1.y, o4[3]);
    }
    float *pm = P.scratch, *pl = pm + HEADS * splits, *pacc = pl + HEADS * splits;
    const int h = kv * GROUP + w;
    *reinterpret_cast<float4 *>(pacc + ((size_t)h * splits + split) * HEAD_DIM + lane * 4) =
        make_float4(o4[0], o4[1], o4[2], o4[3]);
    if (lane == 0)
      pm[h * splits + split] = m, pl[h * splits + split] = l;
  }
  stamp(P, layer, 2 * PHASES + 1);
}

__device__ __noinline__ void attend(const Params &P, int layer, float *smemA, float *red,
                                    const Ring &r) {
  const Attn &a = P.attn[layer];
  const int phase = layer * PHASES + 1;
  const int splits = P.splits;
  if ((int)blockIdx.x >= KV_HEADS * splits)
    return;
  if (threadIdx.x == 0)
    waitCount(&P.done[(phase - 1) * P.pad], gridDim.x, P.sleepNs);
  consumerBarrier();
  stamp(P, layer, 2);
  const int kv = blockIdx.x / splits, split = blockIdx.x % splits, lane = threadIdx.x & 31,
            w = threadIdx.x >> 5, C = P.context;
  const int lo = (int)((long long)C * split / splits), hi = (int)((long long)C * (split + 1) / splits);
  float *pm = P.scratch, *pl = pm + HEADS * splits, *pacc = pl + HEADS * splits;
  if (P.kvRing && hi - lo <= KV_MAX) {
    ringItem(P, layer, kv, split, lo, hi, smemA, r);
  } else {
  const float scale = 1.4426950408889634f / sqrtf((float)HEAD_DIM);
  auto load4 = [&](const __half *p, float (&f)[4]) {
    const uint2 v = __ldcg(reinterpret_cast<const uint2 *>(p));
    const float2 f0 = __half22float2(*reinterpret_cast<const __half2 *>(&v.x));
    const float2 f1 = __half22float2(*reinterpret_cast<const __half2 *>(&v.y));
    f[0] = f0.x; f[1] = f0.y; f[2] = f1.x; f[3] = f1.y;
  };
  float q[GROUP][4], acc[GROUP][4], m[GROUP], l[GROUP];
#pragma unroll
  for (int g = 0; g < GROUP; ++g) {
    load4(a.q + (kv * GROUP + g) * HEAD_DIM + lane * 4, q[g]);
#pragma unroll
    for (int d = 0; d < 4; ++d)
      q[g][d] *= scale, acc[g][d] = 0.f;
    m[g] = -1e30f;
    l[g] = 0.f;
  }
  stampAfter(P, layer, 2 * PHASES + 2, q[0][0]);
  bool first = true;
  constexpr int U = 8;
  for (int p0 = lo + w; p0 < hi; p0 += CW * U) {
    float kf[U][4], vf[U][4];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int pos = p0 + u * CW;
      if (pos < hi) {
        const size_t off = ((size_t)pos * KV_HEADS + kv) * HEAD_DIM + lane * 4;
        load4(a.k + off, kf[u]);
        load4(a.v + off, vf[u]);
      }
    }
    if (first)
      stampAfter(P, layer, 2 * PHASES + 3, kf[0][0] + vf[0][0]);
    first = false;
#pragma unroll
    for (int g = 0; g < GROUP; ++g) {
      float sc[U], mb = m[g];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        sc[u] = warpSum(q[g][0] * kf[u][0] + q[g][1] * kf[u][1] + q[g][2] * kf[u][2] +
                        q[g][3] * kf[u][3]);
        if (p0 + u * CW >= hi)
          sc[u] = -1e30f;
        mb = fmaxf(mb, sc[u]);
      }
      const float corr = exp2f(m[g] - mb);
      l[g] *= corr;
#pragma unroll
      for (int d = 0; d < 4; ++d)
        acc[g][d] *= corr;
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (p0 + u * CW < hi) {
          const float pr = exp2f(sc[u] - mb);
          l[g] += pr;
#pragma unroll
          for (int d = 0; d < 4; ++d)
            acc[g][d] = fmaf(pr, vf[u][d], acc[g][d]);
        }
      m[g] = mb;
    }
  }
  stamp(P, layer, 2 * PHASES + 1);
  // Merge the warps: smemA holds [CW][GROUP][HEAD_DIM] accumulators, then
  // [CW][GROUP] maxima and sums.
  float *wm = smemA + CW * GROUP * HEAD_DIM, *wl = wm + CW * GROUP;
#pragma unroll
  for (int g = 0; g < GROUP; ++g) {
#pragma unroll
    for (int d = 0; d < 4; ++d)
      smemA[(w * GROUP + g) * HEAD_DIM + lane * 4 + d] = acc[g][d];
    if (lane == 0)
      wm[w * GROUP + g] = m[g], wl[w * GROUP + g] = l[g];
  }
  consumerBarrier();
  for (int t = threadIdx.x; t < GROUP * HEAD_DIM; t += CW * 32) {
    const int g = t / HEAD_DIM, d = t % HEAD_DIM, h = kv * GROUP + g;
    float M = -1e30f;
#pragma unroll
    for (int v = 0; v < CW; ++v)
      M = fmaxf(M, wm[v * GROUP + g]);
    float L = 0.f, A = 0.f;
#pragma unroll
    for (int v = 0; v < CW; ++v) {
      const float c = exp2f(wm[v * GROUP + g] - M);
      L += wl[v * GROUP + g] * c;
      A += smemA[(v * GROUP + g) * HEAD_DIM + d] * c;
    }
    pacc[((size_t)h * splits + split) * HEAD_DIM + d] = A;
    if (d == 0)
      pm[h * splits + split] = M, pl[h * splits + split] = L;
  }
  }
  consumerBarrier();
  if (threadIdx.x == 0) {
    unsigned arrived;
    if (P.fence) {
      __threadfence();
      arrived = atomicAdd(&P.arrivals[(layer * KV_HEADS + kv) * P.pad], 1u);
      __threadfence();
    } else {
      asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;"
                   : "=r"(arrived) : "l"(&P.arrivals[(layer * KV_HEADS + kv) * P.pad]) : "memory");
    }
    red[0] = arrived == (unsigned)splits - 1 ? 1.f : 0.f;
  }
  stamp(P, layer, 3);
  consumerBarrier();
  if (red[0] == 0.f)
    return;
  stamp(P, layer, 2 * PHASES + 4);
  if (P.oneRound) {
    combineOneRound(P, layer, kv, a.out);
  } else {
    // A thread per (head, 4 dims).
    const int t = threadIdx.x;
    if (t < GROUP * HEAD_DIM / 4) {
      const int g = t / (HEAD_DIM / 4), d = 4 * (t % (HEAD_DIM / 4)), h = kv * GROUP + g;
      // The maxima first (16 registers), then the sums and values four
      // splits at a time: few registers live, so no load waits on a spill.
      float mv[MAX_SPLITS], M = -1e30f;
#pragma unroll
      for (int s2 = 0; s2 < MAX_SPLITS; ++s2)
        mv[s2] = s2 < splits ? __ldcg(pm + h * splits + s2) : -1e30f;
#pragma unroll
      for (int s2 = 0; s2 < MAX_SPLITS; ++s2)
        M = fmaxf(M, mv[s2]);
      float L = 0.f;
      float4 A = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int b0 = 0; b0 < MAX_SPLITS; b0 += 4) {
        float lv[4];
        float4 av[4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (b0 + i < splits) {
            lv[i] = __ldcg(pl + h * splits + b0 + i);
            av[i] = __ldcg(reinterpret_cast<const float4 *>(
                pacc + ((size_t)h * splits + b0 + i) * HEAD_DIM + d));
          }
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (b0 + i < splits) {
            const float c = exp2f(mv[b0 + i] - M);
            L += lv[i] * c;
            A.x += av[i].x * c, A.y += av[i].y * c, A.z += av[i].z * c, A.w += av[i].w * c;
          }
      }
      if (t == 0)
        stampAfter(P, layer, 2 * PHASES + 5, L);
      const float r = 1.f / L;
      __half2 *out = reinterpret_cast<__half2 *>(a.out + h * HEAD_DIM + d);
      out[0] = __floats2half2_rn(A.x * r, A.y * r);
      out[1] = __floats2half2_rn(A.z * r, A.w * r);
    }
  }
  finishPhase(P, phase);
  stamp(P, layer, 2 * PHASES);
}


__device__ __forceinline__ unsigned long long evictFirstPolicy() {
  unsigned long long pol = 0;
  LAB_SM90("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}
__device__ __forceinline__ void bulkCopyFirst(void *dst, const void *src, unsigned bytes,
                                              unsigned long long *bar, unsigned long long pol) {
  LAB_SM90("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
           " [%0], [%1], %2, [%3], %4;"
           ::"r"(smemAddr(dst)), "l"(src), "r"(bytes), "r"(smemAddr(bar)), "l"(pol) : "memory");
}

template <int STAGES>
__global__ void __launch_bounds__(STHREADS, 1) layerStream(const __grid_constant__ Params P) {
  extern __shared__ __align__(128) unsigned char smem[];
  Ring r;
  r.stage = smem;
  r.kv = smem + STAGES * STAGE_BYTES;
  r.full = reinterpret_cast<unsigned long long *>(r.kv + KV_BYTES);
  r.empty = r.full + STAGES;
  r.kvFull = r.empty + STAGES;
  r.chunk = reinterpret_cast<int *>(r.kvFull + 1);
  float(*part)[CW] = reinterpret_cast<float(*)[CW]>(r.chunk + 8);
  float *red = &part[MAX_ROWS][0]; // CW floats
  r.taken = reinterpret_cast<int *>(red + CW);
  float *smemA = reinterpret_cast<float *>(r.taken + MAX_ROWS); // attention: ATTN_FLOATS
  if (threadIdx.x == 0)
    for (int s = 0; s < STAGES; ++s) {
      mbarInit(&r.full[s], 1);
      mbarInit(&r.empty[s], CW);
    }
  if (threadIdx.x == 0)
    mbarInit(r.kvFull, 1);
  __syncthreads();
  int it = 0;
  if (threadIdx.x >= CW * 32) { // the producer warp: its lane 0 copies
    if (threadIdx.x != CW * 32)
      return;
    const unsigned long long pol = evictFirstPolicy();
    for (int q = 0; q < LAYERS * PROJS; ++q) {
      const Proj &p = P.proj[q];
      const unsigned *dc;
      unsigned dn;
      if (!P.ahead && dependency(P, (q / PROJS) * PHASES + phaseOf(q % PROJS), dc, dn))
        waitCount(dc, dn, P.sleepNs);
      if (P.full && P.kvRing && q % PROJS == 0 && (int)blockIdx.x < KV_HEADS * P.splits) {
        // This block's attention item: its K/V rows, ahead of QKV's rows.
        const Attn &a = P.attn[q / PROJS];
        const int kv = blockIdx.x / P.splits;
        int lo, hi;
        splitRange(P, blockIdx.x % P.splits, lo, hi);
        if (hi - lo <= KV_MAX) {
          mbarExpectTx(r.kvFull, 2u * (hi - lo) * HEAD_DIM * 2);
          for (int i = 0; i < hi - lo; ++i) {
            const size_t off = ((size_t)(lo + i) * KV_HEADS + kv) * HEAD_DIM;
            bulkCopy(r.kv + i * KV_STRIDE, a.k + off, HEAD_DIM * 2, r.kvFull);
            bulkCopy(r.kv + (KV_MAX + i) * KV_STRIDE, a.v + off, HEAD_DIM * 2, r.kvFull);
          }
        }
      }
      const int ops = outsPerStage(p.K, p.glu), total = (p.nout + ops - 1) / ops;
      // Fixed: chunks [c0, c1) of this block. Claimed: from the
      // projection's counter, one ahead, at most `cap` (the partials' room).
      int c0 = (int)((long long)total * blockIdx.x / gridDim.x);
      const int c1 = (int)((long long)total * (blockIdx.x + 1) / gridDim.x);
      const int cap = MAX_ROWS / (ops * (p.glu ? 2 : 1));
      int claimed = 0;
      auto claim = [&]() -> int {
        if (claimed++ >= cap)
          return total;
        if (P.dynamic)
          return (int)atomicAdd(&P.next[q * P.pad], 1u);
        return c0 < c1 ? c0++ : total;
      };
      int c = claim();
      for (;; ++it) {
        const int s = it % STAGES;
        mbarWait(&r.empty[s], ((it / STAGES) & 1) ^ 1);
        if (c >= total) {
          r.chunk[s] = -1;
          mbarArrive(&r.full[s]);
          ++it;
          break;
        }
        const int cn = claim();
        const int o = c * ops, n = min(ops, p.nout - o);
        const unsigned bytes = (unsigned)n * p.K * 2;
        r.chunk[s] = c;
        mbarExpectTx(&r.full[s], p.glu ? 2 * bytes : bytes);
        unsigned char *dst = r.stage + (size_t)s * STAGE_BYTES;
        if (P.evictFirst) {
          bulkCopyFirst(dst, p.w + (size_t)o * p.K, bytes, &r.full[s], pol);
          if (p.glu)
            bulkCopyFirst(dst + (size_t)ops * p.K * 2, p.wu + (size_t)o * p.K, bytes, &r.full[s],
                          pol);
        } else {
          bulkCopy(dst, p.w + (size_t)o * p.K, bytes, &r.full[s]);
          if (p.glu)
            bulkCopy(dst + (size_t)ops * p.K * 2, p.wu + (size_t)o * p.K, bytes, &r.full[s]);
        }
        c = cn;
      }
    }
    return;
  }
  for (int q = 0; q < LAYERS * PROJS; ++q) {
    switch (q % PROJS) {
    case 0: consume<HIDDEN, false, STAGES>(P, q, it, r, part, red); break;
    case 1: consume<HIDDEN, false, STAGES>(P, q, it, r, part, red); break;
    case 2: consume<HIDDEN, true, STAGES>(P, q, it, r, part, red); break;
    default: consume<FFN, false, STAGES>(P, q, it, r, part, red); break;
    }
    if (P.full && q % PROJS == 0)
      attend(P, q / PROJS, smemA, red, r);
  }
}

// ---- Host ----

__global__ void fillRandom(__half *p, size_t n, unsigned seed, float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
    p[i] = __float2half(scale * ((h & 0xffffff) / 8388608.0f - 1.0f));
  }
}


template <int K, bool GLU> void launchSeparate(cudaStream_t st, const Proj &p) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((p.nout + 7) / 8);
  cfg.blockDim = dim3(256);
  cfg.stream = st;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CHECK(cudaLaunchKernelEx(&cfg, gemvSeparate<K, GLU>, p));
}

int main() {
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

  // Weights, and activations per layer for each way.
  const size_t sizes[PROJS] = {(size_t)QKV * HIDDEN, (size_t)HIDDEN * HIDDEN,
                               (size_t)2 * FFN * HIDDEN, (size_t)HIDDEN * FFN};
  size_t perLayer = 0;
  for (size_t s : sizes)
    perLayer += s;
  __half *weights;
  CHECK(cudaMalloc(&weights, perLayer * LAYERS * sizeof(__half)));
  fillRandom<<<4 * sms, 256, 0, st>>>(weights, perLayer * LAYERS, 7u, 1.7f / 64.0f);
  const double layerBytes = perLayer * 2.0;
  std::printf("one H200: %d SMs; %d layers of %.1f MB of fp16 projections\n", sms, LAYERS,
              layerBytes / 1e6);

  // Activations per layer: QKV's outputs, attention's, h after attention,
  // SwiGLU's, h after the MLP (the next layer's input); KV caches.
  const size_t actPerLayer = QKV + 3 * HIDDEN + FFN;
  __half *act[3];
  for (auto &a : act) {
    CHECK(cudaMalloc(&a, (HIDDEN + actPerLayer * LAYERS) * sizeof(__half)));
    fillRandom<<<16, 256, 0, st>>>(a, HIDDEN, 11u, 1.0f); // the first input
  }
  constexpr int MAX_CONTEXT = 4096;
  const size_t cachePerLayer = (size_t)MAX_CONTEXT * KV_HEADS * HEAD_DIM;
  __half *kcache, *vcache;
  CHECK(cudaMalloc(&kcache, cachePerLayer * LAYERS * sizeof(__half)));
  CHECK(cudaMalloc(&vcache, cachePerLayer * LAYERS * sizeof(__half)));
  fillRandom<<<4 * sms, 256, 0, st>>>(kcache, cachePerLayer * LAYERS, 13u, 1.0f);
  fillRandom<<<4 * sms, 256, 0, st>>>(vcache, cachePerLayer * LAYERS, 17u, 1.0f);
  constexpr int COUNTERS = LAYERS * (PHASES + KV_HEADS + PROJS) * 32; // room for padding
  unsigned *done;
  CHECK(cudaMalloc(&done, COUNTERS * sizeof(unsigned)));
  float *scratch;
  CHECK(cudaMalloc(&scratch, (size_t)HEADS * sms * (HEAD_DIM + 2) * sizeof(float)));
  auto params = [&](__half *a, int ahead, unsigned *done, int full, int context) {
    Params P{};
    const __half *w = weights;
    const __half *x = a;
    __half *y = a + HIDDEN;
    for (int l = 0; l < LAYERS; ++l) {
      __half *qkv = y, *att = y + QKV, *hA = att + HIDDEN, *g = hA + HIDDEN, *hB = g + FFN;
      Proj *p = &P.proj[l * PROJS];
      p[0] = {HIDDEN, QKV, 0, w, nullptr, x, qkv, nullptr, 1};
      w += sizes[0];
      p[1] = {HIDDEN, HIDDEN, 0, w, nullptr, full ? att : qkv, hA, x, 0}; // else O reads Q
      w += sizes[1];
      p[2] = {HIDDEN, FFN, 1, w, w + (size_t)FFN * HIDDEN, hA, g, nullptr, 1};
      w += sizes[2];
      p[3] = {FFN, HIDDEN, 0, w, nullptr, g, hB, hA, 0};
      w += sizes[3];
      P.attn[l] = {qkv, kcache + cachePerLayer * l, vcache + cachePerLayer * l, att};
      x = hB;
      y += actPerLayer;
    }
    P.full = full;
    P.context = context;
    P.done = done;
    P.stamps = nullptr;
    P.arrivals = done + LAYERS * PHASES * 32;
    P.next = P.arrivals + LAYERS * KV_HEADS * 32;
    P.scratch = scratch;
    P.ahead = ahead;
    return P;
  };
  const int reps = 20;
  auto report = [&](const char *what, float ms) {
    const double us = ms * 1e3 / LAYERS;
    std::printf("| %-66s | %7.1f | %5.2f |\n", what, us, layerBytes / (us * 1e-6) / 1e12);
  };
  std::printf("\n| one layer at one token, fp16 (TB/s: projection bytes only) | us | TB/s |\n"
              "|---|---|---|\n");

  // Separate kernels in one graph, programmatic dependent launch.
  const Params S = params(act[0], 0, done, 0, 0);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int l = 0; l < LAYERS; ++l) {
    launchSeparate<HIDDEN, false>(st, S.proj[l * PROJS + 0]);
    launchSeparate<HIDDEN, false>(st, S.proj[l * PROJS + 1]);
    launchSeparate<HIDDEN, true>(st, S.proj[l * PROJS + 2]);
    launchSeparate<FFN, false>(st, S.proj[l * PROJS + 3]);
  }
  CHECK(cudaStreamEndCapture(st, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  report("projections only: separate kernels, one graph, programmatic launch",
         timeMs(st, reps, [&] { CHECK(cudaGraphLaunch(exec, st)); }));

  // The persistent stream kernel.
  unsigned long long *stamps;
  CHECK(cudaMalloc(&stamps, EVENTS * sms * sizeof(unsigned long long)));
  auto printTimeline = [&](const char *what) {
    // Layer STAMP_LAYER's timeline in the last launch: per event, the
    // earliest and latest block, us after the earliest QKV start.
    std::vector<unsigned long long> t(EVENTS * sms);
    CHECK(cudaMemcpy(t.data(), stamps, t.size() * 8, cudaMemcpyDeviceToHost));
    const char *names[EVENTS] = {"QKV input ready", "QKV written", "attention start",
                                 "attention partial written", "O input ready", "O written",
                                 "gate/up input ready", "gate/up written", "down input ready",
                                 "down written", "attention combined (last split)",
                                 "attention: warps' sums done, before the merge",
                                 "attention: query loaded", "attention: first K/V rows loaded",
                                 "combine: last split known", "combine: partials loaded"};
    unsigned long long t0 = ~0ull;
    for (int b = 0; b < sms; ++b)
      if (t[b])
        t0 = std::min(t0, t[b]);
    std::printf("\n| layer %d, %s: event | first block, us | last block, us | blocks |\n"
                "|---|---|---|---|\n", STAMP_LAYER, what);
    for (int e = 0; e < EVENTS; ++e) {
      unsigned long long lo = ~0ull, hi = 0;
      int n = 0;
      for (int b = 0; b < sms; ++b)
        if (unsigned long long v = t[e * sms + b]; v >= t0) {
          lo = std::min(lo, v), hi = std::max(hi, v), ++n;
        }
      if (n)
        std::printf("| %s | %.2f | %.2f | %d |\n", names[e], (lo - t0) * 1e-3, (hi - t0) * 1e-3, n);
    }
  };
  struct Run {
    int ahead = 1, full = 0, context = 0, splits = 0, fence = 0, evictFirst = 0, rowReduce = 1;
    bool timeline = false;
    int pad = 1, sleepNs = 0, dynamic = 0, kvRing = 0, oneRound = 0;
  };
  auto stream = [&](auto stagesTag, __half *a, Run run, const char *what) {
    const int ahead = run.ahead, full = run.full, context = run.context, splits = run.splits;
    const bool timeline = run.timeline;
    constexpr int STAGES = decltype(stagesTag)::value;
    const size_t smem = (size_t)STAGES * STAGE_BYTES + KV_BYTES + (2 * STAGES + 1) * 8 + 8 * 4 +
                        MAX_ROWS * CW * 4 + CW * 4 + MAX_ROWS * 4 + ATTN_FLOATS * 4;
    CHECK(cudaFuncSetAttribute(layerStream<STAGES>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)smem));
    int perSm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, layerStream<STAGES>, STHREADS,
                                                        smem));
    if (perSm < 1) {
      std::printf("| %-66s | does not fit |\n", what);
      return;
    }
    Params P = params(a, ahead, done, full, context);
    P.splits = splits ? splits : sms / KV_HEADS;
    P.fence = run.fence;
    P.evictFirst = run.evictFirst;
    P.rowReduce = run.rowReduce;
    P.pad = run.pad;
    P.sleepNs = run.sleepNs;
    P.dynamic = run.dynamic;
    P.kvRing = run.kvRing;
    P.oneRound = run.oneRound;
    if (timeline) {
      P.stamps = stamps;
      CHECK(cudaMemsetAsync(stamps, 0, EVENTS * sms * sizeof(unsigned long long), st));
    }
    void *args[] = {(void *)&P};
    report(what, timeMs(st, reps, [&] {
             CHECK(cudaMemsetAsync(done, 0, COUNTERS * sizeof(unsigned), st));
             CHECK(cudaLaunchCooperativeKernel((void *)layerStream<STAGES>, sms, STHREADS, args,
                                               smem, st));
           }));
    if (run.timeline) {
      printTimeline(what);
      std::printf("\n");
    }
  };
  using S6 = std::integral_constant<int, 6>;
  using S4 = std::integral_constant<int, 4>;
  // ahead, full, context, splits, fence, evict first, row butterfly, timeline
  auto R = [](int ahead, int full, int context, int splits, int fence, int evictFirst,
              int rowReduce, bool timeline = false) {
    Run r;
    r.ahead = ahead, r.full = full, r.context = context, r.splits = splits, r.fence = fence;
    r.evictFirst = evictFirst, r.rowReduce = rowReduce, r.timeline = timeline;
    return r;
  };
  auto att = [](Run r, int kvRing, int oneRound) {
    r.kvRing = kvRing, r.oneRound = oneRound;
    return r;
  };
  using S5 = std::integral_constant<int, 5>; // 6 stages and the K/V rows exceed 227 KiB
  stream(S5{}, act[1], R(0, 0, 0, 0, 0, 1, 1), "projections only: producer waits for inputs");
  stream(S5{}, act[1], R(1, 0, 0, 0, 0, 1, 1), "projections only: stream kernel");
  stream(S5{}, act[2], att(R(1, 1, 512, 0, 0, 1, 1), 0, 0), "whole layer, context 512: K/V loaded");
  stream(S5{}, act[2], att(R(1, 1, 512, 0, 0, 1, 1), 1, 1),
         "whole layer, context 512: K/V copied, combine in one round");
  stream(S4{}, act[2], att(R(1, 1, 512, 0, 0, 1, 1), 1, 0), "whole layer, context 512: K/V copied, 4 stages");
  stream(S5{}, act[2], att(R(1, 1, 1024, 0, 0, 1, 1), 1, 0), "whole layer, context 1024: K/V copied");
  stream(S5{}, act[2], att(R(1, 1, 4096, 0, 0, 1, 1), 1, 0),
         "whole layer, context 4096 (K/V loaded: past 64 an item)");
  stream(S5{}, act[2], att(R(1, 1, 512, 0, 0, 1, 1, true), 1, 0),
         "whole layer, context 512: K/V copied");
  // Ceilings: plain reads of the same bytes.
  unsigned *sink;
  CHECK(cudaMalloc(&sink, 4));
  report("plain read, a kernel per projection", timeMs(st, reps, [&] {
           const __half *w = weights;
           for (int l = 0; l < LAYERS; ++l)
             for (size_t s : sizes) {
               streamKernel<<<4 * sms, 512, 0, st>>>(reinterpret_cast<const uint4 *>(w), s / 8,
                                                      sink);
               w += s;
             }
         }));
  report("plain read, one kernel for all layers", timeMs(st, reps, [&] {
           streamKernel<<<4 * sms, 512, 0, st>>>(reinterpret_cast<const uint4 *>(weights),
                                                  perLayer * LAYERS / 8, sink);
         }));

  // The stream kernel's outputs against the separate kernels' (same math,
  // other summation order), projections only; act[1] holds the last
  // projections-only run's.
  CHECK(cudaStreamSynchronize(st));
  auto fetch = [&](const __half *d, size_t n) {
    std::vector<__half> h(n);
    CHECK(cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost));
    std::vector<float> f(n);
    for (size_t i = 0; i < n; ++i)
      f[i] = __half2float(h[i]);
    return f;
  };
  auto compare = [](const char *what, const std::vector<float> &ref, const float *got) {
    double maxDiff = 0, maxAbs = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      maxAbs = std::max(maxAbs, (double)std::fabs(ref[i]));
      maxDiff = std::max(maxDiff, (double)std::fabs(ref[i] - got[i]));
    }
    std::printf("%s: max |difference| %.3g, max |value| %.3g (%s)\n", what, maxDiff, maxAbs,
                maxDiff <= 1e-2 * std::max(1.0, maxAbs) ? "ok" : "DIFFER");
  };
  {
    std::vector<float> a = fetch(act[0] + HIDDEN, actPerLayer * LAYERS);
    std::vector<float> b = fetch(act[1] + HIDDEN, actPerLayer * LAYERS);
    for (int l = 0; l < LAYERS; ++l) { // attention's room is unused there
      std::fill_n(a.begin() + l * actPerLayer + QKV, HIDDEN, 0.f);
      std::fill_n(b.begin() + l * actPerLayer + QKV, HIDDEN, 0.f);
    }
    std::printf("\n");
    compare("projections only, stream vs separate kernels, every layer", a, b.data());
  }
  // The whole layer against a CPU reference of layer 0 (context 512, the
  // last run): QKV, attention, h after attention, SwiGLU, h after the MLP.
  {
    const int C = 512;
    const std::vector<float> h0 = fetch(act[2], HIDDEN);
    const std::vector<float> got = fetch(act[2] + HIDDEN, actPerLayer);
    const std::vector<float> W = fetch(weights, perLayer);
    const std::vector<float> Kc = fetch(kcache, (size_t)C * KV_HEADS * HEAD_DIM);
    const std::vector<float> Vc = fetch(vcache, (size_t)C * KV_HEADS * HEAD_DIM);
    auto rmsnorm = [](std::vector<float> x) {
      double ss = 0;
      for (float v : x)
        ss += (double)v * v;
      const float s = 1.0f / std::sqrt((float)(ss / x.size()) + 1e-5f);
      for (float &v : x)
        v *= s;
      return x;
    };
    auto gemv = [](const float *w, const std::vector<float> &x, int n) {
      std::vector<float> y(n);
      for (int o = 0; o < n; ++o) {
        double acc = 0;
        for (size_t k = 0; k < x.size(); ++k)
          acc += (double)w[(size_t)o * x.size() + k] * x[k];
        y[o] = (float)acc;
      }
      return y;
    };
    auto half = [](std::vector<float> v) { // outputs are stored as f16
      for (float &x : v)
        x = __half2float(__float2half(x));
      return v;
    };
    const float *w = W.data();
    const std::vector<float> qkv = half(gemv(w, rmsnorm(h0), QKV));
    w += sizes[0];
    std::vector<float> att(HIDDEN);
    for (int h = 0; h < HEADS; ++h) {
      const int kv = h / (HEADS / KV_HEADS);
      std::vector<double> sc(C);
      double m = -1e300, l = 0;
      for (int p = 0; p < C; ++p) {
        double d = 0;
        for (int i = 0; i < HEAD_DIM; ++i)
          d += (double)qkv[h * HEAD_DIM + i] * Kc[((size_t)p * KV_HEADS + kv) * HEAD_DIM + i];
        sc[p] = d / std::sqrt((double)HEAD_DIM);
        m = std::max(m, sc[p]);
      }
      for (int p = 0; p < C; ++p)
        l += sc[p] = std::exp(sc[p] - m);
      for (int i = 0; i < HEAD_DIM; ++i) {
        double acc = 0;
        for (int p = 0; p < C; ++p)
          acc += sc[p] * Vc[((size_t)p * KV_HEADS + kv) * HEAD_DIM + i];
        att[h * HEAD_DIM + i] = (float)(acc / l);
      }
    }
    att = half(att);
    std::vector<float> hA = gemv(w, att, HIDDEN);
    w += sizes[1];
    for (int i = 0; i < HIDDEN; ++i)
      hA[i] += h0[i];
    hA = half(hA);
    const std::vector<float> xn = rmsnorm(hA);
    const std::vector<float> gate = gemv(w, xn, FFN), up = gemv(w + (size_t)FFN * HIDDEN, xn, FFN);
    w += sizes[2];
    std::vector<float> g(FFN);
    for (int i = 0; i < FFN; ++i)
      g[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    g = half(g);
    std::vector<float> hB = gemv(w, g, HIDDEN);
    for (int i = 0; i < HIDDEN; ++i)
      hB[i] += hA[i];
    compare("whole layer 0, stream kernel vs CPU: QKV", qkv, got.data());
    compare("  attention", att, got.data() + QKV);
    compare("  h after attention", hA, got.data() + QKV + HIDDEN);
    compare("  SwiGLU", g, got.data() + QKV + 2 * HIDDEN);
    compare("  h after the MLP", hB, got.data() + QKV + 2 * HIDDEN + FFN);
  }
  CHECK(cudaGetLastError());
  return 0;
}
