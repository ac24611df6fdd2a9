// RoPE and the KV-cache write as a region of their own (weft/rope_kv_write.cuh):
// queries, keys and values as head groups, Qwen3's head norms before them.
#include "targets/CUDA/EmitterSupport.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <string>

namespace weft::cuda::detail {

using mlir::BlockArgument;
using mlir::Operation;
using mlir::RankedTensorType;
using mlir::Value;

//===----------------------------------------------------------------------===//
// RoPE + KV-cache write
//===----------------------------------------------------------------------===//

// inv_freq of a rope op (RopeOp::inverseFrequencies), errors named by region.
llvm::Expected<std::vector<double>> ropeFrequencies(FusionOp region, RopeOp op) {
  llvm::Expected<std::vector<double>> inv = op.inverseFrequencies();
  if (!inv)
    return regionError(region, llvm::toString(inv.takeError()));
  return inv;
}

// One group of heads the kernel handles: rotated (table >= 0) or copied,
// to results and/or one of the caches.
struct HeadGroup {
  int64_t inputParam = 0; // index into the kernel's input list
  int64_t heads = 0;
  int64_t table = -1;
  int64_t positionsParam = -1; // rope positions
  llvm::SmallVector<int64_t, 1> results;
  int cache = 0; // 0 none, 1 K, 2 V
  ElementType inType, resultType;
  // A head norm before the rotation (HeadRmsNormOp): its weight's input
  // index (-1: none), epsilon and result type.
  int64_t normParam = -1;
  double normEps = 0.0;
  ElementType normType, normWeightType;
};

llvm::Expected<std::vector<EmittedStep>> emitRopeKvWrite(FusionOp region,
                                                         const EmitOptions &o) {
  mlir::Block &body = region.getBody().front();
  auto yielded = yieldedResults(region);
  llvm::SmallVector<RopeOp> ropes;
  llvm::SmallVector<HeadRmsNormOp> norms;
  KvWriteOp write;
  for (Operation &op : body.without_terminator()) {
    if (auto r = llvm::dyn_cast<RopeOp>(op))
      ropes.push_back(r);
    else if (auto n = llvm::dyn_cast<HeadRmsNormOp>(op))
      norms.push_back(n);
    else if (auto w = llvm::dyn_cast<KvWriteOp>(op)) {
      if (write)
        return regionError(region, "more than one kv_write");
      write = w;
    } else {
      return regionError(region, "unsupported op '" + op.getName().getStringRef() +
                                     "' in a rope/kv_write region");
    }
  }
  // Inputs of the kernel (region operands), deduplicated, in first-use order.
  llvm::SmallVector<int64_t> inputs;
  auto useInput = [&](Value v) -> int64_t {
    int64_t i = inputIndex(region, v);
    if (i < 0)
      return -1;
    auto it = llvm::find(inputs, i);
    if (it != inputs.end())
      return it - inputs.begin();
    inputs.push_back(i);
    return int64_t(inputs.size()) - 1;
  };
  int64_t tokens = -1, headDim = -1;
  std::vector<std::vector<double>> tables;
  std::vector<HeadGroup> groups;
  ElementType cacheType = ElementType::BF16;
  int64_t kvHeads = 0;
  if (write) {
    auto cache = write.getCache().getType();
    auto ct = elementTypeOf(cache.getDtype());
    if (!ct)
      return regionError(region, "the KV cache must be f16, bf16 or f32");
    cacheType = *ct;
    kvHeads = cache.getKvHeads();
    headDim = cache.getHeadDim();
  }
  // Each head norm feeds one rope of the region, nothing else.
  for (HeadRmsNormOp n : norms) {
    Value out = n.getResult();
    if (!out.hasOneUse() || !llvm::isa<RopeOp>(*out.getUsers().begin()))
      return regionError(region, "a head_rms_norm must feed one rope of the region and nothing "
                                 "else");
  }
  for (RopeOp r : ropes) {
    auto norm = r.getInput().getDefiningOp<HeadRmsNormOp>();
    Value loaded = norm ? norm.getInput() : r.getInput();
    auto shape = matrixShape(loaded);
    auto it = elementTypeOf(loaded.getType()), rt = elementTypeOf(r.getResult().getType());
    if (!shape || !it || !rt)
      return regionError(region, "rope operands must be static f16/bf16/f32 matrices");
    int64_t dim = r.getHeadDim();
    if (headDim >= 0 && dim != headDim)
      return regionError(region, "rope head_dim differs from the cache's or another rope's");
    if (dim % 2 || shape->second % dim)
      return regionError(region, "rope width is not a multiple of an even head_dim");
    headDim = dim;
    if (tokens >= 0 && shape->first != tokens)
      return regionError(region, "token counts differ");
    tokens = shape->first;
    llvm::Expected<std::vector<double>> inv = ropeFrequencies(region, r);
    if (!inv)
      return inv.takeError();
    int64_t table = llvm::find(tables, *inv) - tables.begin();
    if (table == int64_t(tables.size()))
      tables.push_back(*inv);
    HeadGroup g;
    g.inputParam = useInput(loaded);
    g.positionsParam = useInput(r.getPositions());
    if (g.inputParam < 0 || g.positionsParam < 0)
      return regionError(region, "rope operands must be region inputs");
    if (norm) {
      auto nt = elementTypeOf(norm.getResult().getType());
      auto wt = elementTypeOf(norm.getWeight().getType());
      if (!nt || !wt)
        return regionError(region, "head_rms_norm operands must be f16/bf16/f32");
      if (norm.getHeadDim() != dim)
        return regionError(region, "head_rms_norm head_dim differs from its rope's");
      if (dim & (dim - 1))
        return regionError(region, "head norms need a power-of-two head_dim, got " +
                                       llvm::Twine(dim));
      g.normParam = useInput(norm.getWeight());
      if (g.normParam < 0)
        return regionError(region, "the head_rms_norm weight must be a region input");
      g.normEps = norm.getEpsilon().convertToDouble();
      g.normType = *nt;
      g.normWeightType = *wt;
    }
    g.heads = shape->second / dim;
    g.table = table;
    g.inType = *it;
    g.resultType = *rt;
    auto y = yielded.find(r.getResult());
    if (y != yielded.end())
      g.results = y->second;
    for (Operation *u : r.getResult().getUsers()) {
      if (llvm::isa<YieldOp>(u))
        continue;
      if (u != write.getOperation() || write.getKey() != r.getResult() ||
          write.getValue() == r.getResult())
        return regionError(region, "a rotated tensor may only be yielded or written as keys");
      g.cache = 1;
      if (g.heads != kvHeads)
        return regionError(region, "rotated keys do not match the cache's kv_heads");
    }
    groups.push_back(std::move(g));
  }
  int64_t positionsParam = -1, slotsParam = -1;
  if (write) {
    // Keys not rotated here and the values are copied.
    for (auto [value, cacheKind] : {std::pair(write.getKey(), 1), std::pair(write.getValue(), 2)}) {
      if (value.getDefiningOp<RopeOp>())
        continue;
      auto shape = matrixShape(value);
      auto et = elementTypeOf(value.getType());
      if (!shape || !et || shape->second != kvHeads * headDim)
        return regionError(region, "kv_write operands must be [tokens, kv_heads * head_dim]");
      if (tokens >= 0 && shape->first != tokens)
        return regionError(region, "token counts differ");
      tokens = shape->first;
      HeadGroup g;
      g.inputParam = useInput(value);
      if (g.inputParam < 0)
        return regionError(region, "kv_write operands must be region inputs");
      g.heads = kvHeads;
      g.cache = cacheKind;
      g.inType = g.resultType = *et;
      groups.push_back(std::move(g));
    }
    positionsParam = useInput(write.getPositions());
    slotsParam = useInput(write.getSlots());
    if (positionsParam < 0 || slotsParam < 0)
      return regionError(region, "kv_write positions and slots must be region inputs");
  }
  if (groups.empty() || tokens < 1 || headDim < 2)
    return regionError(region, "nothing to rotate or write");

  int64_t half = headDim / 2;
  int64_t headsPerBlock = half <= 128 ? std::max<int64_t>(1, 128 / half) : 1;
  int64_t threads = headsPerBlock * half;
  if (threads > 1024)
    return regionError(region, "head_dim " + llvm::Twine(headDim) + " is too large");
  int64_t totalHeads = 0;
  for (const HeadGroup &g : groups)
    totalHeads += g.heads;

  // The pointers: inputs in first-use order (the head groups' tensors and
  // norm weights, the int32 positions and slots), the caches and the block
  // table, then each group's results.
  std::vector<ParamBinding> params;
  std::vector<std::string> types;
  for (auto [i, in] : llvm::enumerate(inputs)) {
    std::string type = "int", name;
    for (auto [gi, g] : llvm::enumerate(groups)) {
      if (g.inputParam == int64_t(i) && name.empty()) {
        type = cudaType(g.inType);
        name = g.cache == 1 ? "keys" : g.cache == 2 ? "values" : "x" + std::to_string(gi);
      }
      if (g.normParam == int64_t(i) && name.empty()) {
        type = cudaType(g.normWeightType);
        name = "norm_w" + std::to_string(gi);
      }
    }
    if (name.empty())
      name = int64_t(i) == slotsParam ? "slots" : "positions";
    if (llvm::any_of(params, [&](const ParamBinding &b) { return b.name == name; }))
      name += std::to_string(i);
    params.push_back(binding(ParamBinding::Kind::RegionInput, in, name));
    types.push_back("const " + type);
  }
  std::string config;
  llvm::raw_string_ostream cs(config);
  cs << "  static constexpr int D = " << headDim << ", HALF = D / 2, HEADS_PER_BLOCK = "
     << headsPerBlock << ", HEADS = " << totalHeads << ";\n"
     << "  static constexpr int THREADS = HEADS_PER_BLOCK * HALF;\n";
  if (write) {
    int64_t layer = int64_t(write.getLayer());
    params.push_back(binding(ParamBinding::Kind::KCache, layer, "k_cache"));
    params.push_back(binding(ParamBinding::Kind::VCache, layer, "v_cache"));
    params.push_back(binding(ParamBinding::Kind::BlockTables, 0, "block_tables"));
    types.insert(types.end(), {"Config::cache_t", "Config::cache_t", "const int"});
    cs << cacheConfig(kvHeads, cacheType, o)
       << "  // pointers of the cache write\n"
       << "  static constexpr int WRITE_POSITIONS = " << positionsParam
       << ", SLOTS = " << slotsParam << ", K_CACHE = " << params.size() - 3
       << ", V_CACHE = " << params.size() - 2 << ", BLOCK_TABLES = " << params.size() - 1
       << ";\n";
  }
  cs.flush();
  std::string preamble;
  if (!tables.empty())
    addRopeTables(tables, headDim / 2, preamble, config);
  // One struct per head group.
  std::vector<std::string> groupNames;
  llvm::raw_string_ostream ps(preamble);
  for (auto [gi, g] : llvm::enumerate(groups)) {
    std::string name = "Heads" + std::to_string(gi);
    size_t first = params.size();
    for (auto [c, r] : llvm::enumerate(g.results)) {
      params.push_back(binding(ParamBinding::Kind::RegionResult, r,
                               "out" + std::to_string(gi) + (c ? "_" + std::to_string(c) : "")));
      types.push_back(cudaType(g.resultType));
    }
    HeadGroupConfig c;
    c.name = name;
    c.heads = g.heads;
    c.in = g.inputParam;
    c.table = g.table;
    c.positions = g.positionsParam;
    c.cache = g.cache;
    c.out = int64_t(first);
    c.outs = int64_t(g.results.size());
    c.resultType = g.resultType;
    if (g.normParam >= 0) {
      c.normWeight = g.normParam;
      c.eps = g.normEps;
      c.normType = g.normType;
    }
    writeHeadGroup(ps, c);
    groupNames.push_back(name);
  }
  ps.flush();
  config += "  using Groups = weft::kernels::HeadGroups<" + llvm::join(groupNames, ", ") + ">;\n";

  bool anyNorm = llvm::any_of(groups, [](const HeadGroup &g) { return g.normParam >= 0; });
  LibraryKernel k;
  k.what = "Rotary embedding (rotate half) of each head; rotated keys and the values go to the "
           "paged KV cache.";
  k.header = "weft/rope_kv_write.cuh";
  k.preamble = std::move(preamble);
  k.config = std::move(config);
  k.params = std::move(params);
  k.instance = "weft::kernels::ropeKvWriteKernel<Config" + packArgs(types) + ">";
  k.grid = {int(ceilDiv(totalHeads, headsPerBlock)), int(tokens), 1};
  k.block = {int(threads), 1, 1};
  k.releaseEarly = releasesEarlyAsFourBitRope(region, o);
  std::vector<EmittedStep> steps;
  steps.push_back(kernelStep(libraryKernel(
      region.getKind(),
      std::string(anyNorm ? "weft_norm_rope_kv_write_h" : "weft_rope_kv_write_h") +
          std::to_string(totalHeads) + "_d" + std::to_string(headDim),
      std::move(k))));
  return steps;
}

} // namespace weft::cuda::detail
