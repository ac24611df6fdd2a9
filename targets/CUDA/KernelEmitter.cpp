// The kernels of a fusion region: the emitter that matches its body
// (attention, embedding, RoPE + KV write, a norm and residual add, a
// projection) writes its steps; every kernel is a template of the kernel
// library (targets/CUDA/kernels/weft) instantiated with a Config. Also the
// embedding and the all-reduce's accumulate kernel.
#include "targets/CUDA/KernelEmitter.h"
#include "targets/CUDA/EmitterSupport.h"

#ifdef WEFT_HAVE_ATTENTION_EMITTER
#include "targets/CUDA/AttentionEmitter.h"
#endif

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>

namespace weft::cuda {
namespace detail {

using mlir::BlockArgument;
using mlir::Operation;
using mlir::RankedTensorType;
using mlir::Value;

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

llvm::Expected<std::vector<EmittedStep>> emitEmbedding(FusionOp region, EmbeddingOp emb) {
  auto table = matrixShape(emb.getTable());
  auto out = matrixShape(emb.getResult());
  auto tableType = elementTypeOf(emb.getTable().getType());
  auto outType = elementTypeOf(emb.getResult().getType());
  if (!table || !out)
    return regionError(region, "embedding shapes must be static");
  if (!tableType || !outType)
    return regionError(region, "embedding table and result must be f16, bf16 or f32");
  int64_t tableIn = inputIndex(region, emb.getTable()), idsIn = inputIndex(region, emb.getIds());
  if (tableIn < 0 || idsIn < 0)
    return regionError(region, "embedding operands must be region inputs");
  auto yielded = yieldedResults(region);
  auto it = yielded.find(emb.getResult());
  if (it == yielded.end())
    return regionError(region, "the embedding is not a region result");
  int64_t tokens = out->first, hidden = table->second, vocab = table->first;
  int64_t vec = vectorWidth(std::max(bytesOf(*tableType), bytesOf(*outType)), {hidden});
  int64_t perRow = hidden / vec;
  int threads = int(std::min<int64_t>(256, roundUp(perRow, 32)));
  LibraryKernel k;
  k.what = "Embedding: gathers the table rows of the token ids (ids outside the vocabulary give "
           "zeros).";
  k.header = "weft/embedding.cuh";
  k.config = "  static constexpr int H = " + std::to_string(hidden) + ", V = " +
             std::to_string(vocab) + ", VEC = " + std::to_string(vec) + ", THREADS = " +
             std::to_string(threads) + ";\n";
  // Gemma's normalizer, sqrt(H) as a number of the result's dtype.
  k.config += "  static constexpr float SCALE = " + floatLiteral(emb.roundedScale()) +
              (emb.getScale() ? ";  // rows times sqrt(H) in out_t\n" : ";\n");
  k.config += "  using table_t = " + std::string(cudaType(*tableType)) + ";\n" +
              "  using out_t = " + cudaType(*outType) + ";\n";
  k.params = {binding(ParamBinding::Kind::RegionInput, tableIn, "table"),
              binding(ParamBinding::Kind::RegionInput, idsIn, "ids")};
  for (size_t c = 0; c < it->second.size(); ++c)
    k.params.push_back(binding(ParamBinding::Kind::RegionResult, it->second[c],
                               c ? "out_" + std::to_string(c) : "out"));
  k.instance = "weft::kernels::embeddingKernel<Config" +
               moreArgs("Config::out_t", it->second.size()) + ">";
  k.grid = {int(ceilDiv(perRow, threads)), int(tokens), 1};
  k.block = {threads, 1, 1};
  std::vector<EmittedStep> steps;
  steps.push_back(kernelStep(
      libraryKernel(region.getKind(), "weft_embedding_h" + std::to_string(hidden), std::move(k))));
  return steps;
}


} // namespace detail

using namespace detail;

namespace {

llvm::Expected<std::vector<EmittedStep>> emitRegionSteps(FusionOp region,
                                                         const EmitOptions &options);

} // namespace

bool hasFourBitProjections(mlir::ModuleOp module) {
  bool found = false;
  module.walk([&](WeightOp w) {
    if (QuantAttr q = quantOf(w.getResult()); q && q.getBits() == 4)
      found = true;
  });
  return found;
}

llvm::Expected<std::vector<EmittedStep>> emitRegion(FusionOp region, const EmitOptions &options) {
  llvm::Expected<std::vector<EmittedStep>> steps = emitRegionSteps(region, options);
  if (!steps)
    return steps.takeError();
  // Every kernel is a library template whose Config says whether it
  // releases its successor early; a 4-bit one-token RoPE region's all do.
  bool early = releasesEarlyAsFourBitRope(region, options);
  for (EmittedStep &s : *steps)
    if (s.kernel) {
      if (s.kernel->instance.empty())
        return regionError(region, "internal error: kernel " + s.kernel->name +
                                       " names no template of the kernel library");
      if (early && !s.kernel->releaseEarly)
        return regionError(region, "internal error: kernel " + s.kernel->name +
                                       " of a 4-bit one-token RoPE region was written "
                                       "without RELEASE_EARLY");
    }
  return steps;
}

namespace {

using RegionSteps = llvm::Expected<std::vector<EmittedStep>>;

template <typename... Ops> bool holds(mlir::Block &body) {
  return llvm::any_of(body.without_terminator(),
                      [](Operation &op) { return llvm::isa<Ops...>(op); });
}

// The region emitters, tried in order: the first whose `matches` accepts a
// region's body generates it. Dispatch is on what the body holds, not on
// the kind string alone; a new kind of region is one entry here.
struct RegionEmitter {
  bool (*matches)(mlir::Block &body);
  RegionSteps (*emit)(FusionOp region, const EmitOptions &options);
};

const RegionEmitter kRegionEmitters[] = {
    // attention (AttentionEmitter.cpp)
    {holds<AttentionOp>,
     [](FusionOp region, const EmitOptions &options) -> RegionSteps {
#ifdef WEFT_HAVE_ATTENTION_EMITTER
       return emitAttentionRegion(region, options);
#else
       (void)options;
       return regionError(region, "attention kernels are not part of this build");
#endif
     }},
    // the embedding, alone
    {holds<EmbeddingOp>,
     [](FusionOp region, const EmitOptions &) -> RegionSteps {
       mlir::Block &body = region.getBody().front();
       if (std::distance(body.without_terminator().begin(), body.without_terminator().end()) != 1)
         return regionError(region, "an embedding region must hold only the embedding");
       return emitEmbedding(region, llvm::cast<EmbeddingOp>(body.front()));
     }},
    // RoPE and the KV-cache write (Qwen3's head norms before them)
    {[](mlir::Block &body) {
       return holds<RopeOp, KvWriteOp>(body) && !holds<LinearOp, LogitsOp>(body);
     },
     emitRopeKvWrite},
    // RMSNorm, then an add of its result (Gemma 2's post-norms)
    {[](mlir::Block &body) {
       auto ops = body.without_terminator();
       if (std::distance(ops.begin(), ops.end()) != 2)
         return false;
       auto norm = llvm::dyn_cast<RmsNormOp>(body.front());
       auto add = llvm::dyn_cast<AddOp>(*std::next(body.begin()));
       return norm && add && llvm::is_contained(add->getOperands(), norm.getResult());
     },
     [](FusionOp region, const EmitOptions &) -> RegionSteps {
       mlir::Block &body = region.getBody().front();
       return emitNormResidual(region, llvm::cast<RmsNormOp>(body.front()),
                               llvm::cast<AddOp>(*std::next(body.begin())));
     }},
    // [rms_norm] -> linear|logits -> epilogue
    {holds<LinearOp, LogitsOp>,
     [](FusionOp region, const EmitOptions &options) -> RegionSteps {
       llvm::Expected<std::optional<Projection>> projection = analyzeProjection(region);
       if (!projection)
         return projection.takeError();
       if (!*projection)
         return regionError(region, "no CUDA kernel for this combination of ops");
       return emitProjection(region, **projection, options);
     }},
};

RegionSteps emitRegionSteps(FusionOp region, const EmitOptions &options) {
  if (region.getBody().empty())
    return regionError(region, "empty region");
  if (options.blockTokens < 1 || options.maxBlocksPerSequence < 1 || options.maxSequences < 1)
    return regionError(region, "block_tokens, max_sequences and max_blocks_per_sequence must "
                               "be positive");
  mlir::Block &body = region.getBody().front();
  for (const RegionEmitter &e : kRegionEmitters)
    if (e.matches(body))
      return e.emit(region, options);
  return regionError(region, "no CUDA kernel for this combination of ops");
}

} // namespace

EmittedKernel emitAccumulateKernel(ElementType type, int64_t count) {
  int64_t blocks = std::min<int64_t>(ceilDiv(count, kAccumulateBlock), 1024);
  LibraryKernel k;
  k.what = "all-reduce without NCCL: dst += src over " + std::to_string(count) + " " +
           elementTypeName(type) + " elements (grid-stride, any grid)";
  k.header = "weft/accumulate.cuh";
  k.config = "  static constexpr long COUNT = " + std::to_string(count) + ";\n" +
             "  static constexpr int THREADS = " + std::to_string(kAccumulateBlock) + ";\n" +
             "  using value_t = " + cudaType(type) + ";\n";
  k.instance = "weft::kernels::accumulateKernel<Config>";
  ParamBinding dst{ParamBinding::Kind::RegionInput, 0};
  dst.name = "dst";
  ParamBinding src{ParamBinding::Kind::RegionInput, 1};
  src.name = "src";
  k.params = {dst, src};
  k.grid = {int(blocks), 1, 1};
  k.block = {int(kAccumulateBlock), 1, 1};
  return libraryKernel("all_reduce",
                       "weft_accumulate_" + std::string(elementTypeName(type)) + "_n" +
                           std::to_string(count),
                       std::move(k));
}

} // namespace weft::cuda
