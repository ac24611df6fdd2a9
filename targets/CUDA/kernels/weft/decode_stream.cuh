// A whole decode step of one token in one persistent kernel (sm_90): every
// layer's RMSNorm + QKV projection + RoPE + KV-cache write, attention over
// the paged cache, O projection + residual, RMSNorm + gate/up + SwiGLU and
// down projection + residual, for all layers, one block per SM.
//
// Why one kernel: at one token every projection reads its weights once, so
// a step is a stream of weight bytes; separate kernels stop that stream at
// every boundary (ramp, input staging, tail). Here one producer lane per
// block copies the block's rows of every projection of every layer, in
// order, into a ring of STAGES shared-memory stages by bulk copies
// (cp.async.bulk + mbarrier). Which rows come next never depends on the
// activations, so the copies run ahead across projection and layer
// boundaries while the CW consumer warps wait for a projection's input.
// test/gpu/lab/layer_stream_lab.cu measured the design; docs/codegen.md
// ("One stream kernel per batch-1 decode step") says how it maps here.
//
// Phases of a layer, each ending with a counter of finished blocks (grow
// within a step; the reset kernel zeroes them before it):
//   0 QKV   all blocks; RMSNorm of the layer input, rows paired (i, i + D/2)
//           per head; Q rotated into `q`, K rotated and V into the cache
//   1 attn  items (KV head, split) on blocks [0, KV_HEADS * SPLITS); the
//           last split of a KV head to arrive weighs the splits together
//   2 O     all blocks; + residual (the layer input) -> h
//   3 MLP   all blocks; RMSNorm of h, gate/up rows paired, SiLU(g) * u
//   4 down  all blocks; + residual (h) -> the next layer's input
// A phase waits for the one before it: KV_HEADS combines for attention's,
// every block for the others'.
//
// Rounding follows the model's 16-bit arithmetic (Hugging Face): the norm
// rounds x / rms, then its product with the weight; each projection's sums
// round before the residual add, RoPE and SiLU.
//
// Config C: t (f16 or bf16: activations, weights, cache), LAYERS, HIDDEN,
// FFN, HEADS, KV_HEADS, D (128), GROUP (HEADS / KV_HEADS, at most 4), CW
// (consumer warps: 8 or 16), QKV_ROWS ((HEADS + 2 KV_HEADS) D), EPS,
// SCALE_LOG2 (scale * log2 e), BLOCK_TOKENS, MAX_BLOCKS, MAX_SEQUENCES,
// SPLITS, STAGES, IN_FLIGHT (of the stages, at most this many requested and
// not landed), STAGE_BYTES,
// SCALE_SLOTS (4-bit codes; else 0), MAX_ROWS (a block's rows of one
// projection, at most), GRID (blocks), SHARED_BYTES (the dynamic shared
// memory the launch gives, at least sharedBytes<C>()); static double
// invFreq(int i) (the rope's inverse frequencies); BITS (0: 16-bit weights
// of type t; 4: 4-bit codes; 8: 8-bit codes, both below), FORMAT (the
// codes' Codes::Int or, 8-bit only, Codes::E4M3) and w_t (t; unsigned for
// 4-bit codes, unsigned char for 8-bit ones).
// HIDDEN, FFN and HEADS D are multiples of 8 CW (of 128 CW with 4-bit codes).
//
// 4-bit codes (BITS 4): each projection's codes in 16-row tiles of 128
// inputs and its (scale, zero) pairs per row and group of 128, as
// weft/mma_weights.cuh's PackedRows<4, 128, ..., TILED> reads them. A unit
// is one tile (O, down) or two (QKV: rows i and i + D/2 of a head; gate/up:
// a tile of gate rows and the same up rows); a ring stage holds a unit's
// tiles over KS inputs, the last of a row's KP parts maybe fewer (one bulk
// copy a tile), and a second ring of SCALE_SLOTS slots holds the unit's
// pairs (one copy a tile). The consumer warps stage the (normed) input in
// shared memory as f16 and take the products on tensor cores: warp w
// expands its 128-input steps of rows g and g + 8 (lane g, q) as pairs for
// mma.m16n8k16, one chain per step: exact (code - zero) scaled once by the
// step's scale in f16, each weight rounded with its scale in bf16
// (test/gpu/lab/layer_stream_int4_lab.cu measured the design).
//
// 8-bit codes (BITS 8) with one scale per row: integers with a (scale,
// zero) pair per row (--weight-dtype int8, per-channel GPTQ/AWQ 8-bit) or
// FP8 E4M3 codes with an f32 scale per row (--weight-dtype fp8), in rows as
// the checkpoint stores them. They take the 16-bit path's chunks of whole
// rows (twice the rows a stage) and its CUDA-core consumer: each code
// becomes its exact value, (code - zero) through 2^23 + code (dotCodes8)
// or the E4M3 value, multiplied into the f32 input; the row's scale
// multiplies its sum once (in bf16 with integer codes each weight is
// rounded with its scale first, as the checkpoint's dequantization), and
// a warp sums all of a chunk's rows in one transposed reduction
// (warpSumEach). Each phase first makes its block's rows' RowCodes in
// shared memory (r.rowAux).
// Block: THREADS; grid: GRID, every block resident (cooperative launch).
#pragma once

#include "weft/bulk_copy.cuh"
#include "weft/mma_weights.cuh"
#include "weft/rope_kv_write.cuh"

