// Decode attention: flash-decoding over the paged KV cache. Each block takes
// one token, a group of query heads of one KV head and one split of the
// positions it attends to; with several splits, decodeCombine weighs the
// splits' partial results together. Two engines for the split pass:
// - decodeSplit (SIMT): K/V rows through shared memory by cp.async, each
//   row read by kLanesPerRow lanes once for all the group's query heads;
// - decodeSplitTc (tensor cores, groups above 4 heads): the heads are the
//   16 rows of mma.m16n8k16, Q Kᵀ and P V on tensor cores.
//
// Config (besides weft/attention.cuh's): kSplits, kGranule, kHeadBlocks,
// kHeadsPerBlock, kHeadsExact, kWarps, kThreads, kStages, kStageElems,
// kCopies, kCopiesPerThread, kPartialValues, kNoScore; SIMT: kVec, kWords,
// kChunks, kLanesPerRow, kChunksPerLane, kChunksExact, kRowsPerWarp,
// kUnroll, kTile; tensor cores: kKeys, kPad, kDimChunks.
// Grid: (kTokens, kKvHeads * kHeadBlocks, kSplits); block: kThreads; dynamic
// shared memory: the K/V stages or the warps' merge, whichever is larger.
// Combine grid: (kTokens, kHeads); block: head_dim rounded up to a warp.
#pragma once

#include "weft/attention.cuh"

namespace weft::kernels::attention {

// One vector of a K/V row (kWords 32-bit words) from global memory.
template <class C>
__device__ __forceinline__ void loadWords(const typename C::elem_t *p, unsigned (&w)[C::kWords]) {
  if constexpr (C::kWords == 4) {
    const uint4 v = __ldg(reinterpret_cast<const uint4 *>(p));
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
  } else if constexpr (C::kWords == 2) {
    const uint2 v = __ldg(reinterpret_cast<const uint2 *>(p));
    w[0] = v.x; w[1] = v.y;
  } else {
    w[0] = __ldg(reinterpret_cast<const unsigned *>(p));
  }
}

// cp.async of one vector (zero-filled when `fill` is false) and the
// matching shared-memory load.
template <class C>
__device__ __forceinline__ void copyAsync(typename C::elem_t *dst, const typename C::elem_t *src,
                                          bool fill) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  if constexpr (C::kWords == 4)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
                 "r"(fill ? 16 : 0) : "memory");
  else if constexpr (C::kWords == 2)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(src),
                 "r"(fill ? 8 : 0) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src),
                 "r"(fill ? 4 : 0) : "memory");
}
template <class C>
__device__ __forceinline__ void loadShared(const typename C::elem_t *p, unsigned (&w)[C::kWords]) {
  if constexpr (C::kWords == 4) {
    const uint4 v = *reinterpret_cast<const uint4 *>(p);
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
  } else if constexpr (C::kWords == 2) {
    const uint2 v = *reinterpret_cast<const uint2 *>(p);
    w[0] = v.x; w[1] = v.y;
  } else {
    w[0] = *reinterpret_cast<const unsigned *>(p);
  }
}

// The kVec values of a vector's words, as f32.
template <class C>
__device__ __forceinline__ void unpack(const unsigned (&w)[C::kWords], float (&f)[C::kVec]) {
#pragma unroll
  for (int i = 0; i < C::kWords; ++i) {
    if constexpr (sizeof(typename C::elem_t) == 4) {
      f[i] = __uint_as_float(w[i]);
    } else {
      const float2 v = unpackPair<typename C::elem_t>(w[i]);
      f[2 * i] = v.x;
      f[2 * i + 1] = v.y;
    }
  }
}

// What a split kernel's block works on: token blockIdx.x, its query heads
// [headBase, headBase + headCount) of KV head kvh (head block blockIdx.y),
// and split blockIdx.z's positions [begin, end) of the sequence in slot.
struct SplitWork {
  int t, kvh, headBase, headCount, split, pos, slot, begin, end;
};

