// Emits the attention kernels: split flash-decoding (SIMT or tensor cores)
// plus a combine kernel for decode, tensor-core flash attention for prefill.
#include "targets/CUDA/AttentionEmitter.h"
#include "targets/CUDA/EmitterSupport.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace weft::cuda {
namespace {

using detail::binding;
using detail::libraryKernel;
using detail::LibraryKernel;

using mlir::BlockArgument;
using mlir::RankedTensorType;
using mlir::Value;

// Everything a kernel is specialized for, read from the region.
struct AttentionShape {
  int64_t tokens = 0, heads = 0, kvHeads = 0, headDim = 0, layer = 0;
  int64_t window = 0; // 0: no sliding window
  double scale = 0.0;
  double softcap = 0.0; // Gemma 2: scores become softcap * tanh(score / softcap); 0: none
  ElementType elem = ElementType::BF16;
  // Operand indices of the weft.fusion.
  int64_t queryInput = 0, positionsInput = 1, slotsInput = 2;
};

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 ("attention region: " + message).str());
}

llvm::Expected<AttentionShape> readShape(FusionOp region) {
  mlir::Block &body = region.getBody().front();
  AttentionOp attn;
  for (mlir::Operation &op : body.without_terminator()) {
    auto a = llvm::dyn_cast<AttentionOp>(op);
    if (!a || attn)
      return fail("expected exactly one weft.attention in the body, found '" +
                  op.getName().getStringRef() + "'");
    attn = a;
  }
  if (!attn)
    return fail("no weft.attention in the body");
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  if (yield.getValues().size() != 1 || yield.getValues()[0] != attn.getResult() ||
      region.getNumResults() != 1)
    return fail("the region must yield exactly the attention result");

  AttentionShape s;
  auto argIndex = [&](Value v, const char *what, int64_t &index) -> llvm::Error {
    auto arg = llvm::dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != &body)
      return fail(llvm::Twine("the ") + what + " must be a region input");
    index = arg.getArgNumber();
    return llvm::Error::success();
  };
  if (llvm::Error e = argIndex(attn.getQuery(), "query", s.queryInput))
    return std::move(e);
  if (llvm::Error e = argIndex(attn.getPositions(), "positions", s.positionsInput))
    return std::move(e);
  if (llvm::Error e = argIndex(attn.getSlots(), "slots", s.slotsInput))
    return std::move(e);

  s.heads = attn.getNumHeads();
  s.kvHeads = attn.getNumKvHeads();
  s.headDim = attn.getHeadDim();
  s.layer = attn.getLayer();
  s.scale = attn.getScale().convertToDouble();
  if (auto cap = attn.getSoftcap())
    s.softcap = cap->convertToDouble();
  if (auto w = attn.getSlidingWindow())
    s.window = int64_t(*w);
  if (s.heads % s.kvHeads != 0)
    return fail("num_heads " + llvm::Twine(s.heads) +
                " is not a multiple of num_kv_heads " + llvm::Twine(s.kvHeads));

  auto qType = llvm::dyn_cast<RankedTensorType>(attn.getQuery().getType());
  if (!qType || qType.getRank() != 2)
    return fail("the query must be a rank-2 tensor");
  if (!qType.isDynamicDim(0)) {
    s.tokens = qType.getDimSize(0);
  } else if (mlir::DictionaryAttr dims = region.getDimsAttr()) {
    if (auto t = dims.getAs<mlir::IntegerAttr>("tokens"))
      s.tokens = t.getInt();
  }
  if (s.tokens <= 0)
    return fail("the token count is not static (run weft-specialize first)");
  if (qType.getDimSize(1) != s.heads * s.headDim)
    return fail("query width " + llvm::Twine(qType.getDimSize(1)) +
                " is not num_heads * head_dim");
  mlir::Type et = qType.getElementType();
  std::optional<ElementType> elem = elementTypeOf(et);
  if (!elem)
    return fail("unsupported activation dtype (f32, f16 or bf16 expected)");
  s.elem = *elem;
  KvCacheType cache = attn.getCache().getType();
  if (cache.getDtype() != et)
    return fail("the KV cache dtype differs from the query dtype");
  if (cache.getKvHeads() != s.kvHeads || cache.getHeadDim() != s.headDim)
    return fail("the KV cache shape differs from the attention's");
  if (s.headDim > 512)
    return fail("head_dim " + llvm::Twine(s.headDim) + " is above the supported 512");
  if ((s.headDim * bytesOf(s.elem)) % 4 != 0)
    return fail("head_dim " + llvm::Twine(s.headDim) +
                " is too odd for vector loads (head_dim * element size must be "
                "a multiple of 4 bytes)");

  // The dims the specializer recorded must agree with the op.
  if (mlir::DictionaryAttr dims = region.getDimsAttr()) {
    auto check = [&](const char *name, int64_t expected) -> llvm::Error {
      if (auto a = dims.getAs<mlir::IntegerAttr>(name))
        if (a.getInt() != expected)
          return fail(llvm::Twine("dims.") + name + " = " + llvm::Twine(a.getInt()) +
                      " disagrees with the op (" + llvm::Twine(expected) + ")");
      return llvm::Error::success();
    };
    for (auto [name, value] :
         {std::pair<const char *, int64_t>{"tokens", s.tokens},
          {"num_heads", s.heads},
          {"kv_heads", s.kvHeads},
          {"head_dim", s.headDim},
          {"layer", s.layer}})
      if (llvm::Error e = check(name, value))
        return std::move(e);
  }
  return s;
}