namespace weft::kernels::stream {

// A block is C::CW consumer warps and one producer warp.
template <class C> __host__ __device__ constexpr int threadsOf() { return (C::CW + 1) * 32; }
constexpr int PHASES = 5;

// One layer's weights and cache, as the generated entry lists them (the
// pairs of 4-bit codes, the pairs or scales per row of 8-bit codes: null
// for 16-bit weights).
template <class C> struct Layer {
  const typename C::t *norm1;
  const typename C::w_t *qkv, *o;
  const typename C::t *norm2;
  const typename C::w_t *gateUp, *down;
  typename C::t *k, *v;
  const unsigned *qkvPairs, *oPairs, *gateUpPairs, *downPairs;
};

// The step's inputs, output and working memory.
template <class C> struct Step {
  const typename C::t *x; // layer 0's input [HIDDEN]
  const int *positions, *slots, *tables;
  typename C::t *out;     // the last layer's output [HIDDEN]
  typename C::t *act;     // per layer: q, attention out [HEADS D], h [HIDDEN], SwiGLU [FFN], x [HIDDEN]
  float *partials;        // attention splits: m, l [HEADS][SPLITS], acc [HEADS][SPLITS][D]
  unsigned *counters;     // done [LAYERS][PHASES], arrivals [LAYERS][KV_HEADS]; zero at launch
};

template <class C> __host__ __device__ constexpr size_t actPerLayer() {
  return 2 * (size_t)C::HEADS * C::D + 2 * (size_t)C::HIDDEN + C::FFN;
}
// The most pages one attention item's positions span.
template <class C> __host__ __device__ constexpr int itemPages() {
  return (C::MAX_BLOCKS + C::SPLITS - 1) / C::SPLITS + 2;
}
__host__ __device__ constexpr int maxOf(int a, int b) { return a > b ? a : b; }
// 4-bit codes: a slot of the pairs' ring holds a unit's pairs (T tiles of
// 16 rows, K / 128 pairs a row), at most; the staged input is the widest K.
template <class C> __host__ __device__ constexpr int scaleSlotBytes() {
  return maxOf(maxOf(C::HIDDEN /* QKV, gate/up: 2 tiles */, C::HEADS * C::D / 2), C::FFN / 2);
}
template <class C> __host__ __device__ constexpr int stagedInputBytes() {
  return C::BITS == 4 ? 2 * maxOf(maxOf(C::HIDDEN, C::HEADS * C::D), C::FFN) : 0;
}
// The attention merge ([CW][GROUP][D] sums, [CW][GROUP] maxima and sums);
// with 4-bit codes the staged input shares its room (never live together).
template <class C> __host__ __device__ constexpr size_t mergeBytes() {
  constexpr size_t merge = ((size_t)C::CW * C::GROUP * C::D + 2 * C::CW * C::GROUP) * 4;
  return merge > (size_t)stagedInputBytes<C>() ? merge : (size_t)stagedInputBytes<C>();
}
// Dynamic shared memory: the ring (and with 4-bit codes the pairs' ring),
// the barriers, the row sums, the norm's partial sums, the attention merge
// (or staged input), the item's pages and, with 8-bit codes, the rows'
// pairs or scales.
template <class C> __host__ __device__ constexpr size_t sharedBytes() {
  return (size_t)C::STAGES * C::STAGE_BYTES +
         (C::BITS == 4 ? (size_t)C::SCALE_SLOTS * (scaleSlotBytes<C>() + 16) : 0) +
         2 * C::STAGES * 8 + (size_t)C::MAX_ROWS * C::CW * 4 + C::CW * 4 + mergeBytes<C>() +
         itemPages<C>() * 4 + (C::BITS == 8 ? (size_t)C::MAX_ROWS * 8 : 0);
}
template <class C> __host__ __device__ constexpr int counterCount() {
  return C::LAYERS * PHASES + C::LAYERS * C::KV_HEADS;
}

// ---- Projections: which rows a chunk (one ring stage) holds ----

// Kinds: QKV and gate/up take columns of two rows (a head's pair (i,
// i + D/2); gate and up); O and down one row per column.
enum Kind { QKV = 0, O = 1, GATE_UP = 2, DOWN = 3 };

// A warp's slice of a K-long row is K / CW elements; lane l takes the
// 16-byte vectors at 8 l + 256 j of it, the last j only where the slice
// reaches (when K is not a multiple of 2048).
__host__ __device__ constexpr int vectorsPerLane(int K, int CW) { return (K / CW + 255) / 256; }
template <int K, int CW> __device__ __forceinline__ bool inSlice(int lane, int j) {
  return (K / CW) % 256 == 0 || lane * 8 + 256 * j < K / CW;
}

// The largest divisor of n that is at most m (at least 1).
__host__ __device__ constexpr int divisorAtMost(int n, int m) {
  int d = m < 1 ? 1 : m;
  while (d > 1 && n % d != 0)
    --d;
  return d;
}

template <class C, int KIND> struct Proj {
  static constexpr int K = KIND == DOWN ? C::FFN : KIND == O ? C::HEADS * C::D : C::HIDDEN;
  static constexpr bool PAIRED = KIND == QKV || KIND == GATE_UP;
  static constexpr int ROW_BYTES = K * (int)sizeof(typename C::w_t); // 16-bit or 8-bit
  static constexpr int FIT = C::STAGE_BYTES / ROW_BYTES; // rows a stage holds
  // Columns per chunk (a QKV chunk stays within one half head).
  static constexpr int COLS = KIND == QKV ? divisorAtMost(C::D / 2, FIT / 2) : PAIRED ? FIT / 2 : FIT;
  static constexpr int ROWS = PAIRED ? 2 * COLS : COLS; // rows per chunk
  static constexpr int N = KIND == QKV ? C::QKV_ROWS / 2 : KIND == GATE_UP ? C::FFN : C::HIDDEN;
  static constexpr int CHUNKS = (N + COLS - 1) / COLS;
  static constexpr int VPL = vectorsPerLane(K, C::CW); // 16-byte vectors per lane of a row
  static_assert(K % (C::CW * 8) == 0, "K must be a multiple of 8 CW");
  static_assert(COLS >= 1 && ROWS <= FIT, "a stage must hold a chunk");
  static_assert((CHUNKS + C::GRID - 1) / C::GRID * ROWS <= C::MAX_ROWS,
                "MAX_ROWS must hold a block's rows of every projection");
  // The weight row of a chunk's column `col` (its second row if `second`):
  // QKV pairs (i, i + D/2) of a head, gate/up a gate row and its up row.
  static __device__ __forceinline__ int row(int col, bool second) {
    if constexpr (KIND == QKV)
      return (col / (C::D / 2)) * C::D + col % (C::D / 2) + (second ? C::D / 2 : 0);
    else if constexpr (KIND == GATE_UP)
      return col + (second ? C::FFN : 0);
    else
      return col;
  }
};

// This block's chunks [c0, c1) of a projection: fixed, in order.
template <class C, class P> __device__ __forceinline__ void blockChunks(int &c0, int &c1) {
  c0 = (int)((long long)P::CHUNKS * blockIdx.x / C::GRID);
  c1 = (int)((long long)P::CHUNKS * (blockIdx.x + 1) / C::GRID);
}

// ---- 4-bit projections: units of tiles ----

// Inputs of a K-long row a stage takes: the most, in whole 128 CW (each of
// the CW warps then takes whole 128-input steps), whose T tiles fit. The
// last of a row's parts may be shorter (FFN 14336 in 4096s: 4096, 4096,
// 4096, 2048), so a stage is not left half full where K / (128 CW) has no
// divisor that fills it.
__host__ __device__ constexpr int quantStageInputs(int K, int T, int stageBytes, int CW) {
  int ks = stageBytes / (T * 8) / (128 * CW) * (128 * CW);
  return ks < K ? ks : K;
}

template <class C, int KIND> struct QProj {
  static constexpr int K = KIND == DOWN ? C::FFN : KIND == O ? C::HEADS * C::D : C::HIDDEN;
  static constexpr bool PAIRED = KIND == QKV || KIND == GATE_UP;
  static constexpr int T = PAIRED ? 2 : 1; // tiles a unit
  static constexpr int ROWS = 16 * T;      // rows a unit (16 columns)
  static constexpr int KS = quantStageInputs(K, T, C::STAGE_BYTES, C::CW), KP = (K + KS - 1) / KS;
  static constexpr int TILE_BYTES = 16 * KS / 2; // a tile's codes in a full stage
  static constexpr int SPW = KS / (128 * C::CW); // 128-input steps per warp of a full stage
  // Inputs of part kp (the last may be fewer), its 128-input steps per
  // warp and a tile's bytes of codes in it.
  static __device__ __forceinline__ int partInputs(int kp) {
    return kp + 1 < KP ? KS : K - (KP - 1) * KS;
  }
  static __device__ __forceinline__ int stepsPerWarp(int kp) {
    return partInputs(kp) / (128 * C::CW);
  }
  static __device__ __forceinline__ unsigned tileBytes(int kp) {
    return 16u * partInputs(kp) / 2;
  }
  static constexpr int GROUPS = K / 128;         // pairs a row
  static constexpr int UNITS = KIND == QKV ? C::QKV_ROWS / 32 : KIND == GATE_UP ? C::FFN / 16
                                                                                : C::HIDDEN / 16;
  static_assert(K % (128 * C::CW) == 0 && SPW >= 1, "whole 128-input steps per warp");
  static_assert(T * TILE_BYTES <= C::STAGE_BYTES, "a stage holds a unit's part");
  static_assert(T * 16 * GROUPS * 4 <= scaleSlotBytes<C>(), "a slot holds a unit's pairs");
  static_assert((UNITS + C::GRID - 1) / C::GRID * ROWS <= C::MAX_ROWS,
                "MAX_ROWS must hold a block's rows of every projection");
  // Tile `tt` of unit u (its first row / 16): QKV pairs rows i and i + D/2
  // of a head (D / 32 units a head), gate/up a gate tile and its up tile.
  static __device__ __forceinline__ int tile(int u, int tt) {
    if constexpr (KIND == QKV)
      return (u / (C::D / 32)) * (C::D / 16) + u % (C::D / 32) + tt * (C::D / 32);
    else if constexpr (KIND == GATE_UP)
      return u + tt * (C::FFN / 16);
    else
      return u;
  }
};

// This block's units [u0, u1) of a projection: fixed, in order.
template <class C, class P> __device__ __forceinline__ void blockUnits(int &u0, int &u1) {
  u0 = (int)((long long)P::UNITS * blockIdx.x / C::GRID);
  u1 = (int)((long long)P::UNITS * (blockIdx.x + 1) / C::GRID);
}

// ---- Synchronization ----

__device__ __forceinline__ void waitCount(const unsigned *c, unsigned n) {
  while (loadAcquire(c) < n)
    __nanosleep(32);
}
// N elements another block of this kernel wrote: from L2, past this SM's
// L1 (which may hold an older line).
template <typename T, int N> __device__ __forceinline__ wf_pack<T, N> loadShared(const T *p) {
  wf_pack<T, N> r;
  static_assert(sizeof(r) == 16 || sizeof(r) == 8, "8 or 16 bytes");
  if constexpr (sizeof(r) == 16)
    *reinterpret_cast<uint4 *>(&r) = __ldcg(reinterpret_cast<const uint4 *>(p));
  else
    *reinterpret_cast<uint2 *>(&r) = __ldcg(reinterpret_cast<const uint2 *>(p));
  return r;
}
// The consumer warps only (the producer never joins).
template <class C> __device__ __forceinline__ void consumerBarrier() {
  asm volatile("bar.sync 1, %0;" ::"n"(C::CW * 32) : "memory");
}

// 8-bit codes: what a row's products need, made once a phase from its
// (scale, zero) pair (integer codes) or f32 scale (E4M3): `bias`, 2^23 +
// zero (integer codes), and `scale`.
struct RowCodes {
  float bias, scale;
};

template <class C> struct Ring {
  unsigned char *stage;              // STAGES * STAGE_BYTES
  unsigned long long *full, *empty;  // per stage
  unsigned char *pairs;              // 4-bit codes: SCALE_SLOTS * scaleSlotBytes
  unsigned long long *pFull, *pEmpty; // per slot
  int units;                         // pair slots taken so far (4-bit codes)
  typename C::t *xs;                 // 4-bit codes: the staged input (in attn's room)
  float (*part)[C::CW];              // [MAX_ROWS][CW] the warps' row sums
  float *red;                        // [CW]
  float *attn;                       // attention: [CW][GROUP][D + 2]
  int *pages;                        // attention: the item's pages, [itemPages]
  RowCodes *rowAux;                  // 8-bit codes: [MAX_ROWS] the rows' biases and scales
  int it;                            // stages taken so far (same count in every thread)
};

__device__ __forceinline__ unsigned *doneCounter(unsigned *counters, int layer, int phase) {
  return counters + layer * PHASES + phase;
}
template <class C>
__device__ __forceinline__ unsigned *doneCounter(const Step<C> &s, int layer, int phase) {
  return doneCounter(s.counters, layer, phase);
}

// The producer keeps at most C::IN_FLIGHT stages requested and not landed:
// landed stages wait in the ring for their consumers, but every copy still
// in flight queues ahead of the blocks' other loads and stores (the
// hand-offs' releases, counters and inputs), so a full ring of requests
// slows every hand-off.
template <class C> __device__ __forceinline__ void capInFlight(Ring<C> &r) {
  if (C::IN_FLIGHT < C::STAGES && r.it >= C::IN_FLIGHT) {
    const int old = r.it - C::IN_FLIGHT;
    mbarWait(&r.full[old % C::STAGES], (old / C::STAGES) & 1);
  }
}

// ---- The producer: every chunk of every projection of every layer ----

template <class C, int KIND>
__device__ __forceinline__ void produce(const typename C::w_t *w, Ring<C> &r) {
  using P = Proj<C, KIND>;
  int c0, c1;
  blockChunks<C, P>(c0, c1);
  for (int c = c0; c < c1; ++c, ++r.it) {
    const int s = r.it % C::STAGES;
    capInFlight(r);
    mbarWait(&r.empty[s], ((r.it / C::STAGES) & 1) ^ 1);
    unsigned char *dst = r.stage + (size_t)s * C::STAGE_BYTES;
    const int col = c * P::COLS, n = min(P::COLS, P::N - col);
    const unsigned rowBytes = (unsigned)P::ROW_BYTES;
    if constexpr (KIND == QKV) {
      // Pairs (i, i + D/2) of head hh: two runs of n rows.
      const int hh = col / (C::D / 2), i = col % (C::D / 2);
      const size_t lo = (size_t)hh * C::D + i;
      mbarExpectTx(&r.full[s], 2 * n * rowBytes);
      bulkCopy(dst, w + lo * P::K, n * rowBytes, &r.full[s]);
      bulkCopy(dst + (size_t)P::COLS * rowBytes, w + (lo + C::D / 2) * P::K, n * rowBytes,
               &r.full[s]);
    } else if constexpr (KIND == GATE_UP) {
      // Gate rows [col, col + n), then the same up rows (FFN further).
      mbarExpectTx(&r.full[s], 2 * n * rowBytes);
      bulkCopy(dst, w + (size_t)col * P::K, n * rowBytes, &r.full[s]);
      bulkCopy(dst + (size_t)P::COLS * rowBytes, w + ((size_t)C::FFN + col) * P::K,
               n * rowBytes, &r.full[s]);
    } else {
      mbarExpectTx(&r.full[s], n * rowBytes);
      bulkCopy(dst, w + (size_t)col * P::K, n * rowBytes, &r.full[s]);
    }
  }
}

// 4-bit codes: per unit, its pairs into a slot of the pairs' ring, then
// its KP parts into stages (a bulk copy per tile each).
template <class C, int KIND>
__device__ __forceinline__ void produceCodes(const unsigned *codes, const unsigned *pairs,
                                             Ring<C> &r) {
  using P = QProj<C, KIND>;
  int u0, u1;
  blockUnits<C, P>(u0, u1);
  constexpr unsigned TILE_PAIR_BYTES = 16 * P::GROUPS * 4;
  for (int u = u0; u < u1; ++u, ++r.units) {
    const int ps = r.units % C::SCALE_SLOTS;
    mbarWait(&r.pEmpty[ps], ((r.units / C::SCALE_SLOTS) & 1) ^ 1);
    mbarExpectTx(&r.pFull[ps], P::T * TILE_PAIR_BYTES);
#pragma unroll
    for (int tt = 0; tt < P::T; ++tt)
      bulkCopy(r.pairs + (size_t)ps * scaleSlotBytes<C>() + tt * TILE_PAIR_BYTES,
               pairs + (size_t)P::tile(u, tt) * 16 * P::GROUPS, TILE_PAIR_BYTES, &r.pFull[ps]);
    for (int kp = 0; kp < P::KP; ++kp, ++r.it) {
      const int s = r.it % C::STAGES;
      capInFlight(r);
      mbarWait(&r.empty[s], ((r.it / C::STAGES) & 1) ^ 1);
      const unsigned bytes = P::tileBytes(kp);
      mbarExpectTx(&r.full[s], P::T * bytes);
#pragma unroll
      for (int tt = 0; tt < P::T; ++tt)
        bulkCopy(r.stage + (size_t)s * C::STAGE_BYTES + tt * P::TILE_BYTES,
                 codes + (size_t)P::tile(u, tt) * 16 * (P::K / 8) + (size_t)kp * 16 * (P::KS / 8),
                 bytes, &r.full[s]);
    }
  }
}

// ---- The consumers ----

// Waits (all consumer warps) for what a layer's phase reads: the previous
// layer's output (phase 0), the attention's KV_HEADS combines (phase 2) or
// every block's previous phase.
template <class C>
__device__ __forceinline__ void waitPhaseInput(const Step<C> &s, int layer, int phase) {
  if (phase > 0 || layer > 0) {
    const unsigned *dep =
        phase == 0 ? doneCounter(s, layer - 1, 4) : doneCounter(s, layer, phase - 1);
    if (threadIdx.x == 0)
      waitCount(dep, phase == 2 ? (unsigned)C::KV_HEADS : (unsigned)C::GRID);
    consumerBarrier<C>();
  }
}

// The norm weights of this lane's slice of a K-long input (as loadInput
// takes them), loaded before the wait for the input: weights never change.
template <class C, int K>
__device__ __forceinline__ void
loadNormWeights(const typename C::t *norm, wf_pack<typename C::t, 8> (&g)[vectorsPerLane(K, C::CW)]) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int base = w * (K / C::CW) + lane * 8;
#pragma unroll
  for (int j = 0; j < vectorsPerLane(K, C::CW); ++j)
    if (norm != nullptr && inSlice<K, C::CW>(lane, j))
      g[j] = wf_load<typename C::t, 8>(norm + base + 256 * j);
}