// The block's SplitWork, or false when it has nothing to do: a padding
// token (whose rows it zeroes when no combine kernel will), a row the chunk
// kernel writes, or a split past the end of a short context.
template <class C>
__device__ __forceinline__ bool splitWork(const int *__restrict__ positions,
                                          const int *__restrict__ slots, void *outOrPartials,
                                          SplitWork &w) {
  using elem_t = typename C::elem_t;
  w.t = blockIdx.x;
  w.kvh = blockIdx.y / C::kHeadBlocks;
  w.headBase = w.kvh * C::kGroup + (blockIdx.y % C::kHeadBlocks) * C::kHeadsPerBlock;
  w.headCount = C::kHeadsExact ? C::kHeadsPerBlock
                               : min(C::kHeadsPerBlock, (w.kvh + 1) * C::kGroup - w.headBase);
  w.split = blockIdx.z;
  w.pos = positions[w.t];
  w.slot = slots[w.t];
  if (!tokenValid<C>(w.pos, w.slot)) {
    // With splits the combine kernel writes the zeros.
    elem_t *out = reinterpret_cast<elem_t *>(outOrPartials);
    if (C::kSplits == 1)
      for (int i = threadIdx.x; i < w.headCount * C::kHeadDim; i += C::kThreads)
        out[(size_t)w.t * C::kQueryWidth + w.headBase * C::kHeadDim + i] = wf_to<elem_t>(0.0f);
    return false;
  }
  if (chunkRow<C>(slots, w.t))
    return false; // the chunk kernel writes this row
  const int lo = firstVisible<C>(w.pos);
  const int length = splitLength<C>(w.pos + 1 - lo);
  w.begin = lo + w.split * length;
  w.end = min(w.pos + 1, w.begin + length);
  return w.begin < w.end; // a short context leaves the later splits empty
}

// The end of a split kernel: the warps' online-softmax results (per warp w
// and head g: the running max sMax[w * STRIDE + g], the sum sSum and the
// unnormalized output row sAcc[(w * STRIDE + g) * kHeadDim]; a warp that saw
// no key holds kNoScore and weighs 0) merged per head, then the head's
// output written (one split) or the split's partial (output, max, sum) for
// the combine kernel.
template <class C, int STRIDE>
__device__ __forceinline__ void mergeWarps(const SplitWork &work, const float *sAcc,
                                           const float *sMax, const float *sSum,
                                           void *outOrPartials) {
  using elem_t = typename C::elem_t;
  constexpr int kHeadDim = C::kHeadDim;
  elem_t *out = reinterpret_cast<elem_t *>(outOrPartials);
  float *partials = reinterpret_cast<float *>(outOrPartials);
  for (int i = threadIdx.x; i < work.headCount * kHeadDim; i += C::kThreads) {
    const int g = i / kHeadDim, d = i % kHeadDim;
    float mAll = C::kNoScore;
#pragma unroll
    for (int w = 0; w < C::kWarps; ++w)
      mAll = fmaxf(mAll, sMax[w * STRIDE + g]);
    float a = 0.0f, sum = 0.0f;
#pragma unroll
    for (int w = 0; w < C::kWarps; ++w) {
      const float f = exp2f(sMax[w * STRIDE + g] - mAll);
      a += f * sAcc[(w * STRIDE + g) * kHeadDim + d];
      sum += f * sSum[w * STRIDE + g];
    }
    const int h = work.headBase + g;
    if (C::kSplits == 1) {
      out[(size_t)work.t * C::kQueryWidth + h * kHeadDim + d] =
          wf_to<elem_t>(sum > 0.0f ? a / sum : 0.0f);
    } else {
      const size_t part = ((size_t)work.t * C::kHeads + h) * C::kSplits + work.split;
      partials[part * kHeadDim + d] = a;
      if (d == 0) {
        partials[C::kPartialValues + 2 * part] = mAll;
        partials[C::kPartialValues + 2 * part + 1] = sum;
      }
    }
  }
}