std::string kernelBaseName(const AttentionShape &s, const char *what) {
  std::string name;
  llvm::raw_string_ostream os(name);
  os << "weft_attention_" << what << "_t" << s.tokens << "_h" << s.heads << "_kv"
     << s.kvHeads << "_d" << s.headDim;
  if (s.window)
    os << "_w" << s.window;
  if (s.softcap)
    os << "_cap";
  os << "_" << elementTypeName(s.elem);
  // The scale is almost always 1/sqrt(head_dim); another one changes the
  // source, so it must change the name too.
  double standard = 1.0 / std::sqrt(double(s.headDim));
  float f = float(s.scale);
  if (f != float(standard)) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    os << "_sc" << llvm::format_hex_no_prefix(bits, 8);
  }
  os.flush();
  return name;
}

//===----------------------------------------------------------------------===//
// Decode: split flash-decoding and the combine kernel
//===----------------------------------------------------------------------===//

constexpr int kDecodeThreads = 128;
constexpr int64_t kMaxSharedBytes = 48 * 1024; // without the opt-in attribute
// Decode grid sizing and kernel choice, tuned on an H200 with 32k-position
// contexts (llama-3.1-8b/70b, llama-2-7b, qwen2.5-7b): about this many
// blocks per SM for one token's splits. More splits make each block's
// cp.async pipeline too short to pay for its fill (8 and 16 per SM were
// slower), fewer leave SMs idle.
constexpr int kDecodeBlocksPerSm = 4;   // SIMT kernel, 128 threads, 48 KiB
constexpr int kDecodeTcBlocksPerSm = 4; // tensor-core kernel, 64 threads
// The SIMT kernel holds the group's query rows and accumulators in
// registers: at most this many floats of each per lane.
constexpr int kDecodeLaneFloats = 64;
constexpr bool kDecodeTensorCores = true;
constexpr int kDecodeTcMinGroup = 4; // tensor cores for larger groups
constexpr int kDecodeTcWarps = 2;
constexpr double kLog2E = 1.4426950408889634;
constexpr const char *kNoScore = "-1.0e30f";

