// Prefill attention: causal flash attention over the paged KV cache on
// tensor cores (mma.sync m16n8k16), for chunks of prompts; f16 and bf16,
// head_dim a multiple of 16 up to 128.
//
// Config (besides weft/attention.cuh's): kRows (query rows per block),
// kKeys (keys per tile), kWarps, kThreads, kPad (row pitch of the staged
// K/V), kDimChunks, kStageElems, kCopies, kCopiesPerThread.
// Grid: (ceil(kTokens / kRows), kHeads); block: kThreads; dynamic shared
// memory: two K/V stages and the block's row bookkeeping.
#pragma once

#include "weft/attention.cuh"

namespace weft::kernels::attention {

// Block: query rows [q0, q0 + kRows) of head blockIdx.y; warp w owns rows
// q0 + 16w .. q0 + 16w + 15. Thread (lane) holds, in the mma layout, rows
// lane/4 and lane/4 + 8 of its warp's 16 and columns 2 * (lane % 4) + {0, 1}
// of every 8-wide tile. Keys stream through shared memory in tiles of kKeys
// (cp.async, two stages); S = Q Kᵀ and O += P V run on tensor cores with f32
// accumulation; the softmax is online, in base 2, per row.
//
// A step may hold chunks of several sequences (and decode tokens, which
// flash-decoding owns): the block takes each run of equal slots in its rows
// (a segment) in turn, with that sequence's block table, and only the rows
// it owns (chunkRow) take part; a tile without such rows exits at once.
template <class C>
__device__ __forceinline__ void prefillChunk(
    const typename C::elem_t *__restrict__ query, const int *__restrict__ positions,
    const int *__restrict__ slots, const typename C::elem_t *__restrict__ k_cache,
    const typename C::elem_t *__restrict__ v_cache, const int *__restrict__ block_tables,
    typename C::elem_t *__restrict__ out) {
  using elem_t = typename C::elem_t;
  // The configuration, as the body names it.
  constexpr auto kBlockTokens = C::kBlockTokens;
  constexpr auto kCopies = C::kCopies;
  constexpr auto kCopiesPerThread = C::kCopiesPerThread;
  constexpr auto kDimChunks = C::kDimChunks;
  constexpr auto kGroup = C::kGroup;
  constexpr auto kHeadDim = C::kHeadDim;
  constexpr auto kKeys = C::kKeys;
  constexpr auto kMaxBlocks = C::kMaxBlocks;
  constexpr auto kPad = C::kPad;
  constexpr auto kQueryWidth = C::kQueryWidth;
  constexpr auto kRowStride = C::kRowStride;
  constexpr auto kRows = C::kRows;
  constexpr auto kScaleLog2 = C::kScaleLog2;
  constexpr auto kStageElems = C::kStageElems;
  constexpr auto kThreads = C::kThreads;
  constexpr auto kTokens = C::kTokens;
  constexpr auto kWarps = C::kWarps;
  constexpr auto kWindow = C::kWindow;
  extern __shared__ uint4 smemVec[];
  elem_t *smem = reinterpret_cast<elem_t *>(smemVec);
  const float kNegInf = __int_as_float(0xff800000u);
  int *sBounds = reinterpret_cast<int *>(smem + 2 * kStageElems); // [2][kWarps]
  int *sSlot = sBounds + 2 * kWarps;                               // [kRows]
  int *sOwned = sSlot + kRows; // [kRows] position of an owned row, -1 otherwise

  // Later tiles see more keys: start them first.
  const int tile = gridDim.x - 1 - blockIdx.x;
  const int h = blockIdx.y, kvh = h / kGroup;
  const int q0 = tile * kRows;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  bool anyOwned = false;
  if (tid < kRows) {
    const int r = q0 + tid;
    int slot = -1, owned = -1;
    if (r < kTokens) {
      slot = slots[r];
      const int p = positions[r];
      if (tokenValid<C>(p, slot) && chunkRow<C>(slots, r))
        owned = p;
    }
    sSlot[tid] = slot;
    sOwned[tid] = owned;
    anyOwned = owned >= 0;
  }
  if (!__syncthreads_or(anyOwned))
    return; // decode tokens and pads only: flash-decoding writes them

  // Q fragments straight from global memory (read once): rows r0 and r1,
  // columns 2 * (lane % 4) + {0, 1} and + 8 of every 16-wide step. Pad rows
  // read row 0 and are never stored.
  const int r0 = q0 + warp * 16 + (lane >> 2), r1 = r0 + 8;
  unsigned qFrag[kHeadDim / 16][4];
  {
    const unsigned *qa = reinterpret_cast<const unsigned *>(
        query + (size_t)(r0 < kTokens ? r0 : 0) * kQueryWidth + h * kHeadDim + (lane & 3) * 2);
    const unsigned *qb = reinterpret_cast<const unsigned *>(
        query + (size_t)(r1 < kTokens ? r1 : 0) * kQueryWidth + h * kHeadDim + (lane & 3) * 2);
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      qFrag[kk][0] = __ldg(qa + kk * 8);
      qFrag[kk][1] = __ldg(qb + kk * 8);
      qFrag[kk][2] = __ldg(qa + kk * 8 + 4);
      qFrag[kk][3] = __ldg(qb + kk * 8 + 4);
    }
  }