// This warp's slice of a K-long input, as f32: lane l holds elements
// w K / CW + 8 l + 256 j (j < VPL; zeros past the slice), RMSNormed with
// the norm weights `g` (loadNormWeights) if `normed`.
template <class C, int K>
__device__ __forceinline__ void
loadInput(const typename C::t *x, bool normed,
          const wf_pack<typename C::t, 8> (&g)[vectorsPerLane(K, C::CW)],
          float (&xf)[vectorsPerLane(K, C::CW) * 8], float *red) {
  using t = typename C::t;
  constexpr int VPL = vectorsPerLane(K, C::CW);
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int base = w * (K / C::CW) + lane * 8;
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    if (!inSlice<K, C::CW>(lane, j)) {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        xf[8 * j + e] = 0.f;
      continue;
    }
    const wf_pack<t, 8> v = loadShared<t, 8>(x + base + 256 * j);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      xf[8 * j + e] = wf_f32(v.v[e]);
  }
  if (!normed)
    return;
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < VPL * 8; ++i)
    ss = fmaf(xf[i], xf[i], ss);
  ss = wf_warp_sum(ss);
  if (lane == 0)
    red[w] = ss;
  consumerBarrier<C>();
  ss = 0.f;
#pragma unroll
  for (int v = 0; v < C::CW; ++v)
    ss += red[v];
  consumerBarrier<C>(); // red is reused by the next norm
  const float inv = rsqrtf(ss / K + C::EPS);
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    if (!inSlice<K, C::CW>(lane, j))
      continue;
