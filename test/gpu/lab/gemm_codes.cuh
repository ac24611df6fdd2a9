// A lab candidate, not used by the compiler (measured no faster than what
// plans run, docs/benchmarks.md): quantized projections of many tokens
// (batched decode, prefill chunks):
// y[t, col] = sum_k x[t, k] * w[row(col), k], the codes expanded to 16-bit
// pairs in registers on their way to the tensor cores and never written
// out, so a step reads each code once per tile of T tokens instead of
// writing and rereading a 16-bit copy of the matrix.
//
// A block owns one tile of T tokens (grid.x, fastest, so the tiles of one
// column block run side by side and share its codes through L2), CPB
// consecutive output columns (grid.y; CPW per group of KW warps, RPC
// weight rows each: 2 for SwiGLU's gate and up) and one K range of KS
// (grid.z: SPLITS). Each warp holds MT = CPW * RPC / 16 tiles of 16 weight
// rows times all NT = ceil(T / 8) token tiles of the mma.m16n8k16
// accumulators, so a token fragment read from shared memory feeds MT
// MMAs and an expanded weight fragment NT.
//
// The pipeline: chunks of KC inputs (KW steps of 4 * ME, one per warp of
// a group) of the tokens, the block's codes and their (scale, zero) pairs
// are copied into a ring of STAGES shared buffers by cp.async, STAGES - 1
// chunks ahead of the one being multiplied (token rows past T are zeros).
// The lanes read their weights in the PackedRows order of
// weft/mma_weights.cuh (lane q of a quad: ME consecutive inputs, 16 bytes
// of codes, 8 inputs per chunk h), and the tokens are staged with the same
// permutation, 16-byte slot h * 4 + q of a step, so that the eight lanes of
// a quarter warp read eight different bank groups.
//
// The KW warps of a group split each chunk between them and meet in shared
// memory; with SPLITS > 1 the sums go to `partials` ([TILES][SPLITS][T][NW],
// as gemv's) and gemvReduce of weft/gemv.cuh runs the epilogue.
//
// Config: T, TILES, TP (T rounded up to 8), K, NW, NC, THREADS, WARPS, KW,
// CPW, RPC, CPB, SPLITS, KS, KC (= KW * 4 * ME), XS (staged token row
// stride, elements), STAGES; x_t (the
// tokens, of the weights' 16-bit type m_t), W (a PackedRows policy, codes
// rounded to m_t with their scale as the checkpoint's dequantization does,
// or E4M3 codes with a scale per row), GROUP (its scale group); static
// row(col, j).
// Epilogue E: a callable (t, col, v[RPC], key), as gemv's.
// Grid: (TILES, ceil(NC / CPB), SPLITS); block: THREADS; dynamic shared
// memory: gemmCodesSharedBytes<C>().
#pragma once

#include "weft/gemv.cuh"