// The members of a region's Config (weft/attention.cuh) every kernel of it
// takes: the element type, model and cache dimensions.
void emitModelConstants(llvm::raw_ostream &os, const AttentionShape &s,
                        const EmitOptions &o, bool chunkKernel) {
  os << "  using elem_t = " << cudaType(s.elem) << ";\n"
     << "  // Model and cache dimensions, fixed at compile time.\n"
     << "  static constexpr int kTokens = " << s.tokens << ";\n"
     << "  static constexpr int kHeads = " << s.heads << ";\n"
     << "  static constexpr int kKvHeads = " << s.kvHeads << ";\n"
     << "  static constexpr int kGroup = " << s.heads / s.kvHeads
     << "; // query heads per KV head\n"
     << "  static constexpr int kHeadDim = " << s.headDim << ";\n"
     << "  static constexpr int kWindow = " << s.window << "; // sliding window, 0: none\n"
     << "  static constexpr float kScale = " << floatLiteral(s.scale) << ";\n"
     << "  static constexpr float kScaleLog2 = " << floatLiteral(s.scale * kLog2E)
     << "; // scale * log2(e): scores in base 2\n"
     << "  static constexpr float kSoftcapLog2 = " << floatLiteral(s.softcap * kLog2E)
     << "; // soft cap of the scores, in base 2 (0: none)\n"
     << "  static constexpr int kBlockTokens = " << o.blockTokens << ";\n"
     << "  static constexpr int kMaxBlocks = " << o.maxBlocksPerSequence
     << "; // block-table row length\n"
     << "  static constexpr int kMaxSequences = " << o.maxSequences << ";\n"
     << "  static constexpr int kMaxContext = kBlockTokens * kMaxBlocks;\n"
     << "  static constexpr int kQueryWidth = kHeads * kHeadDim;\n"
     << "  static constexpr int kRowStride = kKvHeads * kHeadDim; // one cached position\n"
     << "  static constexpr bool kChunkKernel = " << (chunkKernel ? "true" : "false")
     << "; // rows of prefill chunks go to the tensor-core chunk kernel\n";
}

void emitDecodeConstants(llvm::raw_ostream &os, const AttentionShape &s,
                         const AttentionSplitPlan &p, const EmitOptions &o,
                         bool chunkKernel) {
  emitModelConstants(os, s, o, chunkKernel);
  os << "  static constexpr int kSplits = " << p.splits << ";\n"
     << "  static constexpr int kGranule = " << p.granule << ";\n"
     << "  static constexpr int kHeadBlocks = " << p.headBlocks << ";\n"
     << "  static constexpr int kHeadsPerBlock = " << p.headsPerBlock << ";\n"
     << "  static constexpr int kHeadsExact = " << (s.heads / s.kvHeads ==
                                             p.headBlocks * p.headsPerBlock)
     << ";\n"
     << "  static constexpr int kWarps = " << p.warps << ";\n"
     << "  static constexpr int kThreads = kWarps * 32;\n"
     << "  static constexpr int kStages = " << p.stages << "; // K/V tiles in flight\n";
  if (p.tensorCores) {
    os << "  static constexpr int kKeys = " << p.keysPerTile << "; // 16 per warp\n"
       << "  static constexpr int kPad = kHeadDim + 8; // row pitch: conflict-free ldmatrix\n"
       << "  static constexpr int kDimChunks = kHeadDim / 8; // 16-byte pieces of a row\n"
       << "  static constexpr int kStageElems = 2 * kKeys * kPad; // K rows, then V rows\n"
       << "  static constexpr int kCopies = kKeys * kDimChunks;\n";
  } else {
    int64_t chunks = s.headDim / p.vec;
    os << "  static constexpr int kVec = " << p.vec << "; // elements per vector load\n"
       << "  static constexpr int kWords = " << p.vec * bytesOf(s.elem) / 4
       << "; // 32-bit words per vector load\n"
       << "  static constexpr int kChunks = " << chunks << "; // vectors per head row\n"
       << "  static constexpr int kLanesPerRow = " << p.lanesPerRow << ";\n"
       << "  static constexpr int kChunksPerLane = " << p.chunksPerLane << ";\n"
       << "  static constexpr int kChunksExact = "
       << (p.chunksPerLane * p.lanesPerRow == chunks) << ";\n"
       << "  static constexpr int kRowsPerWarp = 32 / kLanesPerRow;\n"
       << "  static constexpr int kUnroll = " << p.unroll << ";\n"
       << "  static constexpr int kTile = kWarps * kRowsPerWarp * kUnroll; // positions per stage\n"
       << "  static constexpr int kStageElems = 2 * kTile * kHeadDim; // K rows, then V rows\n"
       << "  static constexpr int kCopies = kTile * kChunks; // vector copies per stage and tensor\n";
  }
  os << "  static constexpr int kCopiesPerThread = (kCopies + kThreads - 1) / kThreads;\n"
     << "  static constexpr int kPartialValues = kTokens * kHeads * kSplits * kHeadDim;\n"
     << "  static constexpr float kNoScore = " << kNoScore << "; // below any real score\n";
}