#pragma unroll
    for (int e = 0; e < 8; ++e)
      xf[8 * j + e] = wf_round<t>(wf_f32(g[j].v[e]) * wf_round<t>(xf[8 * j + e] * inv));
  }
}

// 8 16-bit weights times 8 f32 inputs, into acc.
template <class t> __device__ __forceinline__ void dot8(uint4 w, const float *x, float &acc) {
  wf_pack<t, 8> v;
  *reinterpret_cast<uint4 *>(&v) = w;
#pragma unroll
  for (int e = 0; e < 8; ++e)
    acc = fmaf(wf_f32(v.v[e]), x[e], acc);
}

// A row's RowCodes from its (scale, zero) pair or f32 scale.
template <class C> __device__ __forceinline__ RowCodes rowCodes(unsigned bits) {
  if constexpr (C::FORMAT == Codes::E4M3) {
    return {0.f, __uint_as_float(bits)};
  } else {
    const float2 sz = wf_pair_f32(wf_bits_as<typename Pair<typename C::t>::type>(bits));
    return {8388608.0f + sz.y, sz.x};
  }
}
// A lane's 8 codes of a row (8 bytes, inputs k..k+7) times its 8 f32
// inputs, into acc. Integer codes: byte j as the f32 2^23 + code (one
// PRMT), minus the row's bias: exact (code - zero); in bf16 then scaled and
// rounded to bf16 per weight, as the checkpoint's dequantization (and
// PackedRows::expandWord<true>). E4M3: pairs of codes exactly as f16
// (cvt.rn.f16x2.e4m3x2). rowSumScale is what the row's sum is then
// multiplied by.
template <class C>
__device__ __forceinline__ void dotCodes8(uint2 w, RowCodes row, const float *x, float &acc) {
  using t = typename C::t;
  const unsigned words[2] = {w.x, w.y};
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const float *xk = x + 4 * k;
    if constexpr (C::FORMAT == Codes::E4M3) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float2 v = __half22float2(wf_bits_as<__half2>(
            wf_e4m3x2_to_f16x2((unsigned short)(words[k] >> (16 * j)))));
        acc = fmaf(v.x, xk[2 * j], acc);
        acc = fmaf(v.y, xk[2 * j + 1], acc);
      }
    } else {
      // Byte b of a word holds input 2 (b % 2) + b / 2 (the codes' order:
      // input k at bit (k % 2) 16 + (k / 2) 8, so that PackedRows' pair j
      // is inputs 2j and 2j + 1).
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        float d = __uint_as_float(__byte_perm(words[k], 0x4B000000u, 0x7650u + b)) - row.bias;
        if constexpr (!wf_same<t, __half>::value)
          d = wf_round<t>(d * row.scale);
        acc = fmaf(d, xk[2 * (b % 2) + b / 2], acc);
      }
    }
  }
}
template <class C> __device__ __forceinline__ float rowSumScale(RowCodes row) {
  if constexpr (C::FORMAT == Codes::Int && !wf_same<typename C::t, __half>::value)
    return 1.0f; // bf16 integer codes: each weight was scaled
  else
    return row.scale;
}

// The smallest power of two at least n.
__host__ __device__ constexpr int pow2AtLeast(int n) {
  int p = 1;
  while (p < n)
    p *= 2;
  return p;
}
// Each of a lane's N values (N a power of two, at most 32) summed over the
// warp, in log2(N) halvings and 5 - log2(N) plain steps: log2(N) + N - 1
// shuffles in all where a sum per value takes 5 N. Value i's sum ends in
// lanes [i 32 / N, (i + 1) 32 / N); each lane gets its own.
template <int N> __device__ __forceinline__ float warpSumEach(float (&v)[N], int lane) {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "a power of two up to 32");
  int offset = 16;
#pragma unroll
  for (int m = N; m > 1; m /= 2, offset /= 2) {
    const bool upper = lane & offset;
#pragma unroll
    for (int i = 0; i < m / 2; ++i) {
      const float keep = upper ? v[i + m / 2] : v[i], give = upper ? v[i] : v[i + m / 2];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, give, offset);
    }
  }
#pragma unroll
  for (; offset >= 1; offset /= 2)
    v[0] += __shfl_xor_sync(0xffffffffu, v[0], offset);
  return v[0];
}