// One block: token blockIdx.x, the query heads [headBase, headBase +
// kHeadsPerBlock) of KV head blockIdx.y / kHeadBlocks, positions of split
// blockIdx.z. K/V rows (one position of the KV head each) arrive in shared
// memory by 16-byte cp.async copies; each row is then read by kLanesPerRow
// lanes with vector loads, once for all the group's query heads. Every row
// of lanes keeps its own online softmax (running max m, sum l and
// accumulator in f32, base-2 scores); rows merge in the warp, warps in
// shared memory.
template <class C>
__device__ __forceinline__ void decodeSplit(
    const typename C::elem_t *__restrict__ query, const int *__restrict__ positions,
    const int *__restrict__ slots, const typename C::elem_t *__restrict__ k_cache,
    const typename C::elem_t *__restrict__ v_cache, const int *__restrict__ block_tables,
    void *__restrict__ outOrPartials) {
  using elem_t = typename C::elem_t;
  // The configuration, as the body names it.
  constexpr auto kBlockTokens = C::kBlockTokens;
  constexpr auto kChunks = C::kChunks;
  constexpr auto kChunksExact = C::kChunksExact;
  constexpr auto kChunksPerLane = C::kChunksPerLane;
  constexpr auto kCopies = C::kCopies;
  constexpr auto kCopiesPerThread = C::kCopiesPerThread;
  constexpr auto kHeadDim = C::kHeadDim;
  constexpr auto kHeadsExact = C::kHeadsExact;
  constexpr auto kHeadsPerBlock = C::kHeadsPerBlock;
  constexpr auto kLanesPerRow = C::kLanesPerRow;
  constexpr auto kMaxBlocks = C::kMaxBlocks;
  constexpr auto kNoScore = C::kNoScore;
  constexpr auto kQueryWidth = C::kQueryWidth;
  constexpr auto kRowStride = C::kRowStride;
  constexpr auto kRowsPerWarp = C::kRowsPerWarp;
  constexpr auto kScaleLog2 = C::kScaleLog2;
  constexpr auto kStageElems = C::kStageElems;
  constexpr auto kStages = C::kStages;
  constexpr auto kThreads = C::kThreads;
  constexpr auto kTile = C::kTile;
  constexpr auto kUnroll = C::kUnroll;
  constexpr auto kVec = C::kVec;
  constexpr auto kWarps = C::kWarps;
  constexpr auto kWords = C::kWords;
  extern __shared__ uint4 smemVec[];
  // After the key loop the stages hold the warps' partial results.
  float *sAcc = reinterpret_cast<float *>(smemVec);        // [kWarps][kHeadsPerBlock][kHeadDim]
  float *sMax = sAcc + kWarps * kHeadsPerBlock * kHeadDim; // [kWarps][kHeadsPerBlock]
  float *sSum = sMax + kWarps * kHeadsPerBlock;            // [kWarps][kHeadsPerBlock]

  SplitWork work;
  if (!splitWork<C>(positions, slots, outOrPartials, work))
    return;
  const int t = work.t, kvh = work.kvh, headBase = work.headBase, headCount = work.headCount;
  const int split = work.split, slot = work.slot;
  const int begin = work.begin, end = work.end;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = lane / kLanesPerRow, sub = lane % kLanesPerRow;

  // The query vectors this lane multiplies, pre-scaled to base-2 scores.
  float q[kHeadsPerBlock][kChunksPerLane][kVec];
#pragma unroll
  for (int g = 0; g < kHeadsPerBlock; ++g)
#pragma unroll
    for (int c = 0; c < kChunksPerLane; ++c) {
      const int chunk = sub + c * kLanesPerRow;
      unsigned w[kWords];
      float f[kVec];
      if ((kHeadsExact || g < headCount) && (kChunksExact || chunk < kChunks)) {
        loadWords<C>(query + (size_t)t * kQueryWidth + (headBase + g) * kHeadDim + chunk * kVec, w);
        unpack<C>(w, f);
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e)
          f[e] = 0.0f;
      }
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        q[g][c][e] = f[e] * kScaleLog2;
    }

  float m[kHeadsPerBlock], l[kHeadsPerBlock], acc[kHeadsPerBlock][kChunksPerLane][kVec];