  for (int segBegin = 0; segBegin < kRows;) {
    // The segment: rows [segBegin, segEnd) of the tile share one slot.
    const int slot = sSlot[segBegin];
    int segEnd = segBegin + 1;
    bool segOwned = sOwned[segBegin] >= 0;
    while (segEnd < kRows && sSlot[segEnd] == slot) {
      segOwned |= sOwned[segEnd] >= 0;
      ++segEnd;
    }
    const int lo = segBegin, hi = segEnd;
    segBegin = segEnd;
    if (!segOwned)
      continue; // block-uniform: every thread read the same shared arrays

    // This thread's two rows and their positions (-1: not in the segment,
    // not owned, pad or invalid).
    const int i0 = r0 - q0, i1 = r1 - q0;
    const int pos0 = i0 >= lo && i0 < hi ? sOwned[i0] : -1;
    const int pos1 = i1 >= lo && i1 < hi ? sOwned[i1] : -1;
    // Bounds of the warp's rows, then of the block's.
    int wMax = max(pos0, pos1);
    int wMin = min(pos0 < 0 ? 0x7fffffff : pos0, pos1 < 0 ? 0x7fffffff : pos1);
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      wMax = max(wMax, __shfl_xor_sync(0xffffffffu, wMax, offset));
      wMin = min(wMin, __shfl_xor_sync(0xffffffffu, wMin, offset));
    }
    const bool wAnyInvalid = __any_sync(0xffffffffu, pos0 < 0 || pos1 < 0);
    __syncthreads(); // the previous segment is done with sBounds and the stages
    if (lane == 0) {
      sBounds[warp] = wMax;
      sBounds[kWarps + warp] = wMin;
    }
    __syncthreads();
    int bMax = -1, bMin = 0x7fffffff;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      bMax = max(bMax, sBounds[w]);
      bMin = min(bMin, sBounds[kWarps + w]);
    }
    // Keys any row of the block may see: [kLo, kHi).
    const int kLo = kWindow > 0 ? max(0, bMin - kWindow + 1) : 0;
    const int kHi = bMax + 1;
    const int firstKey = kLo / kKeys * kKeys;
    const int tiles = (kHi - firstKey + kKeys - 1) / kKeys;
    const int *table = block_tables + (size_t)slot * kMaxBlocks;

    // Stage s holds K at s * kStageElems and V after it.
    auto loadKeys = [&](int j, int stage) {
      elem_t *sK = smem + stage * kStageElems;
      elem_t *sV = sK + kKeys * kPad;
      const int kb = firstKey + j * kKeys;
#pragma unroll
      for (int n = 0; n < kCopiesPerThread; ++n) {
        const int i = tid + n * kThreads;
        if (kCopies % kThreads != 0 && i >= kCopies)
          break;
        const int r = i / kDimChunks, c = i % kDimChunks;
        const int p = kb + r;
        const bool ok = p >= kLo && p < kHi;
        size_t offset = 0;
        if (ok) {
          const int page = __ldg(table + p / kBlockTokens);
          offset = ((size_t)page * kBlockTokens + p % kBlockTokens) * kRowStride +
                   (size_t)kvh * kHeadDim + c * 8;
        }
        copyAsync16(sK + r * kPad + c * 8, k_cache + offset, ok);
        copyAsync16(sV + r * kPad + c * 8, v_cache + offset, ok);
      }
    };

    loadKeys(0, 0);
    copyAsyncCommit();

    float o[kHeadDim / 8][4];
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n)
      o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float rowMax[2] = {kNegInf, kNegInf};
    float rowSum[2] = {0.0f, 0.0f}; // this thread's columns only until the end

    for (int j = 0; j < tiles; ++j) {
      if (j + 1 < tiles) {
        loadKeys(j + 1, (j + 1) & 1);
        copyAsyncCommit();
        copyAsyncWait<1>();
      } else {
        copyAsyncWait<0>();
      }
      __syncthreads();
      const int kb = firstKey + j * kKeys;
      const elem_t *sK = smem + (j & 1) * kStageElems;
      const elem_t *sV = sK + kKeys * kPad;
      // Skip the tile when no key of it is visible to any row of the warp.
      const bool skip = kb > wMax || (kWindow > 0 && kb + kKeys - 1 < wMin - kWindow + 1);
      if (!skip) {
        float sc[kKeys / 8][4];
#pragma unroll
        for (int n = 0; n < kKeys / 8; ++n)
          sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < kHeadDim / 16; ++kk)
#pragma unroll
          for (int np = 0; np < kKeys / 16; ++np) {
            unsigned b[4];
            loadMatrix(b, sK + (np * 16 + (lane & 7) + ((lane >> 4) << 3)) * kPad + kk * 16 +
                              ((lane >> 3) & 1) * 8);
            mma16816<elem_t>(sc[2 * np], qFrag[kk], b[0], b[1]);
            mma16816<elem_t>(sc[2 * np + 1], qFrag[kk], b[2], b[3]);
          }

        // Masks are needed only where the tile crosses a row's causal or
        // window edge (or the warp has pad rows).
        const bool full = !wAnyInvalid && kb + kKeys - 1 <= wMin &&
                          (kWindow == 0 || wMax - kb < kWindow);
#pragma unroll
        for (int ri = 0; ri < 2; ++ri) {
          const int pr = ri ? pos1 : pos0;
          float mx = kNegInf;
#pragma unroll
          for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float v = capScore<C>(sc[n][2 * ri + e] * kScaleLog2);
              if (!full) {
                const int key = kb + n * 8 + (lane & 3) * 2 + e;
                const bool visible = pr >= 0 && key <= pr && (kWindow == 0 || pr - key < kWindow);
                v = visible ? v : kNegInf;
              }
              sc[n][2 * ri + e] = v;
              mx = fmaxf(mx, v);
            }
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          const float mNew = fmaxf(rowMax[ri], mx);
          // A row with nothing visible yet keeps exp2(-inf - 0) = 0 everywhere.
          const float ref = mNew == kNegInf ? 0.0f : mNew;
          const float alpha = exp2f(rowMax[ri] - ref);
          rowMax[ri] = mNew;
          rowSum[ri] *= alpha;
#pragma unroll
          for (int n = 0; n < kHeadDim / 8; ++n) {
            o[n][2 * ri] *= alpha;
            o[n][2 * ri + 1] *= alpha;
          }
#pragma unroll
          for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e)
              sc[n][2 * ri + e] = exp2f(sc[n][2 * ri + e] - ref);
        }

        // P (rounded to 16 bits, and summed as rounded so the weights the mma
        // uses are exactly the ones normalized by) times V.