// The consumer warps' share of one projection: wait for its input, then
// per stage each warp's sums of its slice of every row into r.part, then
// `column(local, sums..., residual)` for each of the block's columns
// (residual: the column's element of `residual`, 0 without one). With
// 8-bit codes `rowAux` holds the projection's pairs or scales per row.
template <class C, int KIND, class Column>
__device__ __forceinline__ void consume(const Step<C> &s, int layer, const typename C::t *x,
                                        const typename C::t *norm, const typename C::t *residual,
                                        const unsigned *rowAux, Ring<C> &r, Column column) {
  using P = Proj<C, KIND>;
  constexpr bool CODES8 = C::BITS == 8;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int phase = KIND == QKV ? 0 : KIND == O ? 2 : KIND == GATE_UP ? 3 : 4;
  wf_pack<typename C::t, 8> gamma[P::VPL];
  loadNormWeights<C, P::K>(norm, gamma);
  int c0, c1;
  blockChunks<C, P>(c0, c1);
  if constexpr (CODES8) {
    // The block's rows' biases and scales, in r.part's order, before the
    // wait (they never change). The wait's barrier, or the norm's for
    // layer 0's QKV, publishes them to the loop; the last phase's column
    // sums, which read them, ended with a barrier.
    for (int q = threadIdx.x; q < (c1 - c0) * P::ROWS; q += C::CW * 32) {
      const int i = q % P::ROWS, col = (c0 + q / P::ROWS) * P::COLS + i % P::COLS;
      if (col < P::N)
        r.rowAux[q] = rowCodes<C>(__ldg(rowAux + P::row(col, i >= P::COLS)));
    }
  }
  waitPhaseInput(s, layer, phase);
  const int cols = min((c1 - c0) * P::COLS, P::N - c0 * P::COLS);
  // The residual of this thread's first column, requested now: its latency
  // then passes under the stages instead of at the phase's end.
  float res0 = 0.f;
  if (residual != nullptr && (int)threadIdx.x < cols)
    res0 = wf_f32(__ldcg(residual + c0 * P::COLS + threadIdx.x));
  float xf[P::VPL * 8];
  loadInput<C, P::K>(x, norm != nullptr, gamma, xf, r.red);
  const int base = w * (P::K / C::CW) + lane * 8;
  for (int c = c0; c < c1; ++c, ++r.it) {
    const int st = r.it % C::STAGES;
    mbarWait(&r.full[st], (r.it / C::STAGES) & 1);
    const typename C::w_t *rows =
        reinterpret_cast<const typename C::w_t *>(r.stage + (size_t)st * C::STAGE_BYTES);
    const int n = min(P::COLS, P::N - c * P::COLS);
    if constexpr (CODES8) {
      // Every row's sums first, then one transposed reduction over the
      // warp for all of them (a sum per row cost 5 shuffles and adds each).
      constexpr int RP = pow2AtLeast(P::ROWS);
      static_assert(RP <= 32, "at most 32 rows a chunk");
      float acc[RP];
#pragma unroll
      for (int i = 0; i < RP; ++i) {
        acc[i] = 0.f;
        if (i >= P::ROWS || i % P::COLS >= n)
          continue;
        const typename C::w_t *row = rows + (size_t)i * P::K + base;
        const RowCodes rc = r.rowAux[(c - c0) * P::ROWS + i];
#pragma unroll
        for (int j = 0; j < P::VPL; ++j)
          if (inSlice<P::K, C::CW>(lane, j))
            dotCodes8<C>(*reinterpret_cast<const uint2 *>(row + 256 * j), rc, xf + 8 * j, acc[i]);
      }
      const float sum = warpSumEach<RP>(acc, lane);
      const int i = lane / (32 / RP);
      if (lane % (32 / RP) == 0 && i < P::ROWS)
        r.part[(c - c0) * P::ROWS + i][w] = sum;
    } else {
#pragma unroll
      for (int i = 0; i < P::ROWS; ++i) {
        if (i % P::COLS >= n)
          continue;
        const typename C::w_t *row = rows + (size_t)i * P::K + base;
        float a = 0.f;
#pragma unroll
        for (int j = 0; j < P::VPL; ++j)
          if (inSlice<P::K, C::CW>(lane, j))
            dot8<typename C::t>(*reinterpret_cast<const uint4 *>(row + 256 * j), xf + 8 * j, a);
        a = wf_warp_sum(a);
        if (lane == 0)
          r.part[(c - c0) * P::ROWS + i][w] = a;
      }
    }
    __syncwarp();
    if (lane == 0)
      mbarArrive(&r.empty[st]);
  }
  consumerBarrier<C>();
  // The block's columns: local column q of chunk k is rows (k ROWS + q)
  // and, paired, (k ROWS + COLS + q).
  for (int q = threadIdx.x; q < cols; q += C::CW * 32) {
    const int k = q / P::COLS, j = q % P::COLS;
    float a = 0.f, b = 0.f;
#pragma unroll
    for (int v = 0; v < C::CW; ++v) {
      a += r.part[k * P::ROWS + j][v];
      if constexpr (P::PAIRED)
        b += r.part[k * P::ROWS + P::COLS + j][v];
    }
    if constexpr (CODES8) {
      a *= rowSumScale<C>(r.rowAux[k * P::ROWS + j]);
      if constexpr (P::PAIRED)
        b *= rowSumScale<C>(r.rowAux[k * P::ROWS + P::COLS + j]);
    }
    const float res = residual == nullptr  ? 0.f
                      : q == (int)threadIdx.x ? res0
                                              : wf_f32(__ldcg(residual + c0 * P::COLS + q));
    column(c0 * P::COLS + q, a, b, res);
  }
  consumerBarrier<C>();
  if (threadIdx.x == 0)
    addRelease(doneCounter(s, layer, phase));
}

// 16 bytes of shared memory (a shared-window address), in program order
// with the barrier waits.
__device__ __forceinline__ uint4 loadSharedV4(unsigned addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr));
  return v;
}
__device__ __forceinline__ unsigned loadSharedU32(unsigned addr) {
  unsigned v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}