#pragma unroll
  for (int g = 0; g < kHeadsPerBlock; ++g) {
    m[g] = kNoScore;
    l[g] = 0.0f;
#pragma unroll
    for (int c = 0; c < kChunksPerLane; ++c)
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        acc[g][c][e] = 0.0f;
  }

  // K/V rows stream through shared memory, kStages tiles of kTile positions
  // in flight (cp.async: no registers held), so the loads of later tiles
  // overlap the arithmetic on this one.
  const int *table = block_tables + (size_t)slot * kMaxBlocks;
  const size_t headOffset = (size_t)kvh * kHeadDim;
  elem_t *stages = reinterpret_cast<elem_t *>(smemVec);
  const int tiles = (end - begin + kTile - 1) / kTile;
  auto loadTile = [&](int i) {
    elem_t *sK = stages + (i % kStages) * kStageElems;
    elem_t *sV = sK + kTile * kHeadDim;
    const int first = begin + i * kTile;
#pragma unroll
    for (int n = 0; n < kCopiesPerThread; ++n) {
      const int idx = threadIdx.x + n * kThreads;
      if (kCopies % kThreads != 0 && idx >= kCopies)
        break;
      const int r = idx / kChunks, c = idx % kChunks;
      const int p = first + r;
      const bool ok = p < end; // past the end: zeros, never NaN garbage
      size_t offset = 0;
      if (ok) {
        const int page = __ldg(table + p / kBlockTokens);
        offset = ((size_t)page * kBlockTokens + p % kBlockTokens) * kRowStride + headOffset +
                 c * kVec;
      }
      copyAsync<C>(sK + r * kHeadDim + c * kVec, k_cache + offset, ok);
      copyAsync<C>(sV + r * kHeadDim + c * kVec, v_cache + offset, ok);
    }
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < tiles)
      loadTile(i);
    copyAsyncCommit(); // empty groups keep the count uniform
  }

  // Warp w, row r of it takes tile rows (w * kRowsPerWarp + r) * kUnroll + u.
  // The trip count is block-uniform, so every shuffle sees all 32 lanes.
  for (int i = 0; i < tiles; ++i) {
    copyAsyncWait<kStages - 2>();
    __syncthreads(); // tile i landed; everyone is done with tile i - 1
    if (i + kStages - 1 < tiles)
      loadTile(i + kStages - 1);
    copyAsyncCommit();
    const elem_t *sK = stages + (i % kStages) * kStageElems;
    const elem_t *sV = sK + kTile * kHeadDim;
    const int first = begin + i * kTile;
    // V is read from shared memory only when needed, to save registers.
    const int rowBase = (warp * kRowsPerWarp + row) * kUnroll;
    unsigned kw[kUnroll][kChunksPerLane][kWords];
    bool live[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      live[u] = first + rowBase + u < end;
#pragma unroll
      for (int c = 0; c < kChunksPerLane; ++c) {
        const int chunk = sub + c * kLanesPerRow;
        if (kChunksExact || chunk < kChunks) {
          loadShared<C>(sK + (rowBase + u) * kHeadDim + chunk * kVec, kw[u][c]);
        } else {
#pragma unroll
          for (int w = 0; w < kWords; ++w)
            kw[u][c][w] = 0u;
        }
      }
    }

    // Scores: partial dot products, summed over the row's lanes.
    float s[kUnroll][kHeadsPerBlock];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float kf[kChunksPerLane][kVec];
#pragma unroll
      for (int c = 0; c < kChunksPerLane; ++c)
        unpack<C>(kw[u][c], kf[c]);
#pragma unroll
      for (int g = 0; g < kHeadsPerBlock; ++g) {
        float dot = 0.0f;
#pragma unroll
        for (int c = 0; c < kChunksPerLane; ++c)
#pragma unroll
          for (int e = 0; e < kVec; ++e)
            dot = fmaf(q[g][c][e], kf[c][e], dot);
        s[u][g] = dot;
      }
    }
#pragma unroll
    for (int offset = 1; offset < kLanesPerRow; offset <<= 1)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int g = 0; g < kHeadsPerBlock; ++g)
          s[u][g] += __shfl_xor_sync(0xffffffffu, s[u][g], offset);
    if constexpr (C::kSoftcapLog2 > 0.0f)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int g = 0; g < kHeadsPerBlock; ++g)
          s[u][g] = capScore<C>(s[u][g]);

    // Online softmax. The running max settles quickly, so the rescale of
    // the accumulators is skipped when no lane of the warp saw it grow.
    float mOld[kHeadsPerBlock];
    bool grew = false;