#pragma unroll
        for (int kk = 0; kk < kKeys / 16; ++kk) {
          unsigned a[4];
          a[0] = packPair<elem_t>(sc[2 * kk][0], sc[2 * kk][1], rowSum[0]);
          a[1] = packPair<elem_t>(sc[2 * kk][2], sc[2 * kk][3], rowSum[1]);
          a[2] = packPair<elem_t>(sc[2 * kk + 1][0], sc[2 * kk + 1][1], rowSum[0]);
          a[3] = packPair<elem_t>(sc[2 * kk + 1][2], sc[2 * kk + 1][3], rowSum[1]);
#pragma unroll
          for (int dp = 0; dp < kHeadDim / 16; ++dp) {
            unsigned b[4];
            loadMatrixT(b, sV + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kPad + dp * 16 +
                               (lane >> 4) * 8);
            mma16816<elem_t>(o[2 * dp], a, b[0], b[1]);
            mma16816<elem_t>(o[2 * dp + 1], a, b[2], b[3]);
          }
        }
      }
      __syncthreads(); // the stage is refilled next iteration
    }

#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      float sum = rowSum[ri];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      const int r = ri ? r1 : r0;
      if ((ri ? pos1 : pos0) >= 0) {
        elem_t *dst = out + (size_t)r * kQueryWidth + h * kHeadDim + (lane & 3) * 2;
#pragma unroll
        for (int n = 0; n < kHeadDim / 8; ++n)
          storePair(dst + n * 8, o[n][2 * ri] * inv, o[n][2 * ri + 1] * inv);
      }
    }
  } // segments
}

// The entry point (AttentionEmitter's emitPrefill); Config adds
// RELEASE_EARLY (common.cuh).
template <class C>
__global__ void __launch_bounds__(C::kThreads) prefillChunkKernel(
    const typename C::elem_t *__restrict__ query, const int *__restrict__ positions,
    const int *__restrict__ slots, const typename C::elem_t *__restrict__ k_cache,
    const typename C::elem_t *__restrict__ v_cache, const int *__restrict__ block_tables,
    typename C::elem_t *__restrict__ out) {
  wf_grid_dependency_enter<C>();
  prefillChunk<C>(query, positions, slots, k_cache, v_cache, block_tables, out);
}

} // namespace weft::kernels::attention