// The same with 4-bit codes (BITS 4): the input staged in r.xs as f16,
// then per unit its pairs' slot and KP stages; each warp's sums of its
// steps of the unit's rows into r.part, then `column` as above (a unit's
// 16 columns: rows j and, paired, 16 + j).
template <class C, int KIND, class Column>
__device__ __forceinline__ void consumeCodes(const Step<C> &s, int layer, const typename C::t *x,
                                             const typename C::t *norm,
                                             const typename C::t *residual, Ring<C> &r,
                                             Column column) {
  using P = QProj<C, KIND>;
  using t = typename C::t;
  using W = PackedRows<4, 128, 32, t, Codes::Int, true>;
  // f16: each step's sums of exact (code - zero) products times its scale
  // once; bf16: each weight rounded with its scale first, as the
  // checkpoint's dequantization (weft/mma_weights.cuh, SUM_SCALE).
  constexpr bool SUM_SCALE = wf_same<t, __half>::value;
  constexpr int K = P::K, VPL = vectorsPerLane(K, C::CW);
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, qd = lane & 3;
  const int phase = KIND == QKV ? 0 : KIND == O ? 2 : KIND == GATE_UP ? 3 : 4;
  wf_pack<t, 8> gamma[VPL];
  loadNormWeights<C, K>(norm, gamma);
  waitPhaseInput(s, layer, phase);
  int u0, u1;
  blockUnits<C, P>(u0, u1);
  const int cols = (u1 - u0) * 16;
  float res0 = 0.f;
  if (residual != nullptr && (int)threadIdx.x < cols)
    res0 = wf_f32(__ldcg(residual + u0 * 16 + threadIdx.x));
  {
    // The input (normed and rounded as the model does) into r.xs.
    float xf[VPL * 8];
    loadInput<C, K>(x, norm != nullptr, gamma, xf, r.red);
    const int base = w * (K / C::CW) + lane * 8;
#pragma unroll
    for (int j = 0; j < VPL; ++j) {
      if (!inSlice<K, C::CW>(lane, j))
        continue;
      wf_pack<t, 8> v;
#pragma unroll
      for (int e = 0; e < 8; ++e)
        v.v[e] = wf_to<t>(xf[8 * j + e]);
      *reinterpret_cast<uint4 *>(r.xs + base + 256 * j) = *reinterpret_cast<const uint4 *>(&v);
    }
    consumerBarrier<C>();
  }
  for (int u = u0; u < u1; ++u, ++r.units) {
    const int ps = r.units % C::SCALE_SLOTS;
    mbarWait(&r.pFull[ps], (r.units / C::SCALE_SLOTS) & 1);
    const unsigned *pairs =
        reinterpret_cast<const unsigned *>(r.pairs + (size_t)ps * scaleSlotBytes<C>());
    float tot[P::T][2];
#pragma unroll
    for (int tt = 0; tt < P::T; ++tt)
      tot[tt][0] = tot[tt][1] = 0.f;
    for (int kp = 0; kp < P::KP; ++kp, ++r.it) {
      const int st = r.it % C::STAGES;
      mbarWait(&r.full[st], (r.it / C::STAGES) & 1);
      const unsigned char *stage = r.stage + (size_t)st * C::STAGE_BYTES;
      const int spw = P::stepsPerWarp(kp);
#pragma unroll
      for (int tt = 0; tt < P::T; ++tt) {
#pragma unroll
        for (int i = 0; i < P::SPW; ++i) {
          if (i >= spw)
            break;
          // Step `step` of the stage (128 inputs): this lane's 32 inputs of
          // rows g and g + 8, words 4 qd .. 4 qd + 3 of each (16 bytes).
          const int step = w * spw + i, group = kp * (P::KS / 128) + step;
          const unsigned at = smemAddr(stage + tt * P::TILE_BYTES + step * 1024 + g * 64 + qd * 16);
          const uint4 cg = loadSharedV4(at), cg8 = loadSharedV4(at + 512);
          const unsigned pat = smemAddr(pairs + (tt * 16 + g) * P::GROUPS + group);
          const unsigned sz = loadSharedU32(pat), sz8 = loadSharedU32(pat + 32 * P::GROUPS);
          // The token's inputs of those words, in the same order (every
          // lane loads them: B's other columns are never read).
          const unsigned xat = smemAddr(r.xs + kp * P::KS + step * 128 + 32 * qd);
          uint4 xb[4];
#pragma unroll
          for (int k = 0; k < 4; ++k)
            xb[k] = loadSharedV4(xat + 16 * k);
          const unsigned wg[4] = {cg.x, cg.y, cg.z, cg.w}, wg8[4] = {cg8.x, cg8.y, cg8.z, cg8.w};
          float d[4] = {0.f, 0.f, 0.f, 0.f};
          // Column 0 of the product is the token: d[0] row g, d[2] row g + 8.
          if constexpr (SUM_SCALE) {
            const CodeBias b(sz), b8(sz8);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
              unsigned h[4], h8[4];
              b.expand(wg[k], h);
              b8.expand(wg8[k], h8);
              wf_mma_m16n8k16<t>(d, h[0], h8[0], h[1], h8[1], xb[k].x, xb[k].y);
              wf_mma_m16n8k16<t>(d, h[2], h8[2], h[3], h8[3], xb[k].z, xb[k].w);
            }
            tot[tt][0] = fmaf(wf_pair_f32(wf_bits_as<typename W::M2>(sz)).x, d[0], tot[tt][0]);
            tot[tt][1] = fmaf(wf_pair_f32(wf_bits_as<typename W::M2>(sz8)).x, d[2], tot[tt][1]);
          } else {
#pragma unroll
            for (int k = 0; k < 4; ++k) {
              unsigned h[4], h8[4];
              W::template expandWord<true>(wg[k], sz, h);
              W::template expandWord<true>(wg8[k], sz8, h8);
              wf_mma_m16n8k16<t>(d, h[0], h8[0], h[1], h8[1], xb[k].x, xb[k].y);
              wf_mma_m16n8k16<t>(d, h[2], h8[2], h[3], h8[3], xb[k].z, xb[k].w);
            }
            tot[tt][0] += d[0];
            tot[tt][1] += d[2];
          }
        }
      }
      __syncwarp();
      if (lane == 0)
        mbarArrive(&r.empty[st]);
    }
    __syncwarp();
    if (lane == 0)
      mbarArrive(&r.pEmpty[ps]);
    if (qd == 0) {
#pragma unroll
      for (int tt = 0; tt < P::T; ++tt) {
        r.part[(u - u0) * P::ROWS + tt * 16 + g][w] = tot[tt][0];
        r.part[(u - u0) * P::ROWS + tt * 16 + g + 8][w] = tot[tt][1];
      }
    }
  }
  consumerBarrier<C>();
  for (int q = threadIdx.x; q < cols; q += C::CW * 32) {
    const int k = q / 16, j = q % 16;
    float a = 0.f, b = 0.f;
#pragma unroll
    for (int v = 0; v < C::CW; ++v) {
      a += r.part[k * P::ROWS + j][v];
      if constexpr (P::PAIRED)
        b += r.part[k * P::ROWS + 16 + j][v];
    }
    const float res = residual == nullptr  ? 0.f
                      : q == (int)threadIdx.x ? res0
                                              : wf_f32(__ldcg(residual + u0 * 16 + q));
    column(u0 * 16 + q, a, b, res);
  }
  consumerBarrier<C>();
  if (threadIdx.x == 0)
    addRelease(doneCounter(s, layer, phase));
}

// ---- Attention: flash-decoding over the grid ----

// The pages of this block's attention item, the same in every layer, into
// r.pages (before the first layer: each K/V row's address then costs no
// dependent load).
template <class C>
__device__ __forceinline__ void loadItemPages(const Step<C> &s, Ring<C> &r, int pos, int seq,
                                              bool valid) {
  if ((int)blockIdx.x >= C::KV_HEADS * C::SPLITS)
    return;
  const int split = blockIdx.x % C::SPLITS, n = valid ? pos + 1 : 0;
  const int lo = (int)((long long)n * split / C::SPLITS);
  const int hi = (int)((long long)n * (split + 1) / C::SPLITS);
  const int *table = s.tables + (size_t)seq * C::MAX_BLOCKS;
  const int firstPage = lo / C::BLOCK_TOKENS;
  const int pageCount = hi > lo ? (hi - 1) / C::BLOCK_TOKENS - firstPage + 1 : 0;
  for (int i = threadIdx.x; i < pageCount; i += C::CW * 32)
    r.pages[i] = table[firstPage + i];
}