#pragma unroll
    for (int g = 0; g < kHeadsPerBlock; ++g) {
      mOld[g] = m[g];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (live[u])
          m[g] = fmaxf(m[g], s[u][g]);
      grew |= m[g] > mOld[g];
    }
    if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
      for (int g = 0; g < kHeadsPerBlock; ++g) {
        const float alpha = exp2f(mOld[g] - m[g]);
        l[g] *= alpha;
#pragma unroll
        for (int c = 0; c < kChunksPerLane; ++c)
#pragma unroll
          for (int e = 0; e < kVec; ++e)
            acc[g][c][e] *= alpha;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float vf[kChunksPerLane][kVec];
#pragma unroll
      for (int c = 0; c < kChunksPerLane; ++c) {
        const int chunk = sub + c * kLanesPerRow;
        unsigned vw[kWords];
        if (kChunksExact || chunk < kChunks) {
          loadShared<C>(sV + (rowBase + u) * kHeadDim + chunk * kVec, vw);
        } else {
#pragma unroll
          for (int w = 0; w < kWords; ++w)
            vw[w] = 0u;
        }
        unpack<C>(vw, vf[c]);
      }
#pragma unroll
      for (int g = 0; g < kHeadsPerBlock; ++g) {
        const float p = live[u] ? exp2f(s[u][g] - m[g]) : 0.0f;
        l[g] += p;
#pragma unroll
        for (int c = 0; c < kChunksPerLane; ++c)
#pragma unroll
          for (int e = 0; e < kVec; ++e)
            acc[g][c][e] = fmaf(p, vf[c][e], acc[g][c][e]);
      }
    }
  }

  copyAsyncWait<0>();
  __syncthreads(); // sAcc below reuses the stages

  // Merge the rows of the warp (lanes kLanesPerRow apart hold the same
  // columns of different rows).
#pragma unroll
  for (int offset = kLanesPerRow; offset < 32; offset <<= 1)
#pragma unroll
    for (int g = 0; g < kHeadsPerBlock; ++g) {
      const float mOther = __shfl_xor_sync(0xffffffffu, m[g], offset);
      const float lOther = __shfl_xor_sync(0xffffffffu, l[g], offset);
      const float mNew = fmaxf(m[g], mOther);
      const float a = exp2f(m[g] - mNew), b = exp2f(mOther - mNew);
      m[g] = mNew;
      l[g] = l[g] * a + lOther * b;
#pragma unroll
      for (int c = 0; c < kChunksPerLane; ++c)
#pragma unroll
        for (int e = 0; e < kVec; ++e)
          acc[g][c][e] = acc[g][c][e] * a + __shfl_xor_sync(0xffffffffu, acc[g][c][e], offset) * b;
    }
  if (row == 0) {
#pragma unroll
    for (int g = 0; g < kHeadsPerBlock; ++g) {
#pragma unroll
      for (int c = 0; c < kChunksPerLane; ++c) {
        const int chunk = sub + c * kLanesPerRow;
        if (kChunksExact || chunk < kChunks)
#pragma unroll
          for (int e = 0; e < kVec; ++e)
            sAcc[(warp * kHeadsPerBlock + g) * kHeadDim + chunk * kVec + e] = acc[g][c][e];
      }
      if (sub == 0) {
        sMax[warp * kHeadsPerBlock + g] = m[g];
        sSum[warp * kHeadsPerBlock + g] = l[g];
      }
    }
  }
  __syncthreads();

  // Merge the warps; write the output (one split) or this split's partial.
  mergeWarps<C, kHeadsPerBlock>(work, sAcc, sMax, sSum, outOrPartials);
}

