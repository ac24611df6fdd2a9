// CUDA kernels for "attention" regions: flash-decoding over the paged KV
// cache for decode buckets, tiled tensor-core flash attention for prefill.
#ifndef WEFT_TARGETS_CUDA_ATTENTIONEMITTER_H_
#define WEFT_TARGETS_CUDA_ATTENTIONEMITTER_H_

#include "targets/CUDA/KernelEmitter.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace weft::cuda {

// The steps of one "attention" region (a weft.fusion holding one
// weft.attention; token count static):
//  - decode (tokens <= kMaxGemvTokens), and prefill of f32 models or of head
//    dimensions the tensor-core kernel does not take: a split kernel, grid
//    (tokens, kv_heads * headBlocks, splits), block 128, and when splits > 1
//    a combine kernel, grid (tokens, num_heads), sharing Scratch buffer 0;
//  - prefill of f16/bf16 models with head_dim a multiple of 16 up to 128,
//    compiled for sm_80 or newer: one tensor-core kernel, grid
//    (ceil(tokens / 64), num_heads), block 128, reading the K/V pages of the
//    slot of each 64-token tile's first token (a chunk is one sequence).
// Parameters: query, positions, slots, k_cache, v_cache, block_tables, then
// out (RegionResult 0) or partials (Scratch 0); the combine kernel takes
// positions, slots, partials, out. All shared memory is dynamic and
// EmittedKernel::sharedBytes gives it (at most 48 KiB).
llvm::Expected<std::vector<EmittedStep>>
emitAttentionRegion(FusionOp region, const EmitOptions &options);

// How a decode-style launch is cut up; exposed for tests and the docs.
struct AttentionSplitPlan {
  int64_t splits = 1;        // blocks along the sequence (grid z)
  int64_t granule = 64;      // a split's range is a multiple of this
  int64_t headBlocks = 1;    // blocks per KV head (query-head groups > 8)
  int64_t headsPerBlock = 1; // query heads one block handles
  int64_t vec = 8;           // elements per 16-byte (or narrower) load
  int64_t lanesPerRow = 16;  // lanes that share one K/V row
  int64_t chunksPerLane = 1; // vectors of a row each of those lanes loads
  int64_t unroll = 4;        // positions per row per loop iteration
  int64_t warps = 4;
  int64_t stages = 3;        // K/V tiles in flight (cp.async)
};

// `maxSpan`: the most positions one token attends to (the cache's per
// sequence capacity, or the sliding window if smaller).
AttentionSplitPlan planAttentionSplits(int64_t tokens, int64_t numHeads,
                                       int64_t kvHeads, int64_t headDim,
                                       int64_t elementBytes, int64_t maxSpan,
                                       int64_t smCount);

} // namespace weft::cuda

#endif // WEFT_TARGETS_CUDA_ATTENTIONEMITTER_H_