// Item (kv, split) for blocks [0, KV_HEADS * SPLITS): the GROUP query heads
// of KV head kv over the split's positions of [0, n). Each consumer warp
// keeps an online softmax per head over the positions it takes (U at a
// time, 4 dimensions a lane); the warps merge in shared memory into the
// item's partial; the last split of kv to arrive weighs the splits together.
//
// It takes plain pointers, not the Step and the Ring: reference parameters
// of a noinline function keep both in local memory (a 200-byte stack frame
// a thread, read through an L1 that the ring's shared memory leaves
// small); with pointers the frame is 32 bytes and the step 4-5% faster
// (benchmarks.md, "Inside a layer of the stream kernel").
template <class C>
__device__ __noinline__ void attend(unsigned *counters, typename C::t *activations,
                                    float *partials, const typename C::t *kCache,
                                    const typename C::t *vCache, const int *pages, float *merge,
                                    float *red, int layer, int pos, bool valid) {
  using t = typename C::t;
  constexpr int G = C::GROUP, D = C::D, U = 8;
  if ((int)blockIdx.x >= C::KV_HEADS * C::SPLITS)
    return;
  const int kv = blockIdx.x / C::SPLITS, split = blockIdx.x % C::SPLITS;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (threadIdx.x == 0)
    waitCount(doneCounter(counters, layer, 0), (unsigned)C::GRID);
  consumerBarrier<C>();
  t *act = activations + (size_t)layer * actPerLayer<C>();
  const t *qv = act;
  t *out = act + (size_t)C::HEADS * D;
  const int n = valid ? pos + 1 : 0;
  const int lo = (int)((long long)n * split / C::SPLITS);
  const int hi = (int)((long long)n * (split + 1) / C::SPLITS);
  float q[G][4], acc[G][4], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const wf_pack<t, 4> v = loadShared<t, 4>(qv + (kv * G + g) * D + lane * 4);
#pragma unroll
    for (int d = 0; d < 4; ++d)
      q[g][d] = wf_f32(v.v[d]) * (float)C::SCALE_LOG2, acc[g][d] = 0.f;
    m[g] = -1e30f;
    l[g] = 0.f;
  }
  // The item's pages are in shared memory (loadItemPages, once a step).
  const int firstPage = lo / C::BLOCK_TOKENS;
  for (int p0 = lo + w; p0 < hi; p0 += C::CW * U) {
    // U rows of K and V in flight, kept packed (2 registers a row) until used.
    wf_pack<t, 4> kp[U], vp[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int p = p0 + u * C::CW;
      if (p < hi) {
        const size_t row =
            ((size_t)pages[p / C::BLOCK_TOKENS - firstPage] * C::BLOCK_TOKENS +
             p % C::BLOCK_TOKENS) *
                C::KV_HEADS + kv;
        kp[u] = loadShared<t, 4>(kCache + row * D + lane * 4);
        vp[u] = loadShared<t, 4>(vCache + row * D + lane * 4);
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float sc[U], mb = m[g];
      const auto score = [&](int u) {
        return wf_warp_sum(q[g][0] * wf_f32(kp[u].v[0]) + q[g][1] * wf_f32(kp[u].v[1]) +
                           q[g][2] * wf_f32(kp[u].v[2]) + q[g][3] * wf_f32(kp[u].v[3]));
      };
      // Every slot within the item: the U sums interleave. Past its end (the
      // same for the whole warp) no sum is taken; at short contexts most are.
      if (p0 + (U - 1) * C::CW < hi) {
#pragma unroll
        for (int u = 0; u < U; ++u)
          sc[u] = score(u);
      } else {
#pragma unroll
        for (int u = 0; u < U; ++u)
          sc[u] = p0 + u * C::CW < hi ? score(u) : -1e30f;
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
        mb = fmaxf(mb, sc[u]);
      const float corr = exp2f(m[g] - mb);
      l[g] *= corr;
#pragma unroll
      for (int d = 0; d < 4; ++d)
        acc[g][d] *= corr;
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (p0 + u * C::CW < hi) {
          const float pr = exp2f(sc[u] - mb);
          l[g] += pr;
#pragma unroll
          for (int d = 0; d < 4; ++d)
            acc[g][d] = fmaf(pr, wf_f32(vp[u].v[d]), acc[g][d]);
        }
      m[g] = mb;
    }
  }
  // Merge the warps: merge holds [CW][G][D] accumulators, then [CW][G]
  // maxima and sums.
  float *wacc = merge, *wm = wacc + C::CW * G * D, *wl = wm + C::CW * G;
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int d = 0; d < 4; ++d)
      wacc[(w * G + g) * D + lane * 4 + d] = acc[g][d];
    if (lane == 0)
      wm[w * G + g] = m[g], wl[w * G + g] = l[g];
  }
  consumerBarrier<C>();
  float *pm = partials, *pl = pm + C::HEADS * C::SPLITS, *pacc = pl + C::HEADS * C::SPLITS;
  for (int i = threadIdx.x; i < G * D; i += C::CW * 32) {
    const int g = i / D, d = i % D, h = kv * G + g;
    float M = -1e30f;
#pragma unroll
    for (int v = 0; v < C::CW; ++v)
      M = fmaxf(M, wm[v * G + g]);
    float Lsum = 0.f, A = 0.f;
#pragma unroll
    for (int v = 0; v < C::CW; ++v) {
      const float c = exp2f(wm[v * G + g] - M);
      Lsum += wl[v * G + g] * c;
      A += wacc[(v * G + g) * D + d] * c;
    }
    pacc[((size_t)h * C::SPLITS + split) * D + d] = A;
    if (d == 0)
      pm[h * C::SPLITS + split] = M, pl[h * C::SPLITS + split] = Lsum;
  }
  consumerBarrier<C>();
  if (threadIdx.x == 0) {
    const unsigned arrived =
        addAcqRel(counters + C::LAYERS * PHASES + layer * C::KV_HEADS + kv);
    red[0] = arrived == (unsigned)C::SPLITS - 1 ? 1.f : 0.f;
  }
  consumerBarrier<C>();
  const bool last = red[0] != 0.f;
  consumerBarrier<C>(); // red is reused
  if (!last)
    return;
  // The last split: two threads per (head, 4 dimensions), each over half
  // of the splits with all its loads in one round (no register spills at 16
  // splits: 8 maxima, 8 sums, 8 float4), then the pair weighs its halves
  // together through a shuffle (pairs are adjacent lanes; whole warps take
  // part: 2 G D / 4 is a multiple of 32 and at most CW * 32).
  constexpr int HALF = (C::SPLITS + 1) / 2;
  static_assert(2 * G * D / 4 <= C::CW * 32 && (2 * G * D / 4) % 32 == 0, "combine threads");
  if (threadIdx.x < 2 * G * D / 4) {
    const int item = threadIdx.x >> 1, half = threadIdx.x & 1;
    const int g = item / (D / 4), d = 4 * (item % (D / 4)), h = kv * G + g;
    float ms[HALF], ls[HALF];
    float4 as[HALF];
#pragma unroll
    for (int k = 0; k < HALF; ++k) {
      const int sp = half * HALF + k;
      if (sp < C::SPLITS) {
        ms[k] = __ldcg(pm + h * C::SPLITS + sp);
        ls[k] = __ldcg(pl + h * C::SPLITS + sp);
        as[k] = __ldcg(
            reinterpret_cast<const float4 *>(pacc + ((size_t)h * C::SPLITS + sp) * D + d));
      } else {
        ms[k] = -1e30f, ls[k] = 0.f, as[k] = make_float4(0.f, 0.f, 0.f, 0.f);
      }
    }
    float M = -1e30f;
#pragma unroll
    for (int k = 0; k < HALF; ++k)
      M = fmaxf(M, ms[k]);
    float Lsum = 0.f, A[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int k = 0; k < HALF; ++k) {
      const float c = exp2f(ms[k] - M);
      Lsum += ls[k] * c;
      A[0] += as[k].x * c, A[1] += as[k].y * c, A[2] += as[k].z * c, A[3] += as[k].w * c;
    }
    const float Mb = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, 1)), c = exp2f(M - Mb);
    Lsum *= c;
    Lsum += __shfl_xor_sync(0xffffffffu, Lsum, 1);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      A[e] *= c;
      A[e] += __shfl_xor_sync(0xffffffffu, A[e], 1);
    }
    const float inv = Lsum > 0.f ? 1.f / Lsum : 0.f;
    // Each of the pair writes two of the four dimensions.
    out[h * D + d + 2 * half] = wf_to<t>((half ? A[2] : A[0]) * inv);
    out[h * D + d + 2 * half + 1] = wf_to<t>((half ? A[3] : A[1]) * inv);
  }
  consumerBarrier<C>();
  if (threadIdx.x == 0)
    addRelease(doneCounter(counters, layer, 1));
}

// ---- The kernel body ----

// A projection's consumer share for the weights' format.
template <class C, int KIND, class Column>
__device__ __forceinline__ void project(const Step<C> &s, int layer, const typename C::t *x,
                                        const typename C::t *norm, const typename C::t *residual,
                                        const unsigned *pairs, Ring<C> &r, Column column) {
  if constexpr (C::BITS == 4)
    consumeCodes<C, KIND>(s, layer, x, norm, residual, r, column);
  else
    consume<C, KIND>(s, layer, x, norm, residual, pairs, r, column);
}