// One block: token blockIdx.x, query heads [headBase, headBase +
// kHeadsPerBlock) of KV head blockIdx.y / kHeadBlocks, positions of split
// blockIdx.z. The heads are the 16 rows of mma.sync m16n8k16 (rows past the
// group are zero), so Q·Kᵀ and P·V run on tensor cores with f32
// accumulation while K/V tiles stream in through cp.async. Warp w takes
// keys [16w, 16w + 16) of every tile and keeps its own online softmax (base
// 2); the warps merge at the end. Thread (lane) holds rows lane/4 and
// lane/4 + 8, columns 2 * (lane % 4) + {0, 1} of every 8-wide tile.
template <class C>
__device__ __forceinline__ void decodeSplitTc(
    const typename C::elem_t *__restrict__ query, const int *__restrict__ positions,
    const int *__restrict__ slots, const typename C::elem_t *__restrict__ k_cache,
    const typename C::elem_t *__restrict__ v_cache, const int *__restrict__ block_tables,
    void *__restrict__ outOrPartials) {
  using elem_t = typename C::elem_t;
  // The configuration, as the body names it.
  constexpr auto kBlockTokens = C::kBlockTokens;
  constexpr auto kCopies = C::kCopies;
  constexpr auto kCopiesPerThread = C::kCopiesPerThread;
  constexpr auto kDimChunks = C::kDimChunks;
  constexpr auto kHeadDim = C::kHeadDim;
  constexpr auto kKeys = C::kKeys;
  constexpr auto kMaxBlocks = C::kMaxBlocks;
  constexpr auto kPad = C::kPad;
  constexpr auto kQueryWidth = C::kQueryWidth;
  constexpr auto kRowStride = C::kRowStride;
  constexpr auto kScaleLog2 = C::kScaleLog2;
  constexpr auto kStageElems = C::kStageElems;
  constexpr auto kStages = C::kStages;
  constexpr auto kThreads = C::kThreads;
  constexpr auto kWarps = C::kWarps;
  extern __shared__ uint4 smemVec[];
  elem_t *smem = reinterpret_cast<elem_t *>(smemVec);
  const float kNegInf = __int_as_float(0xff800000u);

  SplitWork work;
  if (!splitWork<C>(positions, slots, outOrPartials, work))
    return;
  const int t = work.t, kvh = work.kvh, headBase = work.headBase, headCount = work.headCount;
  const int slot = work.slot;
  const int begin = work.begin, end = work.end;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int *table = block_tables + (size_t)slot * kMaxBlocks;
  const size_t headOffset = (size_t)kvh * kHeadDim;
  const int tiles = (end - begin + kKeys - 1) / kKeys;
  auto loadTile = [&](int i) {
    elem_t *sK = smem + (i % kStages) * kStageElems;
    elem_t *sV = sK + kKeys * kPad;
    const int first = begin + i * kKeys;
#pragma unroll
    for (int n = 0; n < kCopiesPerThread; ++n) {
      const int idx = tid + n * kThreads;
      if (kCopies % kThreads != 0 && idx >= kCopies)
        break;
      const int r = idx / kDimChunks, c = idx % kDimChunks;
      const int p = first + r;
      const bool ok = p < end;
      size_t offset = 0;
      if (ok) {
        const int page = __ldg(table + p / kBlockTokens);
        offset = ((size_t)page * kBlockTokens + p % kBlockTokens) * kRowStride + headOffset +
                 c * 8;
      }
      copyAsync16(sK + r * kPad + c * 8, k_cache + offset, ok);
      copyAsync16(sV + r * kPad + c * 8, v_cache + offset, ok);
    }
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < tiles)
      loadTile(i);
    copyAsyncCommit(); // empty groups keep the count uniform
  }

  // Q fragments from global memory: rows are heads headBase + lane/4 (+ 8).
  const int g0 = lane >> 2, g1 = g0 + 8;
  const bool has0 = g0 < headCount, has1 = g1 < headCount;
  unsigned qFrag[kHeadDim / 16][4];
  {
    const elem_t *qRow = query + (size_t)t * kQueryWidth + headBase * kHeadDim + (lane & 3) * 2;
    const unsigned *qa = reinterpret_cast<const unsigned *>(qRow + (has0 ? g0 : 0) * kHeadDim);
    const unsigned *qb = reinterpret_cast<const unsigned *>(qRow + (has1 ? g1 : 0) * kHeadDim);
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      qFrag[kk][0] = has0 ? __ldg(qa + kk * 8) : 0u;
      qFrag[kk][1] = has1 ? __ldg(qb + kk * 8) : 0u;
      qFrag[kk][2] = has0 ? __ldg(qa + kk * 8 + 4) : 0u;
      qFrag[kk][3] = has1 ? __ldg(qb + kk * 8 + 4) : 0u;
    }
  }

  float o[kHeadDim / 8][4];