std::vector<EmittedStep> emitDecode(const AttentionShape &s, const EmitOptions &o,
                                    int64_t maxSpan, bool chunkKernel) {
  AttentionSplitPlan p =
      planAttentionSplits(s.tokens, s.heads, s.kvHeads, s.headDim,
                          bytesOf(s.elem), maxSpan, o.smCount);
  std::string base = kernelBaseName(s, "decode") + "_s" + std::to_string(p.splits);
  int64_t stageBytes, mergeBytes;
  if (p.tensorCores) {
    stageBytes = 2 * p.keysPerTile * (s.headDim + 8) * bytesOf(s.elem);
    mergeBytes = p.warps * 16 * (s.headDim + 2) * int64_t(sizeof(float));
  } else {
    stageBytes = 2 * p.warps * (32 / p.lanesPerRow) * p.unroll * s.headDim *
                 bytesOf(s.elem);
    mergeBytes = p.warps * p.headsPerBlock * (s.headDim + 2) * int64_t(sizeof(float));
  }

  // The Config of weft/attention_decode.cuh, shared by the split and
  // combine kernels. Between a 4-bit layer's QKV and O projections, at one
  // token, both release the next kernel at once (EmitOptions::fourBitProjections).
  std::string config;
  {
    llvm::raw_string_ostream os(config);
    emitDecodeConstants(os, s, p, o, chunkKernel);
    os.flush();
  }
  const bool releaseEarly = o.fourBitProjections && s.tokens == 1;

  LibraryKernel split;
  split.what = std::string("Weft attention, decode: flash-decoding over the paged KV cache") +
               (p.tensorCores ? " on tensor cores" : "") +
               (p.splits > 1 ? " (split pass)" : "") + ".";
  split.header = "weft/attention_decode.cuh";
  split.config = config;
  split.instance = std::string("weft::kernels::attention::decodeSplitKernel<Config, ") +
                   (p.tensorCores ? "true" : "false") + ">";
  split.hashName = false;
  split.grid = {int(s.tokens), int(s.kvHeads * p.headBlocks), int(p.splits)};
  split.block = {int(p.warps * 32), 1, 1};
  split.sharedBytes = int(std::max(p.stages * stageBytes, mergeBytes));
  split.releaseEarly = releaseEarly;
  split.params = {
      binding(ParamBinding::Kind::RegionInput, s.queryInput, "query"),
      binding(ParamBinding::Kind::RegionInput, s.positionsInput, "positions"),
      binding(ParamBinding::Kind::RegionInput, s.slotsInput, "slots"),
      binding(ParamBinding::Kind::KCache, s.layer, "k_cache"),
      binding(ParamBinding::Kind::VCache, s.layer, "v_cache"),
      binding(ParamBinding::Kind::BlockTables, 0, "block_tables"),
  };
  uint64_t partialBytes =
      uint64_t(s.tokens * s.heads * p.splits) * uint64_t(s.headDim + 2) * 4u;
  ParamBinding scratch = binding(ParamBinding::Kind::Scratch, 0, "partials");
  scratch.bytes = partialBytes;
  if (p.splits == 1)
    split.params.push_back(binding(ParamBinding::Kind::RegionResult, 0, "out"));
  else
    split.params.push_back(scratch);

  std::vector<EmittedStep> steps(1);
  steps[0].kernel = libraryKernel("attention", base + (p.splits > 1 ? "_split" : ""),
                                  std::move(split));
  if (p.splits == 1)
    return steps;

  LibraryKernel combine;
  combine.what = "Weft attention, decode: combines the splits' partial results.";
  combine.header = "weft/attention_decode.cuh";
  combine.config = config;
  combine.instance = "weft::kernels::attention::decodeCombineKernel<Config>";
  combine.hashName = false;
  int threads = int(std::clamp<int64_t>((s.headDim + 31) / 32 * 32, 32, 256));
  combine.grid = {int(s.tokens), int(s.heads), 1};
  combine.block = {threads, 1, 1};
  combine.sharedBytes = int((p.splits + 1) * sizeof(float));
  combine.releaseEarly = releaseEarly;
  combine.params = {
      binding(ParamBinding::Kind::RegionInput, s.positionsInput, "positions"),
      binding(ParamBinding::Kind::RegionInput, s.slotsInput, "slots"),
      scratch,
      binding(ParamBinding::Kind::RegionResult, 0, "out"),
  };
  steps.emplace_back();
  steps.back().kernel = libraryKernel("attention", base + "_combine", std::move(combine));
  return steps;
}