template <class C>
__device__ __forceinline__ void decodeStep(const Step<C> &s, const Layer<C> *layers) {
  using t = typename C::t;
  extern __shared__ __align__(128) unsigned char smem[];
  Ring<C> r;
  constexpr bool CODES = C::BITS == 4;
  static_assert(C::BITS == 0 || C::BITS == 4 || C::BITS == 8, "16-bit weights, 4- or 8-bit codes");
  static_assert(C::BITS == 8 || C::FORMAT == Codes::Int, "E4M3 codes are 8 bits");
  r.stage = smem;
  r.pairs = smem + (size_t)C::STAGES * C::STAGE_BYTES;
  unsigned char *afterPairs =
      r.pairs + (CODES ? (size_t)C::SCALE_SLOTS * scaleSlotBytes<C>() : 0);
  r.full = reinterpret_cast<unsigned long long *>(afterPairs);
  r.empty = r.full + C::STAGES;
  r.pFull = r.empty + C::STAGES;
  r.pEmpty = r.pFull + (CODES ? C::SCALE_SLOTS : 0);
  r.part = reinterpret_cast<float(*)[C::CW]>(r.pEmpty + (CODES ? C::SCALE_SLOTS : 0));
  r.red = &r.part[C::MAX_ROWS][0];
  r.attn = r.red + C::CW;
  r.xs = reinterpret_cast<t *>(r.attn);
  r.pages = reinterpret_cast<int *>(reinterpret_cast<unsigned char *>(r.attn) + mergeBytes<C>());
  r.rowAux = reinterpret_cast<RowCodes *>(r.pages + itemPages<C>());
  static_assert(sharedBytes<C>() <= C::SHARED_BYTES, "SHARED_BYTES holds the layout");
  r.it = 0;
  r.units = 0;
  if (threadIdx.x == 0) {
    for (int i = 0; i < C::STAGES; ++i) {
      mbarInit(&r.full[i], 1);
      mbarInit(&r.empty[i], C::CW);
    }
    for (int i = 0; i < (CODES ? C::SCALE_SLOTS : 0); ++i) {
      mbarInit(&r.pFull[i], 1);
      mbarInit(&r.pEmpty[i], C::CW);
    }
  }
  __syncthreads(); // also publishes `layers`
  if (threadIdx.x >= C::CW * 32) {
    // The producer: lane 0 of the last warp copies; weights never change,
    // so it runs ahead of every dependency.
    if (threadIdx.x != C::CW * 32)
      return;
    for (int layer = 0; layer < C::LAYERS; ++layer) {
      const Layer<C> &L = layers[layer];
      if constexpr (CODES) {
        produceCodes<C, QKV>(L.qkv, L.qkvPairs, r);
        produceCodes<C, O>(L.o, L.oPairs, r);
        produceCodes<C, GATE_UP>(L.gateUp, L.gateUpPairs, r);
        produceCodes<C, DOWN>(L.down, L.downPairs, r);
      } else {
        produce<C, QKV>(L.qkv, r);
        produce<C, O>(L.o, r);
        produce<C, GATE_UP>(L.gateUp, r);
        produce<C, DOWN>(L.down, r);
      }
    }
    return;
  }
  wf_grid_dependency_wait();
  const int pos = s.positions[0], seq = s.slots[0];
  const CacheSlot slot = cacheSlot<C>(pos, seq, s.tables);
  loadItemPages<C>(s, r, pos, seq, slot.valid); // read after the attention's barrier
  for (int layer = 0; layer < C::LAYERS; ++layer) {
    const Layer<C> &L = layers[layer];
    t *act = s.act + (size_t)layer * actPerLayer<C>();
    t *q = act, *attn = q + (size_t)C::HEADS * C::D, *h = attn + (size_t)C::HEADS * C::D;
    t *a = h + C::HIDDEN, *next = a + C::FFN;
    if (layer + 1 == C::LAYERS)
      next = s.out;
    const t *x = layer == 0 ? s.x : s.act + (size_t)(layer - 1) * actPerLayer<C>() +
                                        2 * (size_t)C::HEADS * C::D + C::HIDDEN + C::FFN;
    project<C, QKV>(s, layer, x, L.norm1, nullptr, L.qkvPairs, r, [&](int col, float va, float vb, float) {
      const int hh = col / (C::D / 2), i = col % (C::D / 2);
      va = wf_round<t>(va);
      vb = wf_round<t>(vb);
      if (hh < C::HEADS + C::KV_HEADS)
        rotatePair<t>(pos, C::invFreq(i), va, vb);
      if (hh < C::HEADS) {
        q[hh * C::D + i] = wf_to<t>(va);
        q[hh * C::D + i + C::D / 2] = wf_to<t>(vb);
      } else if (slot.valid) {
        const bool isK = hh < C::HEADS + C::KV_HEADS;
        const int kh = isK ? hh - C::HEADS : hh - C::HEADS - C::KV_HEADS;
        t *cache = isK ? L.k : L.v;
        cache[(slot.row + kh) * C::D + i] = wf_to<t>(va);
        cache[(slot.row + kh) * C::D + i + C::D / 2] = wf_to<t>(vb);
      }
    });
    attend<C>(s.counters, s.act, s.partials, L.k, L.v, r.pages, r.attn, r.red, layer, pos,
              slot.valid);
    project<C, O>(s, layer, attn, nullptr, x, L.oPairs, r, [&](int col, float va, float, float res) {
      h[col] = wf_to<t>(wf_round<t>(va) + res);
    });
    project<C, GATE_UP>(s, layer, h, L.norm2, nullptr, L.gateUpPairs, r, [&](int col, float g, float u, float) {
      a[col] = wf_to<t>(wf_round<t>(wf_silu(wf_round<t>(g))) * wf_round<t>(u));
    });
    project<C, DOWN>(s, layer, a, nullptr, h, L.downPairs, r, [&](int col, float va, float, float res) {
      next[col] = wf_to<t>(wf_round<t>(va) + res);
    });
  }
}

// The layers' pointers in shared memory. Declared here, in a function of
// the Config alone, rather than in the entry: PTX names a variable after
// its function, and the entry's name spells out every layer's pointer type.
template <class C> __device__ __forceinline__ Layer<C> *layerTable() {
  __shared__ Layer<C> table[C::LAYERS];
  return table;
}

// The entry point (emitDecodeStream): the step's pointers, then each
// layer's, in the order the plan binds them: norm1, qkv, k, v, o, norm2,
// gate_up, down and, with codes, the qkv, o, gate_up and down scale
// tables. Config adds RELEASE_EARLY and, for the compiler's sizes to agree
// with the library's, COUNTERS and ACT_BYTES.
template <class C, class... L>
__global__ void __launch_bounds__(threadsOf<C>(), 1)
    decodeStreamKernel(const typename C::t *x, const int *positions, const int *slots,
                       const int *block_tables, typename C::t *out, typename C::t *act,
                       float *partials, unsigned *counters, L *...layer) {
  using t = typename C::t;
  using w_t = typename C::w_t;
  constexpr int N = C::BITS ? 12 : 8; // pointers a layer
  static_assert(sizeof...(L) == C::LAYERS * N, "a layer's pointers, for every layer");
  static_assert(counterCount<C>() == C::COUNTERS, "counters");
  static_assert(actPerLayer<C>() * C::LAYERS * 2 == C::ACT_BYTES, "activations");
  wf_grid_dependency_enter<C>();
  Layer<C> *layers = layerTable<C>();
  if (threadIdx.x == 0) {
    void *const p[] = {const_cast<void *>(static_cast<const void *>(layer))...};
#pragma unroll
    for (int l = 0; l < C::LAYERS; ++l) {
      void *const *q = p + l * N;
      layers[l] = {static_cast<const t *>(q[0]),   static_cast<const w_t *>(q[1]),
                   static_cast<const w_t *>(q[4]), static_cast<const t *>(q[5]),
                   static_cast<const w_t *>(q[6]), static_cast<const w_t *>(q[7]),
                   static_cast<t *>(q[2]),         static_cast<t *>(q[3]),
                   N == 12 ? static_cast<const unsigned *>(q[N == 12 ? 8 : 0]) : nullptr,
                   N == 12 ? static_cast<const unsigned *>(q[N == 12 ? 9 : 0]) : nullptr,
                   N == 12 ? static_cast<const unsigned *>(q[N == 12 ? 10 : 0]) : nullptr,
                   N == 12 ? static_cast<const unsigned *>(q[N == 12 ? 11 : 0]) : nullptr};
    }
  }
  decodeStep<C>({x, positions, slots, block_tables, out, act, partials, counters}, layers);
}

// Zeroes the stream kernel's counters (the launch before it).
__device__ __forceinline__ void resetCounters(unsigned *counters, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    counters[i] = 0u;
}

// Its entry point (emitDecodeStream): Config holds COUNTERS and, as every
// library entry's, RELEASE_EARLY (common.cuh).
template <class C> __global__ void __launch_bounds__(256) resetCountersKernel(unsigned *counters) {
  wf_grid_dependency_enter<C>();
  resetCounters(counters, C::COUNTERS);
}

} // namespace weft::kernels::stream