#pragma unroll
  for (int n = 0; n < kHeadDim / 8; ++n)
    o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float rowMax[2] = {kNegInf, kNegInf};
  float rowSum[2] = {0.0f, 0.0f}; // this thread's columns only until the end

  for (int i = 0; i < tiles; ++i) {
    copyAsyncWait<kStages - 2>();
    __syncthreads(); // tile i landed; everyone is done with tile i - 1
    if (i + kStages - 1 < tiles)
      loadTile(i + kStages - 1);
    copyAsyncCommit();
    const int kb = begin + i * kKeys + warp * 16; // this warp's first key
    if (kb >= end)
      continue; // warp-uniform
    const elem_t *sK = smem + (i % kStages) * kStageElems + warp * 16 * kPad;
    const elem_t *sV = sK + kKeys * kPad;

    float sc[2][4];
#pragma unroll
    for (int n = 0; n < 2; ++n)
      sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      unsigned b[4];
      loadMatrix(b, sK + ((lane & 7) + ((lane >> 4) << 3)) * kPad + kk * 16 + ((lane >> 3) & 1) * 8);
      mma16816<elem_t>(sc[0], qFrag[kk], b[0], b[1]);
      mma16816<elem_t>(sc[1], qFrag[kk], b[2], b[3]);
    }

    // Online softmax; the rescale is skipped while no row's max grows.
    float mOld[2];
    bool grew = false;
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      float mx = kNegInf;
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = kb + n * 8 + (lane & 3) * 2 + e;
          const float v = key < end ? capScore<C>(sc[n][2 * ri + e] * kScaleLog2) : kNegInf;
          sc[n][2 * ri + e] = v;
          mx = fmaxf(mx, v);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      mOld[ri] = rowMax[ri];
      rowMax[ri] = fmaxf(rowMax[ri], mx);
      grew |= rowMax[ri] > mOld[ri];
    }
    if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
      for (int ri = 0; ri < 2; ++ri) {
        const float alpha = exp2f(mOld[ri] - rowMax[ri]); // -inf - finite: 0
        rowSum[ri] *= alpha;
#pragma unroll
        for (int n = 0; n < kHeadDim / 8; ++n) {
          o[n][2 * ri] *= alpha;
          o[n][2 * ri + 1] *= alpha;
        }
      }
    }
#pragma unroll
    for (int ri = 0; ri < 2; ++ri)
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          sc[n][2 * ri + e] = exp2f(sc[n][2 * ri + e] - rowMax[ri]);

    unsigned a[4];
    a[0] = packPair<elem_t>(sc[0][0], sc[0][1], rowSum[0]);
    a[1] = packPair<elem_t>(sc[0][2], sc[0][3], rowSum[1]);
    a[2] = packPair<elem_t>(sc[1][0], sc[1][1], rowSum[0]);
    a[3] = packPair<elem_t>(sc[1][2], sc[1][3], rowSum[1]);
#pragma unroll
    for (int dp = 0; dp < kHeadDim / 16; ++dp) {
      unsigned b[4];
      loadMatrixT(b, sV + ((lane & 7) + ((lane >> 3) & 1) * 8) * kPad + dp * 16 + (lane >> 4) * 8);
      mma16816<elem_t>(o[2 * dp], a, b[0], b[1]);
      mma16816<elem_t>(o[2 * dp + 1], a, b[2], b[3]);
    }
  }
  copyAsyncWait<0>();
  __syncthreads(); // the merge below reuses the stages

  // Merge the warps: sO[warp][row][d], sMax/sSum[warp][row].
  float *sO = reinterpret_cast<float *>(smemVec);
  float *sMax = sO + kWarps * 16 * kHeadDim;
  float *sSum = sMax + kWarps * 16;
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    float sum = rowSum[ri];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = g0 + 8 * ri;
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) {
      const int d = n * 8 + (lane & 3) * 2;
      sO[(warp * 16 + row) * kHeadDim + d] = o[n][2 * ri];
      sO[(warp * 16 + row) * kHeadDim + d + 1] = o[n][2 * ri + 1];
    }
    if ((lane & 3) == 0) {
      sMax[warp * 16 + row] = rowMax[ri];
      sSum[warp * 16 + row] = sum;
    }
  }
  __syncthreads();
  mergeWarps<C, 16>(work, sO, sMax, sSum, outOrPartials);
}