//===----------------------------------------------------------------------===//
// Prefill: tensor-core flash attention
//===----------------------------------------------------------------------===//

// Four warps of 16 query rows; eight (128 rows) measured no faster on H200.
constexpr int kPrefillWarps = 4;
constexpr int kPrefillRows = 16 * kPrefillWarps;
constexpr int kPrefillThreads = 32 * kPrefillWarps;

// Keys per tile: as many as two double-buffered K/V stages allow in 48 KiB.
int64_t prefillKeyTile(int64_t headDim) { return headDim <= 64 ? 64 : 32; }

int64_t prefillSharedBytes(int64_t headDim) {
  int64_t pad = headDim + 8;
  int64_t stage = 2 * prefillKeyTile(headDim) * pad * 2; // K and V, 16-bit
  return 2 * stage + 2 * kPrefillWarps * 4              // + row bounds
         + 2 * kPrefillRows * 4;                          // + slots, owned positions
}

bool prefillTakesTensorCores(const AttentionShape &s, const EmitOptions &o) {
  return s.elem != ElementType::F32 && s.headDim % 16 == 0 && s.headDim <= 128 &&
         o.computeCapability >= 80;
}

std::vector<EmittedStep> emitPrefill(const AttentionShape &s, const EmitOptions &o) {
  int64_t keys = prefillKeyTile(s.headDim);
  LibraryKernel k;
  k.what = "Weft attention, prefill: causal flash attention on tensor cores (mma.sync m16n8k16)\n"
           "over the paged KV cache.";
  k.header = "weft/attention_prefill.cuh";
  {
    llvm::raw_string_ostream os(k.config);
    emitModelConstants(os, s, o, /*chunkKernel=*/true);
    os << "  static constexpr int kRows = " << kPrefillRows << "; // query rows per block\n"
       << "  static constexpr int kKeys = " << keys << "; // keys per tile\n"
       << "  static constexpr int kWarps = " << kPrefillWarps << ";\n"
       << "  static constexpr int kThreads = kWarps * 32;\n"
       << "  static constexpr int kPad = kHeadDim + 8; // row pitch: conflict-free ldmatrix\n"
       << "  static constexpr int kDimChunks = kHeadDim / 8; // 16-byte pieces of a row\n"
       << "  static constexpr int kStageElems = 2 * kKeys * kPad;\n"
       << "  static constexpr int kCopies = kKeys * kDimChunks; // 16-byte copies per tile and "
          "tensor\n"
       << "  static constexpr int kCopiesPerThread = (kCopies + kThreads - 1) / kThreads;\n";
    os.flush();
  }
  k.instance = "weft::kernels::attention::prefillChunkKernel<Config>";
  k.hashName = false;
  k.grid = {int((s.tokens + kPrefillRows - 1) / kPrefillRows), int(s.heads), 1};
  k.block = {kPrefillThreads, 1, 1};
  k.sharedBytes = int(prefillSharedBytes(s.headDim));
  k.params = {
      binding(ParamBinding::Kind::RegionInput, s.queryInput, "query"),
      binding(ParamBinding::Kind::RegionInput, s.positionsInput, "positions"),
      binding(ParamBinding::Kind::RegionInput, s.slotsInput, "slots"),
      binding(ParamBinding::Kind::KCache, s.layer, "k_cache"),
      binding(ParamBinding::Kind::VCache, s.layer, "v_cache"),
      binding(ParamBinding::Kind::BlockTables, 0, "block_tables"),
      binding(ParamBinding::Kind::RegionResult, 0, "out"),
  };
  std::vector<EmittedStep> steps(1);
  steps[0].kernel = libraryKernel("attention", kernelBaseName(s, "prefill"), std::move(k));
  return steps;
}

} // namespace