namespace weft::kernels {

// cp.async of 16 bytes, zero-filled when `fill` is false (src must still be
// a valid address), and of 4 bytes; commit closes a group of copies,
// wait<N> waits until at most N groups are in flight.
__device__ __forceinline__ void wf_copy_async16(void *dst, const void *src, bool fill) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "r"(fill ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void wf_copy_async4(void *dst, const void *src) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void wf_copy_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void wf_copy_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Chunk c (weights 8c .. 8c + 7 of a lane's ME) of PackedRows codes as four
// pairs of M, each weight rounded once with its scale.
template <class W>
__device__ __forceinline__ void expandChunk(const typename W::Raw &raw, int c, uint4 &out) {
  constexpr int WPC = 8 / W::PER_WORD; // words per chunk
  unsigned h[4];
#pragma unroll
  for (int w = 0; w < WPC; ++w) {
    unsigned part[W::PER_WORD / 2];
    W::template expandWord<true>(raw.w[c * WPC + w], raw.sz, part);
#pragma unroll
    for (int j = 0; j < W::PER_WORD / 2; ++j)
      h[w * (W::PER_WORD / 2) + j] = part[j];
  }
  out = make_uint4(h[0], h[1], h[2], h[3]);
}

// The shared memory of one stage of gemmCodes: the tokens [TP][XS], the
// block's codes [ROWS][CODE_WORDS] and, for integer codes, their (scale,
// zero) pairs [ROWS][KW].
template <class C> struct GemmCodesStage {
  using W = typename C::W;
  static constexpr int ROWS = C::CPB * C::RPC;
  static constexpr int ROW_BYTES = C::KC * (32 / W::PER_WORD) / 8;
  // A row of codes is padded to an odd multiple of 64 bytes: the eight
  // lanes of a quarter warp (rows g, g + 1; quads 0-3 at 16 bytes each)
  // then read eight different bank groups.
  static constexpr int CODE_WORDS = (ROW_BYTES % 128 == 0 ? ROW_BYTES + 64 : ROW_BYTES) / 4;
  static constexpr int X_BYTES = C::TP * C::XS * 2;
  static constexpr int CODE_BYTES = ROWS * CODE_WORDS * 4;
  static constexpr int SZ_BYTES = W::ROW_SCALE ? 0 : ROWS * C::KW * 4;
  static constexpr int BYTES = X_BYTES + CODE_BYTES + SZ_BYTES;
};

template <class C> constexpr int gemmCodesSharedBytes() {
  constexpr int stages = C::STAGES * GemmCodesStage<C>::BYTES;
  constexpr int sums = C::WARPS * C::CPW * C::RPC * C::T * 4;
  return stages > sums ? stages : sums;
}

// The staged position of input k of a chunk: step k / (4 ME), within it
// chunk j = k / 8 of the quad (lane q = j / CH, its chunk h = j % CH)
// stored at slot h * 4 + q.
template <int ME> __device__ __forceinline__ int gemmCodesSlot(int k) {
  constexpr int STEP = 4 * ME, CH = ME / 8;
  const int j = (k % STEP) / 8;
  return (k / STEP) * STEP + ((j % CH) * 4 + j / CH) * 8 + k % 8;
}

template <class C, class E>
__device__ __forceinline__ void gemmCodes(const typename C::x_t *__restrict__ x,
                                          const unsigned *__restrict__ w,
                                          const void *__restrict__ scales, E tileEpilogue,
                                          float *__restrict__ partials) {
  using x_t = typename C::x_t;
  using W = typename C::W;
  using S = GemmCodesStage<C>;
  constexpr int T = C::T, TP = C::TP, K = C::K, NW = C::NW, THREADS = C::THREADS;
  constexpr int CPW = C::CPW, RPC = C::RPC, CPB = C::CPB, WARPS = C::WARPS, KW = C::KW;
  constexpr int KS = C::KS, KC = C::KC, XS = C::XS, SPLITS = C::SPLITS, STAGES = C::STAGES;
  constexpr bool SPLIT = SPLITS > 1;
  constexpr int ME = W::CHUNKS * 8, STEP = 4 * ME, CH = W::CHUNKS;
  constexpr int MT = CPW * RPC / 16, NT = TP / 8;
  constexpr int STEP_WORDS = STEP / W::PER_WORD; // of one row
  static_assert(TP % 8 == 0 && TP >= T && TP < T + 8, "TP: T rounded up to 8");
  static_assert(WARPS % KW == 0 && CPB == WARPS / KW * CPW, "warp groups must tile the block");
  static_assert(CPW % 16 == 0 && (CPW * RPC) % 16 == 0, "16-row weight tiles");
  static_assert(KC == KW * STEP && KS % KC == 0 && K % KC == 0, "whole steps per warp");
  static_assert(W::WORDS == 4, "16 bytes of codes per lane and step");
  static_assert(W::ROW_SCALE || C::GROUP % STEP == 0, "a step inside one group");
  static_assert(XS % 8 == 0 && (XS * 2) % 128 == 64, "token rows alternate bank halves");
  static_assert(STAGES >= 2, "a ring of at least two stages");

  const int tile = blockIdx.x;
  x += (size_t)tile * T * K;
  if constexpr (SPLIT)
    partials += (size_t)tile * SPLITS * T * NW;
  auto epilogue = [&](int t, int col, float (&v)[C::RPC], unsigned long long &key) {
    tileEpilogue(tile * T + t, col, v, key);
  };

  extern __shared__ __align__(16) unsigned char gemm_codes_smem[];
  float *res = reinterpret_cast<float *>(gemm_codes_smem);
  auto stageX = [&](int b) {
    return reinterpret_cast<x_t *>(gemm_codes_smem + b * S::BYTES);
  };
  auto stageCodes = [&](int b) {
    return reinterpret_cast<unsigned *>(gemm_codes_smem + b * S::BYTES + S::X_BYTES);
  };
  auto stageSz = [&](int b) {
    return reinterpret_cast<unsigned *>(gemm_codes_smem + b * S::BYTES + S::X_BYTES +
                                        S::CODE_BYTES);
  };
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3;
  const int kBegin = blockIdx.z * KS;
  const int kEnd = kBegin + KS < K ? kBegin + KS : K;
  const int chunks = (kEnd - kBegin) / KC;

  // Block row r (warp group r / (CPW RPC), its tile m and row in it) is
  // weight row C::row(col, j); columns past NC read the last row (their
  // sums are dropped).
  auto weightRow = [&](int r) {
    const int group = r / (CPW * RPC), m = (r % (CPW * RPC)) / 16;
    const int c = blockIdx.y * CPB + group * CPW + (m % (CPW / 16)) * 16 + r % 16;
    return C::row(c < C::NC ? c : C::NC - 1, m / (CPW / 16));
  };

  // Chunk k0 of the tokens, the codes and their pairs into stage b.
  auto stage = [&](int k0, int b) {
    constexpr int VECS = KC / 8;
    x_t *xd = stageX(b);
    for (int i = threadIdx.x; i < TP * VECS; i += THREADS) {
      const int t = i / VECS, k = (i % VECS) * 8;
      const bool real = t < T;
      wf_copy_async16(xd + t * XS + gemmCodesSlot<ME>(k), real ? x + (size_t)t * K + k0 + k : x,
                      real);
    }
    unsigned *cd = stageCodes(b);
    for (int i = threadIdx.x; i < S::ROWS * KW * 4; i += THREADS) {
      const int r = i / (KW * 4), s = (i / 4) % KW, piece = i % 4;
      const W rowCodes(w, scales, weightRow(r), K, 0);
      wf_copy_async16(cd + r * S::CODE_WORDS + s * STEP_WORDS + piece * 4,
                      rowCodes.row + W::wordOffset(k0 + s * STEP) + piece * 4, true);
    }
    if constexpr (!W::ROW_SCALE) {
      unsigned *sd = stageSz(b);
      const unsigned *sz = static_cast<const unsigned *>(scales);
      for (int i = threadIdx.x; i < S::ROWS * KW; i += THREADS) {
        const int r = i / KW, s = i % KW;
        wf_copy_async4(sd + i,
                       sz + (size_t)weightRow(r) * (K / C::GROUP) + (k0 + s * STEP) / C::GROUP);
      }
    }
  };

  float acc[MT][NT][4];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[m][n][e] = 0.0f;

  // The ring: STAGES - 1 chunks in flight before the first is consumed;
  // every iteration commits one group (empty past the end) so that
  // wait<STAGES - 2> always means "this chunk has landed".
#pragma unroll
  for (int i = 0; i < STAGES - 1; ++i) {
    if (i < chunks)
      stage(kBegin + i * KC, i);
    wf_copy_async_commit();
  }
  const int s = warp % KW;                    // this warp's step of a chunk
  const int rowBase = (warp / KW) * CPW * RPC; // its group's first block row
  for (int c = 0; c < chunks; ++c) {
    wf_copy_async_wait<STAGES - 2>();
    __syncthreads(); // chunk c has landed; chunk c - 1 is consumed
    if (c + STAGES - 1 < chunks)
      stage(kBegin + (c + STAGES - 1) * KC, (c + STAGES - 1) % STAGES);
    wf_copy_async_commit();
    const int b = c % STAGES;
    const x_t *xs = stageX(b);
    const unsigned *cs = stageCodes(b);
    const unsigned *ss = stageSz(b);
    // This warp's codes of the step: rows g and g + 8 of each tile.
    typename W::Raw raw[MT][2];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = rowBase + m * 16 + g + 8 * half;
        const uint4 v =
            *reinterpret_cast<const uint4 *>(cs + r * S::CODE_WORDS + s * STEP_WORDS + q * 4);
        raw[m][half].w[0] = v.x, raw[m][half].w[1] = v.y, raw[m][half].w[2] = v.z,
        raw[m][half].w[3] = v.w;
        raw[m][half].sz = W::ROW_SCALE ? 0u : ss[r * KW + s];
      }
#pragma unroll
    for (int h = 0; h < CH; ++h) {
      uint4 lo[MT], hi[MT];
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        expandChunk<W>(raw[m][0], h, lo[m]);
        expandChunk<W>(raw[m][1], h, hi[m]);
      }
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const uint4 bv = *reinterpret_cast<const uint4 *>(xs + (n * 8 + g) * XS + s * STEP +
                                                          (h * 4 + q) * 8);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          wf_mma_m16n8k16<typename C::m_t>(acc[m][n], lo[m].x, hi[m].x, lo[m].y, hi[m].y, bv.x,
                                           bv.y);
          wf_mma_m16n8k16<typename C::m_t>(acc[m][n], lo[m].z, hi[m].z, lo[m].w, hi[m].w, bv.z,
                                           bv.w);
        }
      }
    }
  }
  wf_copy_async_wait<0>();
  __syncthreads(); // the stages become res

  // Fragment (m, n, e) holds row g (+8 for e >= 2) of tile m and token
  // n * 8 + 2q + (e & 1); E4M3 codes take their row's scale here.
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    float rowScale[2] = {1.0f, 1.0f};
    if constexpr (W::ROW_SCALE) {
#pragma unroll
      for (int half = 0; half < 2; ++half)
        rowScale[half] = W(w, scales, weightRow(rowBase + m * 16 + g + 8 * half), K, 0).rowScale();
    }
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int token = n * 8 + 2 * q + (e & 1);
        const int c = (m % (CPW / 16)) * 16 + g + (e >= 2 ? 8 : 0), j = m / (CPW / 16);
        if (token < T)
          res[(warp * CPW * RPC + c * RPC + j) * T + token] =
              W::ROW_SCALE ? acc[m][n][e] * rowScale[e >= 2] : acc[m][n][e];
      }
  }
  __syncthreads();
  // The sums of the KW warps of each group (gemvColumnSum), to the
  // partials or through the epilogue. The block's columns are blockIdx.y's.
  for (int i = threadIdx.x; i < T * CPB; i += THREADS) {
    const int t = i / CPB, cl = i % CPB, col = blockIdx.y * CPB + cl;
    if (col >= C::NC)
      continue;
    if constexpr (SPLIT) {
#pragma unroll
      for (int j = 0; j < RPC; ++j)
        partials[((size_t)blockIdx.z * T + t) * NW + C::row(col, j)] =
            gemvColumnSum<C>(res, t, cl, j);
    } else {
      float v[RPC];
#pragma unroll
      for (int j = 0; j < RPC; ++j)
        v[j] = gemvColumnSum<C>(res, t, cl, j);
      unsigned long long key = 0ull;
      epilogue(t, col, v, key);
    }
  }
}

} // namespace weft::kernels
