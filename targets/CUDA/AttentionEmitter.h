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
// weft.attention; token count static; sm_80 or newer):
//  - always a split flash-decoding kernel, grid (tokens, kv_heads *
//    headBlocks, splits), and when splits > 1 a combine kernel, grid
//    (tokens, num_heads), sharing Scratch buffer 0. The split kernel is
//    SIMT (128 threads) or, for f16/bf16 groups of more than 4 query heads
//    per KV head, tensor-core (64 threads). Each token reads the pages of
//    its own slot, so any mix of sequences is right;
//  - above kMaxGemvTokens tokens, for f16/bf16 with head_dim a multiple of
//    16 up to 128, then a tensor-core chunk kernel, grid (ceil(tokens / 64),
//    num_heads), 128 threads, for the rows of prefill chunks: rows whose
//    neighbour has the same slot. It takes each run of equal slots in its
//    64 rows with that sequence's block table; flash-decoding skips those
//    rows and keeps the rest (decode tokens, one-token prompts, pads).
// Parameters: query, positions, slots, k_cache, v_cache, block_tables, then
// out (RegionResult 0) or partials (Scratch 0); the combine kernel takes
// positions, slots, partials, out. All shared memory is dynamic and
// EmittedKernel::sharedBytes gives it (at most 48 KiB: no opt-in needed).
// Tokens with a negative or out-of-range position or slot get zeros.
llvm::Expected<std::vector<EmittedStep>>
emitAttentionRegion(FusionOp region, const EmitOptions &options);

// How a decode-style launch is cut up; exposed for tests and the docs.
struct AttentionSplitPlan {
  int64_t splits = 1;        // blocks along the sequence (grid z)
  int64_t granule = 64;      // a split's range is a multiple of this
  int64_t headBlocks = 1;    // blocks per KV head (large query-head groups)
  int64_t headsPerBlock = 1; // query heads one block handles
  int64_t vec = 8;           // elements per 16-byte (or narrower) load
  int64_t lanesPerRow = 16;  // lanes that share one K/V row
  int64_t chunksPerLane = 1; // vectors of a row each of those lanes loads
  int64_t unroll = 4;        // positions per row per loop iteration
  int64_t warps = 4;
  int64_t stages = 3;        // K/V tiles in flight (cp.async)
  // f16/bf16, head_dim a multiple of 16 up to 128, more than 4 query heads
  // per KV head: Q·Kᵀ and P·V on tensor cores, the query heads as the 16
  // rows of the mma, each warp 16 keys of a keysPerTile tile
  // (vec/lanesPerRow/chunksPerLane/unroll unused).
  bool tensorCores = false;
  int64_t keysPerTile = 32;
};

// `maxSpan`: the most positions one token attends to (the cache's per
// sequence capacity, or the sliding window if smaller). For decode buckets
// (tokens <= kMaxGemvTokens) the splits are sized so that one token alone
// fills the GPU, since lengths in a batch differ; larger launches (prefill
// chunks on these kernels) share the target among their tokens.
AttentionSplitPlan planAttentionSplits(int64_t tokens, int64_t numHeads,
                                       int64_t kvHeads, int64_t headDim,
                                       int64_t elementBytes, int64_t maxSpan,
                                       int64_t smCount);

} // namespace weft::cuda

#endif // WEFT_TARGETS_CUDA_ATTENTIONEMITTER_H_