AttentionSplitPlan planAttentionSplits(int64_t tokens, int64_t numHeads,
                                       int64_t kvHeads, int64_t headDim,
                                       int64_t elementBytes, int64_t maxSpan,
                                       int64_t smCount) {
  AttentionSplitPlan p;
  int64_t group = std::max<int64_t>(1, numHeads / std::max<int64_t>(1, kvHeads));
  // A decode batch mixes lengths: one long sequence alone must fill the GPU,
  // so its token count does not divide the target (splits past a short
  // sequence's span exit at once). A larger launch on these kernels is a
  // prefill chunk of one sequence, whose tokens share the work.
  int64_t splitTokens = tokens > kMaxGemvTokens ? tokens : 1;
  if (kDecodeTensorCores && group > kDecodeTcMinGroup && elementBytes == 2 &&
      headDim % 16 == 0 && headDim <= 128) {
    // Tensor cores: up to 16 query heads per block as the mma's rows. With
    // small groups the SIMT kernel's deeper cp.async pipeline streams K/V
    // faster (measured on H200: groups of 4 and 1); for bigger groups its
    // FMAs and shuffles become the limit and the mma path wins (group 8,
    // 32k positions of llama-3.1-70b: 48 µs against 97 µs).
    p.tensorCores = true;
    p.headBlocks = (group + 15) / 16;
    p.headsPerBlock = (group + p.headBlocks - 1) / p.headBlocks;
    p.warps = kDecodeTcWarps;
    p.keysPerTile = 16 * p.warps;
    int64_t stageBytes = 2 * p.keysPerTile * (headDim + 8) * elementBytes;
    p.stages = std::clamp<int64_t>(kMaxSharedBytes / stageBytes, 2, 4);
    p.granule = std::max<int64_t>(64, p.keysPerTile);
    int64_t blocksPerSplit = std::max<int64_t>(1, splitTokens * kvHeads * p.headBlocks);
    int64_t target = kDecodeTcBlocksPerSm * std::max<int64_t>(1, smCount);
    int64_t maxSplits = std::max<int64_t>(1, (maxSpan + p.granule - 1) / p.granule);
    p.splits = std::clamp<int64_t>((target + blocksPerSplit - 1) / blocksPerSplit, 1,
                                   maxSplits);
    return p;
  }
  // The widest load (16 bytes at most) that tiles a head row.
  int64_t vecBytes = 16;
  while (vecBytes > 4 && (headDim * elementBytes) % vecBytes != 0)
    vecBytes /= 2;
  p.vec = std::max<int64_t>(1, vecBytes / elementBytes);
  int64_t chunks = std::max<int64_t>(1, headDim / p.vec);
  p.lanesPerRow = 1;
  while (p.lanesPerRow * 2 <= std::min<int64_t>(chunks, 32))
    p.lanesPerRow *= 2;
  p.chunksPerLane = (chunks + p.lanesPerRow - 1) / p.lanesPerRow;
  // The query and the accumulator are heads * perLane floats each per lane;
  // past 64 of each they would spill, so big groups take several blocks.
  int64_t perLane = p.vec * p.chunksPerLane;
  int64_t maxHeads = std::max<int64_t>(1, kDecodeLaneFloats / perLane);
  p.headBlocks = (group + maxHeads - 1) / maxHeads;
  p.headsPerBlock = (group + p.headBlocks - 1) / p.headBlocks;
  p.unroll = p.headsPerBlock * perLane <= 32 ? 4 : 2;
  p.warps = kDecodeThreads / 32;
  // Shared memory: as many stages of K/V rows as fit 48 KiB (2 to 4).
  auto stageBytes = [&] {
    return 2 * p.warps * (32 / p.lanesPerRow) * p.unroll * headDim * elementBytes;
  };
  while (p.unroll > 1 && 2 * stageBytes() > kMaxSharedBytes)
    p.unroll /= 2;
  p.stages = std::clamp<int64_t>(kMaxSharedBytes / stageBytes(), 2, 4);
  int64_t perIteration = p.warps * (32 / p.lanesPerRow) * p.unroll;
  p.granule = std::max<int64_t>(64, perIteration);
  // About four blocks per SM, but no split shorter than a granule of the
  // longest possible span.
  int64_t blocksPerSplit = std::max<int64_t>(1, splitTokens * kvHeads * p.headBlocks);
  int64_t target = kDecodeBlocksPerSm * std::max<int64_t>(1, smCount);
  int64_t splits = (target + blocksPerSplit - 1) / blocksPerSplit;
  int64_t maxSplits = std::max<int64_t>(1, (maxSpan + p.granule - 1) / p.granule);
  p.splits = std::clamp<int64_t>(splits, 1, maxSplits);
  return p;
}