// One block per (token, query head): weighs the splits' partial results by
// exp2(max_s - max) and normalizes by the weighted sum.
template <class C>
__device__ __forceinline__ void decodeCombine(const int *__restrict__ positions,
                                              const int *__restrict__ slots,
                                              const float *__restrict__ partials,
                                              typename C::elem_t *__restrict__ out) {
  using elem_t = typename C::elem_t;
  // The configuration, as the body names it.
  constexpr auto kHeadDim = C::kHeadDim;
  constexpr auto kHeads = C::kHeads;
  constexpr auto kNoScore = C::kNoScore;
  constexpr auto kPartialValues = C::kPartialValues;
  constexpr auto kQueryWidth = C::kQueryWidth;
  constexpr auto kSplits = C::kSplits;
  extern __shared__ uint4 smemVec[];
  float *sWeight = reinterpret_cast<float *>(smemVec); // [kSplits], then 1/sum
  const int t = blockIdx.x, h = blockIdx.y;
  const int pos = positions[t];
  elem_t *o = out + (size_t)t * kQueryWidth + h * kHeadDim;
  if (!tokenValid<C>(pos, slots[t])) {
    for (int d = threadIdx.x; d < kHeadDim; d += blockDim.x)
      o[d] = wf_to<elem_t>(0.0f);
    return;
  }
  if (chunkRow<C>(slots, t))
    return; // the chunk kernel writes this row
  const int lo = firstVisible<C>(pos);
  const int span = pos + 1 - lo;
  const int length = splitLength<C>(span);
  const int used = (span + length - 1) / length; // splits that did work
  const size_t first = ((size_t)t * kHeads + h) * kSplits;
  const float *stats = partials + kPartialValues + 2 * first;
  if (threadIdx.x < 32) {
    float mAll = kNoScore;
    for (int s = threadIdx.x; s < used; s += 32)
      mAll = fmaxf(mAll, stats[2 * s]);
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
      mAll = fmaxf(mAll, __shfl_xor_sync(0xffffffffu, mAll, offset));
    float sum = 0.0f;
    for (int s = threadIdx.x; s < used; s += 32) {
      const float w = exp2f(stats[2 * s] - mAll);
      sWeight[s] = w;
      sum += w * stats[2 * s + 1];
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (threadIdx.x == 0)
      sWeight[kSplits] = sum > 0.0f ? 1.0f / sum : 0.0f;
  }
  __syncthreads();
  const float inv = sWeight[kSplits];
  for (int d = threadIdx.x; d < kHeadDim; d += blockDim.x) {
    float a = 0.0f;
    for (int s = 0; s < used; ++s)
      a = fmaf(sWeight[s], partials[(first + s) * kHeadDim + d], a);
    o[d] = wf_to<elem_t>(a * inv);
  }
}

// The entry points (AttentionEmitter's emitDecode): the split pass, SIMT or
// on tensor cores (TENSOR_CORES), writes the output (one split) or its
// partials; the combine weighs the partials. Config adds RELEASE_EARLY
// (common.cuh).
template <class C, bool TENSOR_CORES>
__global__ void __launch_bounds__(C::kThreads) decodeSplitKernel(
    const typename C::elem_t *__restrict__ query, const int *__restrict__ positions,
    const int *__restrict__ slots, const typename C::elem_t *__restrict__ k_cache,
    const typename C::elem_t *__restrict__ v_cache, const int *__restrict__ block_tables,
    void *__restrict__ outOrPartials) {
  wf_grid_dependency_enter<C>();
  if constexpr (TENSOR_CORES)
    decodeSplitTc<C>(query, positions, slots, k_cache, v_cache, block_tables, outOrPartials);
  else
    decodeSplit<C>(query, positions, slots, k_cache, v_cache, block_tables, outOrPartials);
}

template <class C>
__global__ void decodeCombineKernel(const int *__restrict__ positions,
                                    const int *__restrict__ slots,
                                    const float *__restrict__ partials,
                                    typename C::elem_t *__restrict__ out) {
  wf_grid_dependency_enter<C>();
  decodeCombine<C>(positions, slots, partials, out);
}

} // namespace weft::kernels::attention