llvm::Expected<std::vector<EmittedStep>>
emitAttentionRegion(FusionOp region, const EmitOptions &options) {
  if (region.getKind() != "attention")
    return fail("kind is '" + region.getKind() + "', not 'attention'");
  llvm::Expected<AttentionShape> shape = readShape(region);
  if (!shape)
    return shape.takeError();
  if (options.blockTokens < 1 || options.maxBlocksPerSequence < 1 ||
      options.maxSequences < 1)
    return fail("block_tokens, max_blocks_per_sequence and max_sequences must "
                "be positive");
  if (options.computeCapability < 80)
    return fail("the attention kernels need sm_80 or newer (cp.async, bf16 mma), "
                "not sm_" + llvm::Twine(options.computeCapability));
  int64_t maxContext = options.blockTokens * options.maxBlocksPerSequence;
  if (maxContext > (int64_t(1) << 30))
    return fail("the cache's per-sequence capacity does not fit 32-bit positions");
  int64_t maxSpan = shape->window ? std::min(shape->window, maxContext) : maxContext;
  // Above the GEMV sizes a step may mix decode tokens of many sequences with
  // prefill chunks: flash-decoding takes the one-token sequences, then the
  // chunk kernel the rest (each writes only the rows it owns).
  bool chunks = shape->tokens > kMaxGemvTokens && prefillTakesTensorCores(*shape, options);
  std::vector<EmittedStep> steps = emitDecode(*shape, options, maxSpan, chunks);
  if (chunks)
    for (EmittedStep &step : emitPrefill(*shape, options))
      steps.push_back(std::move(step));
  return steps;
}

} // namespace weft::cuda
